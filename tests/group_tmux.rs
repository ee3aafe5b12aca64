//! Test group `tmux`: The real binary driven in tmux (and the real k9s and kubectl on the demo).
//!
//! One binary for these files (Cargo.toml: `autotests = false`): one link instead of one
//! per file, and their tests share the binary's threads. Each file stays a module under
//! its own name (`tmux::FILE::test`).

#[path = "guard_tmux_lock.rs"]
mod guard_tmux_lock;
#[path = "sim_apiserver_tmux.rs"]
mod sim_apiserver_tmux;
#[path = "sim_k9s.rs"]
mod sim_k9s;
#[path = "ui_tmux.rs"]
mod ui_tmux;
#[path = "ui_tmux_incident.rs"]
mod ui_tmux_incident;
#[path = "ui_tmux_init.rs"]
mod ui_tmux_init;
#[path = "ui_tmux_signals.rs"]
mod ui_tmux_signals;

// The helpers the files share, once for the binary (each file `use crate::...`s them).
mod tmux_common;
