//! ansible.cfg's `inventory =` (and `ANSIBLE_INVENTORY`) when hk-console.yaml names no
//! `inventory:`: `hk-console inventory --list` (no -i) must equal the real
//! `ansible-inventory --list` run with no -i in the repo's Ansible directory, on several
//! ansible.cfg shapes; `envs` says where the inventory came from; the plan passes the same
//! sources to ansible-playbook, one `-i` each.
//!
//! Needs ansible-core 2.19 (found as crates/hk-engine/tests/inventory_parity.rs finds it). Missing is a FAILURE.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::fs_common::copy_dir;
use hk_test_support::ansible::bin as ansible_bin;

/// A repo with `ansible/` as its Ansible directory, hk-console.yaml naming no inventory,
/// and these files (path relative to the repo root, contents).
fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("repo");
    std::fs::create_dir_all(root.join("ansible")).expect("mkdir");
    std::fs::write(
        root.join("hk-console.yaml"),
        "ansible_dir: ansible\nenvironments:\n  dev: { servers: g1 }\n",
    )
    .expect("config");
    std::fs::create_dir_all(tmp.path().join("home")).expect("home");
    for (p, text) in files {
        let p = if let Some(rest) = p.strip_prefix("~/") {
            tmp.path().join("home").join(rest)
        } else {
            root.join(p)
        };
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
    tmp
}

/// An environment with no Ansible settings but HOME pointing into the temp dir.
fn isolate(c: &mut Command, tmp: &Path, vars: &[(&str, &str)]) {
    for k in [
        "ANSIBLE_CONFIG",
        "ANSIBLE_INVENTORY",
        "ANSIBLE_ROLES_PATH",
        "HK_REPO",
        "HK_RUNBOOKS",
    ] {
        c.env_remove(k);
    }
    c.env("HOME", tmp.join("home"));
    c.env("XDG_STATE_HOME", tmp.join("state"));
    c.envs(vars.iter().copied());
}

fn real_list(tmp: &Path, vars: &[(&str, &str)]) -> Value {
    let mut c = Command::new(ansible_bin("ansible-inventory"));
    c.arg("--list").current_dir(tmp.join("repo/ansible"));
    isolate(&mut c, tmp, vars);
    json(
        c.output().expect("run ansible-inventory"),
        "ansible-inventory",
    )
}

fn hk(tmp: &Path, args: &[&str], vars: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hk-console"));
    c.arg("--repo").arg(tmp.join("repo")).args(args);
    isolate(&mut c, tmp, vars);
    c.output().expect("run hk-console")
}

fn json(o: Output, what: &str) -> Value {
    assert!(
        o.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("json")
}

const ONE: &str = "[g1]\nh1 a=1\n";
const TWO: &str = "[g2]\nh2\n[g1]\nh3\n";
const YAML: &str = "all:\n  children:\n    g4:\n      hosts:\n        h4:\n";

/// (name, files, environment variables (ANSIBLE_CONFIG, ANSIBLE_INVENTORY), the groups the
/// real tool must show besides ungrouped).
type Case = (
    &'static str,
    Vec<(&'static str, &'static str)>,
    &'static [(&'static str, &'static str)],
    &'static [&'static str],
);

fn cases() -> Vec<Case> {
    vec![
        (
            "a list of two, one name with `#`, a `; comment`",
            vec![
                (
                    "ansible/ansible.cfg",
                    "[defaults]\ninventory = inv/one.ini, sub/two#x.ini ; not a file\n",
                ),
                ("ansible/inv/one.ini", ONE),
                ("ansible/sub/two#x.ini", TWO),
            ],
            &[],
            &["g1", "g2"],
        ),
        (
            "`;` with no space before it and `#` mid-value are part of the name",
            vec![
                (
                    "ansible/ansible.cfg",
                    "[defaults]\ninventory = one.ini;x # y\t;z\n",
                ),
                ("ansible/one.ini;x # y", ONE),
            ],
            &[],
            &["g1"],
        ),
        (
            "`~` and a directory, `key: value`, and a section that is not [defaults]",
            vec![
                (
                    "ansible/ansible.cfg",
                    "[ssh_connection]\ninventory = nothing\n[defaults]\ninventory: ~/mine.ini,../invdir\n",
                ),
                ("~/mine.ini", ONE),
                ("invdir/10-two.ini", TWO),
                ("invdir/20-four.yml", YAML),
                ("invdir/ignored.cfg", "not an inventory"),
            ],
            &[],
            &["g1", "g2", "g4"],
        ),
        (
            "an empty item is the cfg's directory",
            vec![
                ("ansible/ansible.cfg", "[defaults]\ninventory = ,\n"),
                ("ansible/hosts.ini", ONE),
            ],
            &[],
            &["g1"],
        ),
        (
            "~/.ansible.cfg when the ansible dir has none",
            vec![
                ("~/.ansible.cfg", "[defaults]\ninventory = mine.ini\n"),
                ("~/mine.ini", TWO),
            ],
            &[],
            &["g1", "g2"],
        ),
        (
            "ANSIBLE_INVENTORY over the cfg, relative to the ansible dir",
            vec![
                ("ansible/ansible.cfg", "[defaults]\ninventory = one.ini\n"),
                ("ansible/one.ini", ONE),
                ("ansible/four.yml", YAML),
            ],
            &[("ANSIBLE_INVENTORY", "four.yml")],
            &["g4"],
        ),
        (
            "ANSIBLE_CONFIG naming a directory means its ansible.cfg",
            vec![
                ("ansible/ansible.cfg", "[defaults]\ninventory = one.ini\n"),
                ("ansible/one.ini", ONE),
                ("elsewhere/ansible.cfg", "[defaults]\ninventory = four.yml\n"),
                ("elsewhere/four.yml", YAML),
            ],
            &[("ANSIBLE_CONFIG", "../elsewhere")],
            &["g4"],
        ),
        (
            "ANSIBLE_CONFIG naming no file falls through to ./ansible.cfg",
            vec![
                ("ansible/ansible.cfg", "[defaults]\ninventory = one.ini\n"),
                ("ansible/one.ini", ONE),
            ],
            &[("ANSIBLE_CONFIG", "../nowhere.cfg")],
            &["g1"],
        ),
    ]
}

#[test]
fn inventory_list_without_i_equals_ansible_inventory_on_ansible_cfg_shapes() {
    let mut failures = Vec::new();
    for (name, files, env, groups) in cases() {
        let tmp = repo(&files);
        let theirs = real_list(tmp.path(), env);
        let mut want: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        want.insert(0, "ungrouped".into());
        let mut children: Vec<String> = theirs["all"]["children"]
            .as_array()
            .expect("children")
            .iter()
            .map(|v| v.as_str().expect("str").to_string())
            .collect();
        children.sort();
        want.sort();
        // The case must be about what it says: the real tool read those sources.
        assert_eq!(
            children, want,
            "{name}: the real ansible-inventory read {theirs}"
        );
        let ours = json(hk(tmp.path(), &["inventory", "--list"], env), name);
        if ours != theirs {
            failures.push(format!("{name}:\n  ours   {ours}\n  theirs {theirs}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn envs_says_which_setting_named_the_inventory() {
    let tmp = repo(&[
        (
            "ansible/ansible.cfg",
            "[defaults]\n# c\ninventory = inv/one.ini, sub/two#x.ini ; c\n",
        ),
        ("ansible/inv/one.ini", ONE),
        ("ansible/sub/two#x.ini", TWO),
    ]);
    let out = hk(tmp.path(), &["envs"], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let first = stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("inventory ansible/inv/one.ini, ansible/sub/two#x.ini (from ")
            && first.ends_with("ansible/ansible.cfg:3 `inventory =`)"),
        "{stdout}"
    );

    // Nothing names one: today's default, said to be hk-console's own.
    let tmp = repo(&[("ansible/ansible.cfg", "[defaults]\nforks = 3\n")]);
    std::fs::create_dir_all(tmp.path().join("repo/infra/ansible/inventory")).expect("mkdir");
    std::fs::write(
        tmp.path().join("repo/infra/ansible/inventory/hosts.ini"),
        ONE,
    )
    .expect("write");
    let out = hk(tmp.path(), &["envs"], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with(
            "inventory infra/ansible/inventory/hosts.ini (from hk-console's default infra/ansible/inventory/hosts.ini: neither"
        ),
        "{stdout}"
    );
}

/// The sample repo with its `inventory:` line removed and an ansible.cfg naming two
/// inventories: hk-console reads both, and the plan gives ansible-playbook and `ansible`
/// both, one `-i` each, in the same order.
#[test]
fn the_plan_passes_ansible_playbook_every_source_hk_console_read() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("repo");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory"),
        &root,
    );
    let cfg_path = root.join("hk-console.yaml");
    let cfg = std::fs::read_to_string(&cfg_path).expect("read");
    let without: String = cfg
        .lines()
        .filter(|l| !l.starts_with("inventory:"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(without, cfg, "the sample names its inventory");
    std::fs::write(&cfg_path, without).expect("write");
    let ansible = root.join("infra/ansible");
    let text = std::fs::read_to_string(ansible.join("ansible.cfg")).expect("cfg");
    std::fs::write(
        ansible.join("ansible.cfg"),
        text.replace(
            "[defaults]\n",
            "[defaults]\ninventory = inventory/hosts.ini, extra.ini ; the lab's spare\n",
        ),
    )
    .expect("cfg");
    std::fs::write(ansible.join("extra.ini"), "[spare]\nspare-1\n").expect("extra");

    let repo = hk_console::repo::Repo::load(&root).expect("loads");
    assert!(repo.inventory.has_group("spare"), "extra.ini was read");
    let env = hk_console::context::plan_env(&repo, "prod", None).expect("plan env");
    assert_eq!(env.inventories, vec!["inventory/hosts.ini", "extra.ini"]);

    let out = hk(
        tmp.path(),
        &["plan", "etcd-io-priority", "--env", "prod"],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ansible-playbook -i inventory/hosts.ini -i extra.ini "),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An ansible.cfg hk-console cannot read, with no `inventory:` in hk-console.yaml, is an
/// error naming the file, never a silent fall back to the default inventory.
#[test]
fn an_unreadable_ansible_cfg_is_an_error_not_the_default() {
    let tmp = repo(&[
        ("ansible/ansible.cfg", "[defaults]\ninventory = one.ini\n"),
        ("infra/ansible/inventory/hosts.ini", ONE),
    ]);
    std::fs::write(
        tmp.path().join("repo/ansible/ansible.cfg"),
        b"[defaults]\ninventory = \xff.ini\n",
    )
    .expect("write");
    for args in [&["envs"][..], &["inventory", "--list"][..]] {
        let out = hk(tmp.path(), args, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("ansible/ansible.cfg"), "{args:?}: {err}");
    }

    // Nothing names one and the default is not there: said so, with where to name it.
    let tmp = repo(&[("ansible/ansible.cfg", "[defaults]\nforks = 2\n")]);
    let out = hk(tmp.path(), &["envs"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "infra/ansible/inventory/hosts.ini: no such inventory (hk-console's default: neither"
        ) && err.contains("ansible/ansible.cfg (`[defaults]` `inventory = PATH`)"),
        "{err}"
    );
}
