//! The live blast radius of a step (issue 29): what disrupting each host it touches does to
//! the cluster as the live panes see it now — the VIP lease it holds, the etcd it leads, the
//! quorum arithmetic, what is already wrong on it. Shown in the gates before a mutating step.
//!
//! Owns: [`live_blast`], from the latest VIP, etcd and nodes panes of the environment, each
//! with its age. A pane not seen, or seen too long ago, makes its facts `unknown` with the
//! age, never fine.
//! A line that `blocks` is the quorum refusal: the gate is not passed until the operator
//! types [`OVERRIDE`] with a reason (the run machine holds that answer to it).
//! Must not: read anything itself (the caller hands in the panes).

use crate::checks::live::{EtcdPane, NodesPane, Rule, Severity, VipLeasePane};
use crate::time::{span_ms, Style};

/// A pane as the caller has it: seen (with how long ago its source last vouched for it, and
/// whether that is too long), or not at all.
#[derive(Debug, Clone, Copy)]
pub enum Seen<T> {
    Fresh { pane: T, age_ms: u64 },
    Stale { pane: T, age_ms: u64 },
    NotSeen,
}

impl<T: Copy> Seen<T> {
    fn fresh(self) -> Option<T> {
        match self {
            Seen::Fresh { pane, .. } => Some(pane),
            _ => None,
        }
    }
}

/// The panes of the step's environment the blast radius is read from.
#[derive(Debug, Clone, Copy)]
pub struct LivePanes<'a> {
    pub vip: Seen<&'a VipLeasePane>,
    pub etcd: Seen<&'a EtcdPane>,
    pub nodes: Seen<&'a NodesPane>,
}

/// One line of the live blast radius, with how much it matters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlastLine {
    pub severity: Severity,
    pub text: String,
    /// The step must not go on without an override: disrupting its hosts, given the health
    /// seen now, leaves etcd without quorum (or the environment without a Ready server).
    pub blocks: bool,
}

fn line(severity: Severity, text: String) -> BlastLine {
    BlastLine {
        severity,
        text,
        blocks: false,
    }
}

/// What the operator types in the gate's note to go on past a blocking line: this prefix,
/// then the reason (journaled with the answer, shown in the change record). The machine's,
/// which counts such an answer among the run's overrides.
pub const OVERRIDE: &str = crate::runbook::machine::QUORUM_OVERRIDE;

/// Whether `lines` hold a blocking one.
pub fn blocks(lines: &[BlastLine]) -> bool {
    lines.iter().any(|l| l.blocks)
}

/// The override's reason when `note` is one (`override quorum: REASON`, REASON not empty).
pub fn override_reason(note: &str) -> Option<&str> {
    crate::runbook::machine::quorum_override_reason(note)
}

/// The refusal the gate shows when a blocking line holds and no override was typed.
pub fn refusal(lines: &[BlastLine]) -> Option<String> {
    let why = lines.iter().find(|l| l.blocks)?;
    Some(format!(
        "refused: {}. To go on anyway, type `{OVERRIDE} REASON` in the note (journaled).",
        why.text
    ))
}

/// `lines` as the journal keeps them (what the gate showed when it was answered): each with
/// its severity in words, the blocking one marked.
pub fn journal_lines(lines: &[BlastLine]) -> Vec<String> {
    lines
        .iter()
        .map(|l| {
            let word = match l.severity {
                Severity::Ok => "ok",
                Severity::Warn => "warning",
                Severity::Critical => "CRITICAL",
                Severity::Unknown => "unknown",
            };
            let blocks = if l.blocks {
                " [refuses the step without an override]"
            } else {
                ""
            };
            format!("{word}: {}{blocks}", l.text)
        })
        .collect()
}

/// Why a pane's facts are unknown: never looked, or the look is old.
fn unknown<T>(what: &str, seen: Seen<T>) -> Option<String> {
    match seen {
        Seen::Fresh { .. } => None,
        Seen::Stale { age_ms, .. } => Some(format!(
            "{what}: unknown (the last look is {} old, stale)",
            span_ms(age_ms, Style::Words)
        )),
        Seen::NotSeen => Some(format!("{what}: unknown (no look yet)")),
    }
}

/// The hosts whose live blast radius the gate of step `n` of `plan` shows: its blast
/// radius's hosts (None where it has none or changes no host). The approval of a move of
/// etcd's leadership shows its server's too: the run that gate lets go on disrupts that
/// server next, so a step that would cost quorum is refused there, before anything
/// changes, not after the leadership moved.
pub fn gate_hosts(plan: &crate::runbook::plan::Plan, n: usize) -> Option<&[String]> {
    let step = plan.steps.iter().find(|s| s.n == n)?;
    let radius = step.blast_radius.as_ref()?;
    (!radius.hosts.is_empty()).then_some(radius.hosts.as_slice())
}

/// The live blast radius of disrupting `hosts` (the step's hosts, in order) in an
/// environment whose etcd members are `servers`: per host, the VIP lease, etcd leadership
/// and what the panes find wrong on it; then the quorum arithmetic once.
pub fn live_blast(hosts: &[String], servers: &[String], panes: &LivePanes<'_>) -> Vec<BlastLine> {
    let mut out = Vec::new();
    if matches!(
        (panes.vip, panes.etcd, panes.nodes),
        (Seen::NotSeen, Seen::NotSeen, Seen::NotSeen)
    ) {
        // One line, not four, on a small terminal: nothing live was ever seen.
        return vec![line(
            Severity::Unknown,
            "unknown: no live look at the VIP lease, etcd or the nodes yet (who holds the VIP, who leads etcd, whether quorum holds)".to_string(),
        )];
    }
    if let Some(why) = unknown("VIP lease holder", panes.vip) {
        out.push(line(Severity::Unknown, why));
    }
    if let Some(why) = unknown("etcd leader and members", panes.etcd) {
        out.push(line(Severity::Unknown, why));
    }
    if let Some(why) = unknown("node readiness", panes.nodes) {
        out.push(line(Severity::Unknown, why));
    }
    let others = |h: &str| -> Vec<&str> {
        servers
            .iter()
            .map(String::as_str)
            .filter(|s| *s != h && !hosts.iter().any(|x| x == s))
            .collect()
    };
    for h in hosts {
        if let Some(vip) = panes.vip.fresh() {
            match vip.holder_node.as_deref() {
                Some(holder) if holder == h => {
                    let to = others(h);
                    // kube-vip's Lease goes to a candidate that acquires it: a server whose
                    // node is Ready (where the nodes are seen; unseen, every other one).
                    let ready = |s: &&str| {
                        panes.nodes.fresh().is_none_or(|n| {
                            n.nodes.iter().any(|r| {
                                r.name == *s
                                    && matches!(
                                        r.ready,
                                        Some(crate::checks::live::ConditionStatus::True)
                                    )
                            })
                        })
                    };
                    let (can, cannot): (Vec<&str>, Vec<&str>) = to.into_iter().partition(ready);
                    let not_ready = if cannot.is_empty() {
                        String::new()
                    } else {
                        format!(" ({} not Ready: cannot take the Lease)", cannot.join(", "))
                    };
                    out.push(if can.is_empty() && cannot.is_empty() {
                        line(
                            Severity::Warn,
                            format!(
                                "{h} holds the VIP lease ({}): no other server can take it",
                                vip.vip
                            ),
                        )
                    } else if can.is_empty() {
                        line(
                            Severity::Critical,
                            format!(
                                "{h} holds the VIP lease ({}): no other server is Ready to take it{not_ready}; the VIP does not answer until one is back",
                                vip.vip
                            ),
                        )
                    } else {
                        line(
                            Severity::Warn,
                            format!(
                                "{h} holds the VIP lease ({}): while it is disrupted the VIP moves to {}{not_ready}",
                                vip.vip,
                                can.join(" or ")
                            ),
                        )
                    });
                }
                Some(holder) => out.push(line(
                    Severity::Ok,
                    format!("{h} does not hold the VIP lease ({holder} does)"),
                )),
                None => out.push(line(
                    Severity::Unknown,
                    format!("VIP lease: no holder seen; whether {h} holds it is unknown"),
                )),
            }
        }
        if let Some(etcd) = panes.etcd.fresh() {
            match etcd.leader.as_deref() {
                Some(l) if l == h => out.push(line(
                    Severity::Warn,
                    format!("{h} leads etcd: an election follows when it is disrupted"),
                )),
                Some(l) => out.push(line(
                    Severity::Ok,
                    format!("{h} does not lead etcd ({l} does)"),
                )),
                None => out.push(line(
                    Severity::Unknown,
                    format!("etcd: no leader seen; whether {h} leads is unknown"),
                )),
            }
            // etcd's client-API findings come once, as the pre-flight's lines (below).
            let client_rule = |v: &&crate::checks::live::Verdict| {
                etcd.client.is_some()
                    && (matches!(
                        v.rule,
                        Rule::EtcdMembership
                            | Rule::EtcdStatus
                            | Rule::EtcdAlarm
                            | Rule::EtcdQuorumRead
                    ) || v.subject.starts_with(crate::checks::live::CLIENT_SUBJECT))
            };
            for v in etcd
                .verdicts
                .iter()
                .filter(|v| names(&v.subject, h) && !client_rule(v))
            {
                if v.severity != Severity::Ok {
                    out.push(line(v.severity, about(h, &v.message)));
                }
            }
        }
        if let Some(nodes) = panes.nodes.fresh() {
            for v in nodes.verdicts.iter().filter(|v| names(&v.subject, h)) {
                if v.severity != Severity::Ok {
                    out.push(line(v.severity, about(h, &v.message)));
                }
            }
        }
    }
    out.extend(preflight(hosts, servers, panes));
    if let Some(q) = quorum(hosts, servers, panes) {
        out.push(q);
    }
    out
}

/// What the plan view says before a run starts that changes `order`: the pre-flight's
/// refusing lines when the plan changes a server (each gate before a server will hold on
/// them until they clear or are overridden). Empty when nothing refuses now.
pub fn plan_refusals(
    order: &[String],
    servers: &[String],
    panes: &LivePanes<'_>,
) -> Vec<BlastLine> {
    preflight(order, servers, panes)
        .into_iter()
        .filter(|l| l.blocks)
        .collect()
}

/// etcd's pre-flight (issue 39) when the step disrupts a server: each finding of the etcd
/// pane's client view, the refusing ones blocking like the quorum arithmetic does.
fn preflight(hosts: &[String], servers: &[String], panes: &LivePanes<'_>) -> Vec<BlastLine> {
    if !hosts.iter().any(|h| servers.contains(h)) {
        return Vec::new();
    }
    let Some(etcd) = panes.etcd.fresh() else {
        return Vec::new();
    };
    match &etcd.client {
        None => vec![line(
            Severity::Unknown,
            "etcd pre-flight: not run (etcd's client API was not read for this environment)"
                .to_string(),
        )],
        Some(view) => view
            .preflight
            .iter()
            .map(|f| BlastLine {
                severity: f.severity,
                text: format!("etcd pre-flight: {}", f.text),
                blocks: f.blocks,
            })
            .collect(),
    }
}

/// "1st", "2nd", "3rd", "4th"... of a 1-based position.
fn ordinal(i: usize) -> String {
    let suffix = match (i % 10, i % 100) {
        (1, x) if x != 11 => "st",
        (2, x) if x != 12 => "nd",
        (3, x) if x != 13 => "rd",
        _ => "th",
    };
    format!("{i}{suffix}")
}

/// Where the plan takes the VIP holder and the etcd leader (issue 29): `order` is the hosts
/// the run changes, in the plan's order. Shown with the plan before the run starts, so the
/// order can put the holder last (the VIP then moves once, not with every later server).
/// `None` when the plan changes fewer than two hosts (the gate's lines say it then).
pub fn holder_in_order(order: &[String], panes: &LivePanes<'_>) -> Option<BlastLine> {
    if order.len() < 2 {
        return None;
    }
    let (vip, etcd) = match (panes.vip.fresh(), panes.etcd.fresh()) {
        (Some(v), Some(e)) => (v, e),
        _ => {
            let why = unknown("VIP lease holder", panes.vip)
                .or_else(|| unknown("etcd leader", panes.etcd))
                .unwrap_or_default();
            return Some(line(
                Severity::Unknown,
                format!("which of these hosts holds the VIP and leads etcd: {why}"),
            ));
        }
    };
    let n = order.len();
    let at = |h: &str| order.iter().position(|x| x == h).map(|i| i + 1);
    let place = |h: &str| match at(h) {
        Some(i) if i == n => format!("the plan takes it last ({} of {n})", ordinal(i)),
        Some(i) => format!("the plan takes it {} of {n}", ordinal(i)),
        None => "the plan does not change it".to_string(),
    };
    let holder = vip.holder_node.as_deref();
    let leader = etcd.leader.as_deref();
    let early = |h: &str| at(h).is_some_and(|i| i < n);
    let advice = "taking it last moves the VIP once (the runbook's target.order sets the order)";
    Some(match (holder, leader) {
        (Some(h), Some(l)) if h == l => line(
            if early(h) {
                Severity::Warn
            } else {
                Severity::Ok
            },
            format!(
                "{h} holds the VIP lease and leads etcd now; {}{}",
                place(h),
                if early(h) {
                    format!(": {advice}")
                } else {
                    String::new()
                }
            ),
        ),
        (h, l) => {
            let vip_part = match h {
                Some(h) => format!("{h} holds the VIP lease now ({})", place(h)),
                None => "no VIP lease holder seen".to_string(),
            };
            let etcd_part = match l {
                Some(l) => format!("{l} leads etcd ({})", place(l)),
                None => "no etcd leader seen".to_string(),
            };
            let warn = h.is_some_and(early) || l.is_some_and(early);
            line(
                if warn { Severity::Warn } else { Severity::Ok },
                format!(
                    "{vip_part}; {etcd_part}{}",
                    if h.is_some_and(early) {
                        format!(": {advice}")
                    } else {
                        String::new()
                    }
                ),
            )
        }
    })
}

/// A verdict's message about `host`, which it names once: prefixed with the host unless it
/// already begins with it.
fn about(host: &str, message: &str) -> String {
    if message.starts_with(host) {
        message.to_string()
    } else {
        format!("{host}: {message}")
    }
}

/// Whether a verdict's subject names `host` (`k3s-prod-1`, `member k3s-prod-1`,
/// `server k3s-prod-1`), not a host whose name merely begins with it.
fn names(subject: &str, host: &str) -> bool {
    subject == host || subject.rsplit(' ').next() == Some(host)
}

/// The quorum arithmetic: healthy members now, and what remains while the step's hosts that
/// are members are disrupted. A member is healthy when its node is Ready and the etcd pane
/// counts nothing against it; unknown when either pane is not fresh.
fn quorum(hosts: &[String], servers: &[String], panes: &LivePanes<'_>) -> Option<BlastLine> {
    let n = servers.len();
    if n == 0 {
        return None;
    }
    let touched: Vec<&String> = hosts.iter().filter(|h| servers.contains(h)).collect();
    if touched.is_empty() {
        return Some(line(
            Severity::Ok,
            format!(
                "no etcd member is disrupted ({} not a server)",
                if hosts.len() == 1 {
                    "the host is"
                } else {
                    "the hosts are"
                }
            ),
        ));
    }
    let (Some(etcd), Some(nodes)) = (panes.etcd.fresh(), panes.nodes.fresh()) else {
        return Some(line(
            Severity::Unknown,
            format!(
                "etcd quorum while {} is disrupted: unknown (the etcd and nodes panes must both be fresh)",
                list(&touched)
            ),
        ));
    };
    let down: Vec<&String> = servers
        .iter()
        .filter(|s| {
            let ready = nodes
                .nodes
                .iter()
                .find(|r| &r.name == *s)
                .and_then(|r| r.ready.as_ref())
                .is_some_and(|r| matches!(r, crate::checks::live::ConditionStatus::True));
            let counted_down = etcd.verdicts.iter().any(|v| {
                v.severity == Severity::Critical
                    && v.rule == crate::checks::live::Rule::EtcdQuorum
                    && v.subject == format!("member {s}")
            });
            !ready || counted_down
        })
        .collect();
    let healthy = n - down.len();
    let majority = n / 2 + 1;
    let disrupted = touched.iter().filter(|h| !down.contains(h)).count();
    let remain = healthy.saturating_sub(disrupted);
    let now = if down.is_empty() {
        format!("{healthy} of {n} etcd members healthy")
    } else {
        format!(
            "{healthy} of {n} etcd members healthy ({} down)",
            list(&down)
        )
    };
    let (severity, then) = if remain < majority {
        (
            Severity::Critical,
            format!("{remain} remain: etcd LOSES QUORUM ({majority} of {n} needed)"),
        )
    } else if remain == majority {
        (
            Severity::Warn,
            format!("{remain} remain: quorum holds ({majority} of {n} needed), no further failure tolerated"),
        )
    } else {
        (
            Severity::Ok,
            format!(
                "{remain} remain: quorum holds ({majority} of {n} needed), {} more failure(s) tolerated",
                remain - majority
            ),
        )
    };
    let mut l = line(
        severity,
        format!("{now}; while {} is disrupted {then}", list(&touched)),
    );
    l.blocks = remain < majority;
    Some(l)
}

fn list(hosts: &[&String]) -> String {
    hosts
        .iter()
        .map(|h| h.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::live::{ConditionStatus, NodeRow, Pane, Rule, Verdict};

    fn servers() -> Vec<String> {
        ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"]
            .map(String::from)
            .to_vec()
    }

    fn vip(holder: &str) -> VipLeasePane {
        let mut p = VipLeasePane::unjudged("prod", "192.168.2.9".parse().expect("ip"), 6443);
        p.holder = Some(holder.into());
        p.holder_node = Some(holder.into());
        p
    }

    fn etcd(leader: &str, down: &[&str]) -> EtcdPane {
        EtcdPane {
            env: "prod".into(),
            members: Vec::new(),
            leader: Some(leader.into()),
            // etcd's client API read, nothing found.
            client: Some(Default::default()),
            verdicts: down
                .iter()
                .map(|h| {
                    Verdict::new(
                        Pane::Etcd,
                        Rule::EtcdQuorum,
                        Severity::Critical,
                        "prod",
                        format!("member {h}"),
                        format!("{h} NotReady: its etcd member is counted down"),
                    )
                })
                .collect(),
        }
    }

    fn nodes(not_ready: &[&str]) -> NodesPane {
        NodesPane {
            env: "prod".into(),
            nodes: servers()
                .into_iter()
                .map(|name| NodeRow {
                    ready: Some(if not_ready.contains(&name.as_str()) {
                        ConditionStatus::False
                    } else {
                        ConditionStatus::True
                    }),
                    name,
                    roles: vec!["control-plane".into()],
                })
                .collect(),
            verdicts: Vec::new(),
        }
    }

    fn fresh<T>(pane: T) -> Seen<T> {
        Seen::Fresh {
            pane,
            age_ms: 2_000,
        }
    }

    fn all_fresh<'a>(v: &'a VipLeasePane, e: &'a EtcdPane, n: &'a NodesPane) -> LivePanes<'a> {
        LivePanes {
            vip: fresh(v),
            etcd: fresh(e),
            nodes: fresh(n),
        }
    }

    fn texts(v: &[BlastLine]) -> Vec<String> {
        v.iter().map(|l| l.text.clone()).collect()
    }

    #[test]
    fn an_etcd_preflight_refusal_blocks_a_step_on_a_server_only() {
        let (v, n) = (vip("k3s-prod-1"), nodes(&[]));
        let mut e = etcd("k3s-prod-1", &[]);
        let learner = "m4 (4) is a learner, not yet a voting member: finish or remove it first";
        e.client = Some(crate::checks::live::EtcdClientView {
            preflight: vec![
                crate::checks::live::Finding {
                    severity: Severity::Critical,
                    blocks: true,
                    text: learner.into(),
                },
                crate::checks::live::Finding {
                    severity: Severity::Warn,
                    blocks: false,
                    text: "k3s-prod-2's disk: slow".into(),
                },
            ],
            ..Default::default()
        });
        let panes = all_fresh(&v, &e, &n);
        let lines = live_blast(&["k3s-prod-3".to_string()], &servers(), &panes);
        assert!(blocks(&lines), "{lines:#?}");
        assert_eq!(
            refusal(&lines).as_deref(),
            Some(format!("refused: etcd pre-flight: {learner}. To go on anyway, type `override quorum: REASON` in the note (journaled).").as_str())
        );
        assert!(texts(&lines).contains(&"etcd pre-flight: k3s-prod-2's disk: slow".to_string()));
        assert_eq!(
            texts(&plan_refusals(&servers(), &servers(), &panes)),
            vec![format!("etcd pre-flight: {learner}")]
        );
        // An agent's step disrupts no member: no pre-flight.
        let lines = live_blast(&["k3s-prod-agent-1".to_string()], &servers(), &panes);
        assert!(!blocks(&lines), "{lines:#?}");
        // etcd's client API not read: said, not passed, not blocking.
        e.client = None;
        let panes = all_fresh(&v, &e, &n);
        let lines = live_blast(&["k3s-prod-3".to_string()], &servers(), &panes);
        assert!(!blocks(&lines));
        assert!(texts(&lines).contains(
            &"etcd pre-flight: not run (etcd's client API was not read for this environment)"
                .to_string()
        ));
    }

    #[test]
    fn the_plan_says_where_it_takes_the_vip_holder_and_the_etcd_leader() {
        let (v, e, n) = (vip("k3s-prod-1"), etcd("k3s-prod-1", &[]), nodes(&[]));
        let panes = all_fresh(&v, &e, &n);
        let order: Vec<String> = ["k3s-prod-3", "k3s-prod-1", "k3s-prod-2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let l = holder_in_order(&order, &panes).expect("a line");
        assert_eq!(l.severity, Severity::Warn);
        assert_eq!(
            l.text,
            "k3s-prod-1 holds the VIP lease and leads etcd now; the plan takes it 2nd of 3: \
             taking it last moves the VIP once (the runbook's target.order sets the order)"
        );
        let order: Vec<String> = ["k3s-prod-3", "k3s-prod-2", "k3s-prod-1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let l = holder_in_order(&order, &panes).expect("a line");
        assert_eq!(l.severity, Severity::Ok);
        assert!(
            l.text.ends_with("the plan takes it last (3rd of 3)"),
            "{}",
            l.text
        );
        // One host: the gate says it.
        assert!(holder_in_order(&order[..1], &panes).is_none());
        // Nothing seen: unknown, never fine.
        let none = LivePanes {
            vip: Seen::NotSeen,
            etcd: Seen::NotSeen,
            nodes: Seen::NotSeen,
        };
        let l = holder_in_order(&order, &none).expect("a line");
        assert_eq!(l.severity, Severity::Unknown);
        assert!(l.text.contains("unknown (no look yet)"), "{}", l.text);
    }

    #[test]
    fn the_holder_and_leader_is_named_and_quorum_holds_with_none_to_spare() {
        let (v, e, n) = (vip("k3s-prod-1"), etcd("k3s-prod-1", &[]), nodes(&[]));
        let panes = all_fresh(&v, &e, &n);
        let out = live_blast(&["k3s-prod-1".into()], &servers(), &panes);
        let t = texts(&out);
        assert_eq!(
            t,
            vec![
                "k3s-prod-1 holds the VIP lease (192.168.2.9): while it is disrupted the VIP moves to k3s-prod-2 or k3s-prod-3",
                "k3s-prod-1 leads etcd: an election follows when it is disrupted",
                "3 of 3 etcd members healthy; while k3s-prod-1 is disrupted 2 remain: quorum holds (2 of 3 needed), no further failure tolerated",
            ]
        );
        assert_eq!(out[2].severity, Severity::Warn);
    }

    /// Where the VIP goes is said from who can take it: a server whose node is not Ready
    /// is named as unable; none Ready is critical.
    #[test]
    fn the_vip_is_said_to_move_only_to_a_ready_server() {
        let (v, e) = (vip("k3s-prod-1"), etcd("k3s-prod-1", &[]));
        let n = nodes(&["k3s-prod-2"]);
        let out = live_blast(&["k3s-prod-1".into()], &servers(), &all_fresh(&v, &e, &n));
        assert_eq!(
            out[0].text,
            "k3s-prod-1 holds the VIP lease (192.168.2.9): while it is disrupted the VIP moves to k3s-prod-3 (k3s-prod-2 not Ready: cannot take the Lease)"
        );
        assert_eq!(out[0].severity, Severity::Warn);
        let n = nodes(&["k3s-prod-2", "k3s-prod-3"]);
        let out = live_blast(&["k3s-prod-1".into()], &servers(), &all_fresh(&v, &e, &n));
        assert_eq!(out[0].severity, Severity::Critical, "{:?}", out[0]);
        assert!(
            out[0]
                .text
                .contains("no other server is Ready to take it (k3s-prod-2, k3s-prod-3 not Ready"),
            "{}",
            out[0].text
        );
    }

    #[test]
    fn with_one_server_down_disrupting_another_loses_quorum() {
        let (v, e, n) = (
            vip("k3s-prod-2"),
            etcd("k3s-prod-2", &["k3s-prod-1"]),
            nodes(&["k3s-prod-1"]),
        );
        let panes = all_fresh(&v, &e, &n);
        let out = live_blast(&["k3s-prod-3".into()], &servers(), &panes);
        let q = out.last().expect("quorum line");
        assert_eq!(q.severity, Severity::Critical, "{q:?}");
        assert_eq!(
            q.text,
            "2 of 3 etcd members healthy (k3s-prod-1 down); while k3s-prod-3 is disrupted 1 remain: etcd LOSES QUORUM (2 of 3 needed)"
        );
        // Disrupting the member already down changes nothing more.
        let out = live_blast(&["k3s-prod-1".into()], &servers(), &panes);
        let q = out.last().expect("quorum line");
        assert_eq!(q.severity, Severity::Warn, "{q:?}");
        assert!(out
            .iter()
            .any(|l| l.text == "k3s-prod-1 NotReady: its etcd member is counted down"));
    }

    #[test]
    fn what_was_not_seen_or_is_stale_is_unknown_with_its_age_never_fine() {
        let (v, e) = (vip("k3s-prod-1"), etcd("k3s-prod-1", &[]));
        let panes = LivePanes {
            vip: Seen::Stale {
                pane: &v,
                age_ms: 40_000,
            },
            etcd: fresh(&e),
            nodes: Seen::NotSeen,
        };
        let out = live_blast(&["k3s-prod-1".into()], &servers(), &panes);
        let t = texts(&out);
        assert!(
            t.contains(&"VIP lease holder: unknown (the last look is 40s old, stale)".to_string()),
            "{t:#?}"
        );
        assert!(
            t.contains(&"node readiness: unknown (no look yet)".to_string()),
            "{t:#?}"
        );
        // Nothing is said of the lease from a stale look; the quorum is unknown.
        assert!(!t.iter().any(|l| l.contains("holds the VIP")), "{t:#?}");
        let q = out.last().expect("quorum");
        assert_eq!(q.severity, Severity::Unknown);
        assert!(q.text.contains("unknown"), "{}", q.text);
        assert!(out
            .iter()
            .all(|l| l.severity != Severity::Ok || !l.text.contains("quorum")));
    }

    #[test]
    fn losing_quorum_blocks_until_an_override_with_a_reason() {
        let (v, e, n) = (
            vip("k3s-prod-2"),
            etcd("k3s-prod-2", &["k3s-prod-1"]),
            nodes(&["k3s-prod-1"]),
        );
        let panes = all_fresh(&v, &e, &n);
        let out = live_blast(&["k3s-prod-3".into()], &servers(), &panes);
        assert!(blocks(&out));
        let why = refusal(&out).expect("a refusal");
        assert!(
            why.starts_with("refused: 2 of 3 etcd members healthy"),
            "{why}"
        );
        assert!(why.contains("override quorum: REASON"), "{why}");
        assert_eq!(
            override_reason("override quorum: node 1 is being replaced"),
            Some("node 1 is being replaced")
        );
        assert_eq!(override_reason("  override quorum:   "), None);
        assert_eq!(override_reason("override: go"), None);
        // Healthy: nothing blocks, not even on the holder and leader.
        let (v, e, n) = (vip("k3s-prod-3"), etcd("k3s-prod-3", &[]), nodes(&[]));
        let panes = all_fresh(&v, &e, &n);
        assert!(!blocks(&live_blast(
            &["k3s-prod-3".into()],
            &servers(),
            &panes
        )));
        // The last Ready server of a one-server environment blocks too.
        let one = vec!["k3s-prod-1".to_string()];
        let mut n1 = nodes(&[]);
        n1.nodes.truncate(1);
        let panes = all_fresh(&v, &e, &n1);
        let out = live_blast(&one, &one, &panes);
        assert!(blocks(&out), "{out:#?}");
    }

    #[test]
    fn with_nothing_seen_one_line_says_so() {
        let panes = LivePanes {
            vip: Seen::NotSeen,
            etcd: Seen::NotSeen,
            nodes: Seen::NotSeen,
        };
        let out = live_blast(&["k3s-prod-1".into()], &servers(), &panes);
        assert_eq!(out.len(), 1, "{out:#?}");
        assert_eq!(out[0].severity, Severity::Unknown);
        assert!(
            out[0].text.starts_with("unknown: no live look"),
            "{}",
            out[0].text
        );
    }

    #[test]
    fn a_host_that_is_no_server_disrupts_no_member() {
        let (v, e, n) = (vip("k3s-prod-1"), etcd("k3s-prod-1", &[]), nodes(&[]));
        let panes = all_fresh(&v, &e, &n);
        let out = live_blast(&["gw-1".into()], &servers(), &panes);
        assert_eq!(
            out.last().map(|l| l.text.as_str()),
            Some("no etcd member is disrupted (the host is not a server)")
        );
        assert!(!names("member k3s-prod-10", "k3s-prod-1"));
        assert!(names("member k3s-prod-1", "k3s-prod-1"));
    }
}
