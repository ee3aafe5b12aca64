//! Rules over the repo model. Owns: findings (rule, severity, env, file:line, message).
//! `parity::check` is PURE over a facts struct; the facts are gathered by
//! `crate::gather`, the one place that reads the repo's
//! files (overlays, templates, vault headers) and runs kustomize. Nothing here does IO,
//! except `blockers`, which reads the repo's playbooks, roles and vaults the way
//! ansible-playbook will, to find what would stop a run before its first step.
//! Must not: talk to hosts or clusters (that is the live, L2, check).
pub mod blockers;
pub mod health;
pub mod live;
pub mod parity;
pub mod release_diff;
pub mod vpn_remotes;
