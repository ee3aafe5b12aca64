//! The run lock's calls as jobs a driver runs off its own task: the console's loop hands
//! them to `session::pump::LockPump`, so a cluster that does not answer never holds the
//! screen.
//!
//! Owns: [`LockJob`] (take, take over or release the lock for one run, bounded by
//! [`super::LOCK_CALL_TIMEOUT`]), its [`LockAnswer`], and what a run waits on it for
//! ([`LockPurpose`]). A lock taken for a run that is gone goes back
//! ([`LockAnswer::orphan_release`]).
//! Must not: journal or decide what happens next (the session does, with the answer).

use hk_effects::cluster::lock::Claimant;
use hk_engine::runbook::machine::RunLockNote;

use super::{bounded, RunLock, RunLockError, RunLocking};

/// What a run waits on the lock for: its start (at the time its run id was made from) or
/// its resume (the journal to resume, under its own run id). The end of a run waits on
/// nothing: its release is journaled when it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockPurpose {
    Start {
        at: hk_engine::runbook::machine::Timestamp,
    },
    Resume {
        path: std::path::PathBuf,
        run_id: String,
    },
    End,
}

/// What is asked of the cluster.
pub(super) enum LockAsk {
    Take(std::sync::Arc<RunLocking>),
    TakeOver {
        locking: std::sync::Arc<RunLocking>,
        typed: String,
        reason: String,
    },
    Release(RunLock),
}

/// One call on the cluster's run lock for run `tag`, to be run off the driver's task
/// ([`LockJob::run`]; the console's pump spawns it, `session::pump::LockPump::run`).
pub struct LockJob {
    pub tag: crate::exec::RunTag,
    pub purpose: LockPurpose,
    pub(super) me: Claimant,
    pub(super) ask: LockAsk,
}

impl std::fmt::Debug for LockJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ask = match &self.ask {
            LockAsk::Take(_) => "take",
            LockAsk::TakeOver { .. } => "take-over",
            LockAsk::Release(_) => "release",
        };
        f.debug_struct("LockJob")
            .field("tag", &self.tag)
            .field("purpose", &self.purpose)
            .field("env", &self.me.env)
            .field("ask", &ask)
            .finish()
    }
}

/// What the cluster said to a [`LockJob`].
pub enum LockOutcome {
    Taken(Result<(Option<RunLock>, RunLockNote), RunLockError>),
    Released(RunLockNote),
}

/// A [`LockJob`]'s answer, for the session of run `tag`
/// (`session::Session::lock_answered`).
pub struct LockAnswer {
    pub tag: crate::exec::RunTag,
    pub purpose: LockPurpose,
    pub env: String,
    pub outcome: LockOutcome,
}

impl std::fmt::Debug for LockAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let outcome = match &self.outcome {
            LockOutcome::Taken(Ok((_, note))) | LockOutcome::Released(note) => note.to_string(),
            LockOutcome::Taken(Err(e)) => e.to_string(),
        };
        f.debug_struct("LockAnswer")
            .field("tag", &self.tag)
            .field("purpose", &self.purpose)
            .field("env", &self.env)
            .field("outcome", &outcome)
            .finish()
    }
}

impl LockJob {
    /// The environment whose lock this is.
    pub fn env(&self) -> &str {
        &self.me.env
    }

    /// Whether this job gives a lock back (not one a run waits on).
    pub fn is_release(&self) -> bool {
        matches!(self.ask, LockAsk::Release(_))
    }

    /// Ask the cluster (each call bounded by [`LOCK_CALL_TIMEOUT`]).
    pub async fn run(self) -> LockAnswer {
        let outcome = match self.ask {
            LockAsk::Take(locking) => LockOutcome::Taken(locking.take(&self.me).await),
            LockAsk::TakeOver {
                locking,
                typed,
                reason,
            } => LockOutcome::Taken(
                locking
                    .take_over(&self.me, &typed, &reason)
                    .await
                    .map(|(l, n)| (Some(l), n)),
            ),
            LockAsk::Release(l) => LockOutcome::Released(match bounded(l.release()).await {
                Ok(note) => note,
                Err(e) => RunLockNote::Lost {
                    now_held_by: format!("unknown: {e}"),
                },
            }),
        };
        LockAnswer {
            tag: self.tag,
            purpose: self.purpose,
            env: self.me.env,
            outcome,
        }
    }
}

impl LockAnswer {
    /// A lock taken for a run that is gone (closed while it was asked for) goes back:
    /// the job that releases it.
    pub fn orphan_release(self) -> Option<LockJob> {
        match self.outcome {
            LockOutcome::Taken(Ok((Some(held), _))) => {
                let me = Claimant::this_console(&held.run_id, "", &self.env);
                Some(LockJob {
                    tag: self.tag,
                    purpose: LockPurpose::End,
                    me,
                    ask: LockAsk::Release(held),
                })
            }
            _ => None,
        }
    }
}
