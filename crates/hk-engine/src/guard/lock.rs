//! PURE. What the run's lock lets go ahead: an operator's go-ahead (an approval, typed
//! text, a retry, a resume decision, a skip) and a mutating step's work are refused while
//! the lock the run holds is lost to another console or lapsed (not renewed for longer than
//! it lasts). A run that holds no lock (none needed, `--no-cluster-lock`) is never stopped
//! here; a rejection, a cancel or an abort only stops things and is never refused.

use crate::runbook::machine::{GateAnswer, Input};

/// The lock as the run holds it now (the renewer's view, handed in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// The run holds no lock.
    NotHeld,
    /// Renewed within its duration: no other console can have taken it.
    Held,
    /// Not renewed for `for_s` seconds, longer than it lasts.
    Lapsed { for_s: u64 },
    /// Another console holds it now.
    Lost { now_held_by: String },
}

/// What a lost lock means for the run, said wherever the loss is.
pub const LOST_STOPS: &str = "nothing more runs in this run; abort it";

/// Why nothing may go ahead now, if anything.
pub fn stop(standing: &Standing) -> Option<String> {
    match standing {
        Standing::NotHeld | Standing::Held => None,
        Standing::Lapsed { for_s } => Some(format!(
            "the run lock was not renewed for {for_s} s, longer than it lasts: another console \
             may hold it now; nothing runs until a renewal succeeds"
        )),
        Standing::Lost { now_held_by } => Some(format!(
            "the run lock was lost: {now_held_by} holds it now · {LOST_STOPS}"
        )),
    }
}

/// Whether `input` is an operator's go-ahead: what moves a run on toward more work (and is
/// refused while its lock is lost or lapsed).
pub fn goes_ahead(input: &Input) -> bool {
    matches!(
        input,
        Input::GateAnswered {
            answer: GateAnswer::Approved { .. },
            ..
        } | Input::TypedText { .. }
            | Input::RetryApproved { .. }
            | Input::RerunApproved { .. }
            | Input::MarkedDone { .. }
            | Input::Skip { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_lost_or_lapsed_lock_stops_and_it_says_why() {
        assert_eq!(stop(&Standing::NotHeld), None);
        assert_eq!(stop(&Standing::Held), None);
        let lapsed = stop(&Standing::Lapsed { for_s: 31 }).unwrap_or_default();
        assert!(lapsed.contains("not renewed for 31 s"), "{lapsed}");
        let lost = stop(&Standing::Lost {
            now_held_by: "bob@laptop".into(),
        })
        .unwrap_or_default();
        assert!(lost.contains("bob@laptop holds it now"), "{lost}");
        assert!(lost.contains(LOST_STOPS), "{lost}");
    }

    #[test]
    fn go_aheads_are_the_answers_that_move_a_run_on() {
        let by = || "root".to_string();
        let ahead = [
            Input::GateAnswered {
                n: 1,
                answer: GateAnswer::Approved {
                    by: by(),
                    note: None,
                },
            },
            Input::TypedText {
                n: 1,
                by: by(),
                text: "prod".into(),
                note: None,
            },
        ];
        for i in &ahead {
            assert!(goes_ahead(i), "{i:?}");
        }
        let stops = [
            Input::GateAnswered {
                n: 1,
                answer: GateAnswer::Rejected {
                    by: by(),
                    reason: "no".into(),
                },
            },
            Input::Abort {
                by: by(),
                reason: "stop".into(),
            },
        ];
        for i in &stops {
            assert!(!goes_ahead(i), "{i:?}");
        }
    }
}
