//! The planner's expected host sets against the real `ansible-playbook --list-hosts` on the
//! bundled sample inventory: every list-hosts step of every shipped runbook, in every
//! environment it is for, must show exactly the hosts the plan expects.
//!
//! Needs ansible-core: found through `HK_ANSIBLE_BIN_DIR`, else on PATH, else in
//! /opt/hk-venv/bin. Missing ansible FAILS this test (`bash tests/run-all.sh` installs it).
use hk_test_support::runbooks as runbooks_common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use hk_engine::runbook::embedded::load;
use hk_engine::runbook::plan::{plan, PlanEnv, StepKind};
use runbooks_common::{dev, homelab, prod};

fn ansible_bin_dir() -> PathBuf {
    hk_test_support::ansible::dir_of("ansible-playbook")
}

/// Every host `--list-hosts` printed, over all plays.
fn listed_hosts(stdout: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut lines = stdout.lines();
    while let Some(line) = lines.next() {
        let t = line.trim();
        if let Some(n) = t.strip_prefix("hosts (").and_then(|r| r.strip_suffix("):")) {
            let n: usize = n.parse().expect("a host count");
            for _ in 0..n {
                out.insert(lines.next().expect("a host line").trim().to_string());
            }
        }
    }
    out
}

fn sample_env(mut env: PlanEnv, ansible_dir: &Path) -> PlanEnv {
    env.ansible_dir = ansible_dir.display().to_string();
    env.inventories = vec![ansible_dir
        .join("inventory/hosts.ini")
        .display()
        .to_string()];
    env
}

#[test]
fn every_list_hosts_step_matches_real_ansible_on_the_sample_inventory() {
    let bin = ansible_bin_dir();
    let ansible_dir = hk_test_support::root().join("inventory/infra/ansible");
    assert!(
        ansible_dir.join("inventory/hosts.ini").is_file(),
        "the sample inventory is missing"
    );
    let set = load(&[]).expect("embedded set loads");
    let topo = homelab();
    let mut checked = 0;
    for loaded in set.iter() {
        let rb = &loaded.runbook;
        for env_name in &rb.environments {
            let mut env = match env_name.as_str() {
                "prod" => sample_env(prod(), &ansible_dir),
                "dev" => sample_env(dev(), &ansible_dir),
                other => panic!("unexpected env {other}"),
            };
            if rb.target.as_ref().is_some_and(|t| t.single) {
                env.host = topo.groups[&env.servers].last().cloned();
            }
            let p = plan(rb, &env, &topo).unwrap_or_else(|e| panic!("{}: {e}", rb.id));
            for step in p.steps.iter().filter(|s| s.kind == StepKind::ListHosts) {
                let argv = step
                    .command
                    .as_ref()
                    .expect("a list-hosts step runs a command");
                let program = bin.join(&argv[0]);
                assert!(program.is_file(), "{} not found", program.display());
                let out = Command::new(&program)
                    .args(&argv[1..])
                    .current_dir(step.cwd.as_deref().expect("cwd"))
                    .env("ANSIBLE_NOCOLOR", "1")
                    .output()
                    .expect("runs");
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert!(
                    out.status.success(),
                    "{} {env_name} step {}: {argv:?} failed:\n{stdout}\n{}",
                    rb.id,
                    step.n,
                    String::from_utf8_lossy(&out.stderr)
                );
                let expected: BTreeSet<String> = step
                    .expect
                    .as_ref()
                    .and_then(|e| e.hosts.clone())
                    .expect("expected hosts")
                    .into_iter()
                    .collect();
                assert_eq!(
                    listed_hosts(&stdout),
                    expected,
                    "{} {env_name} step {}: {argv:?}",
                    rb.id,
                    step.n
                );
                checked += 1;
            }
        }
    }
    // etcd 3 + memattr 3 + packages 2 + cold 2 + node-health 2 + reprovision 2 at least.
    assert!(checked >= 14, "only {checked} list-hosts steps checked");
}

#[test]
fn the_parser_reads_every_play() {
    let out = "playbook: x\n\n  play #1 (a): A\tTAGS: []\n    pattern: ['a']\n    hosts (2):\n      h1\n      h2\n\n  play #2 (b): B\n    hosts (1):\n      h3\n";
    let got: Vec<String> = listed_hosts(out).into_iter().collect();
    assert_eq!(got, ["h1", "h2", "h3"]);
}
