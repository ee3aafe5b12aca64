//! Test binary `sim` of hk-sim: the simulated homelab on its own and under the real
//! clients: its Kubernetes API (kube-rs, the real kubectl, server-side apply, the Flux
//! objects), its lifecycle, its tools and faults, and etcd's answers through the effects'
//! probes. One binary for these files (Cargo.toml: `autotests = false`); each stays a
//! module under its own name. The demo's rehearsals through the binary are the root's.

mod observe_etcd;
mod sim_cluster_api;
mod sim_fault;
mod sim_flux;
mod sim_flux_objects;
mod sim_kube;
mod sim_kubectl;
mod sim_kubectl_real;
mod sim_kubectl_ssa;
mod sim_lifecycle;
mod sim_tools;

mod demo_common;
mod support;
