//! PURE. Where every gate's decision is made: whether an operator's answer opens a step's
//! gate ([`operator`]), whether the cluster is healthy enough for the next host ([`health`]:
//! the health gate between hosts, and what a node carries before `disrupts: node`), what a
//! step's hosts carry live and whether it would cost quorum ([`blast`]: the quorum refusal
//! and its override), and whether the run's lock lets anything go ahead ([`lock`]).
//!
//! Owns: the rules, each a function of what was seen (answers, snapshots, panes with their
//! ages, the lock's standing), each unit-tested here. The run machine asks [`operator`];
//! the session asks [`lock`]; the effects only gather what the rules read (the health
//! probe's snapshot, the gate's live look, the renewer's standing) and hand it in.
//! Must not: do IO or read the clock (tests/architecture.rs holds that for this module),
//! or know how the console words a key.

pub mod blast;
pub mod health;
pub mod leader;
pub mod lock;
pub mod outage;
pub mod snapshot;
/// The operator gate rule, applied by the run machine to every answer (written beside the
/// plan's `Gate`, below the guard, so the machine imports nothing above it).
pub use crate::runbook::gate as operator;
