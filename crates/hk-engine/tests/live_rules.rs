//! The live (L2) verdict rules of `checks::live`, both sides of each, with the 2026-09-06
//! (agents on a node address) and 2026-09-12 (VPN eviction loop) incidents as fixtures.
//! Pure and fast: no cluster, no SSH, no clock.

use std::collections::BTreeMap;
use std::net::IpAddr;

use hk_engine::checks::live::*;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test IP")
}

/// Timestamp of a short-iso journal time.
fn at(s: &str) -> Timestamp {
    parse_journal_time(s).expect("fixture time")
}

fn prod() -> EnvTopology {
    EnvTopology {
        env: "prod".into(),
        vip: ip("192.168.2.9"),
        api_port: 6443,
        agents: Vec::new(),
        servers: vec![
            Server {
                name: "k3s-prod-1".into(),
                address: ip("192.168.2.10"),
            },
            Server {
                name: "k3s-prod-2".into(),
                address: ip("192.168.2.11"),
            },
            Server {
                name: "k3s-prod-3".into(),
                address: ip("192.168.2.12"),
            },
        ],
    }
}

fn by_rule(vs: &[Verdict], rule: Rule) -> Vec<&Verdict> {
    vs.iter().filter(|v| v.rule == rule).collect()
}

fn one(vs: &[Verdict], rule: Rule) -> &Verdict {
    let found = by_rule(vs, rule);
    assert_eq!(found.len(), 1, "exactly one {rule:?} verdict in {vs:#?}");
    found[0]
}

// ------------------------------------------------------------------------------------------
// exit code and JSON
// ------------------------------------------------------------------------------------------

fn verdict(rule: Rule, severity: Severity) -> Verdict {
    Verdict {
        pane: Pane::Nodes,
        rule,
        severity,
        env: "prod".into(),
        subject: "x".into(),
        message: "m".into(),
    }
}

#[test]
fn exit_code_policy() {
    assert_eq!(exit_code(&[]), 0);
    assert_eq!(
        exit_code(&[
            verdict(Rule::NodeReady, Severity::Ok),
            verdict(Rule::NodeMissing, Severity::Warn),
            verdict(Rule::AgentHost, Severity::Unknown),
        ]),
        0
    );
    assert_eq!(
        exit_code(&[verdict(Rule::CouldNotLook, Severity::Unknown)]),
        2
    );
    // Critical wins over could-not-look.
    assert_eq!(
        exit_code(&[
            verdict(Rule::CouldNotLook, Severity::Unknown),
            verdict(Rule::NodeReady, Severity::Critical),
        ]),
        1
    );
    assert_eq!(
        worst(&[
            verdict(Rule::NodeReady, Severity::Unknown),
            verdict(Rule::NodeMissing, Severity::Warn),
        ]),
        Severity::Warn
    );
}

#[test]
fn verdicts_serialise_for_json() {
    let v = Verdict {
        pane: Pane::VpnEgress,
        rule: Rule::VpnEvictionLoop,
        severity: Severity::Critical,
        env: "dev".into(),
        subject: "a + b".into(),
        message: "m".into(),
    };
    let j = serde_json::to_value(&v).expect("serialise");
    assert_eq!(j["pane"], "vpn-egress");
    assert_eq!(j["rule"], "vpn-eviction-loop");
    assert_eq!(j["severity"], "critical");
    let back: Verdict = serde_json::from_value(j).expect("deserialise");
    assert_eq!(back, v);
    // Whole panes serialise too (what --json prints).
    let pane = nodes(&prod(), &Look::could_not("connection refused"));
    let j = serde_json::to_string(&pane).expect("pane");
    assert!(j.contains("could-not-look"), "{j}");
}

// ------------------------------------------------------------------------------------------
// 1. VIP lease
// ------------------------------------------------------------------------------------------

fn lease(holder: &str, renew: Timestamp) -> LeaseObs {
    LeaseObs {
        name: "plndr-cp-lock".into(),
        holder_identity: Some(holder.into()),
        renew_time: Some(renew),
        lease_duration_seconds: Some(5),
        lease_transitions: Some(2),
    }
}

fn lease_input(lease: Option<LeaseObs>, probe: TcpProbe, now: Timestamp) -> VipLeaseInput {
    VipLeaseInput {
        lease: Look::seen(lease),
        probe: Look::seen(probe),
        now,
    }
}

const UP: TcpProbe = TcpProbe::Connected { latency_ms: 2 };

fn down() -> TcpProbe {
    TcpProbe::Failed {
        error: "connection refused".into(),
    }
}

#[test]
fn lease_held_fresh_and_vip_answering_is_ok() {
    let now = Timestamp(1_000_000);
    let pane = vip_lease(
        &prod(),
        &lease_input(Some(lease("k3s-prod-2", Timestamp(998_000))), UP, now),
    );
    assert_eq!(pane.holder_node.as_deref(), Some("k3s-prod-2"));
    assert_eq!(pane.renew_age_ms, Some(2_000));
    assert_eq!(pane.transitions, Some(2));
    assert_eq!(worst(&pane.verdicts), Severity::Ok, "{:#?}", pane.verdicts);
    assert!(one(&pane.verdicts, Rule::VipAnswers)
        .message
        .contains("192.168.2.9:6443"));
    assert_eq!(exit_code(&pane.verdicts), 0);
}

#[test]
fn lease_staleness_boundary() {
    let renew = Timestamp(1_000_000);
    // Exactly the lease duration: still within the lease.
    let pane = vip_lease(
        &prod(),
        &lease_input(Some(lease("k3s-prod-1", renew)), UP, Timestamp(1_005_000)),
    );
    assert_eq!(one(&pane.verdicts, Rule::LeaseFresh).severity, Severity::Ok);
    // One millisecond later: stale (warn), and the probe answering is now a disagreement.
    let pane = vip_lease(
        &prod(),
        &lease_input(Some(lease("k3s-prod-1", renew)), UP, Timestamp(1_005_001)),
    );
    let fresh = one(&pane.verdicts, Rule::LeaseFresh);
    assert_eq!(fresh.severity, Severity::Warn);
    assert!(fresh.message.contains("stale"), "{}", fresh.message);
    assert!(fresh.message.contains("k3s-prod-1"), "{}", fresh.message);
    assert_eq!(
        one(&pane.verdicts, Rule::LeaseVipAgree).severity,
        Severity::Warn
    );
    // A renew in the future (clock skew) is not stale.
    let pane = vip_lease(
        &prod(),
        &lease_input(Some(lease("k3s-prod-1", renew)), UP, Timestamp(990_000)),
    );
    assert_eq!(pane.renew_age_ms, Some(0));
    assert_eq!(one(&pane.verdicts, Rule::LeaseFresh).severity, Severity::Ok);
}

#[test]
fn no_lease_is_critical() {
    let pane = vip_lease(&prod(), &lease_input(None, down(), Timestamp(0)));
    let held = one(&pane.verdicts, Rule::LeaseHeld);
    assert_eq!(held.severity, Severity::Critical);
    assert!(held.message.contains("192.168.2.9"), "{}", held.message);
    assert_eq!(exit_code(&pane.verdicts), 1);
    // An empty holder is no holder.
    let mut l = lease("", Timestamp(0));
    l.holder_identity = Some(String::new());
    let pane = vip_lease(&prod(), &lease_input(Some(l), UP, Timestamp(0)));
    assert_eq!(
        one(&pane.verdicts, Rule::LeaseHeld).severity,
        Severity::Critical
    );
    // Lease missing while something answers on the VIP: named.
    let agree = one(&pane.verdicts, Rule::LeaseVipAgree);
    assert_eq!(agree.severity, Severity::Warn);
    assert!(agree.message.contains("answers"), "{}", agree.message);
}

#[test]
fn holder_mapping() {
    let now = Timestamp(10_000);
    let fqdn = vip_lease(
        &prod(),
        &lease_input(Some(lease("k3s-prod-3.lan", Timestamp(9_000))), UP, now),
    );
    assert_eq!(fqdn.holder_node.as_deref(), Some("k3s-prod-3"));
    // A name that only starts like a server is not that server.
    let stranger = vip_lease(
        &prod(),
        &lease_input(Some(lease("k3s-prod-10", Timestamp(9_000))), UP, now),
    );
    assert_eq!(stranger.holder_node, None);
    let h = one(&stranger.verdicts, Rule::LeaseHolder);
    assert_eq!(h.severity, Severity::Warn);
    assert!(h.message.contains("k3s-prod-10"), "{}", h.message);
    assert!(
        h.message.contains("k3s-prod-1, k3s-prod-2"),
        "{}",
        h.message
    );
}

#[test]
fn lease_held_but_vip_silent_is_critical_and_named() {
    let pane = vip_lease(
        &prod(),
        &lease_input(
            Some(lease("k3s-prod-1", Timestamp(9_000))),
            down(),
            Timestamp(10_000),
        ),
    );
    assert_eq!(
        one(&pane.verdicts, Rule::VipAnswers).severity,
        Severity::Critical
    );
    let agree = one(&pane.verdicts, Rule::LeaseVipAgree);
    assert_eq!(agree.severity, Severity::Critical);
    assert!(
        agree.message.contains("held by k3s-prod-1"),
        "{}",
        agree.message
    );
    assert!(
        agree.message.contains("connection refused"),
        "{}",
        agree.message
    );
}

#[test]
fn lease_without_times_is_unknown_freshness() {
    let mut l = lease("k3s-prod-1", Timestamp(0));
    l.renew_time = None;
    let pane = vip_lease(&prod(), &lease_input(Some(l), UP, Timestamp(10_000)));
    let f = one(&pane.verdicts, Rule::LeaseFresh);
    assert_eq!(f.severity, Severity::Unknown);
    assert!(f.message.contains("renewTime"), "{}", f.message);
}

#[test]
fn lease_could_not_look_exits_2() {
    let input = VipLeaseInput {
        lease: Look::could_not("403 Forbidden: leases.coordination.k8s.io"),
        probe: Look::seen(UP),
        now: Timestamp(0),
    };
    let pane = vip_lease(&prod(), &input);
    let c = one(&pane.verdicts, Rule::CouldNotLook);
    assert!(c.message.contains("403"), "{}", c.message);
    assert!(by_rule(&pane.verdicts, Rule::LeaseVipAgree).is_empty());
    assert_eq!(exit_code(&pane.verdicts), 2);
}

// ------------------------------------------------------------------------------------------
// 2. Agent env
// ------------------------------------------------------------------------------------------

fn literal(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        source: EnvSource::Literal {
            value: value.into(),
        },
    }
}

fn agent(name: &str, node: &str, host: &str, port: &str) -> AgentPod {
    AgentPod {
        name: name.into(),
        node: Some(node.into()),
        phase: "Running".into(),
        ready: true,
        env: vec![
            literal("K8S_NODE_NAME", node),
            literal(SERVICE_HOST_VAR, host),
            literal(SERVICE_PORT_VAR, port),
        ],
        env_from: vec![],
    }
}

fn prod_agents(host: &str) -> Vec<AgentPod> {
    vec![
        agent("cilium-4xk2p", "k3s-prod-1", host, "6443"),
        agent("cilium-9bq7d", "k3s-prod-2", host, "6443"),
        agent("cilium-tz5mw", "k3s-prod-3", host, "6443"),
    ]
}

/// 2026-09-06: all three prod agents carried KUBERNETES_SERVICE_HOST=192.168.2.10 (k3s-prod-1's
/// own address) while the VIP 192.168.2.9 was live.
#[test]
fn incident_2026_09_06_agents_on_node_address() {
    let pane = agent_env(
        &prod(),
        &Look::seen(prod_agents("192.168.2.10")),
        &ConfigMaps::new(),
    );
    let hosts = by_rule(&pane.verdicts, Rule::AgentHost);
    assert_eq!(hosts.len(), 3);
    for v in &hosts {
        assert_eq!(v.severity, Severity::Critical, "{v}");
        assert!(v.message.contains("k3s-prod-1's own address"), "{v}");
        assert!(v.message.contains("single-node dependency"), "{v}");
    }
    assert!(pane.agents.iter().all(|a| a.endpoint
        == Endpoint::NodeAddress {
            node: "k3s-prod-1".into(),
            address: "192.168.2.10".into()
        }));
    let s = one(&pane.verdicts, Rule::AgentsSummary);
    assert_eq!(s.severity, Severity::Critical);
    assert!(
        s.message
            .contains("3 of 3 agents dial k3s-prod-1's own address 192.168.2.10"),
        "{}",
        s.message
    );
    assert_eq!(exit_code(&pane.verdicts), 1);
}

#[test]
fn agents_on_the_vip_are_ok() {
    let pane = agent_env(
        &prod(),
        &Look::seen(prod_agents("192.168.2.9")),
        &ConfigMaps::new(),
    );
    assert_eq!(worst(&pane.verdicts), Severity::Ok, "{:#?}", pane.verdicts);
    let s = one(&pane.verdicts, Rule::AgentsSummary);
    assert!(
        s.message.contains("3 of 3 agents dial the VIP 192.168.2.9"),
        "{}",
        s.message
    );
    assert_eq!(exit_code(&pane.verdicts), 0);
}

#[test]
fn mid_rollout_mix_names_the_node_and_counts() {
    let mut agents = prod_agents("192.168.2.9");
    agents[2] = agent("cilium-tz5mw", "k3s-prod-3", "192.168.2.10", "6443");
    let pane = agent_env(&prod(), &Look::seen(agents), &ConfigMaps::new());
    let s = one(&pane.verdicts, Rule::AgentsSummary);
    assert_eq!(s.severity, Severity::Critical);
    assert!(
        s.message
            .contains("1 of 3 agents dial k3s-prod-1's own address"),
        "{}",
        s.message
    );
    assert!(s.message.contains("2 dial the VIP"), "{}", s.message);
}

#[test]
fn other_endpoint_is_unknown_and_port_mismatch_warns() {
    let agents = vec![
        agent("cilium-a", "k3s-prod-1", "10.43.0.1", "443"),
        // A server's name is the same single-node dependency as its address.
        agent("cilium-b", "k3s-prod-2", "k3s-prod-2", "6443"),
    ];
    let pane = agent_env(&prod(), &Look::seen(agents), &ConfigMaps::new());
    let hosts = by_rule(&pane.verdicts, Rule::AgentHost);
    assert_eq!(hosts[0].severity, Severity::Unknown);
    assert!(
        hosts[0].message.contains("10.43.0.1"),
        "{}",
        hosts[0].message
    );
    assert_eq!(hosts[1].severity, Severity::Critical);
    assert!(
        hosts[1].message.contains("k3s-prod-2's own address"),
        "{}",
        hosts[1].message
    );
    let ports = by_rule(&pane.verdicts, Rule::AgentPort);
    assert_eq!(ports[0].severity, Severity::Warn);
    assert!(ports[0].message.contains("=443"), "{}", ports[0].message);
    assert!(ports[0].message.contains("6443"), "{}", ports[0].message);
    assert_eq!(ports[1].severity, Severity::Ok);
}

/// Issue 28: an agent that dials 127.0.0.1:6444 (the k3s supervisor's client-side load
/// balancer on its own node, which follows every server) is highly available; loopback on
/// another port is not; an agent node's address is never an API endpoint.
#[test]
fn the_k3s_supervisor_load_balancer_is_ha_and_an_agent_address_is_not_an_endpoint() {
    let mut topo = prod();
    topo.agents = vec![Server {
        name: "k3s-prod-w1".into(),
        address: ip("192.168.2.21"),
    }];
    let agents = vec![
        agent("cilium-a", "k3s-prod-1", "127.0.0.1", "6444"),
        agent("cilium-b", "k3s-prod-2", "192.168.2.9", "6443"),
        agent("cilium-c", "k3s-prod-w1", "localhost", "6444"),
    ];
    let pane = agent_env(&topo, &Look::seen(agents), &ConfigMaps::new());
    assert_eq!(worst(&pane.verdicts), Severity::Ok, "{:#?}", pane.verdicts);
    assert_eq!(pane.agents[0].endpoint, Endpoint::SupervisorLb);
    assert_eq!(pane.agents[2].endpoint, Endpoint::SupervisorLb);
    let s = one(&pane.verdicts, Rule::AgentsSummary);
    assert_eq!(
        s.message,
        "3 of 3 agents dial a highly available endpoint: 1 the VIP 192.168.2.9, 2 the k3s \
         supervisor's load balancer (127.0.0.1:6444)"
    );

    let agents = vec![
        agent("cilium-a", "k3s-prod-1", "127.0.0.1", "6443"),
        agent("cilium-b", "k3s-prod-2", "192.168.2.21", "6443"),
    ];
    let pane = agent_env(&topo, &Look::seen(agents), &ConfigMaps::new());
    let hosts = by_rule(&pane.verdicts, Rule::AgentHost);
    assert_eq!(hosts[0].severity, Severity::Unknown, "{}", hosts[0].message);
    assert_eq!(
        hosts[1].severity,
        Severity::Critical,
        "{}",
        hosts[1].message
    );
    assert!(
        hosts[1]
            .message
            .contains("is agent k3s-prod-w1's address: an agent node runs no API server"),
        "{}",
        hosts[1].message
    );
}

fn cm(name: &str, pairs: &[(&str, &str)]) -> ConfigMaps {
    let mut all = ConfigMaps::new();
    all.insert(
        name.into(),
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    );
    all
}

fn from_cm(name: &str, config_map: &str, key: &str, optional: bool) -> EnvVar {
    EnvVar {
        name: name.into(),
        source: EnvSource::ConfigMapKey {
            config_map: config_map.into(),
            key: key.into(),
            optional,
        },
    }
}

#[test]
fn config_map_value_from_resolution() {
    let cms = cm(
        "cilium-config",
        &[
            ("k8s-service-host", "192.168.2.9"),
            ("k8s-service-port", "6443"),
        ],
    );
    let env = vec![
        from_cm(SERVICE_HOST_VAR, "cilium-config", "k8s-service-host", false),
        from_cm(SERVICE_PORT_VAR, "cilium-config", "k8s-service-port", false),
    ];
    assert_eq!(
        resolve_env(&env, &[], SERVICE_HOST_VAR, &cms),
        Resolved::Value {
            value: "192.168.2.9".into()
        }
    );
    // Missing key / missing map: unresolvable, naming them; optional: unset.
    let bad = vec![from_cm(SERVICE_HOST_VAR, "cilium-config", "nope", false)];
    match resolve_env(&bad, &[], SERVICE_HOST_VAR, &cms) {
        Resolved::Unresolvable { reason } => {
            assert!(
                reason.contains("cilium-config") && reason.contains("nope"),
                "{reason}"
            )
        }
        other => panic!("expected unresolvable, got {other:?}"),
    }
    let gone = vec![from_cm(SERVICE_HOST_VAR, "other-config", "k", false)];
    assert!(matches!(
        resolve_env(&gone, &[], SERVICE_HOST_VAR, &cms),
        Resolved::Unresolvable { .. }
    ));
    let opt = vec![from_cm(SERVICE_HOST_VAR, "other-config", "k", true)];
    assert_eq!(
        resolve_env(&opt, &[], SERVICE_HOST_VAR, &cms),
        Resolved::Unset
    );
    // Other valueFrom kinds are not guessed.
    let secret = vec![EnvVar {
        name: SERVICE_HOST_VAR.into(),
        source: EnvSource::Other {
            description: "secretKeyRef api/host".into(),
        },
    }];
    assert!(matches!(
        resolve_env(&secret, &[], SERVICE_HOST_VAR, &cms),
        Resolved::Unresolvable { .. }
    ));
    // Not set at all.
    assert_eq!(
        resolve_env(&[], &[], SERVICE_HOST_VAR, &cms),
        Resolved::Unset
    );

    // The pane resolves through the ConfigMap and judges the value.
    let pod = AgentPod {
        name: "cilium-4xk2p".into(),
        node: Some("k3s-prod-1".into()),
        phase: "Running".into(),
        ready: true,
        env,
        env_from: vec![],
    };
    let pane = agent_env(&prod(), &Look::seen(vec![pod.clone()]), &cms);
    assert_eq!(worst(&pane.verdicts), Severity::Ok, "{:#?}", pane.verdicts);
    // Same pod, ConfigMap not known: unknown, not ok and not critical.
    let pane = agent_env(&prod(), &Look::seen(vec![pod]), &ConfigMaps::new());
    assert_eq!(
        one(&pane.verdicts, Rule::AgentHost).severity,
        Severity::Unknown
    );
    assert_eq!(
        one(&pane.verdicts, Rule::AgentsSummary).severity,
        Severity::Unknown
    );
}

#[test]
fn env_precedence_like_the_kubelet() {
    let cms = cm("api", &[("KUBERNETES_SERVICE_HOST", "192.168.2.10")]);
    let mut prefixed = cm("p", &[("SERVICE_HOST", "192.168.2.11")]);
    prefixed.extend(cms.clone());
    let from = |c: &str, prefix: &str| EnvFromConfigMap {
        config_map: c.into(),
        prefix: prefix.into(),
    };
    // envFrom alone.
    assert_eq!(
        resolve_env(&[], &[from("api", "")], SERVICE_HOST_VAR, &cms),
        Resolved::Value {
            value: "192.168.2.10".into()
        }
    );
    // env[] beats envFrom.
    let env = vec![literal(SERVICE_HOST_VAR, "192.168.2.9")];
    assert_eq!(
        resolve_env(&env, &[from("api", "")], SERVICE_HOST_VAR, &cms),
        Resolved::Value {
            value: "192.168.2.9".into()
        }
    );
    // Last env[] entry of a name wins.
    let env = vec![
        literal(SERVICE_HOST_VAR, "192.168.2.10"),
        literal(SERVICE_HOST_VAR, "192.168.2.9"),
    ];
    assert_eq!(
        resolve_env(&env, &[], SERVICE_HOST_VAR, &cms),
        Resolved::Value {
            value: "192.168.2.9".into()
        }
    );
    // Prefix, and the last envFrom source wins.
    assert_eq!(
        resolve_env(
            &[],
            &[from("api", ""), from("p", "KUBERNETES_")],
            SERVICE_HOST_VAR,
            &prefixed
        ),
        Resolved::Value {
            value: "192.168.2.11".into()
        }
    );
}

#[test]
fn no_agents_or_could_not_look() {
    let pane = agent_env(&prod(), &Look::seen(vec![]), &ConfigMaps::new());
    assert_eq!(
        one(&pane.verdicts, Rule::AgentsSummary).severity,
        Severity::Unknown
    );
    let pane = agent_env(
        &prod(),
        &Look::could_not("cluster unreachable"),
        &ConfigMaps::new(),
    );
    assert_eq!(exit_code(&pane.verdicts), 2);
}

// ------------------------------------------------------------------------------------------
// 2b. Rollout
// ------------------------------------------------------------------------------------------

fn ds(desired: u32, updated: u32, ready: u32, unavailable: u32) -> DaemonSetStatus {
    DaemonSetStatus {
        name: "cilium".into(),
        generation: 7,
        observed_generation: 7,
        desired,
        updated,
        ready,
        available: ready,
        unavailable,
    }
}

fn rpod(name: &str, node: &str, updated: bool, ready: bool, since: Option<u64>) -> RolloutPod {
    RolloutPod {
        name: name.into(),
        node: Some(node.into()),
        updated,
        ready,
        not_ready_since: since.map(Timestamp),
    }
}

const STUCK_AFTER: u64 = 5 * 60 * 1000;

#[test]
fn rollout_rolled_out() {
    let pods = [
        rpod("cilium-a", "k3s-prod-1", true, true, None),
        rpod("cilium-b", "k3s-prod-2", true, true, None),
        rpod("cilium-c", "k3s-prod-3", true, true, None),
    ];
    let pane = rollout(
        "prod",
        &Look::seen(Some(ds(3, 3, 3, 0))),
        &pods,
        Timestamp(0),
        STUCK_AFTER,
    );
    assert_eq!(pane.state, Some(RolloutState::RolledOut));
    let v = one(&pane.verdicts, Rule::Rollout);
    assert_eq!(v.severity, Severity::Ok);
    assert!(v.message.contains("3 of 3"), "{}", v.message);
}

#[test]
fn rollout_progressing_is_rolling_not_stuck() {
    let now = Timestamp(10_000_000);
    // One updated pod is not ready yet, for less than the threshold: still progressing.
    let pods = [
        rpod("cilium-a", "k3s-prod-3", true, false, Some(now.0 - 60_000)),
        rpod("cilium-b", "k3s-prod-1", false, true, None),
        rpod("cilium-c", "k3s-prod-2", false, true, None),
    ];
    let pane = rollout(
        "prod",
        &Look::seen(Some(ds(3, 1, 2, 1))),
        &pods,
        now,
        STUCK_AFTER,
    );
    assert_eq!(
        pane.state,
        Some(RolloutState::Rolling {
            updated: 1,
            desired: 3
        })
    );
    let v = one(&pane.verdicts, Rule::Rollout);
    assert_eq!(v.severity, Severity::Warn);
    assert!(v.message.contains("1 of 3 updated"), "{}", v.message);
    assert!(
        v.message.contains("cilium-a on k3s-prod-3"),
        "{}",
        v.message
    );
    // Exactly at the threshold: still not stuck.
    let pods = [rpod(
        "cilium-a",
        "k3s-prod-3",
        true,
        false,
        Some(now.0 - STUCK_AFTER),
    )];
    let pane = rollout(
        "prod",
        &Look::seen(Some(ds(3, 1, 2, 1))),
        &pods,
        now,
        STUCK_AFTER,
    );
    assert!(matches!(pane.state, Some(RolloutState::Rolling { .. })));
    // All counters converged but the controller has not seen the new spec: rolling.
    let mut behind = ds(3, 3, 3, 0);
    behind.generation = 8;
    let pane = rollout("prod", &Look::seen(Some(behind)), &[], now, STUCK_AFTER);
    let v = one(&pane.verdicts, Rule::Rollout);
    assert_eq!(v.severity, Severity::Warn);
    assert!(v.message.contains("generation 8"), "{}", v.message);
}

#[test]
fn rollout_stuck_on_unready_updated_pod_is_critical() {
    let now = Timestamp(10_000_000);
    let pods = [
        rpod(
            "cilium-a",
            "k3s-prod-3",
            true,
            false,
            Some(now.0 - STUCK_AFTER - 1),
        ),
        rpod("cilium-b", "k3s-prod-1", false, true, None),
        rpod("cilium-c", "k3s-prod-2", false, true, None),
    ];
    let pane = rollout(
        "prod",
        &Look::seen(Some(ds(3, 1, 2, 1))),
        &pods,
        now,
        STUCK_AFTER,
    );
    assert!(matches!(
        &pane.state,
        Some(RolloutState::Stuck { pod, node, .. }) if pod == "cilium-a" && node.as_deref() == Some("k3s-prod-3")
    ));
    let v = one(&pane.verdicts, Rule::Rollout);
    assert_eq!(v.severity, Severity::Critical);
    assert!(
        v.message.contains("cilium-a on k3s-prod-3"),
        "{}",
        v.message
    );
    assert!(v.message.contains("5m"), "{}", v.message);
    assert_eq!(exit_code(&pane.verdicts), 1);
    // An old (not updated) pod unready for long is not what the rollout is stuck on.
    let pods = [rpod("cilium-b", "k3s-prod-1", false, false, Some(0))];
    let pane = rollout(
        "prod",
        &Look::seen(Some(ds(3, 1, 2, 1))),
        &pods,
        now,
        STUCK_AFTER,
    );
    assert!(matches!(pane.state, Some(RolloutState::Rolling { .. })));
}

#[test]
fn rollout_missing_or_unseen() {
    let pane = rollout("prod", &Look::seen(None), &[], Timestamp(0), STUCK_AFTER);
    assert_eq!(
        one(&pane.verdicts, Rule::Rollout).severity,
        Severity::Critical
    );
    let pane = rollout(
        "prod",
        &Look::could_not("timeout"),
        &[],
        Timestamp(0),
        STUCK_AFTER,
    );
    assert_eq!(exit_code(&pane.verdicts), 2);
}

// ------------------------------------------------------------------------------------------
// 3. VPN egress
// ------------------------------------------------------------------------------------------

/// One connect cycle of OpenVPN 2.6 as `journalctl -o short-iso -u vpn-egress-tunnel` shows
/// it, connecting at `t` (HH:MM:SS on 2026-09-12) to `server` and being handed `addr`, then
/// tripping --ping-restart 60 s later.
fn cycle(host: &str, t: &str, drop: &str, server: &str, addr: &str, mask: &str) -> Vec<String> {
    let ts = |hms: &str| format!("2026-09-12T{hms}+0000 {host} openvpn[812]:");
    vec![
        format!("{} TCP/UDP: Preserving recently used remote address: [AF_INET]{server}", ts(t)),
        format!("{} UDPv4 link remote: [AF_INET]{server}", ts(t)),
        format!("{} [Server-10779-2a] Peer Connection Initiated with [AF_INET]{server}", ts(t)),
        format!(
            "{} PUSH: Received control message: 'PUSH_REPLY,redirect-gateway def1,dhcp-option DNS 10.0.0.243,ping 10,ping-restart 60,route-gateway 10.72.192.1,topology subnet,ifconfig {addr} {mask},peer-id 3,cipher AES-128-GCM'",
            ts(t)
        ),
        format!("{} TUN/TAP device tun0 opened", ts(t)),
        format!("{} net_iface_mtu_set: mtu 1500 for tun0", ts(t)),
        format!("{} net_addr_v4_add: {addr}/18 dev tun0", ts(t)),
        format!("{} Initialization Sequence Completed", ts(t)),
        format!("{} [Server-10779-2a] Inactivity timeout (--ping-restart), restarting", ts(drop)),
        format!("{} SIGUSR1[soft,ping-restart] received, process restarting", ts(drop)),
        format!("{} Restart pause, 5 second(s)", ts(drop)),
    ]
}

fn journal(host: &str, times: &[(&str, &str)], server: &str, addr: &str) -> Vec<String> {
    times
        .iter()
        .flat_map(|(t, d)| cycle(host, t, d, server, addr, "255.255.192.0"))
        .collect()
}

fn gateway(env: &str, host: &str, lines: Vec<String>) -> GatewayObs {
    GatewayObs {
        env: env.into(),
        host: host.into(),
        service: "vpn-egress-tunnel.service".into(),
        interface: "tun0".into(),
        active_state: Look::seen("active".into()),
        tunnel_exit: Look::seen(Ok(ip("158.173.241.20"))),
        direct_exit: Look::seen(Ok(ip("203.0.113.7"))),
        journal: Look::seen(lines),
    }
}

const PIA: &str = "158.173.241.112:1198";

fn dev_0912() -> Vec<String> {
    journal(
        "k3s-dev-3",
        &[
            ("22:57:05", "22:58:05"),
            ("22:59:03", "23:00:03"),
            ("23:01:05", "23:02:05"),
        ],
        PIA,
        "10.72.192.7",
    )
}

fn prod_0912(server: &str) -> Vec<String> {
    journal(
        "k3s-prod-3",
        &[
            ("22:58:04", "22:59:04"),
            ("23:00:05", "23:01:05"),
            ("23:02:04", "23:03:04"),
        ],
        server,
        "10.72.192.7",
    )
}

fn now_0912() -> Timestamp {
    at("2026-09-12T23:03:30+0000")
}

/// 2026-09-12: dev and prod on one PIA server, handed the same tunnel address, each
/// restarting ~every 2 minutes about a minute apart.
#[test]
fn incident_2026_09_12_eviction_loop() {
    let policy = VpnPolicy::default();
    let dev = vpn_gateway(
        &gateway("dev", "k3s-dev-3", dev_0912()),
        now_0912(),
        &policy,
    );
    let prod = vpn_gateway(
        &gateway("prod", "k3s-prod-3", prod_0912(PIA)),
        now_0912(),
        &policy,
    );
    for g in [&dev, &prod] {
        assert_eq!(g.server.map(|s| s.to_string()).as_deref(), Some(PIA));
        let t = g.tunnel_addr.as_ref().expect("tunnel address");
        assert_eq!(t.to_string(), "10.72.192.7 255.255.192.0");
        assert_eq!(g.connects.len(), 3);
    }
    let flap = one(&dev.verdicts, Rule::VpnFlapping);
    assert_eq!(flap.severity, Severity::Warn);
    assert!(
        flap.message
            .contains("restarts every ~2m: 22:57:05, 22:59:03, 23:01:05"),
        "{}",
        flap.message
    );
    assert_eq!(
        one(&prod.verdicts, Rule::VpnFlapping).severity,
        Severity::Warn
    );

    let across = vpn_across(&[dev, prod]);
    assert_eq!(across.len(), 1, "{across:#?}");
    let e = &across[0];
    assert_eq!(e.rule, Rule::VpnEvictionLoop);
    assert_eq!(e.severity, Severity::Critical);
    for needle in [
        "k3s-dev-3 (dev)",
        "k3s-prod-3 (prod)",
        "158.173.241.112:1198",
        "10.72.192.7 255.255.192.0",
        "~1m apart",
    ] {
        assert!(
            e.message.contains(needle),
            "{needle:?} not in {}",
            e.message
        );
    }
    assert_eq!(exit_code(&across), 1);
}

/// The fix: prod pinned to another pool member. No eviction loop, even if the addresses
/// happened to match (different servers hand out from different pools).
#[test]
fn different_servers_are_no_eviction_loop() {
    let policy = VpnPolicy::default();
    let dev = vpn_gateway(
        &gateway("dev", "k3s-dev-3", dev_0912()),
        now_0912(),
        &policy,
    );
    let prod = vpn_gateway(
        &gateway("prod", "k3s-prod-3", prod_0912("158.173.241.135:1198")),
        now_0912(),
        &policy,
    );
    assert!(vpn_across(&[dev.clone(), prod]).is_empty());
    // Same server, different address: also fine.
    let other = journal(
        "k3s-prod-3",
        &[("22:00:00", "22:00:00")],
        PIA,
        "10.72.192.9",
    );
    let prod = vpn_gateway(&gateway("prod", "k3s-prod-3", other), now_0912(), &policy);
    assert!(vpn_across(&[dev, prod]).is_empty());
}

#[test]
fn steady_tunnel_is_ok() {
    let lines = journal("k3s-dev-3", &[("20:00:00", "20:00:00")], PIA, "10.72.192.7");
    // Drop the two ping-restart lines: one connect, hours ago.
    let lines: Vec<String> = lines.into_iter().take(8).collect();
    let g = vpn_gateway(
        &gateway("dev", "k3s-dev-3", lines),
        now_0912(),
        &VpnPolicy::default(),
    );
    assert_eq!(worst(&g.verdicts), Severity::Ok, "{:#?}", g.verdicts);
    assert!(g.connects.is_empty(), "20:00 is outside the 30 min window");
    assert_eq!(g.tunnel_exit, Some(ip("158.173.241.20")));
    assert!(one(&g.verdicts, Rule::VpnExit)
        .message
        .contains("158.173.241.20"));
}

/// Issue 38: after vpn-eviction-fix ended the loop, the pane still said `! restarts every
/// ~4s (33 in the last 30m)` a minute after the last restart. Flapping is what the unit does
/// now: a loop that stopped (quiet for longer than three of its periods, and at least 30 s)
/// is no warning, and the verdict says until when it restarted.
#[test]
fn a_loop_that_stopped_is_not_flapping_now() {
    let times: Vec<(String, String)> = (0..33)
        .map(|i| {
            let t = 22 * 3600 + 59 * 60 + i * 4;
            let hms = |s: u32| format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
            (hms(t), hms(t + 3))
        })
        .collect();
    let refs: Vec<(&str, &str)> = times
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let lines = journal("k3s-prod-3", &refs, PIA, "10.72.192.7");
    // The last (re)connect at 23:01:08; looked at a minute later.
    let later = at("2026-09-12T23:02:08+0000");
    let g = vpn_gateway(
        &gateway("prod", "k3s-prod-3", lines.clone()),
        later,
        &VpnPolicy::default(),
    );
    assert_eq!(g.connects.len(), 33);
    let flap = one(&g.verdicts, Rule::VpnFlapping);
    assert_eq!(flap.severity, Severity::Ok, "{}", flap.message);
    assert!(!flap.message.contains("restarts every"), "{}", flap.message);
    assert!(
        flap.message.contains("until 23:01:08") && flap.message.contains("none since"),
        "{}",
        flap.message
    );
    // While it still restarts (4 s after the last), it is flapping.
    let g = vpn_gateway(
        &gateway("prod", "k3s-prod-3", lines),
        at("2026-09-12T23:01:12+0000"),
        &VpnPolicy::default(),
    );
    let flap = one(&g.verdicts, Rule::VpnFlapping);
    assert_eq!(flap.severity, Severity::Warn, "{}", flap.message);
    assert!(
        flap.message.contains("restarts every ~4s"),
        "{}",
        flap.message
    );
}

#[test]
fn slow_reconnects_are_not_flapping() {
    // Three connects 10 minutes apart: reconnects, not flapping.
    let lines = journal(
        "k3s-dev-3",
        &[
            ("22:40:00", "22:41:00"),
            ("22:50:00", "22:51:00"),
            ("23:00:00", "23:01:00"),
        ],
        PIA,
        "10.72.192.7",
    );
    let g = vpn_gateway(
        &gateway("dev", "k3s-dev-3", lines),
        now_0912(),
        &VpnPolicy::default(),
    );
    assert_eq!(g.connect_period_ms, Some(600_000));
    assert_eq!(one(&g.verdicts, Rule::VpnFlapping).severity, Severity::Ok);
}

#[test]
fn leak_is_critical() {
    let mut obs = gateway("dev", "k3s-dev-3", vec![]);
    obs.tunnel_exit = Look::seen(Ok(ip("203.0.113.7")));
    let g = vpn_gateway(&obs, now_0912(), &VpnPolicy::default());
    let v = one(&g.verdicts, Rule::VpnExit);
    assert_eq!(v.severity, Severity::Critical);
    assert!(v.message.contains("LEAK"), "{}", v.message);
    assert!(v.message.contains("203.0.113.7"), "{}", v.message);
    assert!(v.message.contains("tun0"), "{}", v.message);
}

#[test]
fn service_down_and_probe_failures() {
    let mut obs = gateway("dev", "k3s-dev-3", vec![]);
    obs.active_state = Look::seen("failed".into());
    obs.tunnel_exit = Look::seen(Err("curl: (7) Failed to connect".into()));
    let g = vpn_gateway(&obs, now_0912(), &VpnPolicy::default());
    let s = one(&g.verdicts, Rule::VpnService);
    assert_eq!(s.severity, Severity::Critical);
    assert!(
        s.message
            .contains("vpn-egress-tunnel.service is failed on k3s-dev-3"),
        "{}",
        s.message
    );
    let e = one(&g.verdicts, Rule::VpnExit);
    assert_eq!(e.severity, Severity::Critical);
    assert!(e.message.contains("Failed to connect"), "{}", e.message);

    // Direct probe failed: cannot rule out a leak.
    let mut obs = gateway("dev", "k3s-dev-3", vec![]);
    obs.direct_exit = Look::seen(Err("timeout".into()));
    let g = vpn_gateway(&obs, now_0912(), &VpnPolicy::default());
    assert_eq!(one(&g.verdicts, Rule::VpnExit).severity, Severity::Unknown);
    assert_eq!(exit_code(&g.verdicts), 0);

    // SSH failed: could not look.
    let mut obs = gateway("dev", "k3s-dev-3", vec![]);
    obs.active_state = Look::could_not("ssh: connection refused");
    obs.journal = Look::could_not("ssh: connection refused");
    let g = vpn_gateway(&obs, now_0912(), &VpnPolicy::default());
    assert_eq!(by_rule(&g.verdicts, Rule::CouldNotLook).len(), 2);
    assert_eq!(exit_code(&g.verdicts), 2);
}

#[test]
fn exit_ip_body_parsing() {
    assert_eq!(parse_exit_ip("158.173.241.20\n"), Ok(ip("158.173.241.20")));
    let err = parse_exit_ip("<html>rate limited</html>")
        .expect_err("not an IP")
        .to_string();
    assert!(err.contains("rate limited"), "{err}");
}

#[test]
fn systemd_restarts_count_when_openvpn_never_completes() {
    let lines: Vec<String> = ["22:57:05", "22:58:05", "22:59:05"]
        .iter()
        .flat_map(|t| {
            [
                format!("2026-09-12T{t}+0000 k3s-dev-3 systemd[1]: Stopped vpn-egress-tunnel.service - PIA egress tunnel."),
                format!("2026-09-12T{t}+0000 k3s-dev-3 systemd[1]: Started vpn-egress-tunnel.service - PIA egress tunnel."),
            ]
        })
        .collect();
    let f = parse_journal(&lines);
    assert_eq!(f.connects.len(), 3);
    assert_eq!(f.stops.len(), 3);
    // Looked at while it still restarts (25 s after the last; 4 minutes later it would
    // have stopped: see a_loop_that_stopped_is_not_flapping_now).
    let g = vpn_gateway(
        &gateway("dev", "k3s-dev-3", lines),
        at("2026-09-12T22:59:30+0000"),
        &VpnPolicy::default(),
    );
    let v = one(&g.verdicts, Rule::VpnFlapping);
    assert_eq!(v.severity, Severity::Warn);
    assert!(v.message.contains("every ~1m"), "{}", v.message);
}

#[test]
fn untimed_lines_still_give_server_and_address() {
    // `journalctl -o cat`: no timestamps, so no restart times, but the facts are there.
    let lines = vec![
        "[Server-10779-2a] Peer Connection Initiated with [AF_INET]158.173.241.135:1198"
            .to_string(),
        "/sbin/ip addr add dev tun0 10.72.200.3/18 broadcast 10.72.255.255".to_string(),
        "Initialization Sequence Completed".to_string(),
    ];
    let f = parse_journal(&lines);
    assert_eq!(f.untimed_lines, 3);
    assert_eq!(
        f.server.map(|s| s.to_string()).as_deref(),
        Some("158.173.241.135:1198")
    );
    assert_eq!(
        f.tunnel_addr.map(|t| t.to_string()).as_deref(),
        Some("10.72.200.3/18")
    );
    assert!(f.connects.is_empty());
}

#[test]
fn the_last_connection_wins() {
    let mut lines = journal(
        "k3s-prod-3",
        &[("22:00:00", "22:01:00")],
        PIA,
        "10.72.192.7",
    );
    lines.extend(journal(
        "k3s-prod-3",
        &[("22:10:00", "22:11:00")],
        "158.173.241.135:1198",
        "10.72.200.3",
    ));
    let f = parse_journal(&lines);
    assert_eq!(
        f.server.map(|s| s.to_string()).as_deref(),
        Some("158.173.241.135:1198")
    );
    assert_eq!(f.tunnel_addr.map(|t| t.address), Some(ip("10.72.200.3")));
}

/// A tiny deterministic PRNG (xorshift64*), so the fuzz test needs no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn mangled_journal_lines_never_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut seeds = dev_0912();
    seeds.extend(prod_0912(PIA));
    seeds.push("2026-09-12T22:57:05.999999+02:00 h systemd[1]: Started x.".into());
    let alphabet: Vec<char> =
        "0123456789.:-+TZ []/,'AF_INET6ifconfigpeer\u{e9}\u{1F600}\t\0Started "
            .chars()
            .collect();
    let mut total_connects = 0;
    for round in 0..3000 {
        let mut batch = Vec::new();
        for _ in 0..(1 + rng.below(6)) {
            let base = &seeds[rng.below(seeds.len())];
            let mut chars: Vec<char> = base.chars().collect();
            match rng.below(5) {
                // Truncate at a random char boundary.
                0 => chars.truncate(rng.below(chars.len() + 1)),
                // Replace some chars.
                1 => {
                    for _ in 0..(1 + rng.below(4)) {
                        if !chars.is_empty() {
                            let i = rng.below(chars.len());
                            chars[i] = alphabet[rng.below(alphabet.len())];
                        }
                    }
                }
                // Delete a span.
                2 if !chars.is_empty() => {
                    let a = rng.below(chars.len());
                    let b = (a + rng.below(12)).min(chars.len());
                    chars.drain(a..b);
                }
                // Pure noise.
                3 => {
                    chars = (0..rng.below(80))
                        .map(|_| alphabet[rng.below(alphabet.len())])
                        .collect()
                }
                _ => {}
            }
            batch.push(chars.into_iter().collect::<String>());
        }
        let f = parse_journal(&batch);
        assert!(
            f.connects.windows(2).all(|w| w[0] <= w[1]),
            "round {round}: unsorted"
        );
        total_connects += f.connects.len();
        let g = vpn_gateway(
            &gateway("dev", "k3s-dev-3", batch),
            now_0912(),
            &VpnPolicy::default(),
        );
        assert!(!g.verdicts.is_empty());
        let _ = vpn_across(&[g.clone(), g]);
    }
    // The unmangled share of lines must still be understood.
    assert!(total_connects > 0);
    // And arbitrary strings as times.
    for _ in 0..3000 {
        let s: String = (0..rng.below(32))
            .map(|_| alphabet[rng.below(alphabet.len())])
            .collect();
        let _ = parse_journal_time(&s);
    }
}

// ------------------------------------------------------------------------------------------
// 4. Nodes
// ------------------------------------------------------------------------------------------

fn node(name: &str, ready: Option<ConditionStatus>, roles: &[&str], addr: &str) -> NodeObs {
    let mut labels: BTreeMap<String, String> = roles
        .iter()
        .map(|r| (format!("node-role.kubernetes.io/{r}"), "true".to_string()))
        .collect();
    labels.insert("kubernetes.io/hostname".into(), name.into());
    NodeObs {
        name: name.into(),
        ready,
        labels,
        addresses: vec![ip(addr)],
    }
}

#[test]
fn nodes_ready_with_roles() {
    let cp = ["control-plane", "etcd", "master"];
    let ns = vec![
        node(
            "k3s-prod-1",
            Some(ConditionStatus::True),
            &cp,
            "192.168.2.10",
        ),
        node(
            "k3s-prod-2",
            Some(ConditionStatus::True),
            &cp,
            "192.168.2.11",
        ),
        node(
            "k3s-prod-3",
            Some(ConditionStatus::True),
            &cp,
            "192.168.2.12",
        ),
    ];
    let pane = nodes(&prod(), &Look::seen(ns));
    assert_eq!(worst(&pane.verdicts), Severity::Ok, "{:#?}", pane.verdicts);
    assert_eq!(pane.nodes[0].roles, vec!["control-plane", "etcd", "master"]);
    assert!(pane.verdicts[0]
        .message
        .contains("k3s-prod-1 Ready (control-plane,etcd,master)"));
}

#[test]
fn not_ready_and_missing_nodes() {
    let ns = vec![
        node(
            "k3s-prod-1",
            Some(ConditionStatus::False),
            &["control-plane"],
            "192.168.2.10",
        ),
        // Named differently, matched by address.
        node(
            "prod2.lan",
            Some(ConditionStatus::Unknown),
            &[],
            "192.168.2.11",
        ),
    ];
    let pane = nodes(&prod(), &Look::seen(ns));
    let ready = by_rule(&pane.verdicts, Rule::NodeReady);
    assert_eq!(ready[0].severity, Severity::Critical);
    assert!(
        ready[0].message.contains("k3s-prod-1 NotReady"),
        "{}",
        ready[0].message
    );
    assert_eq!(ready[1].severity, Severity::Critical);
    assert!(ready[1].message.contains("Unknown"), "{}", ready[1].message);
    let missing = one(&pane.verdicts, Rule::NodeMissing);
    assert_eq!(missing.severity, Severity::Warn);
    assert!(
        missing.message.contains("k3s-prod-3 (192.168.2.12)"),
        "{}",
        missing.message
    );
    assert_eq!(exit_code(&pane.verdicts), 1);
    // No Ready condition at all: unknown.
    let pane = nodes(
        &prod(),
        &Look::seen(vec![node("k3s-prod-1", None, &[], "192.168.2.10")]),
    );
    assert_eq!(
        by_rule(&pane.verdicts, Rule::NodeReady)[0].severity,
        Severity::Unknown
    );
}

#[test]
fn roles_ignore_other_labels() {
    let mut labels = BTreeMap::new();
    labels.insert("node-role.kubernetes.io/worker".to_string(), String::new());
    labels.insert("node-role.kubernetes.io/".to_string(), "true".to_string());
    labels.insert(
        "node.kubernetes.io/instance-type".to_string(),
        "k3s".to_string(),
    );
    assert_eq!(node_roles(&labels), vec!["worker"]);
}

// ------------------------------------------------------------------------------------------
// 5. The snapshot of `observe --once`
// ------------------------------------------------------------------------------------------

fn healthy_snapshot() -> Snapshot {
    let topo = prod();
    let now = Timestamp(10_000);
    let policy = VpnPolicy::default();
    let cp = ["control-plane"];
    Snapshot {
        vip_lease: vec![vip_lease(
            &topo,
            &lease_input(Some(lease("k3s-prod-1", Timestamp(9_000))), UP, now),
        )],
        agent_env: vec![agent_env(
            &topo,
            &Look::seen(prod_agents("192.168.2.9")),
            &ConfigMaps::new(),
        )],
        rollout: vec![rollout(
            "prod",
            &Look::seen(Some(ds(3, 3, 3, 0))),
            &[],
            now,
            STUCK_AFTER,
        )],
        vpn: vec![vpn_gateway(
            &gateway("prod", "k3s-prod-3", vec![]),
            now_0912(),
            &policy,
        )],
        vpn_across: vec![],
        nodes: vec![nodes(
            &topo,
            &Look::seen(vec![
                node(
                    "k3s-prod-1",
                    Some(ConditionStatus::True),
                    &cp,
                    "192.168.2.10",
                ),
                node(
                    "k3s-prod-2",
                    Some(ConditionStatus::True),
                    &cp,
                    "192.168.2.11",
                ),
                node(
                    "k3s-prod-3",
                    Some(ConditionStatus::True),
                    &cp,
                    "192.168.2.12",
                ),
            ]),
        )],
        etcd: vec![],
    }
}

#[test]
fn snapshot_exit_codes() {
    let ok = healthy_snapshot();
    assert_eq!(worst(&ok.verdicts()), Severity::Ok, "{:#?}", ok.verdicts());
    assert_eq!(ok.exit_code(), 0);

    let mut blind = healthy_snapshot();
    blind.nodes = vec![nodes(
        &prod(),
        &Look::could_not("kubeconfig .cache/prod.kubeconfig: no such file"),
    )];
    assert_eq!(blind.exit_code(), 2);

    let mut incident = blind.clone();
    incident.agent_env = vec![agent_env(
        &prod(),
        &Look::seen(prod_agents("192.168.2.10")),
        &ConfigMaps::new(),
    )];
    assert_eq!(incident.exit_code(), 1);

    // The JSON round-trips (what --json prints and a later reader parses).
    let j = serde_json::to_string(&incident).expect("serialise");
    let back: Snapshot = serde_json::from_str(&j).expect("deserialise");
    assert_eq!(back, incident);
}

#[test]
fn inputs_deserialise_from_json() {
    // The shape a watcher (or a recorded fixture) hands to the rules.
    let obs: GatewayObs = serde_json::from_str(
        r#"{
            "env": "dev", "host": "k3s-dev-3",
            "service": "vpn-egress-tunnel.service", "interface": "tun0",
            "active_state": {"look": "seen", "value": "active"},
            "tunnel_exit": {"look": "seen", "value": {"Ok": "158.173.241.20"}},
            "direct_exit": {"look": "seen", "value": {"Err": "timeout"}},
            "journal": {"look": "could-not-look", "reason": "ssh: permission denied"}
        }"#,
    )
    .expect("gateway obs");
    assert_eq!(obs.tunnel_exit, Look::seen(Ok(ip("158.173.241.20"))));
    let g = vpn_gateway(&obs, now_0912(), &VpnPolicy::default());
    assert!(one(&g.verdicts, Rule::CouldNotLook)
        .message
        .contains("permission denied"));

    let pod: AgentPod = serde_json::from_str(
        r#"{"name": "cilium-4xk2p", "node": "k3s-prod-1", "phase": "Running", "ready": true,
            "env": [{"name": "KUBERNETES_SERVICE_HOST",
                     "source": {"from": "config-map-key", "config_map": "cilium-config",
                                "key": "k8s-service-host"}}]}"#,
    )
    .expect("agent pod");
    assert!(matches!(
        &pod.env[0].source,
        EnvSource::ConfigMapKey {
            optional: false,
            ..
        }
    ));
}
