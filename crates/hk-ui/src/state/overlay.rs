//! The overlays over a screen and the modals they hold.
//!
//! Owns: [`Overlay`] (which one is open) and the state of each modal: a gate's answer and
//! note ([`GateModal`]), the resume decision ([`ResumeModal`]), the yes/no and reason
//! questions. Must not: import the app or the panes (the app changes these on keys; the
//! panes draw them).

use tui_textarea::TextArea;

use hk_engine::runbook::plan::Gate;

use super::field::{single_line, GateField};
use super::look::LookOverlay;
use super::picker::HostPicker;
use super::takeover::TakeoverModal;

/// An open gate, as a modal.
#[derive(Debug)]
pub struct GateModal {
    pub n: usize,
    pub gate: Gate,
    /// The typed answer (count of hosts, environment name).
    pub answer: TextArea<'static>,
    /// Optional free-text note journaled with the answer, typed or approval (or the reason
    /// of a rejection).
    pub note: TextArea<'static>,
    pub field: GateField,
    /// Why the last answer did not open the gate.
    pub error: Option<String>,
    /// Diff scroll (approve-diff).
    pub scroll: u16,
}

impl GateModal {
    pub fn new(n: usize, gate: Gate) -> Self {
        let typed = gate_is_typed(&gate);
        let mut m = GateModal {
            n,
            gate,
            answer: single_line(),
            note: single_line(),
            field: if typed {
                GateField::Answer
            } else {
                GateField::Note
            },
            error: None,
            scroll: 0,
        };
        m.show_cursor();
        m
    }

    /// Move the keyboard to `field`; only the field that has it shows a cursor, so it is
    /// clear where typing goes.
    pub fn focus(&mut self, field: GateField) {
        self.field = field;
        self.show_cursor();
    }

    fn show_cursor(&mut self) {
        let on = ratatui::style::Style::default().add_modifier(ratatui::style::Modifier::REVERSED);
        let off = ratatui::style::Style::default();
        let (a, n) = match self.field {
            GateField::Answer => (on, off),
            GateField::Note => (off, on),
        };
        self.answer.set_cursor_style(a);
        self.note.set_cursor_style(n);
    }
}

/// Gates opened by typed text rather than an approval.
pub fn gate_is_typed(g: &Gate) -> bool {
    matches!(g, Gate::TypedConfirm { .. } | Gate::ConfirmHosts { .. })
}

/// A yes/no question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirm {
    /// Quit while a run is active.
    Quit,
    /// Cancel the running step (Ctrl-C).
    CancelStep { n: usize },
}

/// A question answered with a reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasonFor {
    Abort,
    Skip { n: usize },
}

/// Which part of the resume decision the modal is at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeStage {
    /// What is known, and the choices (or, while its process runs: wait or stop).
    Choose,
    /// Re-run: type the environment's name.
    Rerun,
    /// Mark done: type the host (or environment) and a reason.
    MarkDone,
}

/// The resume decision over an interrupted step that changes systems, as a modal.
#[derive(Debug)]
pub struct ResumeModal {
    pub n: usize,
    pub stage: ResumeStage,
    pub typed: TextArea<'static>,
    pub reason: TextArea<'static>,
    /// `Answer`: the typed confirmation; `Note`: the reason.
    pub field: GateField,
    pub error: Option<String>,
}

impl ResumeModal {
    pub fn new(n: usize) -> Self {
        ResumeModal {
            n,
            stage: ResumeStage::Choose,
            typed: single_line(),
            reason: single_line(),
            field: GateField::Answer,
            error: None,
        }
    }
}

#[derive(Debug)]
pub enum Overlay {
    Help,
    /// The resume decision over an interrupted step that changes systems.
    Resume(Box<ResumeModal>),
    /// Taking over a stale run lock (its holder stopped renewing).
    Takeover(Box<TakeoverModal>),
    Gate(Box<GateModal>),
    Confirm(Confirm),
    Reason {
        why: ReasonFor,
        text: Box<TextArea<'static>>,
        error: Option<String>,
    },
    Command {
        text: Box<TextArea<'static>>,
        error: Option<String>,
    },
    /// Every status line of this session, whole and wrapped (`M`, `:messages`).
    Messages,
    /// The `/` filter being typed.
    Filter {
        text: Box<TextArea<'static>>,
    },
    /// A read-only look at the object a verdict names (events, logs, describe).
    Look(Box<LookOverlay>),
    /// Which host a runbook that runs on one host should be planned for.
    HostPicker(Box<HostPicker>),
}
