//! The `repo-wait` and `vpn-wait` steps: wait, looking again every few seconds, until a
//! named condition holds, the step's timeout passes or the operator cancels.
//!
//! Owns: for `repo-wait`, one live look at every VPN gateway first (which share which
//! server and tunnel address now), then loading the infra repo again from disk on every
//! look and judging it (`hk_engine::checks::vpn_remotes`); for `vpn-wait`, a look at every
//! gateway of every environment through the read-only SSH executor (the VPN pane's own
//! look) judged by `hk_engine::checks::live::vpn::loop_gone`. Output lines only when what
//! is shown changes (not every look), the outcome as journalable inputs.
//! Must not: write to the repo or to any host. Both kinds are read-only by construction:
//! the repo is only read, and the gateways are reached through an `Executor<ReadOnly>`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::exec::{ExecReply, ExecRequest, RunTag, StepExecutor};
use hk_effects::exec::{Executor, ReadOnly};
use hk_effects::observe::vpn::{look_with, Gateways};
use hk_engine::checks::live::{loop_gone, LOOP_GONE_QUIET_MS};
use hk_engine::checks::vpn_remotes::{self, RepoCheck};
use hk_engine::repo::Repo;
use hk_engine::runbook::machine::Input;
use hk_engine::runbook::plan::{PlannedStep, StepKind};

use super::Key;

/// How often a wait looks again (the repo is re-read, the gateways looked at).
pub const LOOK_EVERY: Duration = Duration::from_secs(2);

/// One of the two waiting kinds.
#[derive(Clone)]
pub struct WaitExecutor {
    kind: StepKind,
    /// The repo's top directory: loaded again on every look, as the operator edits it.
    root: PathBuf,
    gateways: Arc<Gateways>,
    /// The quiet stretch `vpn-loop-gone` needs is divided by this (the demo's time scale).
    time_scale: u32,
    every: Duration,
    cancels: Arc<Mutex<HashMap<Key, CancellationToken>>>,
    /// Each finished attempt's last line, for its Verify.
    done: Arc<Mutex<HashMap<Key, Result<String, String>>>>,
}

impl std::fmt::Debug for WaitExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitExecutor")
            .field("kind", &self.kind)
            .field("root", &self.root)
            .finish()
    }
}

impl WaitExecutor {
    /// `kind` is [`StepKind::RepoWait`] or [`StepKind::VpnWait`]; `exec` reaches the
    /// gateways read-only (its pool must know them).
    pub fn new(kind: StepKind, root: PathBuf, exec: Arc<Executor<ReadOnly>>) -> Self {
        WaitExecutor {
            kind,
            root,
            gateways: Arc::new(Gateways::with_executor(exec)),
            time_scale: 1,
            every: LOOK_EVERY,
            cancels: Arc::default(),
            done: Arc::default(),
        }
    }

    /// Real durations divided by `scale` (the demo's compressed time).
    pub fn with_time_scale(mut self, scale: u32) -> Self {
        self.time_scale = scale.max(1);
        self
    }

    async fn load(&self) -> Result<Repo, String> {
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || Repo::load(&root))
            .await
            .map_err(|e| format!("the repo could not be read: {e}"))?
            .map_err(|e| {
                format!("the repo cannot be read ({e}); fix it and this step reads it again")
            })
    }

    /// Which gateways share which server and tunnel address now, one line each.
    async fn live_pairs(&self, repo: &Repo, cancel: &CancellationToken) -> Vec<String> {
        let (look, _) = look_with(repo, &[], &self.gateways, cancel).await;
        let mut out: Vec<String> = look
            .gateways
            .iter()
            .map(|g| {
                format!(
                    "now: {}/{} on server {}, tunnel address {}",
                    g.env,
                    g.host,
                    g.server
                        .map_or_else(|| "not seen".into(), |s| s.to_string()),
                    g.tunnel_addr
                        .as_ref()
                        .map_or_else(|| "not seen".into(), |t| t.address.to_string())
                )
            })
            .collect();
        out.extend(look.across.iter().map(|v| format!("now: {}", v.message)));
        out
    }

    /// One look: (holds, impossible, lines).
    async fn look(
        &self,
        condition: &str,
        cancel: &CancellationToken,
    ) -> (Option<Result<(), String>>, Vec<String>) {
        let repo = match self.load().await {
            Ok(r) => r,
            Err(e) => return (None, vec![format!("waiting: {e}")]),
        };
        match self.kind {
            StepKind::VpnWait => {
                let mut words = condition.split_whitespace();
                let host = match (words.next(), words.next(), words.next()) {
                    (Some("vpn-loop-gone"), Some(h), None) => h.to_string(),
                    _ => {
                        return (
                            Some(Err(format!(
                            "unknown vpn-wait condition `{condition}` (known: vpn-loop-gone HOST)"
                        ))),
                            Vec::new(),
                        )
                    }
                };
                let (look, now) = look_with(&repo, &[], &self.gateways, cancel).await;
                let quiet = LOOP_GONE_QUIET_MS / u64::from(self.time_scale);
                let g = loop_gone(&host, &look.gateways, &look.across, now, quiet);
                (g.holds.then_some(Ok(())), g.lines)
            }
            _ => {
                let j = vpn_remotes::evaluate(&repo, condition);
                match j.check {
                    RepoCheck::Holds => (Some(Ok(())), j.lines),
                    RepoCheck::Waiting => (None, j.lines),
                    RepoCheck::Impossible(why) => (Some(Err(why)), j.lines),
                }
            }
        }
    }

    async fn execute(
        self,
        tag: RunTag,
        step: PlannedStep,
        attempt: u32,
        replies: mpsc::Sender<ExecReply>,
    ) {
        let n = step.n;
        let key = (tag, n, attempt);
        let send = |input: Input| {
            let replies = replies.clone();
            async move {
                let _ = replies.send(ExecReply::Outcome { tag, input }).await;
            }
        };
        let line = |line: String| {
            let replies = replies.clone();
            async move {
                let _ = replies
                    .send(ExecReply::Output {
                        tag,
                        n,
                        attempt,
                        line,
                    })
                    .await;
            }
        };
        let expect = step.expect.clone().unwrap_or_default();
        let (Some(condition), Some(timeout_s)) = (expect.condition.clone(), expect.timeout_s)
        else {
            send(Input::StepFinished {
                n,
                attempt,
                exit_code: None,
                error: Some(format!(
                    "a {} step needs a condition and timeout_s; the step was not started",
                    self.kind.as_str()
                )),
            })
            .await;
            return;
        };
        let cancel = CancellationToken::new();
        self.cancels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, cancel.clone());
        let timeout = Duration::from_secs(timeout_s);
        let deadline = tokio::time::Instant::now() + timeout;
        if self.kind == StepKind::RepoWait {
            match self.load().await {
                Ok(repo) => {
                    for l in self.live_pairs(&repo, &cancel).await {
                        line(l).await;
                    }
                }
                Err(e) => line(format!("now: not looked at: {e}")).await,
            }
        }
        // What was last shown, with its numbers taken out ("2s ago" changes every look).
        let mut shown = String::new();
        let outcome: Result<String, String> = loop {
            let (verdict, lines) = tokio::select! {
                r = self.look(&condition, &cancel) => r,
                _ = cancel.cancelled() => break Err("stopped at the operator's request".into()),
            };
            let shape: String = lines
                .iter()
                .flat_map(|l| l.chars().filter(|c| !c.is_ascii_digit()))
                .collect();
            if shape != shown || verdict.is_some() {
                for l in &lines {
                    line(l.clone()).await;
                }
                shown = shape;
            }
            let last = lines.last().cloned().unwrap_or_default();
            match verdict {
                Some(Ok(())) => break Ok(last),
                Some(Err(why)) => break Err(why),
                None => {}
            }
            if tokio::time::Instant::now() >= deadline {
                break Err(format!(
                    "{condition} did not hold within {} s; last look: {last}",
                    timeout.as_secs()
                ));
            }
            tokio::select! {
                _ = tokio::time::sleep(self.every) => {}
                _ = cancel.cancelled() => break Err("stopped at the operator's request".into()),
            }
        };
        self.cancels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key);
        let input = super::finished_input(n, attempt, cancel.is_cancelled(), &outcome);
        self.done
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, outcome);
        send(input).await;
    }
}

impl StepExecutor for WaitExecutor {
    fn kind(&self) -> StepKind {
        self.kind
    }

    fn mutates(&self) -> bool {
        false
    }

    fn handle(&self, req: ExecRequest, replies: mpsc::Sender<ExecReply>) {
        match req {
            ExecRequest::Cancel { tag, step, attempt } => {
                if let Some(t) = self
                    .cancels
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&(tag, step.n, attempt))
                {
                    t.cancel();
                }
            }
            ExecRequest::Verify { tag, step, attempt } => {
                let result = self
                    .done
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&(tag, step.n, attempt));
                let (ok, detail) = match result {
                    Some(Ok(l)) => (true, l),
                    Some(Err(e)) => (false, e),
                    None => (false, "the wait's result was not kept".to_string()),
                };
                tokio::spawn(async move {
                    let input = Input::VerifyResult {
                        n: step.n,
                        attempt,
                        ok,
                        detail,
                    };
                    let _ = replies.send(ExecReply::Outcome { tag, input }).await;
                });
            }
            ExecRequest::Execute {
                tag, step, attempt, ..
            } => {
                let me = self.clone();
                tokio::spawn(me.execute(tag, step, attempt, replies));
            }
        }
    }
}
