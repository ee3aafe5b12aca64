//! Test group `ui`: The console drawn into a test backend: screens, panes, keys, prompts, hostile journals.
//!
//! One binary for these files (Cargo.toml: `autotests = false`): one link instead of one
//! per file, and their tests share the binary's threads. Each file stays a module under
//! its own name (`ui::FILE::test`).

#[path = "hostile_journal.rs"]
mod hostile_journal;
#[path = "ui_incident.rs"]
mod ui_incident;

// The helpers the files share, once for the binary (each file `use crate::...`s them).
use hk_test_support::machine as machine_common;
// The console tests' helpers are hk-ui's (its tests/ui_common); these two files share them.
#[path = "../crates/hk-ui/tests/ui_common/mod.rs"]
mod ui_common;
