//! The operator's own repo (issue 14), through the real binary: a repo shaped like the
//! source README's (tests/fixtures/operator-repo: roles keeping their knobs in
//! defaults/main.yml, no hk-console.yaml, FOUR prod servers).
//!
//! - `init` proposes hk-console.yaml from the inventory with its evidence; `--write` writes
//!   it (never over an existing one) and `check` is clean on it.
//! - every shipped runbook plans for every environment it names, its templates seeing the
//!   roles' defaults; the shipped etcd-io-priority is refused for prod naming the fourth
//!   server; a variable no layer defines is named with the places searched.
//! - `demo --repo` simulates THAT repo: an override naming all four servers runs headless
//!   over four simulated prod nodes in its order (real ansible-playbook, the role's raw
//!   tasks over SSH). A scenario naming an environment the repo lacks is refused.

use std::path::{Path, PathBuf};
use std::process::Command;

use fs_common::copy_dir;
use hk_test_support::fs as fs_common;

fn bin(state: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hk-console"));
    c.env("XDG_STATE_HOME", state)
        .env_remove("HK_REPO")
        .env_remove("HK_RUNBOOKS")
        .stdin(std::process::Stdio::null());
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fresh copy of the fixture (tests may write into it).
fn copy_fixture(to: &Path) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/operator-repo");
    let dst = to.join("repo");
    copy_dir(&from, &dst);
    dst
}

/// The fixture with `init --write` done.
fn initialised(tmp: &Path) -> PathBuf {
    let repo = copy_fixture(tmp);
    let out = bin(tmp)
        .args(["init", "--write", "--repo"])
        .arg(&repo)
        .output()
        .expect("run init");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    repo
}

#[test]
fn init_proposes_the_environments_with_evidence_and_writes_only_when_asked() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = copy_fixture(tmp.path());
    let out = bin(tmp.path())
        .args(["init", "--repo"])
        .arg(&repo)
        .output()
        .expect("run init");
    let proposal = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        !repo.join("hk-console.yaml").exists(),
        "init without --write wrote the file"
    );
    // The environments, their groups, and the evidence with file:line.
    for want in [
        "  dev:\n",
        "    servers: k3s_servers\n",
        "    vpn_gateways: vpn_egress_gateway\n",
        "    operator_present: true\n",
        "  prod:\n",
        "    servers: k3s_prod\n",
        "    vpn_gateways: vpn_egress_gateway_prod\n",
        "k3s_servers_group: k3s_prod (infra/ansible/inventory/group_vars/k3s_prod/vars.yml:",
        "named `prod` after cluster_kubeconfig_name: prod.kubeconfig",
        "k3s-prod-1, k3s-prod-2, k3s-prod-3, k3s-prod-4",
    ] {
        assert!(proposal.contains(want), "missing {want:?} in:\n{proposal}");
    }
    // Prod is not dev-like: nothing says the operator must be present there.
    let prod = proposal.split("  prod:\n").nth(1).expect("prod section");
    assert!(!prod.contains("operator_present"), "{prod}");
    // ... it is production: the gate policy guards it.
    assert!(prod.contains("    protected: true\n"), "{prod}");
    let dev = proposal.split("  prod:\n").next().expect("dev section");
    assert!(!dev.contains("protected"), "{dev}");

    // --write writes it and runs check on it: clean.
    let out = bin(tmp.path())
        .args(["init", "--write", "--repo"])
        .arg(&repo)
        .output()
        .expect("run init --write");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}{stdout}", text(&out.stderr));
    assert!(stdout.contains("parity: clean"), "{stdout}");
    let written = std::fs::read_to_string(repo.join("hk-console.yaml")).expect("written");
    assert_eq!(written.trim_end(), proposal.trim_end());

    // Never over an existing file: exit 2, naming it.
    let out = bin(tmp.path())
        .args(["init", "--write", "--repo"])
        .arg(&repo)
        .output()
        .expect("run init again");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("hk-console.yaml already exists"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_repo_without_config_is_offered_init() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = copy_fixture(tmp.path());
    let out = bin(tmp.path())
        .arg("--repo")
        .arg(&repo)
        .arg("envs")
        .output()
        .expect("run envs");
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("hk-console init --repo DIR"), "{err}");
}

/// The runbooks the binary ships, with their environments and whether they run on one
/// host.
fn shipped(tmp: &Path, repo: &Path) -> Vec<(String, Vec<String>)> {
    let out = bin(tmp)
        .arg("--repo")
        .arg(repo)
        .args(["runbooks", "list", "--json"])
        .output()
        .expect("runbooks list");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    v.as_array()
        .expect("array")
        .iter()
        .map(|r| {
            let id = r["id"].as_str().expect("id").to_string();
            let envs = r["environments"]
                .as_array()
                .expect("envs")
                .iter()
                .map(|e| e.as_str().expect("env").to_string())
                .collect();
            (id, envs)
        })
        .collect()
}

#[test]
fn every_shipped_runbook_plans_on_the_operator_repo_and_the_three_node_order_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = initialised(tmp.path());
    let runbooks = shipped(tmp.path(), &repo);
    assert!(runbooks.len() >= 8, "{runbooks:?}");
    let mut planned = 0;
    for (id, envs) in &runbooks {
        for env in envs {
            let plan = |host: Option<&str>| {
                let mut c = bin(tmp.path());
                c.arg("--repo")
                    .arg(&repo)
                    .args(["plan", id, "--env", env, "--json"]);
                if let Some(h) = host {
                    c.args(["--host", h]);
                }
                c.output().expect("plan")
            };
            let mut out = plan(None);
            let err = text(&out.stderr);
            // Single-host runbooks want a host: plan on the last server of the group.
            if err.contains("runs on one host of") {
                let host = err
                    .rsplit("one of: ")
                    .next()
                    .and_then(|l| l.trim().trim_end_matches(')').split(", ").last())
                    .expect("a host list")
                    .to_string();
                out = plan(Some(&host));
            }
            let err = text(&out.stderr);
            if id == "etcd-io-priority" && env == "prod" {
                // Its order names three of the four servers: refused, naming the fourth.
                assert_eq!(out.status.code(), Some(2), "{err}");
                assert!(err.contains("k3s-prod-4"), "{err}");
                continue;
            }
            assert_eq!(out.status.code(), Some(0), "{id} on {env}: {err}");
            planned += 1;
        }
    }
    assert!(planned >= 12, "only {planned} plans");
}

/// `--runbooks DIR` holding etcd-io-priority with all four prod servers in its order.
fn four_node_override(tmp: &Path) -> PathBuf {
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("runbooks/etcd-io-priority.yaml"),
    )
    .expect("shipped runbook");
    let from = "prod: [k3s-prod-3, k3s-prod-1, k3s-prod-2]";
    assert!(shipped.contains(from), "the shipped order changed");
    let dir = tmp.join("runbooks");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("etcd-io-priority.yaml"),
        shipped.replace(
            from,
            "prod: [k3s-prod-3, k3s-prod-4, k3s-prod-1, k3s-prod-2]",
        ),
    )
    .expect("write override");
    dir
}

#[test]
fn role_defaults_reach_the_templates_and_a_missing_variable_is_named() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = initialised(tmp.path());
    let runbooks = four_node_override(tmp.path());
    let plan = || {
        bin(tmp.path())
            .arg("--repo")
            .arg(&repo)
            .arg("--runbooks")
            .arg(&runbooks)
            .args(["plan", "etcd-io-priority", "--env", "prod"])
            .output()
            .expect("plan")
    };
    // The knobs live only in the role's defaults: the read-back command has their values.
    let out = plan();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(stdout.contains("k3s-prod-4: Read back"), "{stdout}");
    assert!(stdout.contains("nr=32; weight=10000;"), "{stdout}");

    // Take one knob away: exit 2 naming the variable, where the runbook uses it, the host,
    // and the role defaults searched.
    let defaults = repo.join("infra/ansible/roles/etcd_io_priority/defaults/main.yml");
    let text_before = std::fs::read_to_string(&defaults).expect("defaults");
    std::fs::write(
        &defaults,
        text_before.replace("etcd_io_priority_io_weight: 10000\n", ""),
    )
    .expect("write defaults");
    let out = plan();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("etcd-io-priority.yaml:")
            && err.contains("`vars.etcd_io_priority_io_weight` is not defined for k3s-prod-3"),
        "{err}"
    );
    assert!(
        err.contains(
            "role defaults and vars of etcd_io_priority (infra/ansible/roles/etcd_io_priority)"
        ),
        "{err}"
    );
    assert!(err.contains("runbook's own `defaults:`"), "{err}");
    assert!(
        !err.contains("set -eu"),
        "the whole command is not the message: {err}"
    );

    // The runbook's own `defaults:` fill what no repo states.
    let file = runbooks.join("etcd-io-priority.yaml");
    let rb = std::fs::read_to_string(&file).expect("override");
    std::fs::write(
        &file,
        rb.replacen(
            "\ntarget:",
            "\ndefaults:\n  etcd_io_priority_io_weight: 10000\ntarget:",
            1,
        ),
    )
    .expect("write override");
    let out = plan();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("weight=10000;"));
}

#[test]
fn demo_repo_runs_the_four_node_override_headless_in_its_order() {
    let dirs = hk_console::exec::ansible::search_dirs();
    assert!(
        hk_console::exec::ansible::find_binary("ansible-playbook", &dirs).is_some(),
        "ansible-playbook not found: {}",
        hk_console::exec::ansible::INSTALL_HINT
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = initialised(tmp.path());
    let runbooks = four_node_override(tmp.path());
    let out = bin(tmp.path())
        .arg("--repo")
        .arg(&repo)
        .arg("--runbooks")
        .arg(&runbooks)
        .args([
            "demo",
            "--headless",
            "--run",
            "etcd-io-priority",
            "--env",
            "prod",
            "--json",
        ])
        .output()
        .expect("demo --headless");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    assert_eq!(v["succeeded"], true, "{v}");
    let steps = v["steps"].as_array().expect("steps");
    let applied: Vec<&str> = steps
        .iter()
        .filter(|s| s["kind"] == "ssh")
        .map(|s| s["host"].as_str().expect("host"))
        .collect();
    assert_eq!(
        applied,
        ["k3s-prod-3", "k3s-prod-4", "k3s-prod-1", "k3s-prod-2"],
        "{v}"
    );
    assert!(steps.iter().all(|s| s["state"] == "done"), "{v}");
}

#[test]
fn demo_repo_refuses_what_it_cannot_simulate() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // No hk-console.yaml: refused, pointing at init.
    let bare = copy_fixture(tmp.path());
    let out = bin(tmp.path())
        .arg("--repo")
        .arg(&bare)
        .args(["demo", "--once"])
        .output()
        .expect("demo --once");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("hk-console init --repo"), "{err}");

    // Environments with other names: `healthy` runs on them, a scenario written for
    // `prod` is refused naming it.
    let other = tmp.path().join("other");
    copy_dir(&bare, &other);
    std::fs::write(
        other.join("hk-console.yaml"),
        "ansible_dir: infra/ansible\ninventory: infra/ansible/inventory/hosts.ini\nenvironments:\n  staging:\n    servers: k3s_servers\n    vpn_gateways: vpn_egress_gateway\n    flux_overlay: clusters/dev\n  production:\n    servers: k3s_prod\n    vpn_gateways: vpn_egress_gateway_prod\n    flux_overlay: clusters/prod\n",
    )
    .expect("write config");
    let out = bin(tmp.path())
        .arg("--repo")
        .arg(&other)
        .args(["demo", "--once", "--json"])
        .output()
        .expect("demo --once");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let s = v.to_string();
    assert!(s.contains("production") && s.contains("k3s-prod-4"), "{s}");
    let out = bin(tmp.path())
        .arg("--repo")
        .arg(&other)
        .args(["demo", "--once", "--scenario", "agents-on-node-ip"])
        .output()
        .expect("demo --once");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("names environment(s) prod"), "{err}");
    assert!(
        err.contains("(its environments: production, staging)"),
        "{err}"
    );
}
