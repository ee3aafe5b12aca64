//! Test binary `exec` of hk-effects: the effects against real programs and no simulation:
//! SSH (russh) to real OpenSSH nodes, ansible-playbook supervised on them, the VPN
//! gateway's looks through SSH, and etcd's probes against a real three-member etcd. One
//! binary for these files (Cargo.toml: `autotests = false`); each stays a module under its
//! own name. The real nodes are hk-test-nodes' (`support` here, as in the root's tests).

mod etcd_real;
mod exec_ansible;
mod exec_ssh;
mod vpn_ssh;

use hk_test_nodes as support;
