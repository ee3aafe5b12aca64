//! hk-engine: the model and the pure engine of hk-console. No async runtime, no network
//! client, no terminal in its dependencies (tests/architecture.rs holds that), so its tests
//! build in seconds.
//!
//! - [`yaml`]: YAML text to a tree of positioned nodes, typed as Ansible types them.
//! - [`repo`]: the infra repo as data: `hk-console.yaml`, the Ansible inventory with
//!   group_vars/host_vars, Jinja resolution, environments, Flux overlays.
//! - [`runbook`]: PURE. Runbook schema and validation, the planner, the run state machine.
//! - [`journal`]: the append-only, fsync'd JSONL record of a run, and its replay.
//! - [`checks`]: PURE rules: the static parity contract (L0), the live verdicts (L2), the
//!   health gate and disruption guard rails.
//! - [`gather`]: what a check's gathered facts are, from where.
//! - [`redact`]: the no_log mask: `repo::vault` learns the secrets, the executors mask them
//!   in every line.
//! - [`text`]: strings from data made safe to print (control characters written out).
//! - [`time`]: the clock read, calendar fields and durations in words, on jiff.
//! - [`topology`]: the planner's `Topology` over a loaded repo, its blockers from `checks`
//!   (above both `repo` and `checks`, so neither imports the other's way back).
//!
//! `runbook` and `checks` do no IO.

pub mod checks;
pub mod gather;
pub mod guard;
pub mod journal;
pub mod redact;
pub mod repo;
pub mod runbook;
pub mod text;
pub mod time;
pub mod topology;
pub mod yaml;
