//! Test binary `session` of hk-session: the session's executors running a plan's steps on
//! real OpenSSH nodes and the real ansible-playbook, recorded before they start. One binary
//! (Cargo.toml: `autotests = false`); the lock, the gates and the headless driver against a
//! real kube-apiserver are the root's (that server is started by the simulation's harness,
//! which no library's tests may build).

mod exec_steps;

use hk_test_nodes as support;
