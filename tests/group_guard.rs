//! Test group `guard`: the run guards and records (the lock, health gates, the change
//! record) and the kube client, watchers and steps, against a real kube-apiserver and etcd
//! (started by the simulation's harness, which only the root's tests and hk-sim's build).
//!
//! One binary for these files (Cargo.toml: `autotests = false`): one link instead of one
//! per file, and their tests share the binary's threads. Each file stays a module under
//! its own name (`guard::FILE::test`).

#[path = "guard_health.rs"]
mod guard_health;
#[path = "guard_lock.rs"]
mod guard_lock;
#[path = "guard_lock_offtask.rs"]
mod guard_lock_offtask;
#[path = "guard_run_lock.rs"]
mod guard_run_lock;
#[path = "journal_durable.rs"]
mod journal_durable;
#[path = "kube_apiserver.rs"]
mod kube_apiserver;
#[path = "kube_flux_preview.rs"]
mod kube_flux_preview;
#[path = "kube_observe.rs"]
mod kube_observe;
#[path = "kube_wait.rs"]
mod kube_wait;
#[path = "kube_watch.rs"]
mod kube_watch;
#[path = "runs_record.rs"]
mod runs_record;
#[path = "runs_reopen.rs"]
mod runs_reopen;

// The helpers the files share, once for the binary (each file `use crate::...`s them).
#[path = "../crates/hk-sim/tests/demo_common/mod.rs"]
mod demo_common;
use hk_test_support::machine as machine_common;
mod support;
#[path = "../crates/hk-ui/tests/ui_common/mod.rs"]
mod ui_common;
