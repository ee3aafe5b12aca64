//! Test binary `machine` of hk-engine: the run machine, the planner over the shipped
//! runbooks, the journal's replay, the guard's plan rules. Pure, or on files and the real
//! ansible-playbook; quick. One binary for these files (Cargo.toml: `autotests = false`):
//! one link instead of one per file. Each file stays a module under its own name.

mod guard_plan;
mod journal_replay;
mod machine_invariants;
mod machine_observe;
mod machine_resume;
mod machine_transitions;
mod runbooks_ansible;
mod runbooks_invalid;
mod runbooks_shipped;
