//! PURE. Whether an operator's answer opens a step's gate: the typed confirmation must be
//! the phrase, the typed host count must be the count of the hosts listed, and a gate that
//! asks for typing is never opened by an approval alone. One of the guard's rules
//! (`crate::guard::operator` is this module); it is written beside the plan's `Gate` because
//! the run machine, below the guard, applies it to every answer.

use super::plan::Gate;

/// What an answer to `gate` by approval alone does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ByApproval {
    /// The approval opens it.
    Opens,
    /// The gate asks for typed text; an approval is not an answer to it.
    NeedsTyping,
}

/// Whether approving (a key, not typed text) can open `gate`.
pub fn by_approval(gate: Option<&Gate>) -> ByApproval {
    match gate {
        Some(Gate::TypedConfirm { .. }) | Some(Gate::ConfirmHosts { .. }) => {
            ByApproval::NeedsTyping
        }
        _ => ByApproval::Opens,
    }
}

/// What typed text does to `gate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Typed {
    /// It opens the gate.
    Opens,
    /// It does not, and why (the line the operator sees under the field).
    DoesNotOpen(String),
    /// The gate asks for no typed text.
    NotAsked,
}

/// Whether `text` typed at `gate` opens it.
pub fn typed(gate: Option<&Gate>, text: &str) -> Typed {
    match gate {
        Some(Gate::TypedConfirm { phrase }) => {
            if text == phrase {
                Typed::Opens
            } else {
                Typed::DoesNotOpen(format!(
                    "typed {text:?}, which is not the confirmation phrase"
                ))
            }
        }
        Some(Gate::ConfirmHosts { expected }) => match text.trim().parse::<usize>() {
            Ok(count) if count == expected.len() => Typed::Opens,
            Ok(count) => Typed::DoesNotOpen(format!(
                "typed {count}, but the step lists {} host(s); count them again",
                expected.len()
            )),
            Err(_) => {
                Typed::DoesNotOpen(format!("typed {text:?}; type the number of hosts listed"))
            }
        },
        _ => Typed::NotAsked,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(n: usize) -> Gate {
        Gate::ConfirmHosts {
            expected: (1..=n).map(|i| format!("k3s-prod-{i}")).collect(),
        }
    }

    #[test]
    fn the_phrase_opens_only_as_typed() {
        let g = Gate::TypedConfirm {
            phrase: "prod".into(),
        };
        assert_eq!(typed(Some(&g), "prod"), Typed::Opens);
        for wrong in ["Prod", "prod ", "", "dev"] {
            assert!(
                matches!(typed(Some(&g), wrong), Typed::DoesNotOpen(ref w) if w.contains("not the confirmation phrase")),
                "{wrong:?}"
            );
        }
    }

    #[test]
    fn the_host_count_must_be_the_count_listed() {
        assert_eq!(typed(Some(&hosts(3)), "3"), Typed::Opens);
        assert_eq!(typed(Some(&hosts(3)), " 3 "), Typed::Opens);
        match typed(Some(&hosts(3)), "2") {
            Typed::DoesNotOpen(w) => assert!(w.contains("lists 3 host(s)"), "{w}"),
            other => panic!("{other:?}"),
        }
        match typed(Some(&hosts(3)), "three") {
            Typed::DoesNotOpen(w) => assert!(w.contains("type the number"), "{w}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn typing_gates_are_not_opened_by_approval_and_others_take_no_text() {
        let phrase = Gate::TypedConfirm {
            phrase: "prod".into(),
        };
        assert_eq!(by_approval(Some(&phrase)), ByApproval::NeedsTyping);
        assert_eq!(by_approval(Some(&hosts(1))), ByApproval::NeedsTyping);
        for g in [
            Gate::OperatorPresent,
            Gate::ApproveDiff,
            Gate::ConfirmDone,
            Gate::Authorise {
                flag: "wipe".into(),
            },
        ] {
            assert_eq!(by_approval(Some(&g)), ByApproval::Opens, "{g:?}");
            assert_eq!(typed(Some(&g), "yes"), Typed::NotAsked, "{g:?}");
        }
        assert_eq!(by_approval(None), ByApproval::Opens);
        assert_eq!(typed(None, "3"), Typed::NotAsked);
    }
}
