//! The look overlay's keys: a next step that is a look (`x` on a verdict naming a pod,
//! node, lease or DaemonSet) opens it, every kind of look it lists is asked for at once,
//! and the answers fill it as they come.
//!
//! Owns: the app's side of it ([`App::open_look`], [`App::handle_look`], the overlay's
//! keys); its state ([`LookOverlay`], the queued [`LookRequest`]s) is `state::look`'s.
//! Must not: take a look (the loop awaits the [`hk_effects::observe::look::LookSource`]
//! off the UI task) or write anything.

use crossterm::event::{KeyCode, KeyEvent};

use hk_effects::observe::look::LookResult;
use hk_effects::observe::summary::{Look, LookKind};

use super::{App, Control, Overlay};
use crate::state::look::{kind_of_key, LookOverlay, LookRequest, LookView};

impl App {
    /// The next step of the open run's environment, if its verdicts ask for one.
    pub fn run_env_next(&self) -> Option<hk_effects::observe::summary::NextStep> {
        let env = self.active.as_ref()?.run.plan().env.clone();
        self.summary().env(&env)?.first_next().cloned()
    }

    /// Open the look at `look`'s object and ask for every kind it lists. Without a way to
    /// look (dry run, the bundled sample) the status line says so: nothing pretends.
    pub fn open_look(&mut self, look: Look) {
        let what = format!("{} {}", look.object.kind.to_lowercase(), look.object.name);
        if self.looker.is_none() {
            self.status = Some(format!(
                "{}: look at {what} (events, logs, describe): no cluster is reachable from \
                 this console",
                look.env
            ));
            return;
        }
        self.look_seq += 1;
        let seq = self.look_seq;
        for kind in &look.kinds {
            self.look_outbox.push_back(LookRequest {
                seq,
                look: look.clone(),
                kind: *kind,
            });
        }
        self.status = Some(format!("{}: looking at {what} (read-only)", look.env));
        self.overlay = Some(Overlay::Look(Box::new(LookOverlay {
            seq,
            view: LookView {
                results: Vec::new(),
                shown: 0,
                pending: look.kinds.clone(),
            },
            look,
            scroll: 0,
            picked: None,
        })));
    }

    /// A look's answer: into the open overlay it was asked for, in the order the look
    /// lists its kinds; the first kind answered is shown until the operator picks another.
    pub fn handle_look(&mut self, seq: u64, result: LookResult) {
        let Some(Overlay::Look(o)) = self.overlay.as_mut() else {
            return;
        };
        if o.seq != seq {
            return;
        }
        let shown = o.shown_kind();
        o.view.pending.retain(|k| *k != result.kind);
        o.view.results.retain(|r| r.kind != result.kind);
        o.view.results.push(result);
        let order = o.look.kinds.clone();
        let rank = |k: LookKind| order.iter().position(|x| *x == k).unwrap_or(usize::MAX);
        o.view.results.sort_by_key(|r| rank(r.kind));
        // Keep what the operator picked; until then the look's first kind, once it is in
        // (before that, the best answer there is).
        let first = order.first().copied().unwrap_or(LookKind::Events);
        let want = o.picked.unwrap_or(first);
        let scroll = o.scroll;
        if !o.show(want) {
            // Not in yet: keep what is shown (or the first answer there is).
            let keep = shown.and_then(|k| o.view.results.iter().position(|r| r.kind == k));
            o.view.shown = keep.unwrap_or(0);
        }
        if shown == o.shown_kind() {
            o.scroll = scroll;
        }
    }

    pub(super) fn look_key(&mut self, mut o: Box<LookOverlay>, key: KeyEvent) -> Control {
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') => return Control::Continue,
            KeyCode::Char(c) if kind_of_key(c).is_some() => {
                if let Some(k) = kind_of_key(c) {
                    if o.look.kinds.contains(&k) {
                        o.picked = Some(k);
                    }
                    if !o.show(k) {
                        self.status = Some(if o.look.kinds.contains(&k) {
                            "that look has not answered yet: it shows when it does".into()
                        } else {
                            format!("no such look for {}", o.look.object.kind.to_lowercase())
                        });
                    }
                }
            }
            KeyCode::Char('r') => {
                // Look again (events and logs move on during an incident).
                self.open_look(o.look.clone());
                return Control::Continue;
            }
            KeyCode::Char('j') | KeyCode::Down => o.scroll = o.scroll.saturating_add(1),
            KeyCode::Char('k') | KeyCode::Up => o.scroll = o.scroll.saturating_sub(1),
            KeyCode::PageDown | KeyCode::Char(' ') => o.scroll = o.scroll.saturating_add(10),
            KeyCode::PageUp => o.scroll = o.scroll.saturating_sub(10),
            KeyCode::Home => o.scroll = 0,
            _ => {}
        }
        self.overlay = Some(Overlay::Look(o));
        Control::Continue
    }
}
