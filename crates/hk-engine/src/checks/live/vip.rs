//! VIP lease: the kube-vip Lease and a TCP probe of VIP:port judged against the environment's
//! servers, and [`holder_ready`], which crosses the lease holder with its node.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::{
    could_not, human_ms,
    nodes::{ConditionStatus, NodesPane},
    EnvTopology, Look, Pane, Rule, Server, Severity, Timestamp, Verdict,
};

/// The kube-vip control-plane Lease as read from kube-system (fields of `LeaseSpec`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseObs {
    pub name: String,
    pub holder_identity: Option<String>,
    pub renew_time: Option<Timestamp>,
    pub lease_duration_seconds: Option<u64>,
    pub lease_transitions: Option<u64>,
}

/// A TCP connect to VIP:port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "result")]
pub enum TcpProbe {
    Connected { latency_ms: u64 },
    Failed { error: String },
}

/// Input of the VIP lease pane. `lease`: `Seen { None }` = no such Lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VipLeaseInput {
    pub lease: Look<Option<LeaseObs>>,
    pub probe: Look<TcpProbe>,
    pub now: Timestamp,
}

/// What the VIP lease pane shows, plus its verdicts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VipLeasePane {
    pub env: String,
    pub vip: IpAddr,
    pub port: u16,
    pub holder: Option<String>,
    /// The environment server the holder identity maps to.
    pub holder_node: Option<String>,
    pub renew_age_ms: Option<u64>,
    pub lease_duration_seconds: Option<u64>,
    pub transitions: Option<u64>,
    pub probe: Option<TcpProbe>,
    pub verdicts: Vec<Verdict>,
}

impl VipLeasePane {
    /// The pane of `env`'s VIP before anything is known about its lease or probe.
    pub fn unjudged(env: &str, vip: IpAddr, port: u16) -> VipLeasePane {
        VipLeasePane {
            env: env.to_string(),
            vip,
            port,
            holder: None,
            holder_node: None,
            renew_age_ms: None,
            lease_duration_seconds: None,
            transitions: None,
            probe: None,
            verdicts: Vec::new(),
        }
    }
}

/// Judge the kube-vip Lease and the VIP probe. Stale means renew age strictly greater than
/// the lease duration (at exactly the duration the holder is still within its lease).
pub fn vip_lease(topo: &EnvTopology, input: &VipLeaseInput) -> VipLeasePane {
    let env = topo.env.as_str();
    let vip_at = format!("{}:{}", topo.vip, topo.api_port);
    let mut pane = VipLeasePane::unjudged(env, topo.vip, topo.api_port);
    let v = |rule, sev, subject: &str, msg: String| {
        Verdict::new(Pane::VipLease, rule, sev, env, subject, msg)
    };

    // None = could not look; Some(true) = a live holder; Some(false) = missing/stale/empty.
    let mut lease_live: Option<bool> = None;
    let mut lease_story = String::new();
    match &input.lease {
        Look::CouldNotLook { reason } => {
            pane.verdicts
                .push(could_not(Pane::VipLease, env, "lease", reason));
        }
        Look::Seen { value: None } => {
            lease_live = Some(false);
            lease_story = "no kube-vip lease".to_string();
            pane.verdicts.push(v(
                Rule::LeaseHeld,
                Severity::Critical,
                "lease",
                format!(
                    "no kube-vip lease: nobody is elected to announce the VIP {}",
                    topo.vip
                ),
            ));
        }
        Look::Seen { value: Some(lease) } => {
            pane.holder = lease.holder_identity.clone().filter(|h| !h.is_empty());
            pane.lease_duration_seconds = lease.lease_duration_seconds;
            pane.transitions = lease.lease_transitions;
            let subject = format!("lease {}", lease.name);
            match &pane.holder {
                None => {
                    lease_live = Some(false);
                    lease_story = format!("lease {} has no holder", lease.name);
                    pane.verdicts.push(v(
                        Rule::LeaseHeld,
                        Severity::Critical,
                        &subject,
                        format!(
                            "lease {} has no holder: nobody announces the VIP {}",
                            lease.name, topo.vip
                        ),
                    ));
                }
                Some(holder) => {
                    lease_live = Some(true);
                    lease_story = format!("lease {} is held by {holder}", lease.name);
                    let transitions = lease
                        .lease_transitions
                        .map(|t| format!(", {t} transitions"))
                        .unwrap_or_default();
                    pane.verdicts.push(v(
                        Rule::LeaseHeld,
                        Severity::Ok,
                        &subject,
                        format!("lease {} held by {holder}{transitions}", lease.name),
                    ));
                    match topo.server_by_identity(holder) {
                        Some(s) => {
                            pane.holder_node = Some(s.name.clone());
                            pane.verdicts.push(v(
                                Rule::LeaseHolder,
                                Severity::Ok,
                                &subject,
                                format!("holder {holder} is server {} ({})", s.name, s.address),
                            ));
                        }
                        None => pane.verdicts.push(v(
                            Rule::LeaseHolder,
                            Severity::Warn,
                            &subject,
                            format!(
                                "holder {holder} is none of {env}'s servers ({})",
                                names(&topo.servers)
                            ),
                        )),
                    }
                    match (lease.renew_time, lease.lease_duration_seconds) {
                        (Some(renew), Some(dur)) => {
                            // A renew in the future (clock skew) counts as just renewed.
                            let age = input.now.0.saturating_sub(renew.0);
                            pane.renew_age_ms = Some(age);
                            let dur_ms = dur.saturating_mul(1000);
                            if age > dur_ms {
                                lease_live = Some(false);
                                lease_story = format!(
                                    "lease {} is stale (last renewed by {holder} {} ago)",
                                    lease.name,
                                    human_ms(age)
                                );
                                pane.verdicts.push(v(
                                    Rule::LeaseFresh,
                                    Severity::Warn,
                                    &subject,
                                    format!(
                                        "stale: {holder} last renewed {} ago, longer than the \
                                         lease duration {dur}s",
                                        human_ms(age)
                                    ),
                                ));
                            } else {
                                pane.verdicts.push(v(
                                    Rule::LeaseFresh,
                                    Severity::Ok,
                                    &subject,
                                    format!(
                                        "renewed {} ago (lease duration {dur}s)",
                                        human_ms(age)
                                    ),
                                ));
                            }
                        }
                        (renew, _) => {
                            if let Some(r) = renew {
                                pane.renew_age_ms = Some(input.now.0.saturating_sub(r.0));
                            }
                            let missing = if renew.is_none() {
                                "renewTime"
                            } else {
                                "leaseDurationSeconds"
                            };
                            pane.verdicts.push(v(
                                Rule::LeaseFresh,
                                Severity::Unknown,
                                &subject,
                                format!("cannot tell freshness: the lease has no {missing}"),
                            ));
                        }
                    }
                }
            }
        }
    }

    let mut vip_answers: Option<bool> = None;
    let mut probe_story = String::new();
    match &input.probe {
        Look::CouldNotLook { reason } => {
            pane.verdicts
                .push(could_not(Pane::VipLease, env, &vip_at, reason));
        }
        Look::Seen { value } => {
            pane.probe = Some(value.clone());
            match value {
                TcpProbe::Connected { latency_ms } => {
                    vip_answers = Some(true);
                    probe_story = format!("VIP {vip_at} answers");
                    pane.verdicts.push(v(
                        Rule::VipAnswers,
                        Severity::Ok,
                        &vip_at,
                        format!("VIP {vip_at} answers ({latency_ms} ms)"),
                    ));
                }
                TcpProbe::Failed { error } => {
                    vip_answers = Some(false);
                    probe_story = format!("VIP {vip_at} does not answer ({error})");
                    pane.verdicts.push(v(
                        Rule::VipAnswers,
                        Severity::Critical,
                        &vip_at,
                        format!("VIP {vip_at} does not answer: {error}"),
                    ));
                }
            }
        }
    }

    match (lease_live, vip_answers) {
        (Some(true), Some(false)) => pane.verdicts.push(v(
            Rule::LeaseVipAgree,
            Severity::Critical,
            &vip_at,
            format!(
                "{lease_story}, but {probe_story}: the holder is not announcing or the API \
                 server behind it is down"
            ),
        )),
        (Some(false), Some(true)) => pane.verdicts.push(v(
            Rule::LeaseVipAgree,
            Severity::Warn,
            &vip_at,
            format!(
                "{probe_story}, but {lease_story}: something answers that no live leader \
                 announces (a former holder's ARP, or another host on the address)"
            ),
        )),
        (Some(true), Some(true)) => pane.verdicts.push(v(
            Rule::LeaseVipAgree,
            Severity::Ok,
            &vip_at,
            format!("{lease_story} and {probe_story}"),
        )),
        _ => {}
    }
    pane
}

/// The VIP holder against the Nodes pane: a holder whose node is NotReady (False or
/// Unknown) is a warning at once, even while its lease is still fresh: kube-vip on a dead
/// node keeps a valid-looking lease for up to its duration, and the VIP moves only when it
/// expires. `None` when the holder maps to no server or its node is not in the pane (the
/// VIP pane's own rules say so already).
pub fn holder_ready(vip: &VipLeasePane, nodes: &NodesPane) -> Option<Verdict> {
    let holder = vip.holder_node.as_deref()?;
    let node = nodes.nodes.iter().find(|n| n.name == holder)?;
    let subject = format!("holder {holder}");
    let (severity, message) = match node.ready {
        Some(ConditionStatus::True) => (Severity::Ok, format!("holder {holder} is Ready")),
        Some(ConditionStatus::False) | Some(ConditionStatus::Unknown) => (
            Severity::Warn,
            format!(
                "holder {holder} is NotReady: the lease is still held but its node is down; \
                 the VIP moves to another server when the lease expires"
            ),
        ),
        None => (
            Severity::Unknown,
            format!("holder {holder}'s node has no Ready condition"),
        ),
    };
    Some(Verdict::new(
        Pane::VipLease,
        Rule::LeaseHolderReady,
        severity,
        &vip.env,
        subject,
        message,
    ))
}

fn names(servers: &[Server]) -> String {
    if servers.is_empty() {
        return "no servers known".to_string();
    }
    servers
        .iter()
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::super::{nodes, worst, NodeObs};
    use super::*;
    use std::collections::BTreeMap;

    fn prod() -> EnvTopology {
        EnvTopology {
            env: "prod".into(),
            vip: "192.168.2.9".parse().expect("ip"),
            api_port: 6443,
            agents: Vec::new(),
            servers: (1..=3)
                .map(|i| Server {
                    name: format!("k3s-prod-{i}"),
                    address: format!("192.168.2.{}", 9 + i).parse().expect("ip"),
                })
                .collect(),
        }
    }

    fn node(name: &str, ready: Option<ConditionStatus>) -> NodeObs {
        NodeObs {
            name: name.into(),
            ready,
            labels: BTreeMap::new(),
            addresses: vec![],
        }
    }

    #[test]
    fn a_notready_holder_warns_while_its_lease_is_fresh() {
        let topo = prod();
        let now = Timestamp(1_000_000);
        let vip = vip_lease(
            &topo,
            &VipLeaseInput {
                lease: Look::seen(Some(LeaseObs {
                    name: "plndr-cp-lock".into(),
                    holder_identity: Some("k3s-prod-1".into()),
                    renew_time: Some(Timestamp(now.0 - 1_000)),
                    lease_duration_seconds: Some(5),
                    lease_transitions: Some(0),
                })),
                probe: Look::seen(TcpProbe::Connected { latency_ms: 1 }),
                now,
            },
        );
        // The lease alone is all green: fresh, held by a server, the VIP answers.
        assert_eq!(worst(&vip.verdicts), Severity::Ok);
        let down = nodes(
            &topo,
            &Look::seen(vec![
                node("k3s-prod-1", Some(ConditionStatus::Unknown)),
                node("k3s-prod-2", Some(ConditionStatus::True)),
                node("k3s-prod-3", Some(ConditionStatus::True)),
            ]),
        );
        let v = holder_ready(&vip, &down).expect("the holder is a node of the pane");
        assert_eq!(v.rule, Rule::LeaseHolderReady);
        assert_eq!(v.severity, Severity::Warn);
        assert_eq!(v.env, "prod");
        assert!(
            v.message.contains("k3s-prod-1 is NotReady"),
            "{}",
            v.message
        );

        let up = nodes(
            &topo,
            &Look::seen(vec![node("k3s-prod-1", Some(ConditionStatus::True))]),
        );
        assert_eq!(
            holder_ready(&vip, &up).map(|v| v.severity),
            Some(Severity::Ok)
        );
        let none = nodes(&topo, &Look::seen(vec![node("k3s-prod-1", None)]));
        assert_eq!(
            holder_ready(&vip, &none).map(|v| v.severity),
            Some(Severity::Unknown)
        );
        // A holder whose node the pane does not list: nothing to add.
        let other = nodes(&topo, &Look::seen(vec![node("k3s-prod-2", None)]));
        assert_eq!(holder_ready(&vip, &other), None);
    }
}
