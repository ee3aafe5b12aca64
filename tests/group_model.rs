//! Test group `model`: The model, the planner, the machine, the checks: pure or on files and the real ansible-inventory/kustomize; quick.
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
#[path = "cli_operator_repo.rs"]
mod cli_operator_repo;
#[path = "cli_runbooks_repo.rs"]
mod cli_runbooks_repo;
#[path = "fuzz_parsers.rs"]
mod fuzz_parsers;
#[path = "hostile_input.rs"]
mod hostile_input;
#[path = "inventory_cfg.rs"]
mod inventory_cfg;
#[path = "inventory_provenance.rs"]
mod inventory_provenance;
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

// The helpers the files share, once for the binary (each file `use crate::...`s them).
use hk_test_support::fs as fs_common;
use hk_test_support::machine as machine_common;
use hk_test_support::runbooks as runbooks_common;
