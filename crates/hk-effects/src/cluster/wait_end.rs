//! How a wait on the cluster ended: a `kube-wait` watch (`exec::kube::wait`), a Flux
//! reconcile, or the health probe's repeated looks ([`super::health_probe`]).
//!
//! Owns: the four ends and their wording in the step's output.
//! Must not: know how the wait was carried out. It sits in `cluster/` so that the probe
//! here and the executors in `exec/kube/` share it without `cluster/` importing `exec/`.

use std::fmt;
use std::time::Duration;

/// How a wait ended (every end but `Met` fails the step).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitEnd {
    Met(String),
    Failed(String),
    TimedOut { after: Duration, last: String },
    Cancelled { last: String },
}

impl WaitEnd {
    pub fn is_met(&self) -> bool {
        matches!(self, WaitEnd::Met(_))
    }
}

impl fmt::Display for WaitEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitEnd::Met(d) | WaitEnd::Failed(d) => f.write_str(d),
            WaitEnd::TimedOut { after, last } => {
                write!(
                    f,
                    "timed out after {} s; last seen: {last}",
                    after.as_secs()
                )
            }
            WaitEnd::Cancelled { last } => {
                write!(f, "stopped at the operator's request; last seen: {last}")
            }
        }
    }
}
