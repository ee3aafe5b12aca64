//! Hostile input through the real binary: every known bomb shape (alias bombs, deep nesting,
//! variable chains, huge host ranges, special files, oversized files, quadratic inputs,
//! invalid UTF-8) through every repo command, under a 1 GiB address-space limit and a 2 s
//! CPU-time limit (`prlimit --as --cpu`: the kernel kills a run past either, so a busy
//! machine cannot make a slow run pass or a fast one fail). Each run must end on its own
//! with a named refusal (exit 2 and the file, with its line where there is one), never an
//! abort, a hang or an allocation failure. Wall time is checked too, loosely (a blocked
//! run, e.g. on a FIFO, uses no CPU).
#![cfg(target_os = "linux")]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::fs_common;
use fs_common::copy_dir;

/// Every command that reads the repo.
const COMMANDS: &[&[&str]] = &[
    &["check"],
    &["envs"],
    &["inventory", "--list"],
    &["inventory", "--host", "k3s-prod-1", "--resolved"],
    &["plan", "etcd-io-priority", "--env", "prod"],
];

const MEMORY_LIMIT: &str = "--as=1073741824";
/// CPU seconds a run may use; past it the kernel sends SIGXCPU and the run has no exit code.
const CPU_LIMIT: &str = "--cpu=2";
/// Wall time for a run, loose because the machine is shared: catches hangs, not slowness.
const DEADLINE: Duration = Duration::from_secs(20);

struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
}

fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory")
}

/// A copy of the bundled sample repo to damage.
fn repo() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("repo");
    copy_dir(&sample(), &root);
    (dir, root)
}

const GROUP_VARS_ALL: &str = "infra/ansible/inventory/group_vars/all.yml";
const HOSTS_INI: &str = "infra/ansible/inventory/hosts.ini";

fn append(root: &Path, rel: &str, text: &[u8]) -> usize {
    let path = root.join(rel);
    let mut bytes = std::fs::read(&path).expect("read");
    if !bytes.ends_with(b"\n") && !bytes.is_empty() {
        bytes.push(b'\n');
    }
    // The 1-based line the appended text starts on.
    let line = bytes.iter().filter(|&&b| b == b'\n').count() + 1;
    bytes.extend_from_slice(text);
    std::fs::write(&path, bytes).expect("write");
    line
}

/// Run the binary under the memory limit, killing it at the deadline (a hang is a failure).
fn run(root: &Path, args: &[&str]) -> Outcome {
    let state = root.parent().expect("parent").join("state");
    let start = Instant::now();
    let mut child = Command::new("prlimit")
        .arg(MEMORY_LIMIT)
        .arg(CPU_LIMIT)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_hk-console"))
        .arg("--repo")
        .arg(root)
        .args(args)
        .env("XDG_STATE_HOME", &state)
        .env_remove("HK_REPO")
        .env_remove("HK_RUNBOOKS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("prlimit (util-linux) runs hk-console");
    // Drain both pipes while waiting: a child blocked on a full pipe is not a hang.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    // Generous past the deadline so a slow machine shows as a timing failure with output,
    // while a real hang is still killed.
    let kill_at = start + DEADLINE * 3;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() > kill_at {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let took = start.elapsed();
    Outcome {
        code: status.and_then(|s| s.code()),
        stdout: stdout.join().expect("stdout"),
        stderr: stderr.join().expect("stderr"),
        took,
    }
}

/// Every command refuses with exit 2, in time, naming `needle` (file:line) and `limit`.
fn refused_everywhere(root: &Path, needle: &str, limit: &str) {
    for args in COMMANDS {
        let out = run(root, args);
        let what = format!("hk-console {}", args.join(" "));
        assert_eq!(
            out.code,
            Some(2),
            "{what}: expected exit 2; stderr:\n{}",
            out.stderr
        );
        assert!(
            out.stderr.contains(needle) && out.stderr.contains(limit),
            "{what}: the message must name `{needle}` and `{limit}`:\n{}",
            out.stderr
        );
        assert!(
            out.took < DEADLINE,
            "{what}: took {:?} (limit {DEADLINE:?})",
            out.took
        );
    }
}

fn alias_bomb() -> String {
    let mut s = String::from("lol0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..9 {
        let refs = vec![format!("*l{}", i - 1); 9].join(", ");
        s.push_str(&format!("lol{i}: &l{i} [{refs}]\n"));
    }
    s
}

#[test]
fn the_alias_bomb_is_the_classic_half_kilobyte_shape() {
    // The shape: nine levels, about half a kilobyte, 9^9 nodes if copied.
    assert!(alias_bomb().len() < 512, "{}", alias_bomb().len());
}

#[test]
fn alias_bomb_in_group_vars() {
    let (_d, root) = repo();
    let line = append(&root, GROUP_VARS_ALL, alias_bomb().as_bytes());
    // The refusal names the alias that crosses the limit, on one of the bomb's lines.
    let needle = format!("{GROUP_VARS_ALL}:");
    refused_everywhere(&root, &needle, "limit yaml.max_alias_nodes");
    let out = run(&root, &["envs"]);
    let at: usize = out
        .stderr
        .split(&needle)
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse().ok())
        .expect("a line number");
    assert!(
        (line..line + 9).contains(&at),
        "{at} not in the bomb: {}",
        out.stderr
    );
}

#[test]
fn alias_bomb_in_hk_console_yaml() {
    let (_d, root) = repo();
    let line = append(&root, "hk-console.yaml", alias_bomb().as_bytes());
    let _ = line;
    refused_everywhere(&root, "hk-console.yaml:", "limit yaml.max_alias_nodes");
}

#[test]
fn deep_flow_nesting_in_group_vars_and_hk_console_yaml() {
    let (_d, root) = repo();
    let line = append(
        &root,
        GROUP_VARS_ALL,
        format!("deep: {}\n", "[".repeat(30_000)).as_bytes(),
    );
    refused_everywhere(
        &root,
        &format!("{GROUP_VARS_ALL}:{line}:"),
        "limit yaml.max_depth",
    );

    // 1 MB of unclosed `[` in hk-console.yaml: serde_yaml alone is quadratic here.
    let (_d2, root) = repo();
    let line = append(
        &root,
        "hk-console.yaml",
        format!("x: {}\n", "[".repeat(1 << 20)).as_bytes(),
    );
    refused_everywhere(
        &root,
        &format!("hk-console.yaml:{line}:"),
        "limit yaml.max_depth",
    );
}

#[test]
fn deep_block_nesting_in_group_vars() {
    let (_d, root) = repo();
    let mut text = String::from("deep:\n");
    for i in 0..1_000 {
        text.push_str(&"  ".repeat(i + 1));
        text.push_str(&format!("k{i}:\n"));
    }
    append(&root, GROUP_VARS_ALL, text.as_bytes());
    refused_everywhere(&root, &format!("{GROUP_VARS_ALL}:"), "limit yaml.max_depth");
}

#[test]
fn aliases_cannot_build_depth_past_the_limit() {
    // Each anchor nests the previous one 60 levels deeper: few nodes, unbounded depth.
    let (_d, root) = repo();
    let mut text = format!("a0: &a0 {}1{}\n", "[".repeat(60), "]".repeat(60));
    for i in 1..6 {
        text.push_str(&format!(
            "a{i}: &a{i} {}*a{}{}\n",
            "[".repeat(60),
            i - 1,
            "]".repeat(60)
        ));
    }
    append(&root, GROUP_VARS_ALL, text.as_bytes());
    refused_everywhere(&root, &format!("{GROUP_VARS_ALL}:"), "limit yaml.max_depth");
}

#[test]
fn huge_host_ranges_are_refused_with_the_line() {
    let (_d, root) = repo();
    let line = append(&root, HOSTS_INI, b"[bombs]\nnode[0:99999999]\n") + 1;
    refused_everywhere(
        &root,
        &format!("{HOSTS_INI}:{line}:"),
        "limit inventory.max_range_hosts",
    );
    // Ranges multiply: nine ranges of ten are a billion names.
    let (_d2, root) = repo();
    let line = append(
        &root,
        HOSTS_INI,
        format!("[bombs]\nn{}\n", "[0:9]".repeat(9)).as_bytes(),
    ) + 1;
    refused_everywhere(
        &root,
        &format!("{HOSTS_INI}:{line}:"),
        "inventory.max_range_hosts",
    );
}

#[test]
fn many_hosts_copying_a_long_variable_are_refused() {
    let (_d, root) = repo();
    let line = append(
        &root,
        HOSTS_INI,
        format!("[bombs]\nn[0:9999] v={}\n", "x".repeat(1 << 20)).as_bytes(),
    ) + 1;
    refused_everywhere(
        &root,
        &format!("{HOSTS_INI}:{line}:"),
        "limit inventory.max_merged_bytes",
    );
}

#[test]
fn ini_literals_past_pythons_nesting_stay_strings_as_in_ansible() {
    // ansible-core keeps a value nested past Python's 200-level parser limit as the string
    // it was, and the inventory works: so must ours, without a stack overflow.
    let (_d, root) = repo();
    let value = "[".repeat(30_000);
    append(
        &root,
        HOSTS_INI,
        format!("[bombs]\nb1 deep={value}\n").as_bytes(),
    );
    let out = run(&root, &["inventory", "--host", "b1"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let vars: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    assert_eq!(vars["deep"], serde_json::Value::String(value));
    assert!(out.took < DEADLINE, "took {:?}", out.took);

    // Deep enough that ansible-core fails on it ("maximum recursion depth exceeded"),
    // shallow enough to be a literal: refused with the line.
    let (_d2, root) = repo();
    let line = append(
        &root,
        HOSTS_INI,
        format!("[bombs]\nb1 deep={}1{}\n", "[".repeat(150), "]".repeat(150)).as_bytes(),
    ) + 1;
    refused_everywhere(
        &root,
        &format!("{HOSTS_INI}:{line}:"),
        "limit inventory.max_literal_depth",
    );
}

#[test]
fn a_variable_chain_is_a_named_error_not_a_stack_overflow() {
    let (_d, root) = repo();
    let mut text = String::new();
    for i in 0..1_500 {
        text.push_str(&format!("v{i}: \"{{{{ v{} }}}}\"\n", i + 1));
    }
    text.push_str("v1500: end\n");
    append(&root, GROUP_VARS_ALL, text.as_bytes());
    let sample_codes: Vec<Option<i32>> = {
        let (_s, clean) = repo();
        COMMANDS.iter().map(|a| run(&clean, a).code).collect()
    };
    for (args, clean_code) in COMMANDS.iter().zip(sample_codes) {
        let out = run(&root, args);
        let what = format!("hk-console {}", args.join(" "));
        assert!(out.took < DEADLINE, "{what}: took {:?}", out.took);
        if args.contains(&"--resolved") {
            // Rendering every variable meets the chain: exit 1 (variables left unrendered),
            // each naming the limit.
            assert_eq!(out.code, Some(1), "{what}: {}", out.stderr);
            assert!(
                out.stderr.contains("v0: cannot render")
                    && out.stderr.contains("limit jinja.max_chain"),
                "{what}: {}",
                out.stderr.chars().take(2000).collect::<String>()
            );
        } else {
            // The other commands never render `v0`: same result as the clean sample.
            assert_eq!(out.code, clean_code, "{what}: {}", out.stderr);
        }
    }
}

#[test]
fn special_files_are_refused_by_type_before_reading() {
    // `vault: /dev/zero` once read 4 GB and then said "vault file missing".
    let (_d, root) = repo();
    let cfg = std::fs::read_to_string(root.join("hk-console.yaml")).expect("read");
    let cfg = cfg.replace(
        "vault: infra/ansible/inventory/group_vars/k3s_prod/vault.yml",
        "vault: /dev/zero",
    );
    std::fs::write(root.join("hk-console.yaml"), &cfg).expect("write");
    let line = cfg
        .lines()
        .position(|l| l.contains("/dev/zero"))
        .expect("vault line")
        + 1;
    refused_everywhere(
        &root,
        &format!("hk-console.yaml:{line}:"),
        "not a regular file",
    );

    // A FIFO as the inventory once hung forever.
    let (_d2, root) = repo();
    let ini = root.join(HOSTS_INI);
    std::fs::remove_file(&ini).expect("rm");
    let made = Command::new("mkfifo").arg(&ini).status().expect("mkfifo");
    assert!(made.success());
    refused_everywhere(&root, "hosts.ini: a FIFO", "not a regular file");

    // A FIFO among a group's vars files is refused by name too, never skipped.
    let (_d3, root) = repo();
    let dir = root.join("infra/ansible/inventory/group_vars/k3s_prod");
    let made = Command::new("mkfifo")
        .arg(dir.join("zz.yml"))
        .status()
        .expect("mkfifo");
    assert!(made.success());
    refused_everywhere(
        &root,
        "group_vars/k3s_prod/zz.yml: a FIFO",
        "not a regular file",
    );
}

#[test]
fn oversized_and_non_utf8_files_name_where() {
    let (_d, root) = repo();
    let big = format!("pad: \"{}\"\n", "x".repeat(9 << 20));
    append(&root, GROUP_VARS_ALL, big.as_bytes());
    refused_everywhere(&root, GROUP_VARS_ALL, "limit repo.max_file_bytes");

    let (_d2, root) = repo();
    let line = append(&root, GROUP_VARS_ALL, b"ok: 1\nbad: caf\xe9\n") + 1;
    refused_everywhere(&root, &format!("{GROUP_VARS_ALL}:{line}:9:"), "not UTF-8");

    let (_d3, root) = repo();
    let line = append(&root, "hk-console.yaml", b"# \xff\n");
    refused_everywhere(&root, &format!("hk-console.yaml:{line}:3:"), "not UTF-8");
}

#[test]
fn wide_inputs_stay_linear() {
    // Shapes that were quadratic: a mapping with many keys (duplicate-key handling), a
    // JSON vars file with many keys (position lookup), a long INI host line with many
    // variables (column lookup), a long Python set (duplicate removal).
    let (_d, root) = repo();
    let mut text = String::new();
    for i in 0..10_000 {
        text.push_str(&format!("k{i}: {i}\n"));
    }
    append(&root, GROUP_VARS_ALL, text.as_bytes());
    let mut json = String::from("{");
    for i in 0..10_000 {
        json.push_str(&format!("\"j{i}\": {i},"));
    }
    json.push_str("\"end\": 0}\n");
    std::fs::write(
        root.join("infra/ansible/inventory/group_vars/vpn_egress_gateway_prod/more.json"),
        json,
    )
    .expect("json");
    let vars: Vec<String> = (0..10_000).map(|i| format!("h{i}={i}")).collect();
    let set: Vec<String> = (0..10_000).map(|i| i.to_string()).collect();
    append(
        &root,
        HOSTS_INI,
        format!("[wide]\nw1 {} s={{{}}}\n", vars.join(" "), set.join(",")).as_bytes(),
    );
    let out = run(&root, &["inventory", "--host", "w1"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let vars: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    assert_eq!(vars["h9999"], 9_999);
    assert_eq!(vars["k9999"], 9_999);
    assert_eq!(vars["s"].as_array().map(Vec::len), Some(10_000));
    assert!(out.took < DEADLINE, "took {:?}", out.took);
}

#[test]
fn runbook_bombs_name_the_runbook_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shapes = [
        ("alias.yaml", alias_bomb(), "limit yaml.max_alias_nodes"),
        (
            "deep.yaml",
            format!("id: deep\nsteps: {}\n", "[".repeat(50_000)),
            "limit yaml.max_depth",
        ),
    ];
    for (name, text, limit) in shapes {
        let file = dir.path().join(name);
        std::fs::write(&file, text).expect("write");
        let state = dir.path().join("state");
        let start = Instant::now();
        let out = Command::new("prlimit")
            .arg(MEMORY_LIMIT)
            .arg(CPU_LIMIT)
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_hk-console"))
            .args(["runbooks", "validate"])
            .arg(&file)
            .env("XDG_STATE_HOME", &state)
            .output()
            .expect("run");
        let took = start.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(2), "{name}: {stdout}{stderr}");
        let said = format!("{stdout}{stderr}");
        assert!(
            said.contains(&format!("{name}:")) && said.contains(limit),
            "{name}: {said}"
        );
        assert!(took < DEADLINE, "{name}: took {took:?}");

        // The same file in --runbooks stops every command that loads runbooks.
        let rbdir = dir.path().join(format!("rb-{name}"));
        std::fs::create_dir_all(&rbdir).expect("mkdir");
        std::fs::copy(&file, rbdir.join(name)).expect("copy");
        let start = Instant::now();
        let out = Command::new("prlimit")
            .arg(MEMORY_LIMIT)
            .arg(CPU_LIMIT)
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_hk-console"))
            .arg("--runbooks")
            .arg(&rbdir)
            .args(["plan", "etcd-io-priority", "--env", "prod"])
            .env("XDG_STATE_HOME", &state)
            .env_remove("HK_REPO")
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("{name}:")) && stderr.contains(limit),
            "{name}: {stderr}"
        );
        assert!(
            start.elapsed() < DEADLINE,
            "{name}: took {:?}",
            start.elapsed()
        );
    }
}

/// A runbook's own template with a loop of 10^8 iterations stops at `jinja.max_fuel`
/// (exit 2, naming the step and the limit) instead of planning for minutes.
#[test]
fn a_runbook_template_loop_stops_at_its_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rb = dir.path().join("rb");
    std::fs::create_dir_all(&rb).expect("mkdir");
    std::fs::write(
        rb.join("loop.yaml"),
        "id: loop\ntitle: Loop\nread_only: true\nenvironments: [prod]\ntarget:\n  group: servers\nsteps:\n  - id: look\n    kind: ssh\n    mutates: false\n    command: \"echo {% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}x\"\n",
    )
    .expect("runbook");
    let start = Instant::now();
    let out = Command::new("prlimit")
        .arg(MEMORY_LIMIT)
        .arg(CPU_LIMIT)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_hk-console"))
        .arg("--runbooks")
        .arg(&rb)
        .args(["plan", "loop", "--env", "prod"])
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .env_remove("HK_REPO")
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("look") && stderr.contains("limit jinja.max_fuel"),
        "{stderr}"
    );
    assert!(start.elapsed() < DEADLINE, "took {:?}", start.elapsed());
}

/// Guard against a test that cannot fail: the clean sample passes every command.
#[test]
fn the_clean_sample_is_not_refused() {
    let (_d, root) = repo();
    for args in COMMANDS {
        let out = run(&root, args);
        assert_ne!(out.code, Some(2), "{}: {}", args.join(" "), out.stderr);
        assert!(out.stdout.len() > 10, "{}", args.join(" "));
    }
}

/// `--dry-run` promises nothing runs: the modes that exist to reach hosts or drive executors
/// refuse it by name (once `demo --headless --dry-run` really ran ansible and SSH), and the
/// commands that run nothing accept it.
#[test]
fn dry_run_is_refused_where_it_cannot_be_honoured() {
    let (_d, root) = repo();
    for args in [
        &["--dry-run", "demo", "--headless", "--run", "node-health"][..],
        &["demo", "--once", "--dry-run"],
        &["--dry-run", "observe", "--once"],
        &["--dry-run", "ssh", "trust", "k3s-prod-1"],
    ] {
        let out = run(&root, args);
        let what = args.join(" ");
        assert_eq!(out.code, Some(2), "{what}: {}{}", out.stdout, out.stderr);
        assert!(
            out.stderr.contains("--dry-run cannot be honoured here"),
            "{what}: {}",
            out.stderr
        );
        assert!(out.stdout.is_empty(), "{what}: nothing ran: {}", out.stdout);
    }
    let out = run(
        &root,
        &["--dry-run", "plan", "etcd-io-priority", "--env", "prod"],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
}

/// Issue 34: a Jinja loop of 10^8 iterations in an inventory value hung `envs`, `check`,
/// `plan` and `observe --once` with no output. Every evaluation has a budget
/// (`jinja.max_fuel`): each command (and `inventory --host --resolved`, which renders every
/// variable) exits 2 naming the variable, its file:line and the limit, within the CPU limit.
#[test]
fn a_template_loop_spends_its_budget_and_is_a_named_error() {
    let (_d, root) = repo();
    let rel = "infra/ansible/inventory/group_vars/k3s_prod/vars.yml";
    let path = root.join(rel);
    let text = std::fs::read_to_string(&path).expect("read");
    let bomb = "k3s_api_host: \"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}192.168.2.10\"";
    assert!(text.contains("k3s_api_host: 192.168.2.10"), "{text}");
    let text = text.replace("k3s_api_host: 192.168.2.10", bomb);
    let line = text
        .lines()
        .position(|l| l.starts_with("k3s_api_host:"))
        .expect("the line")
        + 1;
    std::fs::write(&path, &text).expect("write");
    let commands: &[&[&str]] = &[
        &["envs"],
        &["check"],
        &["plan", "etcd-io-priority", "--env", "prod"],
        &["observe", "--once"],
        &["inventory", "--host", "k3s-prod-1", "--resolved"],
    ];
    for args in commands {
        let out = run(&root, args);
        let what = format!("hk-console {}", args.join(" "));
        assert_eq!(out.code, Some(2), "{what}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!("{rel}:{line}:"))
                && out.stderr.contains("`k3s_api_host`")
                && out.stderr.contains("limit jinja.max_fuel"),
            "{what}: {}",
            out.stderr
        );
        assert!(out.took < DEADLINE, "{what}: took {:?}", out.took);
    }
}
