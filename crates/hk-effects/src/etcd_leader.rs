//! etcd's leadership moved off a server before it is changed (issue 39), as Talos forfeits
//! leadership before it stops a node: one look at the members (the etcd pane's, over SSH),
//! the choice ([`hk_engine::guard::leader::choose`]), etcd's own MoveLeader
//! (`POST /v3/maintenance/transfer-leadership`, sent to the leader's member from its own
//! server with that server's etcd client certificates), then looks until every member that
//! answers follows the new leader.
//!
//! Owns: the transfer's argv ([`transfer_argv`]), the read-only [`preview`] and the
//! [`move_away`] that runs the transfer through `Executor<Mutating>` (so only with the proof
//! that the step's start is journaled) and verifies it.
//! Must not: decide who takes over (the guard does), or call a move done that no look
//! showed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::exec::ssh::shell_quote;
use crate::exec::{classify, Classified, Executor, Mutating, RunOptions, StepOutcome};
use crate::observe::etcd::{ClientSpec, EtcdSource};
use hk_engine::guard::leader::{self, LeaderPlan};
use hk_engine::journal::StartRecorded;
use hk_engine::runbook::plan::{Expect, PlannedStep, StepKind};

/// How long etcd is given to answer the transfer (it returns once the new leader is elected;
/// etcd's own request timeout is 7 s).
pub const TRANSFER_MAX_TIME: Duration = Duration::from_secs(15);
/// Between looks while waiting for every member to follow the new leader.
const LOOK_EVERY: Duration = Duration::from_millis(300);

/// `curl ... -X POST -d {"targetID":"ID"} URL/v3/maintenance/transfer-leadership`, with the
/// server's etcd client certificates (under `sudo -n` where the reads use it).
pub fn transfer_argv(spec: &ClientSpec, target: u64) -> Vec<String> {
    spec.post(
        TRANSFER_MAX_TIME,
        &format!("{{\"targetID\":\"{target}\"}}"),
        "/v3/maintenance/transfer-leadership",
    )
}

/// One look at `env`'s members: etcd's client view and each server's WAL fsync p99.
pub(crate) async fn look(
    source: &EtcdSource,
    env: &str,
    cancel: &CancellationToken,
) -> Result<
    (
        hk_engine::checks::live::EtcdClientView,
        BTreeMap<String, f64>,
    ),
    String,
> {
    let pane = source.pane(env, cancel).await;
    let fsync = pane
        .members
        .iter()
        .filter_map(|m| Some((m.host.clone(), m.metrics.as_ref()?.wal_fsync_p99_ms?)))
        .collect();
    match pane.client {
        Some(view) => Ok((view, fsync)),
        None => Err(pane
            .verdicts
            .iter()
            .map(|v| v.message.clone())
            .next()
            .unwrap_or_else(|| format!("{env}: etcd's members were not read"))),
    }
}

/// Whether leadership would move off `host` now, and to whom (read-only).
pub async fn preview(
    source: &EtcdSource,
    env: &str,
    host: &str,
    later: &[String],
    cancel: &CancellationToken,
) -> Result<LeaderPlan, String> {
    let (view, fsync) = look(source, env, cancel).await?;
    if let Some(p99) = fsync.get(host) {
        source.note_before_change(env, host, *p99);
    }
    Ok(leader::choose(&view, &fsync, host, later))
}

/// What [`move_away`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Moved {
    /// `host` did not lead: nothing was sent.
    NothingToMove(String),
    /// Leadership moved and a look showed it: the line says from, to, the term and how long.
    Moved(String),
}

/// Why [`move_away`] failed: the operator stopped it, or what went wrong, named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MoveError {
    Cancelled(String),
    Failed(String),
}

/// Moves etcd's leadership off `host` if it leads (to a member not in `later`, the servers
/// the run changes after it, where one fits), then waits (up to `deadline`) until a
/// look shows every answering member following the member chosen. `n`/`id` are the plan
/// step's (the transfer runs as that step, only with `start`, its journaled start).
#[allow(clippy::too_many_arguments)]
pub async fn move_away(
    exec: &Executor<Mutating>,
    source: &EtcdSource,
    env: &str,
    host: &str,
    later: &[String],
    (n, id): (usize, &str),
    start: &StartRecorded,
    deadline: Duration,
    cancel: &CancellationToken,
    progress: &(dyn Fn(String) + Send + Sync),
) -> Result<Moved, MoveError> {
    let failed = MoveError::Failed;
    let (view, fsync) = look(source, env, cancel).await.map_err(failed)?;
    if let Some(p99) = fsync.get(host) {
        source.note_before_change(env, host, *p99);
    }
    let plan = leader::choose(&view, &fsync, host, later);
    progress(plan.line());
    let (to, to_id) = match &plan {
        LeaderPlan::NotLeader { .. } => return Ok(Moved::NothingToMove(plan.line())),
        LeaderPlan::Cannot { why } => return Err(failed(why.clone())),
        LeaderPlan::Move { to, to_id, .. } => (to.clone(), *to_id),
    };
    let spec = source
        .specs(env)
        .map_err(|e| failed(e.to_string()))?
        .into_iter()
        .find(|m| m.host == host)
        .ok_or_else(|| failed(format!("{host} is no server of {env}")))?
        .client
        .map_err(|e| failed(e.to_string()))?;
    let argv = transfer_argv(&spec, to_id);
    let command = argv
        .iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ");
    let transfer = PlannedStep {
        n,
        id: id.to_string(),
        kind: StepKind::Ssh,
        host: Some(host.to_string()),
        mutates: true,
        gate: None,
        command: Some(vec!["ssh".into(), host.to_string(), command]),
        expect: Some(Expect {
            timeout_s: Some(TRANSFER_MAX_TIME.as_secs() + 5),
            ..Expect::default()
        }),
        title: format!("etcd MoveLeader {host} -> {to}"),
        cwd: None,
        source: None,
        blast_radius: None,
        declared_read_only: None,
    };
    let Ok(Classified::Mutating(step)) = classify(&transfer) else {
        return Err(failed(
            "the transfer did not classify as a mutating SSH step".into(),
        ));
    };
    let began = Instant::now();
    progress(format!("{host}: etcd MoveLeader to {to} ({to_id:x})"));
    let opts = RunOptions {
        cancel: cancel.clone(),
        ..RunOptions::default()
    };
    let out = match exec.run_mutating(&step, &opts, start).await {
        Ok(StepOutcome::Ssh(out)) => out,
        Ok(_) => return Err(failed("the transfer ran as no SSH command".into())),
        Err(e) => return Err(failed(format!("{host}: the transfer: {e}"))),
    };
    if cancel.is_cancelled() {
        return Err(MoveError::Cancelled(format!(
            "stopped at the operator's request after MoveLeader to {to} was sent; the next look says who leads"
        )));
    }
    if out.exit_status != Some(0) {
        return Err(failed(format!(
            "{host}: `{}` exited {:?}: {}",
            argv.join(" "),
            out.exit_status,
            out.stderr.trim()
        )));
    }
    // etcd answers `{"header":...}`; a refusal is `{"code":N,"message":"..."}`.
    let said: serde_json::Value = serde_json::from_str(out.stdout.trim()).map_err(|e| {
        failed(format!(
            "{host}: etcd's answer to MoveLeader is no JSON ({e}): {}",
            out.stdout.trim()
        ))
    })?;
    if let Some(message) = said.get("message").or_else(|| said.get("error")) {
        return Err(failed(format!(
            "etcd refused MoveLeader from {host} to {to}: {}",
            message.as_str().unwrap_or_default()
        )));
    }
    let until = tokio::time::Instant::now() + deadline;
    let mut last = String::from("no look yet");
    let mut said_last = String::new();
    loop {
        if cancel.is_cancelled() {
            return Err(MoveError::Cancelled(format!(
                "stopped at the operator's request while waiting for the members to follow {to}; last seen: {last}"
            )));
        }
        match look(source, env, cancel).await {
            Ok((view, _)) => match leader::moved(&view, host, to_id) {
                Ok(done) => {
                    return Ok(Moved::Moved(format!(
                        "{}{host} to {to} in {:.1} s: {done}",
                        leader::MOVED,
                        began.elapsed().as_secs_f64()
                    )))
                }
                Err(why) => last = why,
            },
            Err(why) => last = why,
        }
        if tokio::time::Instant::now() >= until {
            return Err(failed(format!(
                "MoveLeader to {to} was accepted but no look within {} s showed every member following it: {last}",
                deadline.as_secs()
            )));
        }
        if last != said_last {
            progress(format!("waiting for the members to follow {to}: {last}"));
            said_last = last.clone();
        }
        tokio::select! {
            () = tokio::time::sleep(LOOK_EVERY) => {}
            () = cancel.cancelled() => {}
        }
    }
}
