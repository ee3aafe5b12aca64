//! Test group `guard`: The run guards and records: the lock, health gates, plans, resume, the change record.
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
#[path = "runs_record.rs"]
mod runs_record;
#[path = "runs_reopen.rs"]
mod runs_reopen;

// The helpers the files share, once for the binary (each file `use crate::...`s them).
mod demo_common;
use hk_test_support::machine as machine_common;
mod support;
#[path = "../crates/hk-ui/tests/ui_common/mod.rs"]
mod ui_common;
