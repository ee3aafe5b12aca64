//! Test group `ui`: The console drawn into a test backend: screens, panes, keys, prompts, hostile journals.
//!
//! One binary for these files (Cargo.toml: `autotests = false`): one link instead of one
//! per file, and their tests share the binary's threads. Each file stays a module under
//! its own name (`ui::FILE::test`).

#[path = "hostile_journal.rs"]
mod hostile_journal;
#[path = "ui_check_screen.rs"]
mod ui_check_screen;
#[path = "ui_console.rs"]
mod ui_console;
#[path = "ui_exec.rs"]
mod ui_exec;
#[path = "ui_fault.rs"]
mod ui_fault;
#[path = "ui_fit.rs"]
mod ui_fit;
#[path = "ui_gates.rs"]
mod ui_gates;
#[path = "ui_incident.rs"]
mod ui_incident;
#[path = "ui_keymap_walk.rs"]
mod ui_keymap_walk;
#[path = "ui_live.rs"]
mod ui_live;
#[path = "ui_looks.rs"]
mod ui_looks;
#[path = "ui_panes.rs"]
mod ui_panes;
#[path = "ui_pointer.rs"]
mod ui_pointer;
#[path = "ui_prompt.rs"]
mod ui_prompt;
#[path = "ui_screens.rs"]
mod ui_screens;

// The helpers the files share, once for the binary (each file `use crate::...`s them).
mod machine_common;
mod runbooks_common;
mod ui_common;
