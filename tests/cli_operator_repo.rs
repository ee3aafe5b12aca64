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

/// Issue 26/28 through the binary: `plan` names every real blocker before step 1, each
/// with what to do (exit 2), `check` names the vault one (exit 1), and nothing else is one.
#[test]
fn plan_and_check_name_every_real_blocker_with_what_to_do() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = sample_copy(tmp.path());
    let r = repo.display().to_string();
    let ansible = repo.join("infra/ansible");
    let run = |args: &[&str]| {
        let o = bin()
            .arg("--repo")
            .arg(&r)
            .args(args)
            .output()
            .expect("run");
        let (out, err) = text(&o);
        (o.status.code(), out, err)
    };
    // As shipped: plans, and check is not worried about the absent prod vault.
    let (code, _, err) = run(&["plan", "etcd-io-priority", "--env", "prod"]);
    assert_eq!(code, Some(0), "{err}");

    // The role beside playbooks/ with no roles_path (ansible-playbook will not find it), and
    // the prod vault encrypted with no password configured.
    let book = ansible.join("playbooks/etcd-io-priority.yml");
    let text_before = std::fs::read_to_string(&book).expect("book");
    let with_role = text_before.replacen(
        "  serial: 1\n",
        "  serial: 1\n  roles:\n    - etcd_io_priority\n",
        1,
    );
    assert_ne!(with_role, text_before);
    std::fs::write(&book, &with_role).expect("book");
    let role_line = with_role
        .lines()
        .position(|l| l == "    - etcd_io_priority")
        .expect("the roles entry")
        + 1;
    let defaults = ansible.join("roles/etcd_io_priority/defaults/main.yml");
    std::fs::create_dir_all(defaults.parent().expect("dir")).expect("mkdir");
    std::fs::write(&defaults, "etcd_io_priority_extra: 1\n").expect("defaults");
    std::fs::copy(
        ansible.join("inventory/group_vars/vpn_egress_gateway/vault.yml"),
        ansible.join("inventory/group_vars/k3s_prod/vault.yml"),
    )
    .expect("vault");
    let cfg = std::fs::read_to_string(ansible.join("ansible.cfg")).expect("cfg");
    std::fs::write(
        ansible.join("ansible.cfg"),
        cfg.replace("vault_password_file", "# vault_password_file"),
    )
    .expect("cfg");

    let (code, _, err) = run(&["plan", "etcd-io-priority", "--env", "prod"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("cannot start on `prod`: 2 blockers before step 1"),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "infra/ansible/playbooks/etcd-io-priority.yml:{role_line}:7: [role-not-found] the role `etcd_io_priority`"
        )),
        "{err}"
    );
    assert!(err.contains("fix: move the role into one of those directories, or add its parent directory to `roles_path` in infra/ansible/ansible.cfg"), "{err}");
    assert!(
        err.contains("infra/ansible/inventory/group_vars/k3s_prod/vault.yml: [vault-locked] vaulted, and no vault password is configured"),
        "{err}"
    );
    assert!(
        err.contains("fix: name the password file in `vault_password_file`"),
        "{err}"
    );
    // The same blockers, in the same words, on every run.
    for _ in 0..3 {
        assert_eq!(run(&["plan", "etcd-io-priority", "--env", "prod"]).2, err);
    }
    let (code, out, _) = run(&["check", "--env", "prod"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("infra/ansible/inventory/group_vars/k3s_prod/vault.yml: [vault-locked] prod: vaulted, and no vault password is configured"),
        "{out}"
    );

    // roles_path names roles/ and the password comes back: plans again.
    std::fs::write(
        ansible.join("ansible.cfg"),
        format!("{cfg}roles_path = roles\n"),
    )
    .expect("cfg");
    let (code, _, err) = run(&["plan", "etcd-io-priority", "--env", "prod"]);
    assert_eq!(code, Some(0), "{err}");

    // A placeholder device a play uses, for a run without --tags; the packages-only run
    // (tags) is not blocked by it.
    let baseline = ansible.join("playbooks/node-baseline.yml");
    let b = std::fs::read_to_string(&baseline).expect("baseline");
    std::fs::write(
        &baseline,
        format!("{b}    - name: Longhorn disk\n      ansible.builtin.debug:\n        msg: \"{{{{ node_baseline_longhorn_device }}}}\"\n"),
    )
    .expect("baseline");
    let (code, _, err) = run(&[
        "plan",
        "reprovision-node",
        "--env",
        "prod",
        "--host",
        "k3s-prod-1",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("infra/ansible/inventory/group_vars/k3s_prod/vars.yml:26: [device-placeholder] `node_baseline_longhorn_device` is the placeholder `/dev/BLOCKED-pending-disk-decision-longhorn`"),
        "{err}"
    );
    assert!(
        err.contains("infra/ansible/playbooks/node-baseline.yml:"),
        "{err}"
    );
    assert!(err.contains("fix: decide the device"), "{err}");
    let (code, _, err) = run(&[
        "plan",
        "packages-baseline",
        "--env",
        "prod",
        "--host",
        "k3s-prod-1",
    ]);
    assert_eq!(code, Some(0), "{err}");

    // A playbook that is not there.
    let runbooks = tmp.path().join("runbooks");
    std::fs::create_dir_all(&runbooks).expect("mkdir");
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("runbooks/node-health.yaml"),
    )
    .expect("shipped");
    assert!(shipped.contains("playbooks/node-health.yml"));
    std::fs::write(
        runbooks.join("node-health.yaml"),
        shipped.replace("playbooks/node-health.yml", "playbooks/node-heath.yml"),
    )
    .expect("override");
    let o = bin()
        .arg("--repo")
        .arg(&r)
        .arg("--runbooks")
        .arg(&runbooks)
        .args(["plan", "node-health", "--env", "prod"])
        .output()
        .expect("run");
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("infra/ansible/playbooks/node-heath.yml: [missing-playbook] the playbook `playbooks/node-heath.yml` does not exist"),
        "{err}"
    );
}

/// Every missing variable, sorted, the same on every run (a hash set's order named a
/// different one of them from run to run).
#[test]
fn plan_names_every_missing_variable_sorted_on_every_run() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = sample_copy(tmp.path());
    let runbooks = tmp.path().join("runbooks");
    std::fs::create_dir_all(&runbooks).expect("mkdir");
    std::fs::write(
        runbooks.join("t.yaml"),
        "id: t\nenvironments: [prod]\ntarget: { group: servers }\nsteps:\n  - id: s\n    kind: ssh\n    mutates: false\n    command: \"echo {{ vars.zz_last }} {{ vars.aa_first }} {{ vars.mm_middle }} {{ vars.etcd_io_priority }}\"\n",
    )
    .expect("runbook");
    let plan = || {
        let o = bin()
            .arg("--repo")
            .arg(&repo)
            .arg("--runbooks")
            .arg(&runbooks)
            .args(["plan", "t", "--env", "prod"])
            .output()
            .expect("run");
        (o.status.code(), text(&o).1)
    };
    let (code, first) = plan();
    assert_eq!(code, Some(2), "{first}");
    assert!(
        first.contains(
            "`vars.aa_first`, `vars.mm_middle` and `vars.zz_last` are not defined for k3s-prod-1"
        ),
        "{first}"
    );
    assert!(
        first.contains("hint: set `aa_first`, `mm_middle` and `zz_last` in"),
        "{first}"
    );
    for _ in 0..5 {
        assert_eq!(plan().1, first);
    }
}

/// Issue 26: `check` names the blockers of every runbook it knows (shipped and --runbooks),
/// for every environment each allows, once per blocker with the runbooks it stops; a
/// blocker ansible-playbook stops on is a violation (exit 1), a device placeholder a
/// warning; `--env` keeps only that environment's; the vault one the parity check already
/// reports is not repeated.
#[test]
fn check_names_every_runbooks_blockers_once_with_what_they_stop() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = sample_copy(tmp.path());
    let ansible = repo.join("infra/ansible");
    let runbooks = tmp.path().join("runbooks");
    std::fs::create_dir_all(&runbooks).expect("mkdir");
    let run = |args: &[&str]| {
        let o = bin()
            .arg("--repo")
            .arg(&repo)
            .arg("--runbooks")
            .arg(&runbooks)
            .args(args)
            .output()
            .expect("run");
        let (out, err) = text(&o);
        (o.status.code(), out, err)
    };
    // As shipped: nothing stops any runbook.
    let (code, out, err) = run(&["check"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(!out.contains("before step 1"), "{out}");

    // A role ansible-playbook will not find (etcd-io-priority, prod only), a placeholder
    // device an untagged node-baseline run uses (prod's vars), a --runbooks override naming
    // a playbook that is not there (node-health, dev and prod), prod's vault locked.
    let book = ansible.join("playbooks/etcd-io-priority.yml");
    let b = std::fs::read_to_string(&book).expect("book");
    std::fs::write(
        &book,
        b.replacen(
            "  serial: 1\n",
            "  serial: 1\n  roles:\n    - etcd_io_priority\n",
            1,
        ),
    )
    .expect("book");
    let baseline = ansible.join("playbooks/node-baseline.yml");
    let b = std::fs::read_to_string(&baseline).expect("baseline");
    std::fs::write(
        &baseline,
        format!("{b}    - name: Longhorn disk\n      ansible.builtin.debug:\n        msg: \"{{{{ node_baseline_longhorn_device }}}}\"\n"),
    )
    .expect("baseline");
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("runbooks/node-health.yaml"),
    )
    .expect("shipped");
    std::fs::write(
        runbooks.join("node-health.yaml"),
        shipped.replace("playbooks/node-health.yml", "playbooks/node-heath.yml"),
    )
    .expect("override");
    std::fs::copy(
        ansible.join("inventory/group_vars/vpn_egress_gateway/vault.yml"),
        ansible.join("inventory/group_vars/k3s_prod/vault.yml"),
    )
    .expect("vault");
    let cfg = std::fs::read_to_string(ansible.join("ansible.cfg")).expect("cfg");
    std::fs::write(
        ansible.join("ansible.cfg"),
        cfg.replace("vault_password_file", "# vault_password_file"),
    )
    .expect("cfg");

    let (code, out, err) = run(&["check"]);
    assert_eq!(code, Some(1), "{out}{err}");
    let once = |needle: &str| {
        assert_eq!(out.matches(needle).count(), 1, "{needle:?} once in:\n{out}");
    };
    once("infra/ansible/playbooks/node-heath.yml: [missing-playbook] violation: stops node-health (dev, prod) before step 1: the playbook `playbooks/node-heath.yml` does not exist");
    once("infra/ansible/playbooks/etcd-io-priority.yml:");
    assert!(
        out.contains("[role-not-found] violation: stops etcd-io-priority (prod) before step 1: the role `etcd_io_priority`"),
        "{out}"
    );
    assert!(
        out.contains("    fix: move the role into one of those directories"),
        "{out}"
    );
    once("infra/ansible/inventory/group_vars/k3s_prod/vars.yml:26: [device-placeholder] warning: stops ");
    assert!(
        out.contains("infra/ansible/inventory/group_vars/k3s_prod/vars.yml:26: [device-placeholder] warning: stops reprovision-node (prod) before step 1: `node_baseline_longhorn_device` is the placeholder `/dev/BLOCKED-pending-disk-decision-longhorn` (for k3s-prod-1, k3s-prod-2, k3s-prod-3) and infra/ansible/playbooks/node-baseline.yml:"),
        "{out}"
    );
    // The vault: the parity finding, then once what it stops, not the blocker again.
    once("infra/ansible/inventory/group_vars/k3s_prod/vault.yml: [vault-locked] prod: vaulted, and no vault password is configured");
    assert!(
        out.lines().any(|l| l.starts_with("infra/ansible/inventory/group_vars/k3s_prod/vault.yml: [vault-locked] the finding above stops ")
            && l.contains("etcd-io-priority (prod)")),
        "{out}"
    );
    // Without the password the gateways' vault is locked too (dev's gateway is a server).
    assert!(
        out.lines().any(|l| l.starts_with("infra/ansible/inventory/group_vars/vpn_egress_gateway/vault.yml: [vault-locked] the finding above stops ")
            && l.contains("vpn-eviction-fix (dev)")),
        "{out}"
    );
    assert!(
        out.contains("blockers: 5 before step 1 (4 violations, 1 warning) in "),
        "{out}"
    );

    // dev alone: the override's missing playbook and the gateways' vault, nothing of prod.
    let (code, out, err) = run(&["check", "--env", "dev"]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        out.contains("[missing-playbook] violation: stops node-health (dev) before step 1"),
        "{out}"
    );
    assert!(
        !out.contains("role-not-found") && !out.contains("k3s_prod"),
        "{out}"
    );
    assert!(
        out.contains("blockers: 2 before step 1 (2 violations, 0 warnings) in "),
        "{out}"
    );

    // JSON: the same blockers, each with what it stops.
    let (code, out, _) = run(&["check", "--env", "dev", "--json"]);
    assert_eq!(code, Some(1), "{out}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("json");
    let blockers = doc["blockers"].as_array().expect("blockers");
    assert_eq!(blockers.len(), 2, "{doc:#}");
    let missing = blockers
        .iter()
        .find(|b| b["kind"] == "missing-playbook")
        .expect("the missing playbook");
    assert_eq!(missing["severity"], "violation");
    assert_eq!(missing["also_a_finding"], false);
    assert_eq!(
        missing["stops"],
        serde_json::json!([{"runbook": "node-health", "env": "dev"}])
    );
    assert!(
        blockers
            .iter()
            .any(|b| b["kind"] == "vault-locked" && b["also_a_finding"] == true),
        "{doc:#}"
    );

    // Only the placeholder left (a warning): check is clean again, and still names it.
    std::fs::write(ansible.join("ansible.cfg"), &cfg).expect("cfg");
    std::fs::write(
        &book,
        std::fs::read_to_string(&book)
            .expect("book")
            .replace("  roles:\n    - etcd_io_priority\n", ""),
    )
    .expect("book");
    std::fs::remove_file(runbooks.join("node-health.yaml")).expect("rm");
    let (code, out, err) = run(&["check"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("blockers: 1 before step 1 (0 violations, 1 warning)"),
        "{out}"
    );
}
