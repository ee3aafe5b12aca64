//! Test group `model`: the binary's commands end to end (the CLI, its conventions, hostile
//! input, the operator's own and the public repos, the trust and injection guards), and the
//! workspace's own rules (the layers, the seed names). The model's, the console's, the
//! effects' and the simulation's own tests are their crates' (crates/*/tests).
//!
//! One binary for these files (Cargo.toml: `autotests = false`): one link instead of one
//! per file, and their tests share the binary's threads. Each file stays a module under
//! its own name (`model::FILE::test`).

#[path = "architecture.rs"]
mod architecture;
#[path = "blockers_ansible.rs"]
mod blockers_ansible;
#[path = "check_kustomize_diff.rs"]
mod check_kustomize_diff;
#[path = "check_mode_derived.rs"]
mod check_mode_derived;
#[path = "check_sample_broken.rs"]
mod check_sample_broken;
#[path = "cli.rs"]
mod cli;
#[path = "cli_conventions.rs"]
mod cli_conventions;
#[path = "cli_operator_repo.rs"]
mod cli_operator_repo;
#[path = "cli_runbooks_repo.rs"]
mod cli_runbooks_repo;
#[path = "exec_cli_trust.rs"]
mod exec_cli_trust;
#[path = "fuzz_parsers.rs"]
mod fuzz_parsers;
#[path = "hostile_input.rs"]
mod hostile_input;
#[path = "hostile_journal.rs"]
mod hostile_journal;
#[path = "inject_terminal.rs"]
mod inject_terminal;
#[path = "inject_values.rs"]
mod inject_values;
#[path = "inventory_cfg.rs"]
mod inventory_cfg;
#[path = "inventory_provenance.rs"]
mod inventory_provenance;
#[path = "public_repos.rs"]
mod public_repos;
#[path = "repo_any_layout.rs"]
mod repo_any_layout;
#[path = "repo_sample.rs"]
mod repo_sample;
#[path = "run_real_plans.rs"]
mod run_real_plans;
#[path = "runbooks_plan.rs"]
mod runbooks_plan;
#[path = "runbooks_policy.rs"]
mod runbooks_policy;
#[path = "seed_names.rs"]
mod seed_names;
#[path = "ui_incident.rs"]
mod ui_incident;

// The helpers the files share, once for the binary (each file `use crate::...`s them).
use hk_test_support::fs as fs_common;
use hk_test_support::machine as machine_common;
use hk_test_support::runbooks as runbooks_common;
mod support;
#[path = "../crates/hk-ui/tests/ui_common/mod.rs"]
mod ui_common;
