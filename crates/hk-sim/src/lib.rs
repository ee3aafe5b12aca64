//! The embedded simulated homelab (issue 6): what `hk-console demo` runs so a newcomer
//! with no cluster reaches something true to life through the console's REAL clients.
//! Everything listens on loopback only.
//!
//! - [`demo_repo`]: the embedded sample moved onto loopback.
//! - [`scenario`]: the scenario files and their parser.
//! - [`kube`]: the simulated Kubernetes API server (TLS, real JSON, list/watch).
//! - [`apiserver`]: `demo --apiserver`: per environment a real etcd (a member per server) and
//!   a kube-apiserver over it.
//! - [`cluster`]: one simulated k3s cluster's objects and controllers on that server.
//! - [`ssh`]: the simulated nodes' SSH servers (russh server side), one per inventory host;
//!   [`channel`]: how one of their channels ends.
//! - [`userland`]: a node's real userland (the machine's own programs in a bubblewrap
//!   sandbox per node), where its exec, shell and sftp channels run when it has one.
//! - [`etcd_endpoint`]: a server's etcd client and metrics endpoints as real listeners,
//!   for a node with a real userland (its real `curl` reaches them).
//! - [`node`]: a node's simulated state.
//! - [`login`]: one login on a node: the shell's System over its state, and the node's own
//!   utilities (systemctl, journalctl, curl, ...).
//! - [`shell`]: the POSIX `sh` subset those commands are written in.
//! - [`coreutils`]: the everyday node tools (ls, ps, df, awk, sed, ip, ss, ...).
//! - [`daemonset`]: the DaemonSet controller's status, over the controllers' one interface.
//! - [`flux`]: Flux's helm-controller, written over the controllers' one interface.
//! - [`fs`]: a node's in-memory file tree (what scp, sftp and redirections write).
pub mod apiserver;
pub mod channel;
pub mod cluster;
pub mod coreutils;
pub mod daemonset;
pub mod demo;
pub mod demo_repo;
pub mod etcd_endpoint;
pub mod flux;
pub mod flux_applied;
pub mod fs;
pub mod kube;
pub mod login;
pub mod node;
pub mod scenario;
pub mod scp;
pub mod sftp;
pub mod shell;
pub mod ssh;
pub mod userland;

#[cfg(test)]
mod probe_answers;
