//! Rules over the repo model. Owns: findings (rule, severity, env, file:line, message).
//! `parity::check` is PURE over a facts struct; `parity::gather` is the one place that reads
//! the repo's files (overlays, templates, vault headers) to build those facts.
//! Must not: talk to hosts or clusters (that is the live, L2, check).
pub mod live;
pub mod parity;
