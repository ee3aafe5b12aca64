//! Test group `model`: The model, the planner, the machine, the checks: pure or on files and the real ansible-inventory/kustomize; quick.
//!
//! One binary for these files (Cargo.toml: `autotests = false`): one link instead of one
//! per file, and their tests share the binary's threads. Each file stays a module under
//! its own name (`model::FILE::test`).

#[path = "architecture.rs"]
mod architecture;
#[path = "blockers_ansible.rs"]
mod blockers_ansible;
#[path = "check_flux.rs"]
mod check_flux;
#[path = "check_gather.rs"]
mod check_gather;
#[path = "check_kustomize_diff.rs"]
mod check_kustomize_diff;
#[path = "check_mode_derived.rs"]
mod check_mode_derived;
#[path = "check_parity.rs"]
mod check_parity;
#[path = "check_sample.rs"]
mod check_sample;
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
#[path = "inventory_parity.rs"]
mod inventory_parity;
#[path = "inventory_provenance.rs"]
mod inventory_provenance;
#[path = "journal_replay.rs"]
mod journal_replay;
#[path = "live_rules.rs"]
mod live_rules;
#[path = "machine_invariants.rs"]
mod machine_invariants;
#[path = "machine_observe.rs"]
mod machine_observe;
#[path = "machine_transitions.rs"]
mod machine_transitions;
#[path = "repo_any_layout.rs"]
mod repo_any_layout;
#[path = "repo_sample.rs"]
mod repo_sample;
#[path = "run_real_plans.rs"]
mod run_real_plans;
#[path = "runbooks_ansible.rs"]
mod runbooks_ansible;
#[path = "runbooks_invalid.rs"]
mod runbooks_invalid;
#[path = "runbooks_plan.rs"]
mod runbooks_plan;
#[path = "runbooks_policy.rs"]
mod runbooks_policy;
#[path = "runbooks_shipped.rs"]
mod runbooks_shipped;
#[path = "seed_names.rs"]
mod seed_names;

// The helpers the files share, once for the binary (each file `use crate::...`s them).
mod fs_common;
mod machine_common;
mod runbooks_common;
