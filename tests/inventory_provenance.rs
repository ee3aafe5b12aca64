//! `hk-console inventory --host H --resolved --playbook P` against the real play: the
//! fixture tests/fixtures/inventory-play has roles with defaults, vars and a dependency, and
//! a playbook whose one task prints what the play sees; every value hk-console gives must be
//! what `ansible-playbook` printed, and every variable the play lacks must be absent.
//!
//! Needs ansible-core 2.19 (`ansible-playbook`): `$HK_ANSIBLE_BIN_DIR`, else `PATH`, else
//! /opt/hk-venv/bin. Missing is a FAILURE.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn ansible_playbook() -> PathBuf {
    hk_test_support::ansible::bin("ansible-playbook")
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/inventory-play")
}

/// host -> the probe task's message (a JSON object of what the play sees).
fn ansible_probe(tmp: &Path) -> Vec<(String, Value)> {
    std::fs::write(tmp.join("ansible.cfg"), "[defaults]\n").expect("cfg");
    let out = Command::new(ansible_playbook())
        .current_dir(fixture())
        .env("ANSIBLE_CONFIG", tmp.join("ansible.cfg"))
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_LOCAL_TEMP", tmp.join("tmp"))
        .env("ANSIBLE_STDOUT_CALLBACK", "default")
        .args(["-i", "hosts.ini", "site.yml"])
        .output()
        .expect("run ansible-playbook");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "ansible-playbook failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut probes = Vec::new();
    let mut lines = stdout.lines();
    while let Some(l) = lines.next() {
        let Some(host) = l
            .strip_prefix("ok: [")
            .and_then(|r| r.strip_suffix("] => {"))
        else {
            continue;
        };
        let mut body = String::from("{");
        for l in lines.by_ref() {
            body.push_str(l);
            if l == "}" {
                break;
            }
        }
        let result: Value = serde_json::from_str(&body).expect("task result is JSON");
        let msg = result["msg"].as_str().expect("msg is the to_json text");
        probes.push((
            host.to_string(),
            serde_json::from_str(msg).expect("probe JSON"),
        ));
    }
    probes
}

fn hk_play_vars(tmp: &Path, host: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_hk-console"))
        .current_dir(fixture())
        .env("XDG_STATE_HOME", tmp.join("state"))
        .args(["inventory", "-i", "hosts.ini", "--host", host, "--resolved"])
        .args(["--playbook", "site.yml"])
        .output()
        .expect("run hk-console");
    assert!(
        out.status.success(),
        "hk-console failed for {host}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("hk-console prints JSON")
}

#[test]
fn play_vars_equal_what_the_real_play_sees_with_provenance() {
    let tmp = tempfile::tempdir().expect("tmp");
    let probes = ansible_probe(tmp.path());
    // Ansible prints each host's result as its fork finishes, so the order varies run to
    // run; the set and the count are what the play promises.
    let mut seen_hosts = probes.iter().map(|(h, _)| h.as_str()).collect::<Vec<_>>();
    seen_hosts.sort_unstable();
    assert_eq!(seen_hosts, ["d1", "w1", "w2"], "one probe per host");
    for (host, seen) in &probes {
        let ours = hk_play_vars(tmp.path(), host);
        assert_eq!(ours["roles"], serde_json::json!(["base", "app"]), "{host}");
        for (k, want) in seen.as_object().expect("probe object") {
            let got = &ours["vars"][k];
            if want == "UNDEF" {
                assert!(
                    got.is_null(),
                    "{host}.{k}: the play lacks it, we give {got}"
                );
            } else {
                assert_eq!(&got["value"], want, "{host}.{k}: {got}");
            }
        }
    }

    let w1 = hk_play_vars(tmp.path(), "w1");
    let from = |v: &Value, k: &str| v["vars"][k]["from"].as_str().expect("from").to_string();
    assert_eq!(w1["vars"]["knob"]["layer"], "host line of w1");
    assert!(
        from(&w1, "knob").ends_with("hosts.ini:3:15"),
        "{}",
        from(&w1, "knob")
    );
    assert_eq!(
        w1["vars"]["knob"]["overrides"].as_array().map(Vec::len),
        Some(2),
        "app defaults (they replace base's: roles' defaults are one layer), group_vars/web: {}",
        w1["vars"]["knob"]
    );
    assert_eq!(w1["vars"]["forced"]["layer"], "role vars (app)");
    assert!(from(&w1, "forced").ends_with("roles/app/vars/main.yml:1:1"));
    assert_eq!(w1["vars"]["base_only"]["layer"], "role defaults (base)");
    assert_eq!(w1["vars"]["everyone"]["layer"], "group_vars/all");
    let d1 = hk_play_vars(tmp.path(), "d1");
    assert_eq!(d1["vars"]["knob"]["layer"], "role defaults (app)");
    assert!(from(&d1, "knob").ends_with("roles/app/defaults/main.yml:1:1"));
}

#[test]
fn play_vars_refuse_an_unknown_host_and_a_missing_role() {
    let tmp = tempfile::tempdir().expect("tmp");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_hk-console"))
            .current_dir(fixture())
            .env("XDG_STATE_HOME", tmp.path().join("state"))
            .args(["inventory", "-i", "hosts.ini", "--resolved"])
            .args(args)
            .output()
            .expect("run hk-console")
    };
    let out = run(&["--host", "nope", "--playbook", "site.yml"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no host `nope`"));
    std::fs::write(
        tmp.path().join("bad.yml"),
        "- hosts: all\n  roles:\n    - not_there\n",
    )
    .expect("write");
    let bad = tmp.path().join("bad.yml");
    let out = run(&["--host", "w1", "--playbook", bad.to_str().expect("utf-8")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("role `not_there` not found"), "{err}");
    // --playbook without --host is refused by the parser, not ignored.
    let out = run(&["--playbook", "site.yml"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
