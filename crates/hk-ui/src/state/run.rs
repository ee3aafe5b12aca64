//! The run open in the run view.
//!
//! Owns: [`ActiveRun`], the open run's session and what the screen keeps of it (the
//! output ring, where each step's output began, the step list's selection). Must not:
//! import the app or the panes; change the run (only its session does).

use std::collections::BTreeMap;

use hk_session::{RunCore, Session};

use crate::output::OutputBuffer;

/// The run open in the run view: its session, and what the screen keeps of it.
#[derive(Debug)]
pub struct ActiveRun {
    /// The run itself, driven by the session (read through `Deref`: `a.run`, `a.journal`).
    pub session: Session,
    pub output: OutputBuffer,
    /// Absolute output line (dropped + len) at which each step's output began.
    pub step_output_start: BTreeMap<usize, u64>,
    /// The step list's selection (index into the plan).
    pub selected: usize,
}

/// The screen reads the run through its session; only the session changes it.
impl std::ops::Deref for ActiveRun {
    type Target = RunCore;
    fn deref(&self) -> &RunCore {
        &self.session
    }
}
