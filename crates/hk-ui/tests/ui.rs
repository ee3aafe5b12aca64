//! Test binary `ui` of hk-ui: the console drawn on ratatui's test backend and driven by
//! its keys, without a terminal, a simulation or the binary (those are the root's tmux and
//! demo tests). One binary for these files (Cargo.toml: `autotests = false`); each stays a
//! module under its own name, and the snapshots keep their names (`ui__FILE__NAME.snap`).

mod ui_check_screen;
mod ui_console;
mod ui_exec;
mod ui_fault;
mod ui_fit;
mod ui_gates;
mod ui_keymap_walk;
mod ui_live;
mod ui_looks;
mod ui_panes;
mod ui_pointer;
mod ui_prompt;
mod ui_screens;

mod ui_common;
