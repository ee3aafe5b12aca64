//! The one pump between a session's driver and the executors.
//!
//! Owns: the executor task built from exactly the driver's capabilities ([`Pump::spawn`]:
//! a new pump replaces the old when the capabilities change, e.g. `:observe` drops the
//! mutating half), handing queued requests over without ever blocking the driver
//! ([`Pump::flush`]), and the replies coming back ([`Pump::recv`]); beside it, the calls
//! on the cluster's run lock a session asks for, each run on its own task
//! ([`LockPump::run`]) with its answer coming back ([`LockPump::recv`]), so a cluster
//! that does not answer never holds the driver (the console keeps drawing and taking
//! keys). Kept apart from the executor pump: a lock call outlives a pump replaced by
//! `:observe`, and a held lock in its answer must reach someone who gives it back. The
//! console's event loop and the headless rehearsal both drive their session through it.
//! Must not: decide anything about the run (the session does) or hold a request back:
//! what does not fit now stays queued, in order, for the next flush.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use super::exec::{executor_task, Capabilities, ExecReply, ExecRequest};
use super::lock::{LockAnswer, LockJob};

/// The executor task and its two channels.
pub struct Pump {
    caps: Arc<Capabilities>,
    tx: mpsc::Sender<ExecRequest>,
    rx: mpsc::Receiver<ExecReply>,
    task: tokio::task::JoinHandle<()>,
}

/// The executor task is gone: nothing sent will be carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the executor task has stopped")]
pub struct PumpClosed;

impl Pump {
    /// Start the executor task for `caps` (on the caller's tokio runtime).
    pub fn spawn(caps: Arc<Capabilities>) -> Pump {
        let (tx, req_rx) = mpsc::channel(64);
        let (reply_tx, rx) = mpsc::channel(1024);
        let task = tokio::spawn(executor_task(Arc::clone(&caps), req_rx, reply_tx));
        Pump { caps, tx, rx, task }
    }

    /// Whether this pump's executors are exactly `caps`.
    pub fn serves(&self, caps: &Arc<Capabilities>) -> bool {
        Arc::ptr_eq(&self.caps, caps)
    }

    /// Hand over what fits in the channel now; the rest stays at the front of `queue`.
    pub fn flush(&self, queue: &mut VecDeque<ExecRequest>) -> Result<(), PumpClosed> {
        while let Some(req) = queue.pop_front() {
            match self.tx.try_send(req) {
                Ok(()) => {}
                Err(TrySendError::Full(req)) => {
                    queue.push_front(req);
                    return Ok(());
                }
                Err(TrySendError::Closed(_)) => {
                    queue.clear();
                    return Err(PumpClosed);
                }
            }
        }
        Ok(())
    }

    /// The next reply; `None` once the executor task is gone.
    pub async fn recv(&mut self) -> Option<ExecReply> {
        self.rx.recv().await
    }

    /// A reply already here, without waiting.
    pub fn try_recv(&mut self) -> Option<ExecReply> {
        self.rx.try_recv().ok()
    }
}

impl Drop for Pump {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Runs the run lock's calls off the driver's task, and brings their answers back.
pub struct LockPump {
    tx: mpsc::UnboundedSender<LockAnswer>,
    rx: mpsc::UnboundedReceiver<LockAnswer>,
}

impl Default for LockPump {
    fn default() -> Self {
        // Unbounded: one answer per call asked, and an answer holding a taken lock must
        // never be dropped for want of room.
        let (tx, rx) = mpsc::unbounded_channel();
        LockPump { tx, rx }
    }
}

impl LockPump {
    /// Run each call on its own task (each bounded by `lock::LOCK_CALL_TIMEOUT`); the
    /// answers come back through [`LockPump::recv`].
    pub fn run(&self, jobs: &mut VecDeque<LockJob>) {
        for job in jobs.drain(..) {
            let tx = self.tx.clone();
            tokio::spawn(async move {
                let answer = job.run().await;
                if let Err(lost) = tx.send(answer) {
                    // Nobody to tell (the console quit): what the call took goes back
                    // here, or it would go stale on the cluster.
                    if let Some(release) = lost.0.orphan_release() {
                        let _ = release.run().await;
                    }
                }
            });
        }
    }

    /// The next answer to a call.
    pub async fn recv(&mut self) -> Option<LockAnswer> {
        self.rx.recv().await
    }
}
