//! The TCP probe steps (`expect.tcp`): open a connection, close it, report how long it took.
//!
//! Owns: the probe's task per request, its cancellation, and the result its Verify reads.
//! Must not: send anything over the connection it opens (that is what keeps it read-only).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::exec::{ExecReply, ExecRequest, StepExecutor};
use hk_engine::runbook::machine::Input;
use hk_engine::runbook::plan::StepKind;

use super::Key;

/// TCP probe steps: `expect.tcp` (host:port) must accept a connection within the step's
/// timeout (default 5 s). Read-only by nature: it opens a connection and closes it.
#[derive(Debug, Default)]
pub struct ProbeExecutor {
    state: Arc<Mutex<HashMap<Key, Result<std::time::Duration, String>>>>,
    cancels: Arc<Mutex<HashMap<Key, CancellationToken>>>,
}

impl StepExecutor for ProbeExecutor {
    fn kind(&self) -> StepKind {
        StepKind::Probe
    }

    fn mutates(&self) -> bool {
        false
    }

    fn handle(&self, req: ExecRequest, replies: mpsc::Sender<ExecReply>) {
        match req {
            ExecRequest::Cancel { tag, step, attempt } => {
                let key = (tag, step.n, attempt);
                if let Some(t) = self
                    .cancels
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&key)
                {
                    t.cancel();
                }
            }
            ExecRequest::Verify { tag, step, attempt } => {
                let key = (tag, step.n, attempt);
                let result = self
                    .state
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&key);
                let (n, ok, detail) = match result {
                    Some(Ok(t)) => (step.n, true, format!("connected in {} ms", t.as_millis())),
                    Some(Err(e)) => (step.n, false, e),
                    None => (step.n, false, "the probe's result was not kept".to_string()),
                };
                tokio::spawn(async move {
                    let input = Input::VerifyResult {
                        n,
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
                let state = Arc::clone(&self.state);
                let cancels = Arc::clone(&self.cancels);
                tokio::spawn(async move {
                    let (n, key) = (step.n, (tag, step.n, attempt));
                    let send = |input: Input| {
                        let replies = replies.clone();
                        async move {
                            let _ = replies.send(ExecReply::Outcome { tag, input }).await;
                        }
                    };
                    let expect = step.expect.clone().unwrap_or_default();
                    let Some(target) = expect.tcp.clone() else {
                        send(Input::StepFinished {
                            n,
                            attempt,
                            exit_code: None,
                            error: Some("a probe step needs expect.tcp (host:port); the step was not started".into()),
                        })
                        .await;
                        return;
                    };
                    let cancel = CancellationToken::new();
                    cancels
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(key, cancel.clone());
                    let timeout = std::time::Duration::from_secs(expect.timeout_s.unwrap_or(5));
                    let t0 = std::time::Instant::now();
                    let result = tokio::select! {
                        r = tokio::time::timeout(timeout, tokio::net::TcpStream::connect(target.clone())) => match r {
                            Ok(Ok(_)) => Ok(t0.elapsed()),
                            Ok(Err(e)) => Err(format!("{target} refused or unreachable: {e}")),
                            Err(_) => Err(format!("{target} did not answer within {} s", timeout.as_secs())),
                        },
                        _ = cancel.cancelled() => Err("stopped at the operator's request".to_string()),
                    };
                    cancels
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&key);
                    // The runbook's named cause travels with the failure (e.g. "the VIP is not
                    // answering: kube-vip is not announcing it yet").
                    let result = result.map_err(|e| match &expect.on_fail {
                        Some(cause) => format!("{e}: {cause}"),
                        None => e,
                    });
                    let input = super::finished_input(n, attempt, cancel.is_cancelled(), &result);
                    state
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(key, result);
                    send(input).await;
                });
            }
        }
    }
}
