//! The look overlay's state: a next step that is a look (`x` on a verdict naming a pod,
//! node, lease or DaemonSet) opens it, every kind of look it lists is asked for at once,
//! and the answers fill it as they come.
//!
//! Owns: [`LookView`] (the looks taken so far and which is shown), [`LookOverlay`] (which
//! look, the scroll, what the operator picked) and the requests queued for the event loop
//! ([`LookRequest`]). Must not: import the app or the panes; take a look (the loop awaits
//! the [`hk_effects::observe::look::LookSource`] off the UI task).

use hk_effects::observe::look::LookResult;
use hk_effects::observe::summary::{Look, LookKind};

/// What the pane holds: the looks taken so far (one per kind) and which is shown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LookView {
    pub results: Vec<LookResult>,
    pub shown: usize,
    /// Still being taken.
    pub pending: Vec<LookKind>,
}

/// A look for the loop to take; `seq` names the overlay it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookRequest {
    pub seq: u64,
    pub look: Look,
    pub kind: LookKind,
}

/// The open look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookOverlay {
    pub seq: u64,
    pub look: Look,
    pub view: LookView,
    pub scroll: u16,
    /// The kind the operator picked (`e`/`g`/`d`), answered yet or not: it is shown as
    /// soon as it is in, and other answers coming in no longer move the view.
    pub picked: Option<LookKind>,
}

impl LookOverlay {
    /// The kind shown, if its answer is in.
    pub fn shown_kind(&self) -> Option<LookKind> {
        self.view.results.get(self.view.shown).map(|r| r.kind)
    }

    /// Show the answer of `kind` (from its top), if it is in.
    pub fn show(&mut self, kind: LookKind) -> bool {
        match self.view.results.iter().position(|r| r.kind == kind) {
            Some(i) => {
                self.view.shown = i;
                self.scroll = 0;
                true
            }
            None => false,
        }
    }
}

/// The kind of look a key picks: `e` events, `g` logs, `d` describe.
pub fn kind_of_key(c: char) -> Option<LookKind> {
    match c {
        'e' => Some(LookKind::Events),
        'g' => Some(LookKind::Logs),
        'd' => Some(LookKind::Describe),
        _ => None,
    }
}
