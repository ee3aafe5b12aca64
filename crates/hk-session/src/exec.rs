//! The boundary between the app and the executors (SSH, ansible-playbook, kube), which
//! live elsewhere.
//!
//! Owns: the requests the app sends on a bounded channel ([`ExecRequest`]), the replies it
//! gets back ([`ExecReply`], tagged with the run so stale replies are dropped), the
//! [`StepExecutor`] trait an executor implements, and [`Capabilities`]: which step kinds
//! this app can run, split into read-only and mutating executors.
//! Observe mode is a type here: a session is built on one of two [`Executors`] sets,
//! [`ReadOnlyExecutors`] (observe) or [`OperateExecutors`] (operate), and
//! [`ReadOnlyExecutors`] refuses an executor that says it mutates, so an observe session
//! has no value through which a mutating step could run. [`Capabilities`] is what the
//! composition root hands the console and the pump routes through; its `Observe`
//! variant has no slot for a mutating executor either.
//! Must not: fake an executor. A step kind with no executor is reported as such
//! ("no executor for kube-wait yet", or the reason it is absent when the builder gave one,
//! e.g. a missing kubeconfig) and the step is never started.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::mpsc;

use hk_engine::journal::StartRecorded;
use hk_engine::runbook::machine::{Input, Mode};
use hk_engine::runbook::plan::{PlannedStep, StepKind};

/// Which run a request or reply belongs to; a reply whose tag is not the current run's is
/// stale (the run was closed or replaced) and dropped.
pub type RunTag = u64;

/// What the app asks an executor to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecRequest {
    /// Run a step's work (from a machine `Execute`). `start` proves its `step-started`
    /// (or a probe's `probe-started`) is on disk: only the journal makes one, after the
    /// append returned, so no request for unrecorded work can be built.
    Execute {
        tag: RunTag,
        step: PlannedStep,
        attempt: u32,
        start: StartRecorded,
        /// Flags the operator authorised (`-e FLAG=true`).
        authorised: Vec<String>,
        /// The run's environment (a step bound to no host still belongs to one cluster).
        env: String,
    },
    /// Check a step's expectations against what its work produced.
    Verify {
        tag: RunTag,
        step: PlannedStep,
        attempt: u32,
    },
    /// Stop a step's work.
    Cancel {
        tag: RunTag,
        step: PlannedStep,
        attempt: u32,
    },
}

impl ExecRequest {
    pub fn tag(&self) -> RunTag {
        match self {
            ExecRequest::Execute { tag, .. }
            | ExecRequest::Verify { tag, .. }
            | ExecRequest::Cancel { tag, .. } => *tag,
        }
    }
}

/// What comes back from an executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecReply {
    /// A line of the step's output.
    Output {
        tag: RunTag,
        n: usize,
        attempt: u32,
        line: String,
    },
    /// An outcome to journal and feed to the machine (StepFinished, VerifyResult,
    /// HostSetObserved, Cancelled, ProcessStarted). Never StepStarted: the session records
    /// that before the request leaves.
    Outcome { tag: RunTag, input: Input },
}

/// One executor: runs the work of one step kind. Implemented in `exec/` (not in this
/// issue); the UI only holds them.
pub trait StepExecutor: Send + Sync + std::fmt::Debug {
    fn kind(&self) -> StepKind;
    /// Whether this executor can change the systems it touches.
    fn mutates(&self) -> bool;
    /// Carry out `req`, sending output and outcomes on `replies`. Runs on the executor task;
    /// must not block it (spawn the work).
    fn handle(&self, req: ExecRequest, replies: mpsc::Sender<ExecReply>);
    /// Start `step`'s work ahead of its turn where that is safe and the executor can (a
    /// list-hosts run, whose answer its step uses only if the files it read are unchanged:
    /// `exec::ansible_prefetch`). False when nothing was started.
    fn prefetch(&self, _step: &PlannedStep) -> bool {
        false
    }
}

/// Why a step cannot be started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoExecutor {
    #[error("no executor for {} yet", .0.as_str())]
    Missing(StepKind),
    /// The builder knows why there is none (e.g. no environment has a kubeconfig).
    #[error("no executor for {}: {why}", .kind.as_str())]
    Unavailable { kind: StepKind, why: String },
    #[error("observe mode: {} step {n} changes systems and cannot run", .kind.as_str())]
    ObserveMode { kind: StepKind, n: usize },
}

/// A mutating executor offered to the read-only set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a {} executor that mutates cannot be a read-only executor", .0.as_str())]
pub struct NotReadOnly(pub StepKind);

/// Executors that change nothing. The only way in is [`ReadOnlyExecutors::add`], which
/// refuses a mutating one.
#[derive(Debug, Clone, Default)]
pub struct ReadOnlyExecutors {
    executors: BTreeMap<&'static str, Arc<dyn StepExecutor>>,
    /// Kinds the builder could not give an executor, and why.
    absent: BTreeMap<&'static str, String>,
    /// The mask the executors apply to output, also applied to the run's journal.
    redactor: hk_engine::redact::Redactor,
}

impl ReadOnlyExecutors {
    /// The secrets to mask in the run's record (the same the executors mask in output).
    pub fn set_redactor(&mut self, redactor: hk_engine::redact::Redactor) {
        self.redactor = redactor;
    }

    /// What the record of a run on these executors masks.
    pub fn redactor(&self) -> &hk_engine::redact::Redactor {
        &self.redactor
    }

    pub fn add(&mut self, e: Arc<dyn StepExecutor>) -> Result<(), NotReadOnly> {
        if e.mutates() {
            return Err(NotReadOnly(e.kind()));
        }
        self.absent.remove(e.kind().as_str());
        self.executors.insert(e.kind().as_str(), e);
        Ok(())
    }

    /// Say why `kind` has no executor here (its steps then say so instead of "yet").
    pub fn absent(&mut self, kind: StepKind, why: impl Into<String>) {
        if !self.executors.contains_key(kind.as_str()) {
            self.absent.insert(kind.as_str(), why.into());
        }
    }

    /// Every executor held, to look at (what an observe console could ever reach).
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn StepExecutor>> {
        self.executors.values()
    }
}

/// Executors that may change systems (operate mode only).
#[derive(Debug, Clone, Default)]
pub struct MutatingExecutors {
    executors: BTreeMap<&'static str, Arc<dyn StepExecutor>>,
    absent: BTreeMap<&'static str, String>,
}

impl MutatingExecutors {
    pub fn add(&mut self, e: Arc<dyn StepExecutor>) {
        self.absent.remove(e.kind().as_str());
        self.executors.insert(e.kind().as_str(), e);
    }

    /// Say why `kind` has no executor here (its steps then say so instead of "yet").
    pub fn absent(&mut self, kind: StepKind, why: impl Into<String>) {
        if !self.executors.contains_key(kind.as_str()) {
            self.absent.insert(kind.as_str(), why.into());
        }
    }
}

/// Why there is no executor of `kind`: the reason the builder gave, else "not yet".
fn missing(kind: StepKind, absent: &[&BTreeMap<&'static str, String>]) -> NoExecutor {
    match absent.iter().find_map(|a| a.get(kind.as_str())) {
        Some(why) => NoExecutor::Unavailable {
            kind,
            why: why.clone(),
        },
        None => NoExecutor::Missing(kind),
    }
}

/// A set of executors a [`RunSession`](super::RunSession) is built on. Sealed: there are
/// exactly two, [`ReadOnlyExecutors`] (observe) and [`OperateExecutors`] (operate), and a
/// session's type says which it holds.
pub trait Executors: sealed::Sealed + Clone + std::fmt::Debug + Send + Sync + 'static {
    /// The machine mode a run on this set is planned and journaled in.
    const MODE: Mode;
    /// The executor that would run `step`, or why none can.
    fn executor_for(&self, step: &PlannedStep) -> Result<&Arc<dyn StepExecutor>, NoExecutor>;
    /// Whether any executor here can mutate.
    fn can_mutate(&self) -> bool;
    /// What the journal of a run on this set masks.
    fn redactor(&self) -> &hk_engine::redact::Redactor;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::ReadOnlyExecutors {}
    impl Sealed for super::OperateExecutors {}
}

/// Observe's set: a mutating step finds nothing here, whatever the plan says.
impl Executors for ReadOnlyExecutors {
    const MODE: Mode = Mode::Observe;

    fn executor_for(&self, step: &PlannedStep) -> Result<&Arc<dyn StepExecutor>, NoExecutor> {
        let kind = step.kind;
        if step.mutates {
            return Err(NoExecutor::ObserveMode { kind, n: step.n });
        }
        self.executors
            .get(kind.as_str())
            .ok_or_else(|| missing(kind, &[&self.absent]))
    }

    fn can_mutate(&self) -> bool {
        false
    }

    fn redactor(&self) -> &hk_engine::redact::Redactor {
        ReadOnlyExecutors::redactor(self)
    }
}

/// Operate's set: the read-only executors and the mutating ones.
#[derive(Debug, Clone, Default)]
pub struct OperateExecutors {
    pub read_only: ReadOnlyExecutors,
    pub mutating: MutatingExecutors,
}

impl Executors for OperateExecutors {
    const MODE: Mode = Mode::Operate;

    fn executor_for(&self, step: &PlannedStep) -> Result<&Arc<dyn StepExecutor>, NoExecutor> {
        operate_executor_for(&self.read_only, &self.mutating, step)
    }

    fn can_mutate(&self) -> bool {
        !self.mutating.executors.is_empty()
    }

    fn redactor(&self) -> &hk_engine::redact::Redactor {
        &self.read_only.redactor
    }
}

/// What this app can run: what the composition root builds and the [`pump`](super::pump)
/// routes requests through. A session never holds this: it holds one of the two typed
/// sets ([`ReadOnlyExecutors`] or [`OperateExecutors`]), chosen once when it is built
/// (`session::Session::plan`).
#[derive(Debug, Clone)]
pub enum Capabilities {
    Operate {
        read_only: ReadOnlyExecutors,
        mutating: MutatingExecutors,
    },
    /// No mutating executors: the variant has nowhere to hold one.
    Observe { read_only: ReadOnlyExecutors },
}

impl Capabilities {
    /// For a banner or wording only: safety never asks this (the session's type holds it).
    pub fn is_observe(&self) -> bool {
        matches!(self, Capabilities::Observe { .. })
    }

    /// Whether any executor here can mutate.
    pub fn can_mutate(&self) -> bool {
        match self {
            Capabilities::Operate { mutating, .. } => !mutating.executors.is_empty(),
            Capabilities::Observe { .. } => false,
        }
    }

    /// The read-only half (all observe has).
    pub fn read_only(&self) -> &ReadOnlyExecutors {
        match self {
            Capabilities::Operate { read_only, .. } | Capabilities::Observe { read_only } => {
                read_only
            }
        }
    }

    /// The executor that would run `step`, or why none can: the same answer the session's
    /// own typed set gives.
    pub fn executor_for(&self, step: &PlannedStep) -> Result<&Arc<dyn StepExecutor>, NoExecutor> {
        match self {
            Capabilities::Observe { read_only } => read_only.executor_for(step),
            Capabilities::Operate {
                read_only,
                mutating,
            } => operate_executor_for(read_only, mutating, step),
        }
    }

    /// Why `step`'s work cannot start, if it cannot (for the run view's step list).
    pub fn blocker(&self, step: &PlannedStep) -> Option<NoExecutor> {
        if !hk_engine::runbook::machine::has_work(step) {
            return None;
        }
        self.executor_for(step).err()
    }
}

/// [`OperateExecutors::executor_for`] over borrowed halves (the enum holds them apart).
fn operate_executor_for<'a>(
    ro: &'a ReadOnlyExecutors,
    m: &'a MutatingExecutors,
    step: &PlannedStep,
) -> Result<&'a Arc<dyn StepExecutor>, NoExecutor> {
    let kind = step.kind;
    if step.mutates {
        return m
            .executors
            .get(kind.as_str())
            .ok_or_else(|| missing(kind, &[&m.absent]));
    }
    ro.executors
        .get(kind.as_str())
        // A read-only step may also run on a mutating-capable executor of its kind.
        .or_else(|| m.executors.get(kind.as_str()))
        .ok_or_else(|| missing(kind, &[&ro.absent, &m.absent]))
}

/// The executor task: receives requests, hands each to the executor of its kind. Requests
/// the app could not route never get here (the app checks [`Capabilities`] first), so a
/// missing executor here is a bug, answered with a failed outcome rather than a hang.
pub async fn executor_task(
    caps: Arc<Capabilities>,
    mut requests: mpsc::Receiver<ExecRequest>,
    replies: mpsc::Sender<ExecReply>,
) {
    while let Some(req) = requests.recv().await {
        let step = match &req {
            ExecRequest::Execute { step, .. }
            | ExecRequest::Verify { step, .. }
            | ExecRequest::Cancel { step, .. } => step.clone(),
        };
        // A request whose start record is another step's never reaches an executor.
        if let ExecRequest::Execute {
            tag,
            step,
            attempt,
            start,
            ..
        } = &req
        {
            if !start.covers(step.n, *attempt) {
                let input = Input::StepFinished {
                    n: step.n,
                    attempt: *attempt,
                    exit_code: None,
                    error: Some(format!(
                        "its start record (seq {}) is step {} attempt {}'s, not this one's; \
                         the step was not started",
                        start.seq(),
                        start.n(),
                        start.attempt()
                    )),
                };
                if replies
                    .send(ExecReply::Outcome { tag: *tag, input })
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
        }
        match caps.executor_for(&step).map(Arc::clone) {
            Ok(e) => e.handle(req, replies.clone()),
            Err(why) => {
                if let ExecRequest::Execute {
                    tag, step, attempt, ..
                } = req
                {
                    let input = Input::StepFinished {
                        n: step.n,
                        attempt,
                        exit_code: None,
                        error: Some(format!("{why}; the step was not started")),
                    };
                    if replies
                        .send(ExecReply::Outcome { tag, input })
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    }
}
