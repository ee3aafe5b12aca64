//! The etcd steps the planner puts before the first change of a server (issue 39): the
//! snapshot (`etcd-snapshot changed=...`, through `hk_effects::etcd_snapshot`), the
//! read-only look (`etcd-leader-preview HOST`: does it lead, and to whom would leadership
//! move) and the move (`etcd-leader-away HOST`), both through `hk_effects::etcd_leader`.
//!
//! Owns: the request/reply plumbing, progress lines as step output, the verdict the Verify
//! reads back, prompt cancels.
//! Must not: move anything without the mutating executor and the step's journaled start
//! (the read-only one has no way to), or pass a step whose look could not decide.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::exec::{ExecReply, ExecRequest, StepExecutor};
use hk_effects::etcd_leader::{self, MoveError, Moved};
use hk_effects::etcd_snapshot::{self, SaveError};
use hk_effects::exec::{Executor, Mutating};
use hk_effects::observe::etcd::EtcdSource;
use hk_engine::guard::leader::LeaderPlan;
use hk_engine::runbook::machine::Input;
use hk_engine::runbook::plan::{LeaderAway, PlannedStep, SnapshotFirst, StepKind};

use super::Key;

#[derive(Debug, Default)]
struct State {
    cancels: HashMap<Key, CancellationToken>,
    /// Each attempt's verdict, for the Verify that follows: met (with its line) or not.
    verdicts: HashMap<Key, Result<String, String>>,
}

/// etcd-leader steps (read-only: the look; built with the mutating executor: the move) or
/// the etcd-snapshot step (read-only: the snapshot API is a read).
#[derive(Clone)]
pub struct EtcdExecutor {
    kind: StepKind,
    source: Arc<EtcdSource>,
    exec: Option<Arc<Executor<Mutating>>>,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for EtcdExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdExecutor")
            .field("kind", &self.kind)
            .field("mutates", &self.exec.is_some())
            .finish()
    }
}

impl EtcdExecutor {
    /// The look only: whether the server leads and where leadership would go.
    pub fn read_only(source: Arc<EtcdSource>) -> Self {
        EtcdExecutor {
            kind: StepKind::EtcdLeader,
            source,
            exec: None,
            state: Arc::default(),
        }
    }

    /// The move too, through `exec`.
    pub fn mutating(source: Arc<EtcdSource>, exec: Arc<Executor<Mutating>>) -> Self {
        EtcdExecutor {
            kind: StepKind::EtcdLeader,
            source,
            exec: Some(exec),
            state: Arc::default(),
        }
    }

    /// The snapshot before the first server (read-only for every system).
    pub fn snapshot(source: Arc<EtcdSource>) -> Self {
        EtcdExecutor {
            kind: StepKind::EtcdSnapshot,
            source,
            exec: None,
            state: Arc::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn run(
        &self,
        step: &PlannedStep,
        attempt: u32,
        env: &str,
        start: &hk_engine::journal::StartRecorded,
        cancel: &CancellationToken,
        progress: &(dyn Fn(String) + Send + Sync),
    ) -> (Input, Option<Result<String, String>>) {
        let n = step.n;
        let fail = |why: String| {
            (
                Input::StepFinished {
                    n,
                    attempt,
                    exit_code: None,
                    error: Some(why),
                },
                None,
            )
        };
        let text = step
            .expect
            .as_ref()
            .and_then(|e| e.condition.clone())
            .unwrap_or_default();
        if self.kind == StepKind::EtcdSnapshot {
            let first = match SnapshotFirst::parse(&text) {
                Some(Ok(f)) => f,
                Some(Err(e)) => return fail(format!("{e}; the step was not started")),
                None => {
                    return fail(format!(
                        "`{text}` is no etcd-snapshot condition; the step was not started"
                    ))
                }
            };
            let journal = start.journal().to_path_buf();
            let path_for =
                move |host: &str| hk_engine::journal::snapshot_path(&journal, host, attempt);
            return match etcd_snapshot::save(
                &self.source,
                env,
                &first.changed,
                &path_for,
                cancel,
                progress,
            )
            .await
            {
                Ok(saved) => {
                    let line = saved.line();
                    progress(line.clone());
                    (
                        Input::StepFinished {
                            n,
                            attempt,
                            exit_code: Some(0),
                            error: None,
                        },
                        Some(Ok(line)),
                    )
                }
                Err(SaveError::Cancelled(reason)) => {
                    (Input::Cancelled { n, attempt, reason }, None)
                }
                Err(SaveError::Failed(why)) => fail(format!("{env}: {why}")),
            };
        }
        let away = match LeaderAway::parse(&text) {
            Some(Ok(a)) => a,
            Some(Err(e)) => return fail(format!("{e}; the step was not started")),
            None => {
                return fail(format!(
                    "`{text}` is no etcd-leader condition; the step was not started"
                ))
            }
        };
        if step.host.as_deref() != Some(away.host.as_str()) {
            return fail(format!(
                "the step is bound to {:?} but its condition names {}; the step was not started",
                step.host, away.host
            ));
        }
        let done = |verdict: Result<String, String>| {
            (
                Input::StepFinished {
                    n,
                    attempt,
                    exit_code: Some(0),
                    error: None,
                },
                Some(verdict),
            )
        };
        if away.preview {
            return match etcd_leader::preview(&self.source, env, &away.host, &away.later, cancel)
                .await
            {
                _ if cancel.is_cancelled() => (
                    Input::Cancelled {
                        n,
                        attempt,
                        reason: "stopped at the operator's request".into(),
                    },
                    None,
                ),
                Ok(plan) => {
                    progress(plan.line());
                    match plan {
                        LeaderPlan::Cannot { why } => done(Err(why)),
                        other => done(Ok(other.line())),
                    }
                }
                Err(why) => fail(format!("{env}: {why}")),
            };
        }
        let Some(exec) = &self.exec else {
            return fail("the read-only executor cannot move etcd's leadership".into());
        };
        let deadline = Duration::from_secs(
            step.expect
                .as_ref()
                .and_then(|e| e.timeout_s)
                .unwrap_or(120),
        );
        match etcd_leader::move_away(
            exec,
            &self.source,
            env,
            &away.host,
            &away.later,
            (n, &step.id),
            start,
            deadline,
            cancel,
            progress,
        )
        .await
        {
            Ok(Moved::NothingToMove(line)) | Ok(Moved::Moved(line)) => {
                progress(line.clone());
                done(Ok(line))
            }
            Err(MoveError::Cancelled(reason)) => (Input::Cancelled { n, attempt, reason }, None),
            Err(MoveError::Failed(why)) => fail(format!("{env}: {why}")),
        }
    }
}

impl StepExecutor for EtcdExecutor {
    fn kind(&self) -> StepKind {
        self.kind
    }

    fn mutates(&self) -> bool {
        self.exec.is_some()
    }

    fn handle(&self, req: ExecRequest, replies: mpsc::Sender<ExecReply>) {
        match req {
            ExecRequest::Execute {
                tag,
                step,
                attempt,
                env,
                start,
                ..
            } => {
                let key = (tag, step.n, attempt);
                let cancel = CancellationToken::new();
                self.lock().cancels.insert(key, cancel.clone());
                let me = self.clone();
                tokio::spawn(async move {
                    let (line_tx, forward) =
                        super::OutputForward::start(&replies, (tag, step.n, attempt), |l| l);
                    let progress = move |line: String| {
                        let _ = line_tx.send(line);
                    };
                    let (input, verdict) = me
                        .run(&step, attempt, &env, &start, &cancel, &progress)
                        .await;
                    drop(progress);
                    forward.finish().await;
                    {
                        let mut st = me.lock();
                        st.cancels.remove(&key);
                        if let Some(v) = verdict {
                            st.verdicts.insert(key, v);
                        }
                    }
                    let _ = replies.send(ExecReply::Outcome { tag, input }).await;
                });
            }
            ExecRequest::Verify { tag, step, attempt } => {
                let key = (tag, step.n, attempt);
                let input = match self.lock().verdicts.remove(&key) {
                    Some(Ok(detail)) => Input::VerifyResult {
                        n: step.n,
                        attempt,
                        ok: true,
                        detail,
                    },
                    Some(Err(detail)) => Input::VerifyResult {
                        n: step.n,
                        attempt,
                        ok: false,
                        detail,
                    },
                    None => Input::VerifyResult {
                        n: step.n,
                        attempt,
                        ok: false,
                        detail: format!(
                            "nothing to verify an {} step against (its verdict was not kept)",
                            self.kind.as_str()
                        ),
                    },
                };
                tokio::spawn(async move {
                    let _ = replies.send(ExecReply::Outcome { tag, input }).await;
                });
            }
            ExecRequest::Cancel { tag, step, attempt } => {
                if let Some(t) = self.lock().cancels.get(&(tag, step.n, attempt)) {
                    t.cancel();
                }
            }
        }
    }
}
