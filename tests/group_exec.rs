//! Test group `exec`: The executors against OpenSSH sshd on loopback and the real ansible-playbook.
//!
//! One binary for these files (Cargo.toml: `autotests = false`): one link instead of one
//! per file, and their tests share the binary's threads. Each file stays a module under
//! its own name (`exec::FILE::test`).

#[path = "etcd_real.rs"]
mod etcd_real;
#[path = "exec_ansible.rs"]
mod exec_ansible;
#[path = "exec_cli_trust.rs"]
mod exec_cli_trust;
#[path = "exec_ssh.rs"]
mod exec_ssh;
#[path = "exec_steps.rs"]
mod exec_steps;
#[path = "inject_terminal.rs"]
mod inject_terminal;
#[path = "inject_values.rs"]
mod inject_values;
#[path = "vpn_ssh.rs"]
mod vpn_ssh;

// The helpers the files share, once for the binary (each file `use crate::...`s them).
use hk_test_support::fs as fs_common;
mod support;
#[path = "../crates/hk-ui/tests/ui_common/mod.rs"]
mod ui_common;
