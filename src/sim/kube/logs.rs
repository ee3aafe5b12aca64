//! Containers' logs: the recent lines each simulated container wrote (what `kubectl logs`
//! reads from the kubelet), and a feed of new lines for `kubectl logs -f`.
//!
//! Owns: [`Logs`] (per namespace, pod and container, the last [`MAX_LINES`] lines with the
//! time each was written and a sequence number), forgetting a pod's lines when the pod goes
//! (the kubelet removes its log files), and the live feed.
//! Must not: write lines of its own (the simulated controllers do).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::broadcast;

/// Lines kept per container (older ones are dropped, as a rotated log file's are).
pub const MAX_LINES: usize = 1000;

/// One log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub seq: u64,
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub at: jiff::Timestamp,
    pub text: String,
}

type Key = (String, String, String);

struct Inner {
    seq: u64,
    lines: BTreeMap<Key, VecDeque<Arc<Line>>>,
}

/// Every container's recent lines. Cheap to clone (shared).
#[derive(Clone)]
pub struct Logs {
    inner: Arc<Mutex<Inner>>,
    tx: broadcast::Sender<Arc<Line>>,
}

impl Default for Logs {
    fn default() -> Self {
        let (tx, _) = broadcast::channel(1024);
        Logs {
            inner: Arc::new(Mutex::new(Inner {
                seq: 0,
                lines: BTreeMap::new(),
            })),
            tx,
        }
    }
}

impl Logs {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The container writes `text` now.
    pub fn append(&self, namespace: &str, pod: &str, container: &str, text: String) {
        let mut g = self.lock();
        g.seq += 1;
        let line = Arc::new(Line {
            seq: g.seq,
            namespace: namespace.into(),
            pod: pod.into(),
            container: container.into(),
            at: jiff::Timestamp::now(),
            text,
        });
        let q = g
            .lines
            .entry((namespace.into(), pod.into(), container.into()))
            .or_default();
        q.push_back(line.clone());
        while q.len() > MAX_LINES {
            q.pop_front();
        }
        // Nobody following is fine.
        let _ = self.tx.send(line);
    }

    /// The kept lines of one container, oldest first, and the sequence number they reach
    /// (a follower continues after it).
    pub fn lines(&self, namespace: &str, pod: &str, container: &str) -> (Vec<Arc<Line>>, u64) {
        let g = self.lock();
        let key = (
            namespace.to_string(),
            pod.to_string(),
            container.to_string(),
        );
        let lines = g
            .lines
            .get(&key)
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default();
        (lines, g.seq)
    }

    /// Every line written from now on.
    pub fn follow(&self) -> broadcast::Receiver<Arc<Line>> {
        self.tx.subscribe()
    }

    /// The pod is gone: so are its containers' logs.
    pub fn forget_pod(&self, namespace: &str, pod: &str) {
        self.lock()
            .lines
            .retain(|(ns, p, _), _| !(ns == namespace && p == pod));
    }

    /// Containers with kept lines (for bounds checks).
    pub fn containers(&self) -> usize {
        self.lock().lines.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_capped_and_forgotten_with_their_pod() {
        let logs = Logs::default();
        for i in 0..(MAX_LINES + 5) {
            logs.append("kube-system", "p", "c", format!("line {i}"));
        }
        logs.append("kube-system", "q", "c", "other".into());
        let (lines, seq) = logs.lines("kube-system", "p", "c");
        assert_eq!(lines.len(), MAX_LINES);
        assert_eq!(lines[0].text, "line 5");
        assert_eq!(seq, (MAX_LINES + 6) as u64);
        logs.forget_pod("kube-system", "p");
        assert_eq!(logs.containers(), 1);
    }
}
