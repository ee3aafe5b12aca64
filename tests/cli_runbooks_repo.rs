//! The operator's own runbooks through the real binary (issue 28): the infra repo's
//! `runbooks/` directory read like `--runbooks` (built-in < the repo's runbooks/ <
//! --runbooks, said where runbooks are listed), and `runbooks new --playbook` scaffolding a
//! runbook that `runbooks validate` and `plan` accept on the sample repo.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::fs_common::copy_dir;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hk-console"));
    c.env(
        "XDG_STATE_HOME",
        std::env::temp_dir().join("hk-console-cli-runbooks-repo-tests"),
    );
    for k in [
        "HK_REPO",
        "HK_RUNBOOKS",
        "ANSIBLE_CONFIG",
        "ANSIBLE_INVENTORY",
    ] {
        c.env_remove(k);
    }
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

fn hk(repo: &Path, args: &[&str]) -> Output {
    bin()
        .arg("--repo")
        .arg(repo)
        .args(args)
        .output()
        .expect("run hk-console")
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn runbook(id: &str, title: &str) -> String {
    format!(
        "id: {id}\ntitle: {title}\nread_only: true\nenvironments: [dev, prod]\ntarget:\n  group: servers\nsteps:\n  - id: look\n    kind: ssh\n    title: \"Look at {{{{ host }}}}\"\n    command: uptime\n    mutates: false\n"
    )
}

fn row<'a>(stdout: &'a str, id: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.starts_with(&format!("{id} ")))
        .unwrap_or_else(|| panic!("no {id} row:\n{stdout}"))
}

#[test]
fn the_repos_runbooks_dir_is_read_and_the_flag_wins_over_it() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = sample_copy(tmp.path());
    let rb = repo.join("runbooks");
    std::fs::create_dir_all(&rb).expect("mkdir");
    std::fs::write(
        rb.join("node-health.yaml"),
        runbook("node-health", "Repo health"),
    )
    .expect("write");
    std::fs::write(rb.join("mine.yaml"), runbook("mine", "Repo mine")).expect("write");

    let o = hk(&repo, &["runbooks", "list"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let s = out(&o);
    let nh = row(&s, "node-health");
    assert!(
        nh.contains("Repo health")
            && nh.contains("overrides the shipped runbook")
            && nh.contains("runbooks/node-health.yaml"),
        "{nh}"
    );
    let mine = row(&s, "mine");
    assert!(mine.contains("(the repo's runbooks/: "), "{mine}");
    // plan takes it from there too.
    let o = hk(&repo, &["plan", "mine", "--env", "dev"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));

    // --runbooks over the repo's: said, with what it replaced.
    let flag = tmp.path().join("flag");
    std::fs::create_dir_all(&flag).expect("mkdir");
    std::fs::write(flag.join("mine.yaml"), runbook("mine", "Flag mine")).expect("write");
    let o = hk(
        &repo,
        &[
            "--runbooks",
            flag.to_str().expect("utf8"),
            "runbooks",
            "list",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let s = out(&o);
    let mine = row(&s, "mine");
    assert!(
        mine.contains("Flag mine")
            && mine.contains("--runbooks: ")
            && mine.contains("replaces the repo's runbooks/: "),
        "{mine}"
    );
    let o = hk(
        &repo,
        &[
            "--runbooks",
            flag.to_str().expect("utf8"),
            "runbooks",
            "list",
            "--json",
        ],
    );
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let mine = rows
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["id"] == "mine")
        .expect("mine");
    assert!(
        mine["origin"]
            .as_str()
            .expect("str")
            .starts_with("--runbooks: "),
        "{mine}"
    );
    assert!(
        mine["replaced"]
            .as_str()
            .expect("str")
            .starts_with("the repo's runbooks/: "),
        "{mine}"
    );
}

#[test]
fn an_invalid_runbook_in_the_repo_is_refused_with_its_file_and_line() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = sample_copy(tmp.path());
    let rb = repo.join("runbooks");
    std::fs::create_dir_all(&rb).expect("mkdir");
    std::fs::write(rb.join("bad.yaml"), "id: bad\ntitle: x\nsteps: nope\n").expect("write");
    for args in [&["runbooks", "list"][..], &["runbooks", "validate"][..]] {
        let o = hk(&repo, args);
        assert_ne!(o.status.code(), Some(0), "{args:?}: {}", out(&o));
        assert!(err(&o).contains("bad.yaml:"), "{args:?}: {}", err(&o));
    }
}

fn new(repo: &Path, playbook: &str, extra: &[&str]) -> Output {
    let mut args = vec!["runbooks", "new", "--playbook", playbook];
    args.extend_from_slice(extra);
    hk(repo, &args)
}

/// Scaffold to a file of the repo's runbooks/, then validate and plan it through the binary.
fn scaffold_validate_plan(repo: &Path, playbook: &str, id: &str, env: &str) -> String {
    let dir = repo.join("runbooks");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let file = dir.join(format!("{id}.yaml"));
    let o = new(
        repo,
        playbook,
        &["--id", id, "--out", file.to_str().expect("utf8")],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let text = std::fs::read_to_string(&file).expect("written");
    let o = hk(
        repo,
        &["runbooks", "validate", file.to_str().expect("utf8")],
    );
    assert_eq!(o.status.code(), Some(0), "{text}\n{}", err(&o));
    let o = hk(repo, &["plan", id, "--env", env]);
    assert_eq!(o.status.code(), Some(0), "{text}\n{}", err(&o));
    text + "\n---plan---\n" + &out(&o)
}

#[test]
fn a_scaffold_of_site_yml_follows_its_imports_and_plans() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = sample_copy(tmp.path());
    let got = scaffold_validate_plan(&repo, "playbooks/site.yml", "site-scaffold", "prod");
    // Every imported playbook gets its steps, in order.
    let mut at = 0;
    for book in [
        "node-baseline",
        "k3s",
        "kube-vip",
        "cilium",
        "verify",
        "flux-bootstrap",
    ] {
        let needle = format!("playbook: \"playbooks/{book}.yml\"");
        let pos = got[at..]
            .find(&needle)
            .unwrap_or_else(|| panic!("{needle} not after byte {at}:\n{got}"));
        at += pos;
    }
    // Servers: one node at a time, the play's hosts variable set to the environment's group.
    assert!(got.contains("  serial: 1\n"), "{got}");
    assert!(got.contains("k3s_hosts: \"{{ env.servers }}\""), "{got}");
    // k3s.yml has two plays (serial: 1, on different groups): both listed, and a question.
    assert!(got.contains("# play playbooks/k3s.yml:4 "), "{got}");
    assert!(got.contains("# play playbooks/k3s.yml:18 "), "{got}");
    assert!(
        got.contains("# QUESTION: the plays of playbooks/k3s.yml run on different groups"),
        "{got}"
    );
    // The plan runs it on prod's servers with prod's group, previewed first.
    assert!(
        got.contains("ansible-playbook -i inventory/hosts.ini playbooks/node-baseline.yml -e k3s_hosts=k3s_prod --limit k3s-prod-1 --check --diff"),
        "{got}"
    );
}

#[test]
fn a_scaffold_of_two_plays_with_serial_and_hosts_all_plans() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = sample_copy(tmp.path());
    std::fs::write(
        repo.join("infra/ansible/playbooks/two.yml"),
        "- name: gateways first\n  hosts: vpn_egress_gateway\n  serial: 1\n  tasks: []\n- name: everything\n  hosts: all\n  tasks: []\n",
    )
    .expect("write");
    let got = scaffold_validate_plan(&repo, "playbooks/two.yml", "two", "dev");
    assert!(
        got.contains("  group: \"vpn_gateways\"\n  # One node"),
        "{got}"
    );
    assert!(got.contains("  serial: 1\n"), "{got}");
    assert!(
        got.contains("# QUESTION: hosts: all is every host of the inventory"),
        "{got}"
    );
    assert!(
        got.contains("# play playbooks/two.yml:1 \"gateways first\""),
        "{got}"
    );
    assert!(
        got.contains("# play playbooks/two.yml:5 \"everything\""),
        "{got}"
    );
    // The literal gateway group is dev's only: the runbook says it is for dev only.
    assert!(got.contains("environments: [dev]\n"), "{got}");
}

#[test]
fn a_missing_playbook_or_import_is_a_loud_exit_2_and_out_is_never_overwritten() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = sample_copy(tmp.path());
    let o = new(&repo, "playbooks/nope.yml", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(
        err(&o).contains("playbooks/nope.yml: no such playbook"),
        "{}",
        err(&o)
    );

    std::fs::write(
        repo.join("infra/ansible/playbooks/broken.yml"),
        "- import_playbook: k3s.yml\n- import_playbook: gone.yml\n",
    )
    .expect("write");
    let o = new(&repo, "playbooks/broken.yml", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(
        err(&o).contains("gone.yml: no such playbook (imported at ")
            && err(&o).contains("broken.yml:2)"),
        "{}",
        err(&o)
    );

    let file = tmp.path().join("mine.yaml");
    std::fs::write(&file, "# the operator's edits\n").expect("write");
    let o = new(
        &repo,
        "playbooks/k3s.yml",
        &["--out", file.to_str().expect("utf8")],
    );
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(
        err(&o).contains("already exists; not overwritten"),
        "{}",
        err(&o)
    );
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        "# the operator's edits\n"
    );
}
