//! The real `hk-console` binary on copies of the sample repo, for what issue 14 asks of
//! every command: the inventory's non-UTF-8 warning from every command that reads the
//! inventory, and a runbook's own `defaults:` in `inventory --host H --resolved --playbook P`
//! with the runbook's file:line.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::fs_common;
use fs_common::copy_dir;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hk-console"));
    c.env(
        "XDG_STATE_HOME",
        std::env::temp_dir().join("hk-console-cli-operator-tests"),
    );
    c.env_remove("HK_REPO");
    c.env_remove("HK_RUNBOOKS");
    c
}

fn sample_copy(dir: &Path) -> PathBuf {
    let to = dir.join("repo");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory"),
        &to,
    );
    to
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn every_command_that_reads_the_inventory_warns_of_non_utf8_values() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = sample_copy(tmp.path());
    let hosts = repo.join("infra/ansible/inventory/hosts.ini");
    let mut bytes = std::fs::read(&hosts).expect("read");
    let at = bytes
        .windows(b"k3s-prod-1 ansible_host=192.168.2.10".len())
        .position(|w| w == b"k3s-prod-1 ansible_host=192.168.2.10")
        .expect("the prod-1 line")
        + b"k3s-prod-1 ansible_host=192.168.2.10".len();
    bytes.splice(at..at, b" site=caf\xe9".iter().copied());
    std::fs::write(&hosts, &bytes).expect("write");
    let r = repo.display().to_string();
    for args in [
        vec!["--repo", &r, "envs"],
        vec!["--repo", &r, "check"],
        vec!["--repo", &r, "plan", "etcd-io-priority", "--env", "prod"],
        vec!["--repo", &r, "inventory", "--host", "k3s-prod-1"],
    ] {
        let o = bin().args(&args).output().expect("run");
        let (_, err) = text(&o);
        assert!(
            err.contains("hosts.ini:22: bytes that are not UTF-8, read as `?`"),
            "{args:?} must warn (exit {:?}):\n{err}",
            o.status.code()
        );
    }
    // The clean sample: no such warning.
    let o = bin()
        .args([
            "--repo",
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("inventory")
                .display()
                .to_string(),
            "envs",
        ])
        .output()
        .expect("run");
    assert!(!text(&o).1.contains("not UTF-8"), "{}", text(&o).1);
}

#[test]
fn a_runbooks_own_defaults_show_in_the_play_view_with_the_runbook_file_and_line() {
    let tmp = tempfile::tempdir().expect("tmp");
    let books = tmp.path().join("runbooks");
    std::fs::create_dir_all(&books).expect("mkdir");
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("runbooks/etcd-io-priority.yaml"),
    )
    .expect("shipped runbook");
    let mut mine = shipped.replacen("id: etcd-io-priority", "id: etcd-io-priority-local", 1);
    assert!(mine.ends_with('\n'));
    // After a blank line and `defaults:`, the first key is three lines past the end.
    let first_key = mine.lines().count() + 3;
    mine.push_str("\ndefaults:\n  io_only_in_runbook: 7\n  ansible_user: from-runbook\n");
    std::fs::write(books.join("local.yaml"), &mine).expect("write");
    let o = bin()
        .args(["--repo"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory"))
        .arg("--runbooks")
        .arg(&books)
        .args([
            "inventory",
            "--host",
            "k3s-prod-1",
            "--resolved",
            "--playbook",
            "./playbooks/etcd-io-priority.yml",
        ])
        .output()
        .expect("run");
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let ids: Vec<&str> = v["runbooks"]
        .as_array()
        .expect("runbooks")
        .iter()
        .filter_map(|x| x.as_str())
        .collect();
    assert!(
        ids.contains(&"etcd-io-priority") && ids.contains(&"etcd-io-priority-local"),
        "{ids:?}"
    );
    // A value only the runbook states: shown, from the runbook's file and line.
    let only = &v["vars"]["io_only_in_runbook"];
    assert_eq!(only["value"], 7, "{v}");
    assert_eq!(only["layer"], "runbook defaults (etcd-io-priority-local)");
    let from = only["from"].as_str().expect("from");
    assert!(
        from.ends_with(&format!("local.yaml:{first_key}:3")),
        "{only}"
    );
    // One the repo states: the repo wins, the runbook's default is listed as beaten, lowest.
    let user = &v["vars"]["ansible_user"];
    assert_eq!(user["value"], "ops", "{user}");
    assert_eq!(user["layer"], "group_vars/all");
    let first = user["overrides"][0].as_str().expect("an override");
    assert!(
        first.starts_with("runbook defaults (etcd-io-priority-local) ")
            && first.ends_with(&format!("local.yaml:{}:3", first_key + 1)),
        "{user}"
    );
}

#[test]
fn envs_names_a_host_named_by_its_address_once() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = sample_copy(tmp.path());
    let hosts = repo.join("infra/ansible/inventory/hosts.ini");
    let ini = std::fs::read_to_string(&hosts).expect("read");
    assert!(ini.contains("k3s-dev-2 ansible_host=192.168.1.51\n"));
    std::fs::write(
        &hosts,
        ini.replace("k3s-dev-2 ansible_host=192.168.1.51\n", "192.168.1.51\n"),
    )
    .expect("write");
    let o = bin()
        .args(["--repo", &repo.display().to_string(), "envs"])
        .output()
        .expect("run");
    let (out, err) = text(&o);
    let servers = out
        .lines()
        .find(|l| l.trim_start().starts_with("servers      k3s_servers"))
        .unwrap_or_else(|| panic!("dev's servers line:\n{out}\n{err}"));
    assert!(
        servers.contains("k3s-dev-1 192.168.1.50, 192.168.1.51, k3s-dev-3 192.168.1.52"),
        "{servers}"
    );
    assert!(!servers.contains("192.168.1.51 192.168.1.51"), "{servers}");
}
