//! Values are data, never shell: every repo value a shipped runbook's `ssh` command uses is
//! spliced as exactly one shell word, so a hostile inventory cannot turn a read-only step
//! into another command. The planned commands run under a REAL `sh -c` (dash) and
//! `bash -c`, with the commands they call replaced by recorders on PATH: the hostile run
//! records exactly what the benign run records (the value in place of the benign one),
//! prints the same and exits the same, and the marker file the payloads try to create is
//! never there. And with the sample's plain values, the plans' commands are byte for byte
//! what they were before quoting existed (one documented runbook rewrite aside).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use hk_console::context::{load_runbooks, plan_runbook};
use hk_console::repo::Repo;
use hk_console::runbook::plan::{Plan, StepKind};

use crate::fs_common;
use fs_common::copy_dir;

/// `MARK` becomes the marker file's path.
const PAYLOADS: &[&str] = &[
    "/var/lib/rancher/k3s; touch MARK #",
    "$(touch MARK)",
    "`touch MARK`",
    "x\ntouch MARK",
    "x\r\ntouch MARK\r",
    "'; touch MARK; '",
    "\"; touch MARK; \"",
    "\\'; touch MARK; #",
    "'\"'\"'$(touch MARK)'\"'\"'",
    "${IFS}touch${IFS}MARK",
    "a b * ? [x] ~ $HOME && touch MARK || touch MARK | touch MARK > MARK",
    "-n; touch MARK",
    "\u{1b}]0;x\u{7}$(touch MARK)",
];

fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory")
}

/// The `vars.*` every shipped runbook's ssh commands use. Any other template variable in an
/// ssh command (env.*, host) fails here, so this test is extended before it goes untested.
fn ssh_command_vars() -> BTreeSet<String> {
    let expr = regex::Regex::new(r"\{\{(.*?)\}\}").expect("regex");
    let var = regex::Regex::new(r"^\s*vars\.([A-Za-z0-9_]+)\s*$").expect("regex");
    let mut out = BTreeSet::new();
    for (name, text) in hk_console::runbook::embedded::embedded() {
        let doc: serde_yaml::Value = serde_yaml::from_str(text).expect("runbook yaml");
        for step in doc["steps"].as_sequence().expect("steps") {
            if step["kind"].as_str() != Some("ssh") {
                continue;
            }
            let command = step["command"].as_str().expect("command");
            for cap in expr.captures_iter(command) {
                let inner = &cap[1];
                // The VPN names are checked words before a runbook sees them (hk-console.yaml
                // `names:` when read, the hostvars by the gateway look):
                // `a_hostile_vpn_name_is_refused_before_any_plan` covers them.
                if VPN_NAMES.contains(&inner.trim()) {
                    continue;
                }
                let v = var.captures(inner).unwrap_or_else(|| {
                    panic!(
                        "{name}: ssh command uses `{{{{{inner}}}}}`: extend this test to cover it"
                    )
                });
                out.insert(v[1].to_string());
            }
        }
    }
    assert!(
        !out.is_empty(),
        "no ssh command uses a repo value: nothing tested"
    );
    out
}

/// The `env.*` VPN names the shipped ssh commands use, and the hostvar each comes from.
const VPN_NAMES: &[&str] = &["env.vpn_unit", "env.vpn_interface", "env.vpn_exit_ip_url"];
const VPN_HOSTVARS: &[(&str, &str)] = &[
    ("env.vpn_unit", "vpn_egress_gateway_service"),
    ("env.vpn_interface", "vpn_egress_gateway_interface"),
    ("env.vpn_exit_ip_url", "vpn_egress_gateway_exit_ip_url"),
];

/// A hostile value in the hostvar a VPN name comes from never runs: the gateway look
/// refuses what is not one word or URL (the name is then undefined and a plan that needs it
/// fails, naming it), and what it lets through lands in a command as exactly one quoted
/// shell word.
#[test]
fn a_hostile_vpn_name_is_refused_before_any_plan() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut refused = 0;
    for (_, hostvar) in VPN_HOSTVARS {
        for payload in [
            "x; touch /tmp/owned #",
            "$(touch /tmp/owned)",
            "a\ntouch /tmp/owned",
        ] {
            let values = BTreeMap::from([(hostvar.to_string(), payload.to_string())]);
            let repo = repo_with(&tmp.path().join(hostvar), &values);
            let set = load_runbooks(None).expect("runbooks");
            match plan_runbook(&repo, &set, "vpn-egress-verify", "dev", None) {
                Err(e) => {
                    refused += 1;
                    // A gateway whose names do not pass leaves all three unknown: the first
                    // the runbook uses is named, with the gateway, the hostvar and why.
                    let e = e.to_string();
                    assert!(
                        e.contains("`env.vpn_unit` is not known for environment `dev`")
                            && e.contains("k3s-dev-3")
                            && e.contains(hostvar),
                        "{hostvar}={payload:?}: {e}"
                    );
                }
                Ok(p) => {
                    let quoted = format!("'{payload}'");
                    let mut used = false;
                    for step in &p.steps {
                        let Some(cmd) = step.command.as_ref().and_then(|c| c.last()) else {
                            continue;
                        };
                        used |= cmd.contains(&quoted);
                        assert!(
                            !cmd.replace(&quoted, "").contains(payload),
                            "{hostvar}={payload:?} unquoted in {cmd}"
                        );
                    }
                    assert!(used, "{hostvar}={payload:?} reached no command: {p:?}");
                }
            }
        }
    }
    // The newline is never a word: refused for every name.
    assert!(refused >= VPN_HOSTVARS.len(), "{refused}");
}

/// A copy of the sample with `values` set for every host (host_vars win over group_vars).
fn repo_with(dir: &Path, values: &BTreeMap<String, String>) -> Repo {
    let root = dir.join("repo");
    std::fs::create_dir_all(dir).expect("dir");
    copy_dir(&sample(), &root);
    let repo = Repo::load(&root).expect("sample loads");
    let hv = repo.inventory_path.parent().expect("dir").join("host_vars");
    std::fs::create_dir_all(&hv).expect("host_vars");
    let mut text = String::new();
    for (k, v) in values {
        // A JSON string is a YAML double-quoted scalar: the value exactly.
        text.push_str(&format!("{k}: {}\n", serde_json::Value::String(v.clone())));
    }
    for host in repo.inventory.hosts() {
        std::fs::write(hv.join(format!("{host}.yml")), &text).expect("host vars");
    }
    Repo::load(&root).expect("hostile repo loads")
}

/// Every plan of every shipped runbook, for each environment (and each host where the
/// runbook runs on one).
fn all_plans(repo: &Repo) -> BTreeMap<String, Plan> {
    let set = load_runbooks(None).expect("runbooks");
    let mut out = BTreeMap::new();
    for id in set.ids() {
        let rb = set.get(id).expect("runbook");
        for env in &rb.environments {
            match plan_runbook(repo, &set, id, env, None) {
                Ok(p) => {
                    out.insert(format!("{id} {env}"), p);
                }
                Err(e) => {
                    let msg = e.to_string();
                    let hosts = msg
                        .split("one of: ")
                        .nth(1)
                        .unwrap_or_else(|| panic!("{id} {env}: {msg}"))
                        .trim_end_matches(')');
                    for h in hosts.split(", ") {
                        let p = plan_runbook(repo, &set, id, env, Some(h))
                            .unwrap_or_else(|e| panic!("{id} {env} {h}: {e}"));
                        out.insert(format!("{id} {env} {h}"), p);
                    }
                }
            }
        }
    }
    out
}

/// Recorders for the commands the shipped ssh steps call: each appends its name and its
/// arguments (one `[arg]` each) to $HK_LOG and prints something plausible.
fn stub_bin(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    let script = r#"#!/bin/sh
n=${0##*/}
# One write per call: a pipeline's commands run at once, and several printfs each would
# interleave their pieces in the shared log.
line=$n; for a in "$@"; do line="$line [$a]"; done
printf '%s\n' "$line" >>"$HK_LOG"
case "$n" in
  findmnt) echo /dev/sda1 ;;
  lsblk|basename) echo sda ;;
  grep) case "$*" in *-c*) echo 0 ;; esac ;;
  cat) echo 64 ;;
  systemctl) case "$*" in *is-active*|*is-system-running*) echo active ;; *) echo 100 ;; esac ;;
  curl) echo 203.0.113.7 ;;
  journalctl) echo 'Initialization Sequence Completed' ;;
esac
exit 0
"#;
    for name in [
        "findmnt",
        "lsblk",
        "basename",
        "grep",
        "cat",
        "systemctl",
        "curl",
        "journalctl",
    ] {
        let p = bin.join(name);
        std::fs::write(&p, script).expect("stub");
        let st = Command::new("chmod")
            .arg("+x")
            .arg(&p)
            .status()
            .expect("chmod");
        assert!(st.success());
    }
    bin
}

#[derive(Debug, PartialEq)]
struct Ran {
    log: String,
    stdout: String,
    code: Option<i32>,
}

fn run_shell(shell: &str, command: &str, bin: &Path, work: &Path) -> Ran {
    let log = work.join("log");
    let _ = std::fs::remove_file(&log);
    let out = Command::new("timeout")
        .arg("20")
        .arg(shell)
        .arg("-c")
        .arg(command)
        .current_dir(work)
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("HK_LOG", &log)
        .output()
        .expect("shell runs");
    // A pipeline's commands start in either order: the record is compared as a set of
    // lines, sorted.
    let mut lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .split_inclusive('\n')
        .map(str::to_string)
        .collect();
    lines.sort();
    Ran {
        log: lines.concat(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        code: out.status.code(),
    }
}

/// The ssh commands of a set of plans, keyed by plan, step id and host.
fn ssh_commands(plans: &BTreeMap<String, Plan>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (key, plan) in plans {
        for s in &plan.steps {
            if s.kind != StepKind::Ssh {
                continue;
            }
            let argv = s.command.as_ref().expect("ssh argv");
            assert_eq!(argv.len(), 3, "{argv:?}");
            assert!(
                !s.mutates,
                "{key} {}: a shipped ssh step mutates; this test runs them",
                s.id
            );
            out.insert(
                format!("{key} {}@{}", s.id, s.host.as_deref().unwrap_or_default()),
                argv[2].clone(),
            );
        }
    }
    out
}

#[test]
fn hostile_values_run_nothing_but_the_intended_command() {
    let vars = ssh_command_vars();
    let tmp = tempfile::tempdir().expect("tmp");
    let bin = stub_bin(tmp.path());
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).expect("work");
    let marker = tmp.path().join("INJECTED");

    // Benign: a distinct plain token per variable, so the recorders show where each lands.
    let benign: BTreeMap<String, String> = vars
        .iter()
        .enumerate()
        .map(|(i, v)| (v.clone(), format!("hkvalue{i}token")))
        .collect();
    let benign_cmds = ssh_commands(&all_plans(&repo_with(&tmp.path().join("b"), &benign)));
    assert!(!benign_cmds.is_empty());
    let shells: Vec<&str> = ["sh", "bash"]
        .into_iter()
        .filter(|s| Command::new(s).arg("-c").arg("true").status().is_ok())
        .collect();
    assert!(shells.contains(&"sh"), "no sh");

    let mut benign_runs = BTreeMap::new();
    for (key, cmd) in &benign_cmds {
        for shell in &shells {
            benign_runs.insert((key.clone(), *shell), run_shell(shell, cmd, &bin, &work));
        }
    }
    // The read-back reaches findmnt with the data dir as one argument.
    let etcd = benign_runs
        .iter()
        .find(|((k, _), _)| k.starts_with("etcd-io-priority prod read-back@"))
        .map(|(_, r)| r)
        .expect("etcd read-back ran");
    let dd = &benign["k3s_data_dir"];
    assert!(
        etcd.log
            .contains(&format!("findmnt [-no] [SOURCE] [--target] [{dd}]\n")),
        "{etcd:?}"
    );

    let mut checked = 0;
    for (n, payload) in PAYLOADS.iter().enumerate() {
        let payload = payload.replace("MARK", &marker.display().to_string());
        let hostile: BTreeMap<String, String> =
            vars.iter().map(|v| (v.clone(), payload.clone())).collect();
        let cmds = ssh_commands(&all_plans(&repo_with(
            &tmp.path().join(format!("h{n}")),
            &hostile,
        )));
        assert_eq!(
            cmds.keys().collect::<Vec<_>>(),
            benign_cmds.keys().collect::<Vec<_>>()
        );
        for (key, cmd) in &cmds {
            for shell in &shells {
                let got = run_shell(shell, cmd, &bin, &work);
                assert!(
                    !marker.exists(),
                    "{key} under {shell}: payload {payload:?} ran: {cmd}"
                );
                let want = benign_runs[&(key.clone(), *shell)].clone_with(&benign, &payload);
                assert_eq!(
                    got, want,
                    "{key} under {shell}: payload {payload:?} changed what runs:\n{cmd}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= PAYLOADS.len() * 3, "{checked} runs compared");
}

impl Ran {
    /// This benign run with each benign token replaced by `payload`: what the hostile run
    /// must record and print if the payload stayed one word of data.
    fn clone_with(&self, benign: &BTreeMap<String, String>, payload: &str) -> Ran {
        let mut log = self.log.clone();
        let mut stdout = self.stdout.clone();
        for token in benign.values() {
            log = log.replace(token.as_str(), payload);
            stdout = stdout.replace(token.as_str(), payload);
        }
        let mut lines: Vec<&str> = log.split_inclusive('\n').collect();
        lines.sort();
        Ran {
            log: lines.concat(),
            stdout,
            code: self.code,
        }
    }
}

/// With the sample's plain values nothing is quoted: every planned command is byte for
/// byte what it was before the shell formatter (tests/fixtures/inject/, written by the
/// previous binary), except etcd-io-priority's read-back, whose runbook moved its two
/// expected values out of the command's double quotes into shell variables (a value
/// inside quotes would have been quoted twice; `runbooks validate` now refuses that).
#[test]
fn plain_values_plan_the_same_commands_as_before() {
    let before: BTreeMap<String, BTreeMap<String, Vec<String>>> = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/inject/sample-plan-commands.json"),
        )
        .expect("fixture"),
    )
    .expect("fixture json");
    let repo = Repo::load(&sample()).expect("sample");
    let root = repo.root.display().to_string();
    // Runbooks shipped after the fixture was written have no "before" to compare with;
    // every other plan must still be there.
    const NEWER: &[&str] = &["vpn-eviction-fix"];
    let mut plans = all_plans(&repo);
    plans.retain(|key, _| !NEWER.iter().any(|id| key.starts_with(&format!("{id} "))));
    assert_eq!(
        plans.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>()
    );
    let mut compared = 0;
    for (key, plan) in &plans {
        for s in &plan.steps {
            let Some(argv) = &s.command else { continue };
            let id = format!("{}@{}", s.id, s.host.as_deref().unwrap_or_default());
            let Some(old) = before[key].get(&id) else {
                continue;
            };
            let argv: Vec<String> = argv.iter().map(|a| a.replace(&root, "<repo>")).collect();
            if key == "etcd-io-priority prod" && s.id == "read-back" {
                let host = s.host.as_deref().expect("host");
                assert_eq!(argv[..2], old[..2]);
                assert_eq!(argv[2], READ_BACK_NOW, "{host}");
                assert_eq!(old[2], READ_BACK_BEFORE, "{host}");
            } else {
                assert_eq!(&argv, old, "{key} {id}");
            }
            compared += 1;
        }
    }
    assert!(compared >= 90, "{compared} commands compared");
}

const READ_BACK_BEFORE: &str = r#"set -eu; src=$(findmnt -no SOURCE --target /var/lib/rancher/k3s); disk=$(lsblk -ndo PKNAME "$src" 2>/dev/null || true); [ -n "$disk" ] || disk=$(basename "$src"); case "$disk" in nvme*) echo "skipped: $disk is NVMe"; exit 0;; esac; q=/sys/block/$disk/queue; grep -q '\[bfq\]' $q/scheduler || { echo "scheduler is not bfq: $(cat $q/scheduler)"; exit 1; }; [ "$(cat $q/nr_requests)" = 32 ] || { echo "nr_requests is $(cat $q/nr_requests), not 32"; exit 1; }; for u in system.slice k3s.service; do w=$(systemctl show -p IOWeight --value $u); [ "$w" = 10000 ] || { echo "$u IOWeight is $w, not 10000"; exit 1; }; done; echo "ok: $disk scheduler=bfq nr_requests=32 IOWeight=10000""#;

const READ_BACK_NOW: &str = r#"set -eu; nr=32; weight=10000; src=$(findmnt -no SOURCE --target /var/lib/rancher/k3s); disk=$(lsblk -ndo PKNAME "$src" 2>/dev/null || true); [ -n "$disk" ] || disk=$(basename "$src"); case "$disk" in nvme*) echo "skipped: $disk is NVMe"; exit 0;; esac; q=/sys/block/$disk/queue; grep -q '\[bfq\]' $q/scheduler || { echo "scheduler is not bfq: $(cat $q/scheduler)"; exit 1; }; [ "$(cat $q/nr_requests)" = "$nr" ] || { echo "nr_requests is $(cat $q/nr_requests), not $nr"; exit 1; }; for u in system.slice k3s.service; do w=$(systemctl show -p IOWeight --value $u); [ "$w" = "$weight" ] || { echo "$u IOWeight is $w, not $weight"; exit 1; }; done; echo "ok: $disk scheduler=bfq nr_requests=$nr IOWeight=$weight""#;

/// The two readings of the read-back agree: with the same host state, before and now print
/// the same and exit the same under a real sh.
#[test]
fn the_rewritten_read_back_behaves_as_before() {
    let tmp = tempfile::tempdir().expect("tmp");
    let bin = stub_bin(tmp.path());
    for shell in ["sh", "bash"] {
        let a = run_shell(shell, READ_BACK_BEFORE, &bin, tmp.path());
        let b = run_shell(shell, READ_BACK_NOW, &bin, tmp.path());
        assert_eq!(a, b, "{shell}");
        // The recorders answer 64 for nr_requests: the check fails the same way.
        assert_eq!(a.stdout, "nr_requests is 64, not 32\n");
        assert_eq!(a.code, Some(1));
    }
}

/// A runbook that writes an expression inside its own quotes is refused (the value would be
/// quoted twice and a `"` in it would end the runbook's quotes); `shell_raw` is warned about
/// with its file:line:col and named in the plan's title.
#[test]
fn quoted_splices_are_refused_and_raw_splices_flagged() {
    use hk_console::runbook::validate::{raw_shell_splices, validate_text};
    let base = "id: t\nenvironments: [prod]\ntarget:\n  group: servers\nsteps:\n  - id: s\n    kind: ssh\n    mutates: false\n";
    for bad in [
        r#"echo "{{ vars.k3s_data_dir }}""#,
        r#"echo '{{ vars.k3s_data_dir }}'"#,
        r#"echo `ls {{ vars.k3s_data_dir }}`"#,
        r#"x="$(echo "a {{ vars.k3s_data_dir }}")""#,
    ] {
        let text = format!(
            "{base}    command: {}\n",
            serde_json::Value::String(bad.into())
        );
        let diags = validate_text("t.yaml", &text).expect_err(bad);
        assert!(
            diags
                .iter()
                .any(|d| d.message.contains("inside shell quotes")),
            "{bad}: {diags:?}"
        );
    }
    for good in [
        r#"echo {{ vars.k3s_data_dir }}"#,
        r#"x="$(findmnt --target {{ vars.k3s_data_dir }})"; echo "$x""#,
        r#"case "$d" in nvme*) echo "n";; esac; ls {{ vars.k3s_data_dir }}"#,
        r#"echo "{{ vars.k3s_data_dir | shell_raw }}""#,
    ] {
        let text = format!(
            "{base}    command: {}\n",
            serde_json::Value::String(good.into())
        );
        validate_text("t.yaml", &text).unwrap_or_else(|d| panic!("{good}: {d:?}"));
    }

    let raw = format!(
        "{base}    # shell_raw in a comment is not a use\n    command: ls {{{{ vars.k3s_data_dir | shell_raw }}}}\n"
    );
    validate_text("t.yaml", &raw).expect("valid");
    let warnings = raw_shell_splices("t.yaml", &raw);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(
        (warnings[0].line, warnings[0].col),
        (10, 40),
        "{warnings:?}"
    );
    assert!(warnings[0]
        .to_string()
        .starts_with("t.yaml:10:40: `shell_raw`"));
    // Every shipped runbook splices values as data only.
    for (name, text) in hk_console::runbook::embedded::embedded() {
        assert!(raw_shell_splices(name, text).is_empty(), "{name}");
    }

    // Planned: the raw value is spliced unquoted, and the title says so.
    let set = hk_console::runbook::embedded::load(&[(
        "t.yaml".into(),
        raw.replace("group: servers", "group: k3s_prod"),
    )])
    .expect("loads");
    let tmp = tempfile::tempdir().expect("tmp");
    let mut v = BTreeMap::new();
    v.insert("k3s_data_dir".to_string(), "/a b".to_string());
    let repo = repo_with(tmp.path(), &v);
    let plan = plan_runbook(&repo, &set, "t", "prod", None).expect("plan");
    let s = &plan.steps[0];
    assert_eq!(s.command.as_ref().expect("argv")[2], "ls /a b");
    assert!(
        s.title.contains("[splices raw shell: shell_raw]"),
        "{}",
        s.title
    );
    // And the same value without shell_raw is one word.
    let quoted = format!("{base}    command: ls {{{{ vars.k3s_data_dir }}}}\n")
        .replace("group: servers", "group: k3s_prod");
    let set = hk_console::runbook::embedded::load(&[("t.yaml".into(), quoted)]).expect("loads");
    let plan = plan_runbook(&repo, &set, "t", "prod", None).expect("plan");
    assert_eq!(
        plan.steps[0].command.as_ref().expect("argv")[2],
        "ls '/a b'"
    );
    assert!(!plan.steps[0].title.contains("shell_raw"));
}

/// Through the binary, as the issue reported it: the read-back of `plan etcd-io-priority`
/// carries the hostile data dir as one quoted word.
#[test]
fn the_reported_plan_quotes_the_value() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut v = BTreeMap::new();
    v.insert(
        "k3s_data_dir".to_string(),
        "/var/lib/rancher/k3s; touch /tmp/INJECTED #".to_string(),
    );
    let repo = repo_with(tmp.path(), &v);
    let out = Command::new(env!("CARGO_BIN_EXE_hk-console"))
        .arg("--repo")
        .arg(&repo.root)
        .args(["plan", "etcd-io-priority", "--env", "prod", "--json"])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: Plan = serde_json::from_slice(&out.stdout).expect("plan json");
    let rb = plan
        .steps
        .iter()
        .find(|s| s.id == "read-back")
        .expect("read-back");
    assert!(!rb.mutates);
    let cmd = &rb.command.as_ref().expect("argv")[2];
    assert!(
        cmd.contains("--target '/var/lib/rancher/k3s; touch /tmp/INJECTED #');"),
        "{cmd}"
    );
}

/// `runbooks validate` passes a runbook that splices raw shell, with a warning naming the
/// exact place, and refuses one that quotes an expression itself (exit 2, file:line:col).
#[test]
fn runbooks_validate_warns_about_raw_and_refuses_quoted_splices() {
    let tmp = tempfile::tempdir().expect("tmp");
    let base = "id: t\nenvironments: [prod]\ntarget:\n  group: servers\nsteps:\n  - id: s\n    kind: ssh\n    mutates: false\n";
    let raw = tmp.path().join("raw.yaml");
    std::fs::write(
        &raw,
        format!("{base}    command: ls {{{{ vars.k3s_data_dir | shell_raw }}}}\n"),
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_hk-console"))
        .args(["runbooks", "validate"])
        .arg(&raw)
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("warning: {}:9:40: `shell_raw`", raw.display())),
        "{err}"
    );

    let quoted = tmp.path().join("quoted.yaml");
    std::fs::write(
        &quoted,
        format!("{base}    command: echo \"{{{{ vars.k3s_data_dir }}}}\"\n"),
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_hk-console"))
        .args(["runbooks", "validate"])
        .arg(&quoted)
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}:9:14: `{{{{ vars.k3s_data_dir }}}}` sits inside shell quotes",
            quoted.display()
        )),
        "{err}"
    );
}
