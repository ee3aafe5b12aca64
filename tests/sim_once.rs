//! `demo --once` is every pane (issue 38): the etcd section the strip and the Live screen
//! have is in the one-shot too, text and `--json`, judged as the console judges it (the
//! members over SSH, quorum through the API endpoint).

use std::process::Command;

use serde_json::Value;

fn once(scenario: &str, json: bool) -> (String, String, Option<i32>) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hk-console"));
    cmd.args(["demo", "--once", "--scenario", scenario]);
    if json {
        cmd.arg("--json");
    }
    let out = cmd
        .env("XDG_STATE_HOME", tmp.path().join("state"))
        .env("XDG_CONFIG_HOME", tmp.path().join("config"))
        .output()
        .expect("run hk-console");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}

#[test]
fn demo_once_has_an_etcd_section_in_text_and_json() {
    let (text, err, code) = once("healthy", false);
    assert_eq!(code, Some(0), "{text}\n{err}");
    for env in ["dev", "prod"] {
        let section: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with(env))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .collect();
        let at = section
            .iter()
            .position(|l| l.starts_with("  etcd"))
            .unwrap_or_else(|| panic!("{env}: no etcd section in\n{text}"));
        let body = section[at..].join("\n");
        assert!(
            body.contains(&format!("k3s-{env}-1 leads (3 of 3 members seen)")),
            "{env}: {body}"
        );
        assert!(
            body.contains("quorum: 3 of 3 members up, /readyz/etcd ok through the API endpoint"),
            "{env}: {body}"
        );
    }

    let (json, err, code) = once("healthy", true);
    assert_eq!(code, Some(0), "{json}\n{err}");
    let snap: Value = serde_json::from_str(&json).expect("snapshot json");
    let etcd = snap["etcd"]
        .as_array()
        .unwrap_or_else(|| panic!("no etcd in {json}"));
    assert_eq!(etcd.len(), 2, "{json}");
    for p in etcd {
        let env = p["env"].as_str().expect("env");
        assert_eq!(p["leader"], format!("k3s-{env}-1"), "{p}");
        assert_eq!(p["members"].as_array().map(Vec::len), Some(3), "{p}");
        let rules: Vec<&str> = p["verdicts"]
            .as_array()
            .expect("verdicts")
            .iter()
            .filter_map(|v| v["rule"].as_str())
            .collect();
        assert!(rules.iter().any(|r| r.contains("quorum")), "{rules:?}");
    }
}

/// The 2026-09-07 incident's one-shot: prod's etcd starves; the console says ✗, and so do
/// `--once`'s verdicts and its exit code.
#[test]
fn demo_once_names_the_starving_etcd_member() {
    let (text, err, code) = once("etcd-io-starvation", false);
    assert_eq!(code, Some(1), "{text}\n{err}");
    assert!(
        text.lines().any(|l| l.contains("critical")
            && l.contains("server k3s-prod-1")
            && l.contains("starvation")),
        "{text}"
    );
}
