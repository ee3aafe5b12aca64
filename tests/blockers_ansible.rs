//! What stops a run before step 1, held to the REAL ansible-playbook (issue 26, issue 28):
//! every role-lookup rule against `ansible-playbook --syntax-check` (HOME pinned, no
//! ANSIBLE_* variables), and the vault blockers against `ansible-playbook --check` on a
//! copy of the sample (local connection, so only what ansible loads decides).
//!
//! Needs ansible-core: `HK_ANSIBLE_BIN_DIR`, else PATH, else /opt/hk-venv/bin. Missing
//! ansible FAILS this test (`bash tests/run-all.sh` installs it).
use std::path::{Path, PathBuf};
use std::process::Command;

use hk_console::context::{load_runbooks, plan_runbook, ContextError};
use hk_console::repo::roles::{play_roles_with, AnsibleEnv, RoleError, RoleSearch};
use hk_console::repo::Repo;
use hk_console::runbook::plan::{Blocker, PlanError};

use crate::fs_common;
use fs_common::copy_dir;

fn ansible_playbook() -> PathBuf {
    let dirs = hk_console::exec::ansible::search_dirs();
    hk_console::exec::ansible::find_binary("ansible-playbook", &dirs).unwrap_or_else(|| {
        panic!(
            "ansible-playbook not found: {}",
            hk_console::exec::ansible::INSTALL_HINT
        )
    })
}

/// ansible-playbook in `dir` with HOME at `home` and none of the caller's ANSIBLE_* set.
fn ansible(dir: &Path, home: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(ansible_playbook())
        .current_dir(dir)
        .env("HOME", home)
        .env_remove("ANSIBLE_CONFIG")
        .env_remove("ANSIBLE_ROLES_PATH")
        .env_remove("ANSIBLE_HOME")
        .env_remove("ANSIBLE_VAULT_PASSWORD_FILE")
        .env_remove("ANSIBLE_VAULT_IDENTITY_LIST")
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_LOCAL_TEMP", home.join("tmp"))
        .args(args)
        .output()
        .expect("run ansible-playbook");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

/// A role that does nothing, at `rel`.
fn role(dir: &Path, rel: &str) {
    write(
        dir,
        &format!("{rel}/tasks/main.yml"),
        "- ansible.builtin.debug: { msg: hi }\n",
    );
}

const PLAY: &str = "- hosts: localhost\n  gather_facts: false\n  roles:\n    - r1\n";

/// Each layout: (what, files to write, roles to create), and whether ansible-playbook's
/// own answer agrees with ours, whichever it is.
#[test]
fn roles_are_found_exactly_where_ansible_playbook_finds_them() {
    type Layout = (
        &'static str,
        Vec<(&'static str, &'static str)>,
        Vec<&'static str>,
    );
    let play_dir_play = "- hosts: localhost\n  gather_facts: false\n  roles:\n    - vendor/r1\n";
    let imported = "- import_playbook: sub/q.yml\n";
    let sub = "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - ansible.builtin.import_role: { name: r2 }\n";
    let layouts: Vec<Layout> = vec![
        // The finding: roles/ beside playbooks/, no roles_path: Ansible does not look there.
        (
            "ansible dir roles/ without roles_path",
            vec![("playbooks/p.yml", PLAY)],
            vec!["roles/r1"],
        ),
        (
            "ansible dir roles/ named by roles_path",
            vec![
                ("playbooks/p.yml", PLAY),
                ("ansible.cfg", "[defaults]\nroles_path = roles\n"),
            ],
            vec!["roles/r1"],
        ),
        (
            "roles_path relative to ansible.cfg, `:` syntax",
            vec![
                ("playbooks/p.yml", PLAY),
                ("ansible.cfg", "[defaults]\nroles_path: ./x:y\n"),
            ],
            vec!["y/r1"],
        ),
        (
            "the playbook's roles/",
            vec![("playbooks/p.yml", PLAY)],
            vec!["playbooks/roles/r1"],
        ),
        (
            "the playbook's own directory",
            vec![("playbooks/p.yml", PLAY)],
            vec!["playbooks/r1"],
        ),
        (
            "the default roles_path (~/.ansible/roles)",
            vec![("playbooks/p.yml", PLAY)],
            vec!["home/.ansible/roles/r1"],
        ),
        (
            "the default is gone once roles_path is set",
            vec![
                ("playbooks/p.yml", PLAY),
                ("ansible.cfg", "[defaults]\nroles_path = elsewhere\n"),
            ],
            vec!["home/.ansible/roles/r1"],
        ),
        (
            "a role by path, its dependency beside it",
            vec![
                ("playbooks/p.yml", play_dir_play),
                (
                    "playbooks/vendor/r1/meta/main.yml",
                    "dependencies:\n  - sib\n",
                ),
            ],
            vec!["playbooks/vendor/r1", "playbooks/vendor/sib"],
        ),
        (
            "an imported playbook's own roles/",
            vec![("playbooks/p.yml", imported), ("playbooks/sub/q.yml", sub)],
            vec!["playbooks/sub/roles/r2"],
        ),
        (
            "an imported playbook does not see the importer's roles/",
            vec![("playbooks/p.yml", imported), ("playbooks/sub/q.yml", sub)],
            vec!["playbooks/roles/r2"],
        ),
        ("nowhere at all", vec![("playbooks/p.yml", PLAY)], vec![]),
    ];
    let mut found_and_not = (0, 0);
    for (what, files, roles) in layouts {
        let tmp = tempfile::tempdir().expect("tmp");
        let a = tmp.path().join("ansible");
        let home = tmp.path().join("ansible/home");
        std::fs::create_dir_all(home.join("tmp")).expect("home");
        for (rel, text) in &files {
            write(&a, rel, text);
        }
        for r in &roles {
            role(&a, r);
        }
        let (ok, out) = ansible(
            &a,
            &home,
            &["-i", "localhost,", "--syntax-check", "playbooks/p.yml"],
        );
        let search = RoleSearch::new(
            &a,
            &AnsibleEnv {
                home: Some(home.clone()),
                ..AnsibleEnv::default()
            },
        );
        let ours = play_roles_with(&a, &["playbooks/p.yml".to_string()], &search);
        assert_eq!(
            ours.is_ok(),
            ok,
            "{what}: ours {ours:?}, ansible-playbook:\n{out}"
        );
        if ok {
            found_and_not.0 += 1;
        } else {
            found_and_not.1 += 1;
            assert!(out.contains("was not found"), "{what}: {out}");
            // The same place: ansible's `Origin: FILE:LINE:COL` is ours.
            let Err(RoleError::NotFound {
                path, line, col, ..
            }) = ours
            else {
                panic!("{what}: {ours:?}");
            };
            let origin = format!("Origin: {}:{line}:{col}", path.display());
            assert!(out.contains(&origin), "{what}: want {origin} in\n{out}");
        }
    }
    assert!(
        found_and_not.0 >= 5 && found_and_not.1 >= 4,
        "{found_and_not:?}"
    );
}

fn sample_copy(dir: &Path) -> PathBuf {
    let to = dir.join("repo");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory"),
        &to,
    );
    to
}

const PROD_VAULT: &str = "infra/ansible/inventory/group_vars/k3s_prod/vault.yml";
const GW_VAULT: &str = "infra/ansible/inventory/group_vars/vpn_egress_gateway/vault.yml";
const CFG: &str = "infra/ansible/ansible.cfg";
const PROD_VARS: &str = "infra/ansible/inventory/group_vars/k3s_prod/vars.yml";

/// The blockers `plan etcd-io-priority --env prod` meets, or none.
fn prod_blockers(repo: &Path) -> Vec<Blocker> {
    let r = Repo::load(repo).expect("loads");
    let set = load_runbooks(None).expect("runbooks");
    match plan_runbook(&r, &set, "etcd-io-priority", "prod", None) {
        Ok(_) => Vec::new(),
        Err(ContextError::Plan(PlanError::Blocked { blockers, .. })) => blockers,
        Err(e) => panic!("{e}"),
    }
}

/// The step's own `--check` preview, run for real (local connection: no host needed).
fn prod_preview(repo: &Path) -> (bool, String) {
    let a = repo.join("infra/ansible");
    let home = repo.join("home");
    std::fs::create_dir_all(home.join("tmp")).expect("home");
    ansible(
        &a,
        &home,
        &[
            "-i",
            "inventory/hosts.ini",
            "playbooks/etcd-io-priority.yml",
            "-e",
            "k3s_hosts=k3s_prod",
            "--limit",
            "k3s-prod-3",
            "--check",
            "--diff",
            "-e",
            "ansible_connection=local",
        ],
    )
}

#[test]
fn a_prod_vault_no_configured_password_opens_blocks_like_ansible_does() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = sample_copy(tmp.path());
    // As shipped: the prod vault is absent and nothing needs it; the preview runs.
    let (ok, out) = prod_preview(&repo);
    assert!(ok, "{out}");
    assert_eq!(prod_blockers(&repo), vec![]);

    // Encrypted (what ansible-vault wrote), and no password configured.
    std::fs::copy(repo.join(GW_VAULT), repo.join(PROD_VAULT)).expect("vault");
    let cfg = std::fs::read_to_string(repo.join(CFG)).expect("cfg");
    std::fs::write(
        repo.join(CFG),
        cfg.replace("vault_password_file", "# vault_password_file"),
    )
    .expect("cfg");
    let (ok, out) = prod_preview(&repo);
    assert!(
        !ok && out.contains("Attempting to decrypt but no vault secrets found"),
        "{out}"
    );
    let b = prod_blockers(&repo);
    assert_eq!(b.len(), 1, "{b:#?}");
    assert_eq!(
        (b[0].kind.as_str(), b[0].at.as_str()),
        ("vault-locked", PROD_VAULT)
    );
    assert!(
        b[0].message.contains("no vault password is configured"),
        "{}",
        b[0]
    );
    assert!(b[0].fix.contains("vault_password_file"), "{}", b[0]);

    // ansible.cfg as given: what the preview (real ansible-playbook) and the blockers say.
    let with_cfg = |text: &str| {
        std::fs::write(repo.join(CFG), text).expect("cfg");
        let (ok, out) = prod_preview(&repo);
        (ok, out, prod_blockers(&repo))
    };

    // A password file that does not open it.
    write(&repo, "wrong-pass", "not the password\n");
    let (ok, out, b) = with_cfg("[defaults]\nvault_password_file = ../../wrong-pass\n");
    assert!(!ok && out.contains("Decryption failed"), "{out}");
    assert_eq!(b.len(), 1, "{b:#?}");
    assert!(b[0].message.contains("does not open it"), "{}", b[0]);

    // A vault identity list whose only id names the wrong password: judged like a password
    // file (it was not judged at all), and ansible-playbook agrees.
    let (ok, out, b) = with_cfg("[defaults]\nvault_identity_list = prod@../../wrong-pass\n");
    assert!(!ok && out.contains("Decryption failed"), "{out}");
    assert_eq!(b.len(), 1, "{b:#?}");
    assert!(b[0].message.contains("does not open it"), "{}", b[0]);
    assert!(b[0].message.contains("wrong-pass"), "{}", b[0]);

    // The same list with the right password as a second id: it opens, nothing blocks, and
    // the preview runs.
    let (ok, out, b) = with_cfg(
        "[defaults]\nvault_identity_list = prod@../../wrong-pass, dev@../../.vault-pass-sample\n",
    );
    assert!(ok, "{out}");
    assert_eq!(b, vec![]);

    // The right one: nothing blocks, and the preview runs.
    let (ok, out, b) = with_cfg(&cfg);
    assert!(ok, "{out}");
    assert_eq!(b, vec![]);
}

#[test]
fn an_absent_vault_is_a_finding_only_when_a_password_variable_needs_it() {
    use hk_console::checks::parity::{check, rules, Severity};
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = sample_copy(tmp.path());
    let findings = |repo: &Path| {
        check(&hk_console::gather::parity_input(
            &Repo::load(repo).expect("loads"),
            hk_console::exec::kustomize::Kustomize::shared(),
        ))
    };
    assert!(findings(&repo)
        .iter()
        .all(|f| f.rule != rules::VAULT_MISSING));

    // The become password names what the absent vault would hold: ansible stops on it,
    // even on a task that does not escalate.
    let vars = std::fs::read_to_string(repo.join(PROD_VARS)).expect("vars");
    let line = vars.lines().count() + 1;
    std::fs::write(
        repo.join(PROD_VARS),
        format!("{vars}ansible_become_password: \"{{{{ vault_become_password }}}}\"\n"),
    )
    .expect("vars");
    let (ok, out) = prod_preview(&repo);
    assert!(
        !ok && out.contains("'vault_become_password' is undefined"),
        "{out}"
    );
    let fs = findings(&repo);
    let f = fs
        .iter()
        .find(|f| f.rule == rules::VAULT_MISSING)
        .unwrap_or_else(|| panic!("{fs:#?}"));
    assert_eq!(
        (f.file.as_path(), f.line, f.severity),
        (Path::new(PROD_VARS), line, Severity::Violation),
        "{f}"
    );
    assert!(
        f.message.contains("vault_become_password") && f.message.contains(PROD_VAULT),
        "{f}"
    );
}
