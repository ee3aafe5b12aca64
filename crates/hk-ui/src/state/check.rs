//! The Check screen's state: the static parity check's last result as the console keeps
//! it.
//!
//! Owns: [`CheckView`]. Must not: import the app or the panes; run the check (the
//! console's checker does).

use hk_engine::checks::parity::Finding;

/// A parity check's result as the console keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckView {
    /// None: not run yet; Err: could not run (the reason).
    pub findings: Option<Result<Vec<Finding>, String>>,
    /// `kustomize v5.8.1` / `builtin engine` line of the check.
    pub engine_line: Option<String>,
    /// `HH:MM:SS` it ran at.
    pub ran_at: Option<String>,
}
