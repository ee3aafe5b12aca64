//! The real `hk-console` binary: exit codes, messages, and output shapes that scripts rely on.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::fs_common;
use fs_common::copy_dir;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hk-console"));
    // Keep logs out of the developer's state dir.
    c.env(
        "XDG_STATE_HOME",
        std::env::temp_dir().join("hk-console-cli-tests"),
    );
    c.env_remove("HK_REPO");
    c.env_remove("HK_RUNBOOKS");
    c
}

fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory")
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run hk-console")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn plan_json_has_the_documented_shape() {
    let out = run(&["plan", "etcd-io-priority", "--env", "prod", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["runbook"], "etcd-io-priority");
    assert_eq!(v["env"], "prod");
    assert_eq!(v["mutates"], true);
    let steps = v["steps"].as_array().expect("steps");
    for (i, s) in steps.iter().enumerate() {
        assert_eq!(s["n"], i + 1);
        for key in ["id", "kind", "host", "mutates", "gate", "command", "expect"] {
            assert!(s.get(key).is_some(), "step {i} lacks {key}: {s}");
        }
    }
    // One node at a time: every mutating step's host had a list-hosts step limited to it
    // earlier, and hosts never interleave.
    let mut seen_hosts: Vec<String> = Vec::new();
    let mut listed: Vec<String> = Vec::new();
    for s in steps {
        let Some(h) = s["host"].as_str() else {
            continue;
        };
        if seen_hosts.last().map(String::as_str) != Some(h) {
            assert!(
                !seen_hosts.iter().any(|x| x == h),
                "host {h} came back after another host"
            );
            seen_hosts.push(h.to_string());
        }
        if s["kind"] == "list-hosts" {
            let argv: Vec<&str> = s["command"]
                .as_array()
                .expect("argv")
                .iter()
                .filter_map(|a| a.as_str())
                .collect();
            assert!(argv.windows(2).any(|w| w == ["--limit", h]), "{argv:?}");
            listed.push(h.to_string());
        }
        if s["mutates"] == true {
            assert!(
                listed.iter().any(|x| x == h),
                "mutating step on {h} before its list-hosts"
            );
        }
    }
    assert_eq!(seen_hosts, ["k3s-prod-3", "k3s-prod-1", "k3s-prod-2"]);
}

#[test]
fn unknown_env_and_runbook_are_errors_with_exit_2() {
    let out = run(&["plan", "etcd-io-priority", "--env", "staging"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no environment `staging`"),
        "{}",
        text(&out.stderr)
    );
    let out = run(&["plan", "etcd-io-prio", "--env", "prod"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no runbook `etcd-io-prio`"),
        "{}",
        text(&out.stderr)
    );
    let out = run(&["plan", "etcd-io-priority", "--env", "dev"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("not meant for environment `dev`"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn runbooks_validate_prints_file_line_col_and_exits_2() {
    let bad = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/runbooks/invalid/unknown-step-field.yaml");
    let out = run(&["runbooks", "validate", bad.to_str().expect("utf8")]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("unknown-step-field.yaml:9:5: steps[0]: unknown field `comand`"),
        "{err}"
    );
    let out = run(&["runbooks", "validate"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("ok: 9 runbook file(s) valid"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn malformed_yaml_runbook_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().expect("tmp");
    let f = dir.path().join("broken.yaml");
    std::fs::write(&f, "id: x\nsteps: [\n  - {kind: gate\n").expect("write");
    let out = run(&["runbooks", "validate", f.to_str().expect("utf8")]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("broken.yaml:"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_bad_inventory_names_file_and_line_and_exits_2() {
    let dir = tempfile::tempdir().expect("tmp");
    let f = dir.path().join("hosts.ini");
    std::fs::write(&f, "[nodes]\nn1\n[broken\nn2\n").expect("write");
    let out = run(&["inventory", "-i", f.to_str().expect("utf8"), "--list"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("hosts.ini:3"), "{err}");
}

/// `-i` takes YAML files and directories, and repeats; `--list` is the loader's listing,
/// and a plugin inventory is refused by name with exit 2 (it was read as INI: issue 28).
#[test]
fn inventory_takes_yaml_directories_and_several_sources() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let yaml = root.join("inventories-yaml/basic/hosts.yml");
    let dir = root.join("inventories-dir/order");
    let out = run(&["inventory", "-i", yaml.to_str().expect("utf8"), "--list"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let inv = hk_console::repo::inventory::Inventory::load(&yaml).expect("load");
    assert_eq!(listed, hk_console::repo::listing::list_json(&inv));
    assert_eq!(
        listed.pointer("/webservers/hosts/0"),
        Some(&serde_json::json!("foo.example.com"))
    );
    let out = run(&[
        "inventory",
        "-i",
        yaml.to_str().expect("utf8"),
        "-i",
        dir.to_str().expect("utf8"),
        "--host",
        "h1",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let h1: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(h1["v"], "from_a");
    assert_eq!(h1["ntp"], "10.0.0.1", "all's vars from the YAML source");
    let plugin = root.join("inventories-yaml-bad/plugin.yml");
    let out = run(&["inventory", "-i", plugin.to_str().expect("utf8"), "--list"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("plugin.yml:4: a plugin inventory (`plugin: ansible.builtin.constructed`)"),
        "{err}"
    );
}

#[test]
fn a_missing_repo_config_says_what_is_expected() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = run(&["--repo", dir.path().to_str().expect("utf8"), "envs"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("hk-console.yaml: cannot read"), "{err}");
    assert!(err.contains("names the environments"), "{err}");
}

#[test]
fn resolved_inventory_renders_the_endpoint_per_environment() {
    let out = run(&["inventory", "--list", "--resolved"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let hv = &v["_meta"]["hostvars"];
    assert_eq!(hv["k3s-prod-1"]["k3s_apiserver_endpoint"], "192.168.2.9");
    assert_eq!(hv["k3s-dev-1"]["k3s_apiserver_endpoint"], "192.168.1.49");
    assert_eq!(hv["k3s-prod-3"]["k3s_tls_sans"][0], "192.168.2.10");
    // The vaulted file is reported, never read.
    assert!(
        text(&out.stderr).contains("vault.yml: vaulted, not read"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn unrenderable_values_are_reported_and_exit_1() {
    let dir = tempfile::tempdir().expect("tmp");
    let f = dir.path().join("hosts.ini");
    std::fs::write(&f, "[nodes]\nn1 endpoint=\"{{ vip }}\"\n").expect("write");
    let out = run(&[
        "inventory",
        "-i",
        f.to_str().expect("utf8"),
        "--host",
        "n1",
        "--resolved",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["endpoint"], "{{ vip }}", "left unrendered, never guessed");
    let err = text(&out.stderr);
    assert!(
        err.contains("n1: endpoint: cannot render") && err.contains("`vip` is not defined"),
        "{err}"
    );
}

#[test]
fn a_closed_pipe_is_not_a_panic() {
    use std::io::Read;
    let mut child = bin()
        .args(["plan", "etcd-io-priority", "--env", "prod"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // Read one byte, then close our end.
    let mut stdout = child.stdout.take().expect("stdout");
    let mut one = [0u8; 1];
    stdout.read_exact(&mut one).expect("read");
    drop(stdout);
    let out = child.wait_with_output().expect("wait");
    let err = text(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        matches!(out.status.code(), Some(0)),
        "{:?} {err}",
        out.status
    );
}

#[test]
fn the_sample_repo_is_the_default() {
    let a = run(&["envs", "--json"]);
    let b = run(&["--repo", sample().to_str().expect("utf8"), "envs", "--json"]);
    assert_eq!(a.status.code(), Some(0), "{}", text(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn check_on_the_sample_is_clean_with_the_prod_blockers_as_warnings() {
    let out = run(&["check"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let stdout = text(&out.stdout);
    // The prod vault is absent and no password variable needs it: no play misses it.
    assert!(!stdout.contains("vault-missing"), "{stdout}");
    assert!(
        stdout.contains("k3s_prod/vars.yml:26: [device-placeholder] warning: prod"),
        "{stdout}"
    );
    // The founder's address is what the k3s playbook joins through: a warning (joins only),
    // per environment, at the line that writes it.
    for (env, node) in [("dev", "k3s-dev-1"), ("prod", "k3s-prod-1")] {
        let line = format!("infra/ansible/playbooks/k3s.yml:25: [ha-endpoint] warning: {env}: k3s_api_host renders to");
        assert!(stdout.contains(&line), "{line}\n{stdout}");
        assert!(
            stdout.contains(&format!(
                "only joins use it: no node can join while {node} is down"
            )),
            "{stdout}"
        );
    }
    assert!(stdout.contains("parity: clean (4 warnings)"), "{stdout}");
}

#[test]
fn check_names_the_single_node_dependency_and_exits_1() {
    let dir = tempfile::tempdir().expect("tmp");
    copy_dir(&sample(), dir.path());
    let overlay = dir.path().join("clusters/prod/kustomization.yaml");
    let text_before = std::fs::read_to_string(&overlay).expect("read");
    assert!(text_before.contains("value: 192.168.2.9"));
    std::fs::write(
        &overlay,
        text_before.replace("value: 192.168.2.9", "value: 192.168.2.10"),
    )
    .expect("write");
    let out = run(&[
        "--repo",
        dir.path().to_str().expect("utf8"),
        "check",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["clean"], false);
    let rules: Vec<&str> = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["severity"] == "violation")
        .filter_map(|f| f["rule"].as_str())
        .collect();
    assert_eq!(
        rules,
        [
            "overlay-equals-endpoint",
            "overlay-equals-vip",
            "overlay-not-node-ip"
        ]
    );
    let f = v["findings"]
        .as_array()
        .and_then(|a| a.iter().find(|f| f["severity"] == "violation"))
        .expect("a violation");
    assert_eq!(f["env"], "prod");
    assert_eq!(f["file"], "clusters/prod/kustomization.yaml");
    assert_eq!(f["line"], 14);
    // Dev alone is still clean.
    let out = run(&[
        "--repo",
        dir.path().to_str().expect("utf8"),
        "check",
        "--env",
        "dev",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
}

#[test]
fn check_that_cannot_run_exits_2() {
    let out = run(&["--repo", "/nonexistent/infra", "check"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("/nonexistent/infra: not a directory"),
        "{}",
        text(&out.stderr)
    );
    let out = run(&["check", "--env", "staging"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_overview_shows_environments_check_and_runbooks() {
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for needle in [
        "== Environments",
        "VIP          192.168.2.9   endpoint 192.168.2.9   founder 192.168.2.10",
        "== Parity check (static, L0)",
        "parity: clean (4 warnings)",
        "== Runbooks",
        "etcd-io-priority",
        "node-health                read-only",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in:\n{stdout}");
    }
}

/// A user runbook replacing a shipped id, whose ssh step declares `mutates: false` for a
/// command that changes the node (the user's word, which hk-console cannot verify).
const USER_NODE_HEALTH: &str = "id: node-health
title: Node health, my way
read_only: true
environments: [dev, prod]
target:
  group: servers
steps:
  - id: look
    kind: ssh
    title: \"Look at {{ host }}\"
    command: systemctl stop k3s
    mutates: false
";

/// `--runbooks DIR` with that runbook: its file.
fn user_runbooks(dir: &Path) -> PathBuf {
    let rb = dir.join("rb");
    std::fs::create_dir_all(&rb).expect("dir");
    std::fs::write(rb.join("node-health.yaml"), USER_NODE_HEALTH).expect("runbook");
    rb.join("node-health.yaml")
}

/// Overriding a shipped runbook's id is said where the runbook is looked at: `runbooks
/// list` (text and JSON) names the file that replaced the shipped one.
#[test]
fn runbooks_list_shows_a_shipped_id_overridden() {
    let tmp = tempfile::tempdir().expect("tmp");
    let file = user_runbooks(tmp.path());
    let dir = file.parent().expect("dir").to_str().expect("utf8");
    let out = run(&["--runbooks", dir, "runbooks", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let row = stdout
        .lines()
        .find(|l| l.starts_with("node-health "))
        .unwrap_or_else(|| panic!("no node-health row:\n{stdout}"));
    assert!(
        row.contains("overrides the shipped runbook") && row.contains(&file.display().to_string()),
        "{row}"
    );
    // A shipped runbook nobody replaced says nothing of the kind.
    let other = stdout
        .lines()
        .find(|l| l.starts_with("etcd-io-priority "))
        .expect("etcd-io-priority row");
    assert!(!other.contains("overrides"), "{other}");

    let out = run(&["--runbooks", dir, "runbooks", "list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let nh = rows
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["id"] == "node-health")
        .expect("node-health");
    assert_eq!(nh["overrides_shipped"], true, "{nh}");
    let ep = rows
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["id"] == "etcd-io-priority")
        .expect("etcd-io-priority");
    assert_eq!(ep["overrides_shipped"], false, "{ep}");
}

/// `plan` of that runbook says it replaced the shipped one, and marks each step whose
/// read-only-ness is only the user's word with the file and line that declares it.
#[test]
fn plan_marks_a_user_declared_read_only_step_and_the_override() {
    let tmp = tempfile::tempdir().expect("tmp");
    let file = user_runbooks(tmp.path());
    let dir = file.parent().expect("dir").to_str().expect("utf8");
    let at = format!("{}:12", file.display());
    let out = run(&["--runbooks", dir, "plan", "node-health", "--env", "dev"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "overrides the shipped runbook node-health: {}",
            file.display()
        )),
        "{stdout}"
    );
    let marked = stdout
        .lines()
        .filter(|l| l.contains(&format!("declared read-only by {at}, not verified")))
        .count();
    // One ssh step per dev server.
    assert_eq!(marked, 3, "{stdout}");

    let out = run(&[
        "--runbooks",
        dir,
        "plan",
        "node-health",
        "--env",
        "dev",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let steps = plan["steps"].as_array().expect("steps");
    assert!(
        steps
            .iter()
            .filter(|s| s["kind"] == "ssh")
            .all(|s| s["declared_read_only"] == at.as_str()),
        "{plan:#}"
    );

    // The shipped node-health's ssh steps are its own (reviewed, shipped): not marked.
    let out = run(&["plan", "node-health", "--env", "dev", "--json"]);
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        plan["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .all(|s| s.get("declared_read_only").is_none()),
        "{plan:#}"
    );
}

#[test]
fn plan_refuses_a_host_the_runbook_cannot_honour() {
    // etcd-io-priority plans every prod server: a host named for it would be ignored, and the
    // operator would read a three-host plan as the one host they asked for.
    let out = run(&[
        "plan",
        "etcd-io-priority",
        "--env",
        "prod",
        "--host",
        "k3s-prod-1",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(
        err.contains("`etcd-io-priority` is not a one-host runbook")
            && err.contains("(`k3s-prod-1`)"),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "no plan printed: {}",
        text(&out.stdout)
    );
    // A one-host runbook still takes it.
    let out = run(&[
        "plan",
        "reprovision-node",
        "--env",
        "prod",
        "--host",
        "k3s-prod-1",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// Issue 38: `demo --dir D`, quit, `demo --dir D` again: the reopened copy moves every
/// port-derived value together onto the new simulation (the Flux release's
/// `k8sServicePort` once stayed at the repo's 6443 while `k3s_api_port` moved), so `check`
/// on it is as clean as on a fresh demo's copy, and the demo's own host_vars are written
/// once, not stacked.
#[test]
fn a_reopened_demo_directory_is_as_clean_as_a_fresh_one() {
    let tmp = tempfile::tempdir().expect("tmp");
    let d = tmp.path().join("demo");
    let d_s = d.display().to_string();
    for round in ["fresh", "reopened"] {
        let o = bin()
            .args(["demo", "--once", "--dir", &d_s])
            .env("XDG_STATE_HOME", tmp.path().join("state"))
            .output()
            .expect("demo --once");
        assert_eq!(o.status.code(), Some(0), "{round}: {}", text(&o.stderr));
        let o = run(&["--repo", &d_s, "check"]);
        let stdout = text(&o.stdout);
        assert!(
            stdout.contains("parity: clean"),
            "{round}: {stdout}\n{}",
            text(&o.stderr)
        );
    }
    let vars = std::fs::read_to_string(d.join("infra/ansible/inventory/host_vars/k3s-prod-1.yml"))
        .expect("the demo's host_vars");
    assert_eq!(
        vars.matches("# Written by hk-console demo").count(),
        1,
        "{vars}"
    );
}
