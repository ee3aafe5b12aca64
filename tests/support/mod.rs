//! The root tests' harness: the real OpenSSH nodes and tool lookups (hk-test-nodes and
//! hk-test-support, re-exported under the names the tests use), the real kube-apiserver
//! and the simulated nodes (hk-sim's tests' own, included from there), and three servers'
//! worth of cluster objects on that API server ([`three_servers`]).
#![allow(dead_code)]

pub use hk_test_nodes::*;

#[path = "../../crates/hk-sim/tests/support/apiserver.rs"]
pub mod apiserver;
#[path = "../../crates/hk-sim/tests/support/sim_nodes.rs"]
pub mod sim_nodes;
pub mod three_servers;
