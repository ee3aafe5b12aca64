//! Containers' logs: the recent lines each simulated container wrote (what `kubectl logs`
//! reads from the kubelet), and a feed of new lines for `kubectl logs -f`.
//!
//! Owns: [`Logs`] (per namespace, pod and container, the last [`MAX_LINES`] lines with the
//! time each was written and a sequence number), kept per container instance as the kubelet
//! keeps them (a restart starts a new log; the last terminated instance's log is kept for
//! `kubectl logs --previous`, older ones are gone), forgetting a pod's lines when the pod goes
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
    /// Which instance of the container wrote it (its restart count then): a follower of
    /// one instance stops at the first line of the next, as the kubelet ends a follow when
    /// the container it reads exits.
    pub instance: u64,
    pub at: jiff::Timestamp,
    pub text: String,
}

type Key = (String, String, String);

/// Which of a container's logs to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Instance {
    /// The running instance's (`kubectl logs`).
    Current,
    /// The last terminated instance's (`kubectl logs --previous`).
    Previous,
}

/// One container's logs: the running instance's and the last terminated one's.
#[derive(Default)]
struct Kept {
    instance: u64,
    current: VecDeque<Arc<Line>>,
    previous: Option<VecDeque<Arc<Line>>>,
}

struct Inner {
    seq: u64,
    lines: BTreeMap<Key, Kept>,
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
        let seq = g.seq;
        let kept = g
            .lines
            .entry((namespace.into(), pod.into(), container.into()))
            .or_default();
        let line = Arc::new(Line {
            seq,
            namespace: namespace.into(),
            pod: pod.into(),
            container: container.into(),
            instance: kept.instance,
            at: jiff::Timestamp::now(),
            text,
        });
        let q = &mut kept.current;
        q.push_back(line.clone());
        while q.len() > MAX_LINES {
            q.pop_front();
        }
        // Nobody following is fine.
        let _ = self.tx.send(line);
    }

    /// The container exited and the kubelet started it again: what it writes from now on is
    /// a new instance's log; the one that ended becomes the previous one (and the one before
    /// that is gone, as the kubelet keeps only the last terminated container).
    pub fn restart(&self, namespace: &str, pod: &str, container: &str) {
        let mut g = self.lock();
        let kept = g
            .lines
            .entry((namespace.into(), pod.into(), container.into()))
            .or_default();
        kept.previous = Some(std::mem::take(&mut kept.current));
        kept.instance += 1;
    }

    /// The kept lines of one container's `which` instance, oldest first, the instance they
    /// are of, and the sequence number they reach (a follower continues after it). `None`:
    /// the container never restarted, so there is no previous instance.
    pub fn lines(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        which: Instance,
    ) -> Option<(Vec<Arc<Line>>, u64, u64)> {
        let g = self.lock();
        let key = (
            namespace.to_string(),
            pod.to_string(),
            container.to_string(),
        );
        let kept = g.lines.get(&key);
        let instance = kept.map_or(0, |k| k.instance);
        let lines = match which {
            Instance::Current => kept
                .map(|k| k.current.iter().cloned().collect())
                .unwrap_or_default(),
            Instance::Previous => kept?.previous.as_ref()?.iter().cloned().collect(),
        };
        let instance = match which {
            Instance::Current => instance,
            Instance::Previous => instance.saturating_sub(1),
        };
        Some((lines, instance, g.seq))
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
        let (lines, _, seq) = logs
            .lines("kube-system", "p", "c", Instance::Current)
            .expect("current");
        assert_eq!(lines.len(), MAX_LINES);
        assert_eq!(lines[0].text, "line 5");
        assert_eq!(seq, (MAX_LINES + 6) as u64);
        logs.forget_pod("kube-system", "p");
        assert_eq!(logs.containers(), 1);
    }

    #[test]
    fn a_restart_starts_a_new_log_and_keeps_only_the_last_terminated_one() {
        let logs = Logs::default();
        let read = |which| {
            logs.lines("kube-system", "vip", "kube-vip", which)
                .map(|(l, i, _)| (l.iter().map(|l| l.text.clone()).collect::<Vec<_>>(), i))
        };
        assert_eq!(read(Instance::Previous), None, "no restart: no previous");
        assert_eq!(read(Instance::Current), Some((vec![], 0)));
        logs.append("kube-system", "vip", "kube-vip", "first a".into());
        logs.append("kube-system", "vip", "kube-vip", "first b".into());
        assert_eq!(read(Instance::Previous), None);
        logs.restart("kube-system", "vip", "kube-vip");
        assert_eq!(read(Instance::Current), Some((vec![], 1)));
        logs.append("kube-system", "vip", "kube-vip", "second".into());
        assert_eq!(read(Instance::Current), Some((vec!["second".into()], 1)));
        assert_eq!(
            read(Instance::Previous),
            Some((vec!["first a".into(), "first b".into()], 0))
        );
        logs.restart("kube-system", "vip", "kube-vip");
        logs.append("kube-system", "vip", "kube-vip", "third".into());
        assert_eq!(read(Instance::Current), Some((vec!["third".into()], 2)));
        assert_eq!(read(Instance::Previous), Some((vec!["second".into()], 1)));
        let (lines, _, _) = logs
            .lines("kube-system", "vip", "kube-vip", Instance::Current)
            .expect("current");
        assert_eq!(
            lines[0].instance, 2,
            "a line names the instance that wrote it"
        );
        // Another container of the pod is untouched.
        assert_eq!(
            logs.lines("kube-system", "vip", "other", Instance::Previous)
                .map(|(l, _, _)| l.len()),
            None
        );
    }
}
