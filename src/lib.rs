//! hk-console: the operator's console for a home-network HA k3s platform.
//!
//! Module map (data flows one way: model -> engine -> effects -> UI):
//!
//! - [`yaml`]: YAML text to a tree of positioned nodes, typed as Ansible types them.
//! - [`repo`]: the infra repo as data: `hk-console.yaml`, the Ansible INI inventory with
//!   group_vars/host_vars, Jinja resolution, environments, Flux overlays.
//! - [`runbook`]: PURE. Runbook schema and validation, the planner, the run state machine.
//! - [`journal`]: the append-only, fsync'd JSONL record of a run, and its replay.
//! - [`checks`]: PURE rules over the model: the static parity contract (L0).
//! - [`context`]: the glue commands and the console share: repo + runbooks -> plans.
//! - [`observe`]: the typed live observations (VIP lease, agent env, VPN egress).
//! - [`record`]: the change record of a run (`runs list`/`runs show`), from its journal.
//! - [`sim`]: the embedded simulated homelab (loopback SSH nodes, ...).
//! - [`ui`]: the interactive console: app state, actions, keymaps, panes, themes.
//! - [`redact`]: the no_log mask: `repo::vault` learns the secrets, `exec` masks them in
//!   every line; neutral, so repo/ needs nothing of exec/.
//! - [`text`]: strings from data made safe to print (control characters written out).
//! - [`time`]: the clock read, calendar fields and durations in words, on jiff.
//! - [`tui`]: the terminal owner and the event loop.
//! - [`cli`]: the commands and flags; `main.rs` only dispatches.
//!
//! `runbook` and `checks` do no IO and know no terminal.

#![forbid(unsafe_code)]

pub mod checks;
pub mod cli;
pub mod cluster;
pub mod context;
pub mod exec;
pub mod journal;
pub mod observe;
pub mod record;
pub mod redact;
pub mod repo;
pub mod runbook;
pub mod session;
pub mod sim;
pub mod text;
pub mod time;
pub mod tui;
pub mod ui;
pub mod yaml;
