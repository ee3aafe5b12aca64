//! Test group `sim`: The simulated homelab: its SSH nodes, API server, controllers and faults, and the live looks on it.
//!
//! One binary for these files (Cargo.toml: `autotests = false`): one link instead of one
//! per file, and their tests share the binary's threads. Each file stays a module under
//! its own name (`sim::FILE::test`).

#[path = "observe_headless.rs"]
mod observe_headless;
#[path = "sim_apiserver_mode.rs"]
mod sim_apiserver_mode;
#[path = "sim_demo.rs"]
mod sim_demo;
#[path = "sim_demo_repo.rs"]
mod sim_demo_repo;
#[path = "sim_once.rs"]
mod sim_once;
#[path = "sim_quorum.rs"]
mod sim_quorum;
#[path = "sim_ssh.rs"]
mod sim_ssh;
#[path = "sim_userland.rs"]
mod sim_userland;

// The helpers the files share, once for the binary (each file `use crate::...`s them).
#[path = "../crates/hk-sim/tests/demo_common/mod.rs"]
mod demo_common;
mod support;
