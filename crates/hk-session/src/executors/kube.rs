//! The kube-backed steps: `kube-wait` (read-only, also in observe mode) through
//! `exec::kube::wait`, `flux-reconcile` (mutating, operate mode only) through
//! `exec::kube::flux`, each against its environment's cluster ([`Clusters`]).
//!
//! Owns: the request/reply plumbing for both kinds, progress lines as step output, the
//! verdict a kube-wait's (or a reconcile preview's) Verify reads back, and prompt cancels.
//! Must not: guess the cluster: a step whose host or kubeconfig says another environment
//! than the run's fails unstarted, saying which.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::exec::{ExecReply, ExecRequest, RunTag, StepExecutor};
use hk_effects::exec::kube::flux::{self, FluxObject};
use hk_effects::exec::kube::wait::{self, Condition, WaitEnd, WaitOptions};
use hk_engine::journal::StartRecorded;
use hk_engine::runbook::machine::Input;
use hk_engine::runbook::plan::{PlannedStep, StepKind};

use super::clusters::{Clusters, NoCluster};

/// Why a kube-backed step could not start (the step then fails with this, unstarted).
#[derive(Debug, thiserror::Error)]
pub enum NotStarted {
    #[error(transparent)]
    Cluster(#[from] NoCluster),
    /// The step's Flux object, as `exec::kube::flux` could not read it.
    #[error(transparent)]
    FluxObject(#[from] hk_effects::exec::kube::flux::FluxObjectError),
    /// The step's wait condition, as `exec::kube::wait` could not read it.
    #[error(transparent)]
    Condition(#[from] hk_effects::exec::kube::wait::ConditionError),
    #[error("a kube-wait step without a condition")]
    NoCondition,
    #[error("a kube-wait step without timeout_s")]
    NoTimeout,
    #[error("step {n} belongs to environment `{own}` but the run is for `{run_env}`")]
    OtherEnvironment {
        n: usize,
        own: String,
        run_env: String,
    },
}
use super::Key;

#[derive(Debug, Default)]
struct KubeState {
    cancels: HashMap<Key, CancellationToken>,
    /// kube-wait verdicts, kept for the Verify that follows.
    ends: HashMap<Key, WaitEnd>,
}

/// What a step's work runs under: its cancel token, and the proof that its start is
/// journaled (a Flux write takes it).
struct Go {
    cancel: CancellationToken,
    start: StartRecorded,
}

/// `kube-wait` (read-only) or `flux-reconcile` (mutating) against the step's environment.
/// Progress lines stream as step output; a kube-wait's verdict comes back on Verify (met,
/// failed, timed out), a reconcile's as the step's outcome; a Cancel stops either promptly.
#[derive(Debug, Clone)]
pub struct KubeExecutor {
    kind: StepKind,
    clusters: Arc<Clusters>,
    /// None: the environment's `WatchSettings::stuck_after`, as the rollout pane uses.
    stuck_after: Option<Duration>,
    /// The demo's time compression: the health gate's stable_for and soak are divided by
    /// it (1 against a real cluster).
    time_scale: u32,
    flux_timeout: Duration,
    /// Where the health gate reads etcd's members (issue 39); None: the API's view only.
    etcd: Option<Arc<dyn hk_effects::cluster::health_probe::EtcdMembers>>,
    state: Arc<Mutex<KubeState>>,
}

impl KubeExecutor {
    pub fn kube_wait(clusters: Arc<Clusters>) -> Self {
        Self::new(StepKind::KubeWait, clusters)
    }

    pub fn flux_reconcile(clusters: Arc<Clusters>) -> Self {
        Self::new(StepKind::FluxReconcile, clusters)
    }

    fn new(kind: StepKind, clusters: Arc<Clusters>) -> Self {
        KubeExecutor {
            kind,
            clusters,
            stuck_after: None,
            time_scale: 1,
            flux_timeout: flux::DEFAULT_TIMEOUT,
            etcd: None,
            state: Arc::default(),
        }
    }

    /// How long an updated pod may stay unready before a rollout wait fails.
    pub fn with_stuck_after(mut self, d: Duration) -> Self {
        self.stuck_after = Some(d);
        self
    }

    /// Run the health gate's waits `scale` times faster (the demo's scenario time scale).
    pub fn with_time_scale(mut self, scale: u32) -> Self {
        self.time_scale = scale.max(1);
        self
    }

    /// Read etcd's members in the health gate between hosts through `source`.
    pub fn with_etcd(
        mut self,
        source: Arc<dyn hk_effects::cluster::health_probe::EtcdMembers>,
    ) -> Self {
        self.etcd = Some(source);
        self
    }

    /// How long a reconcile may take.
    pub fn with_flux_timeout(mut self, d: Duration) -> Self {
        self.flux_timeout = d;
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, KubeState> {
        // Plain inserts and removes: a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn execute(
        self,
        tag: RunTag,
        step: PlannedStep,
        attempt: u32,
        env: String,
        go: Go,
        replies: mpsc::Sender<ExecReply>,
    ) {
        let (n, key) = (step.n, (tag, step.n, attempt));
        let input = self.run(tag, &step, attempt, &env, &go, &replies).await;
        self.lock().cancels.remove(&key);
        let _ = replies
            .send(ExecReply::Outcome {
                tag,
                input: input.unwrap_or_else(|why| Input::StepFinished {
                    n,
                    attempt,
                    exit_code: None,
                    error: Some(format!("{why}; the step was not started")),
                }),
            })
            .await;
    }

    /// The step's final input, or (Err) why it could not start.
    async fn run(
        &self,
        tag: RunTag,
        step: &PlannedStep,
        attempt: u32,
        run_env: &str,
        go: &Go,
        replies: &mpsc::Sender<ExecReply>,
    ) -> Result<Input, NotStarted> {
        let (n, cancel, start) = (step.n, &go.cancel, &go.start);
        enum Work {
            Wait(Condition, Duration),
            Reconcile(FluxObject),
        }
        let work = match self.kind {
            StepKind::FluxReconcile => {
                let argv = step.command.as_deref().unwrap_or_default();
                Work::Reconcile(FluxObject::from_argv(argv)?)
            }
            _ => {
                let expect = step.expect.clone().unwrap_or_default();
                let text = expect.condition.ok_or(NotStarted::NoCondition)?;
                // The gate policy's read-only look before a reconcile (the planner writes it).
                let words: Vec<&str> = text.split_whitespace().collect();
                if let [hk_engine::runbook::plan::FLUX_PREVIEW, object, ns] = words.as_slice() {
                    return self
                        .preview(
                            tag,
                            step,
                            attempt,
                            run_env,
                            FluxObject::parse(object, Some(ns))?,
                            cancel,
                            replies,
                        )
                        .await;
                }
                let timeout = expect.timeout_s.ok_or(NotStarted::NoTimeout)?;
                Work::Wait(Condition::parse(&text)?, Duration::from_secs(timeout))
            }
        };
        // The run's environment; a step whose own host or kubeconfig says otherwise is
        // refused rather than sent to either cluster.
        let env = match self.clusters.env_of(step) {
            Ok(own) if own != run_env => {
                return Err(NotStarted::OtherEnvironment {
                    n,
                    own,
                    run_env: run_env.to_string(),
                })
            }
            _ => run_env.to_string(),
        };
        let (client, topology, settings) = self.clusters.connect(&env).await?;
        if cancel.is_cancelled() {
            return Ok(Input::Cancelled {
                n,
                attempt,
                reason: "stopped at the operator's request before it started".into(),
            });
        }
        // Progress lines go out in order, all of them before the outcome.
        let (line_tx, forward) = super::OutputForward::start(replies, (tag, n, attempt), |l| l);
        let progress = move |line: String| {
            let _ = line_tx.send(line);
        };
        let input = match work {
            Work::Wait(condition, timeout) => {
                let mut opts = WaitOptions::new(timeout, &settings);
                if let Some(d) = self.stuck_after {
                    opts.stuck_after = d;
                }
                opts.etcd = self.etcd.clone();
                match wait::wait_scaled(
                    client,
                    &topology,
                    &settings,
                    &condition,
                    &opts,
                    self.time_scale,
                    cancel,
                    &progress,
                )
                .await
                {
                    Ok(WaitEnd::Cancelled { last }) => Input::Cancelled {
                        n,
                        attempt,
                        reason: format!("stopped at the operator's request; last seen: {last}"),
                    },
                    Ok(end) => {
                        progress(format!("verdict: {end}"));
                        self.lock().ends.insert((tag, n, attempt), end);
                        Input::StepFinished {
                            n,
                            attempt,
                            exit_code: Some(0),
                            error: None,
                        }
                    }
                    Err(e) => Input::StepFinished {
                        n,
                        attempt,
                        exit_code: None,
                        error: Some(format!("{env}: {e}")),
                    },
                }
            }
            Work::Reconcile(obj) => {
                match flux::reconcile(client, &obj, self.flux_timeout, cancel, &progress, start)
                    .await
                {
                    Ok(r) => match r.end {
                        WaitEnd::Met(detail) => {
                            progress(format!("verdict: {detail}"));
                            Input::StepFinished {
                                n,
                                attempt,
                                exit_code: Some(0),
                                error: None,
                            }
                        }
                        WaitEnd::Cancelled { last } => Input::Cancelled {
                            n,
                            attempt,
                            reason: format!(
                                "stopped waiting at the operator's request; the reconcile was \
                                 already requested ({} = {}) and Flux carries it out anyway; \
                                 last seen: {last}",
                                flux::REQUESTED_AT_ANNOTATION,
                                r.requested_at
                            ),
                        },
                        end => {
                            progress(format!("verdict: {end}"));
                            Input::StepFinished {
                                n,
                                attempt,
                                exit_code: None,
                                error: Some(end.to_string()),
                            }
                        }
                    },
                    Err(e) => Input::StepFinished {
                        n,
                        attempt,
                        exit_code: None,
                        error: Some(format!("{env}: {e}")),
                    },
                }
            }
        };
        drop(progress);
        forward.finish().await;
        Ok(input)
    }

    /// The preview of a Flux reconcile: every line as step output, the blast radius as
    /// the verdict the Verify reports.
    #[allow(clippy::too_many_arguments)]
    async fn preview(
        &self,
        tag: RunTag,
        step: &PlannedStep,
        attempt: u32,
        env: &str,
        obj: FluxObject,
        cancel: &CancellationToken,
        replies: &mpsc::Sender<ExecReply>,
    ) -> Result<Input, NotStarted> {
        let n = step.n;
        let (client, _, _) = self.clusters.connect(env).await?;
        // What the overlay renders for the object: the repo's files, read off the workers.
        let rendered = {
            let clusters = Arc::clone(&self.clusters);
            let (env, kind, name, ns) = (
                env.to_string(),
                obj.kind_name().to_string(),
                obj.name.clone(),
                obj.namespace.clone(),
            );
            tokio::task::spawn_blocking(move || clusters.rendered(&env, &kind, &name, &ns))
                .await
                .ok()
                .flatten()
        };
        let looked = tokio::select! {
            r = flux::preview(client, &obj, rendered.as_ref()) => r,
            () = cancel.cancelled() => {
                return Ok(Input::Cancelled {
                    n,
                    attempt,
                    reason: "stopped at the operator's request".into(),
                })
            }
        };
        let (input, lines) = match looked {
            Ok(p) => {
                let summary = p.summary(&obj.to_string());
                self.lock()
                    .ends
                    .insert((tag, n, attempt), WaitEnd::Met(summary.clone()));
                let mut lines = p.lines;
                lines.push(format!("verdict: {summary}"));
                (
                    Input::StepFinished {
                        n,
                        attempt,
                        exit_code: Some(0),
                        error: None,
                    },
                    lines,
                )
            }
            Err(e) => (
                Input::StepFinished {
                    n,
                    attempt,
                    exit_code: None,
                    error: Some(format!("{env}: {e}")),
                },
                Vec::new(),
            ),
        };
        // Every line goes out before the outcome, so the approval shows the whole preview.
        for line in lines {
            let _ = replies
                .send(ExecReply::Output {
                    tag,
                    n,
                    attempt,
                    line,
                })
                .await;
        }
        Ok(input)
    }

    fn verify(&self, step: &PlannedStep, key: Key) -> Input {
        let (n, attempt) = (key.1, key.2);
        match self.lock().ends.remove(&key) {
            Some(end) => Input::VerifyResult {
                n,
                attempt,
                ok: end.is_met(),
                detail: end.to_string(),
            },
            None => Input::VerifyResult {
                n,
                attempt,
                ok: false,
                detail: format!(
                    "nothing to verify a {} step against (its verdict was not kept)",
                    step.kind.as_str()
                ),
            },
        }
    }
}

impl StepExecutor for KubeExecutor {
    fn kind(&self) -> StepKind {
        self.kind
    }

    fn mutates(&self) -> bool {
        self.kind == StepKind::FluxReconcile
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
                // Registered before the task runs, so a Cancel right behind finds it.
                let cancel = CancellationToken::new();
                self.lock()
                    .cancels
                    .insert((tag, step.n, attempt), cancel.clone());
                tokio::spawn(self.clone().execute(
                    tag,
                    step,
                    attempt,
                    env,
                    Go { cancel, start },
                    replies,
                ));
            }
            ExecRequest::Verify { tag, step, attempt } => {
                let input = self.verify(&step, (tag, step.n, attempt));
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
