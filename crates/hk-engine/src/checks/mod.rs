//! Rules over the repo model. Owns: findings (rule, severity, env, file:line, message).
//! `parity::check` is PURE over a facts struct; the facts are gathered by
//! `crate::gather`, the one place that reads the repo's
//! files (overlays, templates, vault headers) and runs kustomize. Nothing here does IO or
//! reads the clock (tests/architecture.rs holds that): what would stop a run before its
//! first step is found by `repo::blockers`, which reads the playbooks, roles and vaults
//! the way ansible-playbook will.
//! Must not: talk to hosts or clusters (that is the live, L2, check).
pub mod live;
pub mod parity;
pub mod release_diff;
pub mod vpn_remotes;
