//! hk-effects: what touches the world. Only this crate (and the simulation, which plays the
//! world) opens connections or starts processes.
//!
//! - [`exec`]: SSH (russh), ansible-playbook supervision, the kube-backed steps; read-only
//!   as a type.
//! - [`cluster`]: the kube client, kubeconfig choice, object conversions, the run lock.
//! - [`context`]: the glue commands and the console share: repo + runbooks -> plans.
//! - [`observe`]: the live sources (the kube watchers, the VPN and etcd looks) and the
//!   judged panes they send.

pub mod cluster;
pub mod context;
pub mod etcd_leader;
pub mod etcd_snapshot;
pub mod exec;
pub mod gateway;
pub mod hostvar;
pub mod observe;
pub mod vault_script;
