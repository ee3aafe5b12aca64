//! Test group `sim`: The simulated homelab: its SSH nodes, API server, controllers and faults, and the live looks on it.
//!
//! One binary for these files (Cargo.toml: `autotests = false`): one link instead of one
//! per file, and their tests share the binary's threads. Each file stays a module under
//! its own name (`sim::FILE::test`).

#[path = "observe_etcd.rs"]
mod observe_etcd;
#[path = "observe_headless.rs"]
mod observe_headless;
#[path = "sim_apiserver_mode.rs"]
mod sim_apiserver_mode;
#[path = "sim_cluster_api.rs"]
mod sim_cluster_api;
#[path = "sim_demo.rs"]
mod sim_demo;
#[path = "sim_demo_repo.rs"]
mod sim_demo_repo;
#[path = "sim_fault.rs"]
mod sim_fault;
#[path = "sim_flux.rs"]
mod sim_flux;
#[path = "sim_flux_objects.rs"]
mod sim_flux_objects;
#[path = "sim_kube.rs"]
mod sim_kube;
#[path = "sim_kubectl.rs"]
mod sim_kubectl;
#[path = "sim_kubectl_real.rs"]
mod sim_kubectl_real;
#[path = "sim_kubectl_ssa.rs"]
mod sim_kubectl_ssa;
#[path = "sim_lifecycle.rs"]
mod sim_lifecycle;
#[path = "sim_once.rs"]
mod sim_once;
#[path = "sim_quorum.rs"]
mod sim_quorum;
#[path = "sim_ssh.rs"]
mod sim_ssh;
#[path = "sim_tools.rs"]
mod sim_tools;
#[path = "sim_userland.rs"]
mod sim_userland;

// The helpers the files share, once for the binary (each file `use crate::...`s them).
mod demo_common;
mod support;
