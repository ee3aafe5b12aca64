//! The kube-backed step executors' work: `kube-wait` ([`wait`]) and `flux-reconcile`
//! ([`flux`], with the gate policy's read-only preview of a reconcile).
//!
//! Owns: what a step does against the API server, next to the other executors (SSH,
//! ansible). The client, kubeconfig selection, conversions and the live watchers stay in
//! `crate::cluster`, which these build on.
//! Must not: know the run or the terminal (`session::executors` adapts them to a run).

pub mod flux;
pub mod wait;
