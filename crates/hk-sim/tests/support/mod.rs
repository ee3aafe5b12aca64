//! What the simulation's tests (and the root's, through `#[path]`) use beside the shared
//! crates: a real kube-apiserver over a real etcd started as `demo --apiserver` starts them
//! ([`apiserver`]), and simulated SSH nodes with their own keys ([`sim_nodes`]). Both build
//! on hk-sim, so they cannot live in a crate below it; the real OpenSSH nodes and the tool
//! lookups are hk-test-nodes' and hk-test-support's, re-exported here under the names the
//! tests use.

// Each binary that includes these uses a part of them.
#![allow(dead_code)]

pub use hk_test_nodes::*;

pub mod apiserver;
pub mod sim_nodes;
