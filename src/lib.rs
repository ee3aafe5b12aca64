//! hk-console: the operator's console for a home-network HA k3s platform.
//!
//! This package is the binary and its composition root ([`cli`]): it puts together the
//! layers, each its own crate (docs/ARCHITECTURE.md has the map, and tests/architecture.rs
//! holds what each may not depend on):
//!
//! - `hk-engine`: the model and the pure engine (repo, runbook, journal, checks, ...); no
//!   runtime, no network, no terminal.
//! - `hk-effects`: SSH, ansible-playbook, the kube client, the live sources.
//! - `hk-session`: the run driver, its executors' boundary, the run lock, the change record.
//! - `hk-ui`: the interactive console; the only crate on ratatui and crossterm.
//! - `hk-sim`: the simulated homelab, for `demo` and the tests; no library depends on it.
//!
//! The re-exports below keep one path per module for the commands and the integration
//! tests (`hk_console::repo`, `hk_console::session`, ...).

pub mod cli;
pub mod rehearsal;

pub use hk_effects::{cluster, context, exec, observe, vault_script};
pub use hk_engine::{checks, gather, guard, journal, redact, repo, runbook, text, time, yaml};
pub use hk_session as session;
pub use hk_session::record;
/// The simulation, and the demo's rehearsals composed over it (`sim::headless`).
pub mod sim {
    pub use crate::rehearsal as headless;
    pub use hk_sim::*;
}
pub use hk_ui as ui;
pub use hk_ui::tui;
