//! hk-console: the operator's console for a home-network HA k3s platform.
//!
//! Module map (data flows one way: model -> engine -> session -> effects -> UI; the house
//! tour is docs/ARCHITECTURE.md):
//!
//! - [`yaml`]: YAML text to a tree of positioned nodes, typed as Ansible types them.
//! - [`repo`]: the infra repo as data: `hk-console.yaml`, the Ansible INI inventory with
//!   group_vars/host_vars, Jinja resolution, environments, Flux overlays.
//! - [`runbook`]: PURE. Runbook schema and validation, the planner, the run state machine.
//! - [`journal`]: the append-only, fsync'd JSONL record of a run, and its replay.
//! - [`checks`]: PURE rules: the static parity contract (L0), the live verdicts (L2), the
//!   health gate and disruption guard rails.
//! - [`session`]: the run driver: `RunSession::feed` journals an input, steps the machine
//!   and answers in effects; one pump for the console and headless runs.
//! - [`exec`]: the effects: SSH, ansible-playbook, the kube-backed steps; read-only as a type.
//! - [`cluster`]: the kube client, kubeconfig choice, object conversions, the run lock.
//! - [`context`]: the glue commands and the console share: repo + runbooks -> plans.
//! - [`observe`]: the live sources (the kube watchers, the VPN and etcd looks) and the
//!   judged panes they send.
//! - [`record`]: the change record of a run (`runs list`/`runs show`), from its journal.
//! - [`sim`]: the embedded simulated homelab (loopback SSH nodes, ...).
//! - [`ui`]: the interactive console: app state, actions, keymaps, panes, themes.
//! - [`redact`]: the no_log mask: `repo::vault` learns the secrets, `exec` masks them in
//!   every line; neutral, so repo/ needs nothing of exec/.
//! - [`text`]: strings from data made safe to print (control characters written out).
//! - [`time`]: the clock read, calendar fields and durations in words, on jiff.
//! - [`tui`]: the terminal owner (raw mode, alternate screen, restore).
//! - [`cli`]: the commands and flags; `main.rs` only dispatches.
//!
//! `runbook` and `checks` do no IO and know no terminal.

#![forbid(unsafe_code)]

pub mod checks;
pub mod cli;
pub mod cluster;
pub mod context;
pub mod exec;
pub mod gather;
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
