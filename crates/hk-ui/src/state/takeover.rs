//! Taking over a stale run lock: the modal's state. It holds who held the lock (login@host,
//! their run and runbook), since when, when it was last renewed and how long ago, and the
//! two answers a take-over needs: the environment's name typed, and a reason (journaled in
//! both runs). The modal judges the answers itself ([`TakeoverModal::answer`]) so a wrong
//! one never leaves it; the session takes the lock over (`cluster::lock::take_over` checks
//! the same again).
//! Must not: import the app or the panes (`panes::takeover` draws it); reach the cluster or
//! journal (the session does).
use crossterm::event::{KeyCode, KeyEvent};
use tui_textarea::TextArea;

use hk_effects::cluster::lock::LockRecord;

use super::field::{single_line, GateField};

/// Age as `5s`, `2m05s`, `1h03m`.
fn age(ms: u64) -> String {
    hk_engine::time::span_ms(ms, hk_engine::time::Style::Compact)
}

/// The take-over prompt over a stale lock of environment `env`.
#[derive(Debug)]
pub struct TakeoverModal {
    pub env: String,
    pub record: LockRecord,
    /// How long ago the holder last renewed (or took it, if it never renewed).
    pub age_ms: u64,
    pub typed: TextArea<'static>,
    pub reason: TextArea<'static>,
    pub field: GateField,
    pub error: Option<String>,
}

/// What a key did to the modal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakeoverKey {
    /// Still asking (typed a character, moved between the fields, or a refused answer).
    Asking,
    /// Esc: nothing is taken over.
    Cancelled,
    /// Both answers given and right: take it over with these.
    TakeOver { typed: String, reason: String },
}

/// Why the answers do not take the lock over, in the modal's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TakeoverRefused {
    #[error("type the environment's name `{env}` to take over its run lock (got `{typed}`)")]
    WrongName { env: String, typed: String },
    #[error("say why the lock is taken over: the reason is journaled in both runs")]
    NoReason,
}

impl TakeoverModal {
    pub fn new(env: &str, record: LockRecord, age_ms: u64) -> Self {
        TakeoverModal {
            env: env.to_string(),
            record,
            age_ms,
            typed: single_line(),
            reason: single_line(),
            field: GateField::Answer,
            error: None,
        }
    }

    /// The two answers, judged: the environment's name exactly (trimmed), and a reason
    /// that says something. Err: what is wrong, in the modal's words.
    pub fn answer(&self) -> Result<(String, String), TakeoverRefused> {
        let typed = self.typed.lines().join("").trim().to_string();
        let reason = self.reason.lines().join(" ").trim().to_string();
        if typed != self.env {
            return Err(TakeoverRefused::WrongName {
                env: self.env.clone(),
                typed,
            });
        }
        if reason.is_empty() {
            return Err(TakeoverRefused::NoReason);
        }
        Ok((typed, reason))
    }

    /// One key: tab moves between the fields, enter submits (a wrong answer stays here,
    /// saying why), esc cancels, anything else is typed into the field in focus.
    pub fn key(&mut self, key: KeyEvent) -> TakeoverKey {
        match key.code {
            KeyCode::Esc => TakeoverKey::Cancelled,
            KeyCode::Tab | KeyCode::BackTab => {
                self.field = match self.field {
                    GateField::Answer => GateField::Note,
                    GateField::Note => GateField::Answer,
                };
                TakeoverKey::Asking
            }
            KeyCode::Enter => match self.answer() {
                Ok((typed, reason)) => TakeoverKey::TakeOver { typed, reason },
                Err(why) => {
                    self.error = Some(why.to_string());
                    TakeoverKey::Asking
                }
            },
            _ => {
                match self.field {
                    GateField::Answer => self.typed.input(key),
                    GateField::Note => self.reason.input(key),
                };
                TakeoverKey::Asking
            }
        }
    }

    /// What the modal says about the lock, line by line (also what a test reads).
    pub fn facts(&self) -> Vec<String> {
        let r = &self.record;
        let mut out = vec![format!(
            "The run lock of `{}` is STALE: its holder stopped renewing it.",
            self.env
        )];
        out.push(format!("holder: {}", r.holder));
        if let Some(id) = &r.run_id {
            let rb = r.runbook.as_deref().unwrap_or("?");
            out.push(format!("run: {id} ({rb})"));
        }
        if let Some(t) = r.since {
            out.push(format!("held since: {t}"));
        }
        match r.renewed {
            Some(t) => out.push(format!(
                "last renewed: {t} ({} ago{})",
                age(self.age_ms),
                r.duration_s
                    .map(|d| format!(", its lease lasts {d} s"))
                    .unwrap_or_default()
            )),
            None => out.push(format!("never renewed: taken {} ago", age(self.age_ms))),
        }
        out.push(
            "Taking it over ends that console's claim: if it still runs, two operators work \
             on one environment."
                .into(),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyModifiers;
    use hk_engine::runbook::machine::Timestamp;

    fn k(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    fn stale() -> TakeoverModal {
        TakeoverModal::new(
            "prod",
            LockRecord {
                holder: "ann@console-a".into(),
                run_id: Some("20260907T101500000Z-etcd-io-priority-prod".into()),
                runbook: Some("etcd-io-priority".into()),
                env: Some("prod".into()),
                since: Some(Timestamp(1_788_776_100_000)),
                renewed: Some(Timestamp(1_788_776_160_000)),
                duration_s: Some(60),
                clock_note: None,
            },
            125_000,
        )
    }

    fn typed(m: &mut TakeoverModal, s: &str) {
        for c in s.chars() {
            assert_eq!(m.key(k(KeyCode::Char(c))), TakeoverKey::Asking);
        }
    }

    #[test]
    fn shows_the_holder_its_run_and_its_last_renewal() {
        let f = stale().facts();
        assert_eq!(f[1], "holder: ann@console-a");
        assert_eq!(
            f[2],
            "run: 20260907T101500000Z-etcd-io-priority-prod (etcd-io-priority)"
        );
        assert_eq!(f[3], "held since: 2026-09-07T10:15:00.000Z");
        assert_eq!(
            f[4],
            "last renewed: 2026-09-07T10:16:00.000Z (2m05s ago, its lease lasts 60 s)"
        );
    }

    #[test]
    fn takes_over_only_with_the_environment_typed_and_a_reason() {
        let mut m = stale();
        // Nothing typed: refused, and says what to type.
        assert_eq!(m.key(k(KeyCode::Enter)), TakeoverKey::Asking);
        assert_eq!(
            m.error.as_deref(),
            Some("type the environment's name `prod` to take over its run lock (got ``)")
        );
        typed(&mut m, "dev");
        assert_eq!(m.key(k(KeyCode::Enter)), TakeoverKey::Asking);
        assert!(m
            .error
            .as_deref()
            .is_some_and(|e| e.contains("(got `dev`)")));
        for _ in 0..3 {
            m.key(k(KeyCode::Backspace));
        }
        typed(&mut m, "prod");
        // The name without a reason: refused.
        assert_eq!(m.key(k(KeyCode::Enter)), TakeoverKey::Asking);
        assert!(m.error.as_deref().is_some_and(|e| e.contains("reason")));
        m.key(k(KeyCode::Tab));
        typed(&mut m, "   ");
        assert_eq!(m.key(k(KeyCode::Enter)), TakeoverKey::Asking);
        typed(&mut m, "ann's laptop died mid-run");
        assert_eq!(
            m.key(k(KeyCode::Enter)),
            TakeoverKey::TakeOver {
                typed: "prod".into(),
                reason: "ann's laptop died mid-run".into()
            }
        );
        assert_eq!(m.key(k(KeyCode::Esc)), TakeoverKey::Cancelled);
    }
}
