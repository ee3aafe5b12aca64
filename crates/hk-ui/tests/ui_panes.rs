//! The incident console's new panes drawn from their models at the four sizes the issue
//! names: the all-environments strip, etcd, the timeline, the Check screen and the look.
//! Each model is built by the real code (the summary from the shipped runbooks, the etcd
//! pane from the judge, the timeline from successive updates).

use ratatui::backend::TestBackend;
use ratatui::layout::Rect;
use ratatui::Terminal;

use hk_effects::observe::feed::{Feed, Update};
use hk_effects::observe::look::LookResult;
use hk_effects::observe::summary::{self, EnvInput, Facet, LookKind, NextStep, Objects};
use hk_effects::observe::timeline::Timeline;
use hk_engine::checks::live::{
    self, AgentEnvPane, AgentRow, ConditionStatus, EtcdMemberObs, EtcdPolicy, IoPressure, Look,
    NodeRow, NodesPane, Pane, Resolved, Rule, Severity, TcpProbe, Timestamp, Verdict, VipLeasePane,
};
use hk_engine::checks::parity;
use hk_engine::runbook::schema::Runbook;
use hk_ui::panes::{check, etcd, look, strip, timeline};
use hk_ui::theme::Theme;

const SIZES: [(u16, u16); 4] = [(160, 45), (120, 40), (80, 24), (60, 15)];

fn frame(w: u16, h: u16, draw: impl FnOnce(&mut ratatui::Frame, Rect)) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).expect("terminal");
    term.draw(|f| {
        let a = f.area();
        draw(f, a)
    })
    .expect("draw");
    term.backend().to_string()
}

fn objects() -> Objects {
    Objects {
        namespace: "kube-system".into(),
        lease_name: "plndr-cp-lock".into(),
        agent_container: "cilium-agent".into(),
        daemonset: "cilium".into(),
    }
}

fn v(env: &str, pane: Pane, rule: Rule, sev: Severity, subject: &str, msg: &str) -> Verdict {
    Verdict {
        pane,
        rule,
        severity: sev,
        env: env.into(),
        subject: subject.into(),
        message: msg.into(),
    }
}

fn runbooks() -> Vec<Runbook> {
    hk_engine::runbook::embedded::load(&[])
        .expect("runbooks")
        .iter()
        .map(|l| l.runbook.clone())
        .collect()
}

/// agents-on-node-ip as the strip sees it: prod critical (agents on k3s-prod-1's address),
/// dev all green, parity with prod's violation.
fn incident_summary() -> summary::Summary {
    let agents = AgentEnvPane {
        env: "prod".into(),
        agents: (1..=3)
            .map(|i| AgentRow {
                pod: format!("cilium-p{i}"),
                node: Some(format!("k3s-prod-{i}")),
                phase: "Running".into(),
                ready: true,
                host: Resolved::Unset,
                port: Resolved::Unset,
                endpoint: live::Endpoint::NodeAddress {
                    node: "k3s-prod-1".into(),
                    address: "192.168.2.10".into(),
                },
            })
            .collect(),
        verdicts: vec![],
    };
    let finding = Box::leak(Box::new(parity::Finding {
        rule: "k3s-api-host",
        severity: parity::Severity::Violation,
        env: Some("prod".into()),
        file: "clusters/prod/kustomization.yaml".into(),
        line: 12,
        message: "K3S_API_HOST is 192.168.2.10, k3s-prod-1's own address, not the VIP 192.168.2.9"
            .into(),
    }));
    let agents = Box::leak(Box::new(agents));
    let ok = |env: &str, pane, rule, msg: &str| v(env, pane, rule, Severity::Ok, "x", msg);
    let dev = EnvInput {
        env: "dev",
        protected: false,
        verdicts: vec![
            ok(
                "dev",
                Pane::VipLease,
                Rule::LeaseHeld,
                "lease held by k3s-dev-1",
            ),
            ok(
                "dev",
                Pane::AgentEnv,
                Rule::AgentsSummary,
                "3 agents dial the VIP 192.168.1.49",
            ),
            ok(
                "dev",
                Pane::VpnEgress,
                Rule::VpnService,
                "k3s-dev-3 tunnel active",
            ),
            ok("dev", Pane::Nodes, Rule::NodeReady, "3 nodes Ready"),
        ],
        parity: Some(vec![]),
        ..EnvInput::default()
    };
    let prod = EnvInput {
        env: "prod",
        protected: true,
        verdicts: vec![
            ok("prod", Pane::VipLease, Rule::LeaseHeld, "lease held by k3s-prod-1"),
            v(
                "prod",
                Pane::AgentEnv,
                Rule::AgentsSummary,
                Severity::Critical,
                "agents",
                "3 of 3 agents dial 192.168.2.10 (k3s-prod-1's own address): lose k3s-prod-1 and no policy or service update lands",
            ),
            ok("prod", Pane::Nodes, Rule::NodeReady, "3 nodes Ready"),
        ],
        agents: Some(agents),
        parity: Some(vec![finding]),
        ..EnvInput::default()
    };
    let rbs = runbooks();
    let refs: Vec<&Runbook> = rbs.iter().collect();
    summary::summarize(&[dev, prod], &refs, &objects())
}

#[test]
fn strip_names_prod_critical_and_its_runbook_while_dev_is_selected() {
    let s = incident_summary();
    assert_eq!(s.envs[0].env, "prod");
    assert_eq!(strip::header_alert(&s).as_deref(), Some("✗ prod critical"));
    match s.envs[0].facet(Facet::Agents).and_then(|f| f.next.clone()) {
        Some(NextStep::Runbook { id, env, .. }) => {
            assert_eq!(
                (id.as_str(), env.as_str()),
                ("cilium-endpoint-rollout", "prod")
            )
        }
        other => panic!("{other:?}"),
    }
    for (w, h) in SIZES {
        let view = strip::StripView {
            summary: &s,
            expanded: Some("dev"),
        };
        let rows = strip::height(&view, h / 3);
        let text = frame(w, rows, |f, a| strip::draw(f, a, &view, &Theme::fallback()));
        if w >= 80 {
            assert!(text.contains("cilium-endpoint-rollout"), "{w}x{h}:\n{text}");
        }
        assert!(text.contains("prod"), "{text}");
        insta::assert_snapshot!(format!("strip_dev_selected_{w}x{h}"), text);
        let view = strip::StripView {
            summary: &s,
            expanded: Some("prod"),
        };
        let rows = strip::height(&view, h / 3);
        let text = frame(w, rows, |f, a| strip::draw(f, a, &view, &Theme::fallback()));
        insta::assert_snapshot!(format!("strip_prod_expanded_{w}x{h}"), text);
    }
}

fn starving_etcd() -> live::EtcdPane {
    let psi = |x: f64| {
        Look::seen(IoPressure {
            some_avg10: x,
            some_avg60: x * 0.9,
            full_avg10: Some(x / 2.0),
        })
    };
    let m = |leader: bool, p99: f64| {
        Look::seen(live::EtcdMetrics {
            is_leader: leader,
            has_leader: Some(true),
            db_size_bytes: Some(25_165_824),
            quota_bytes: Some(2_147_483_648),
            wal_fsync_p99_ms: Some(p99),
            wal_fsync_count: Some(10_000),
            leader_changes: Some(1),
            wal_fsync_buckets: Vec::new(),
            wal_fsync_window_s: None,
        })
    };
    live::etcd(
        "prod",
        &[
            EtcdMemberObs {
                host: "k3s-prod-1".into(),
                address: "192.168.2.10".into(),
                metrics: m(true, 1024.0),
                io_pressure: psi(11.36),
            },
            EtcdMemberObs {
                host: "k3s-prod-2".into(),
                address: "192.168.2.11".into(),
                metrics: m(false, 2.0),
                io_pressure: psi(0.10),
            },
            EtcdMemberObs {
                host: "k3s-prod-3".into(),
                address: "192.168.2.12".into(),
                metrics: Look::could_not("k3s-prod-3: `curl` exited 7: connection refused"),
                io_pressure: psi(1.29),
            },
        ],
        &EtcdPolicy::default(),
    )
}

#[test]
fn etcd_pane_names_the_starving_server() {
    let p = starving_etcd();
    for (w, h) in SIZES {
        let text = frame(w, h / 2, |f, a| {
            etcd::draw(f, a, Some(&p), &Theme::fallback())
        });
        assert!(text.contains("k3s-prod-1"), "{text}");
        if w >= 80 {
            assert!(text.contains("leader"), "{text}");
            assert!(text.contains("11.36"), "{text}");
        }
        insta::assert_snapshot!(format!("etcd_starving_{w}x{h}"), text);
    }
    let empty = frame(60, 6, |f, a| etcd::draw(f, a, None, &Theme::fallback()));
    assert!(empty.contains("no data yet"), "{empty}");
}

fn vip(at: u64, holder: &str) -> Update {
    let mut p = VipLeasePane::unjudged("prod", "192.168.2.9".parse().expect("ip"), 6443);
    p.holder = Some(holder.into());
    p.holder_node = Some(holder.into());
    p.probe = Some(TcpProbe::Connected { latency_ms: 1 });
    Update {
        env: "prod".into(),
        at: Timestamp(at),
        feed: Feed::Vip(p),
    }
}

fn nodes(at: u64, one: ConditionStatus) -> Update {
    Update {
        env: "prod".into(),
        at: Timestamp(at),
        feed: Feed::Nodes(NodesPane {
            env: "prod".into(),
            nodes: (1..=3)
                .map(|i| NodeRow {
                    name: format!("k3s-prod-{i}"),
                    ready: Some(if i == 1 { one } else { ConditionStatus::True }),
                    roles: vec!["control-plane".into()],
                })
                .collect(),
            verdicts: vec![],
        }),
    }
}

#[test]
fn timeline_records_the_holder_dying_and_the_lease_moving() {
    // 12:03:00 UTC.
    let t0 = 1_796_256_000_000 + 12 * 3_600_000 + 3 * 60_000;
    let mut tl = Timeline::default();
    tl.observe(&vip(t0, "k3s-prod-1"));
    tl.observe(&nodes(t0, ConditionStatus::True));
    tl.observe(&nodes(t0 + 2_000, ConditionStatus::Unknown));
    tl.observe(&vip(t0 + 19_000, "k3s-prod-2"));
    let texts: Vec<String> = tl
        .events()
        .map(|e| format!("{} {}", e.clock(), e.text))
        .collect();
    assert_eq!(
        texts,
        vec![
            "12:03:02 node k3s-prod-1 Ready -> NotReady (Unknown)".to_string(),
            "12:03:19 lease moved k3s-prod-1 -> k3s-prod-2".to_string(),
        ]
    );
    for (w, h) in SIZES {
        let text = frame(w, 6, |f, a| {
            timeline::draw(f, a, &tl, "", &Theme::fallback())
        });
        assert!(text.contains("12:03:19"), "{text}");
        insta::assert_snapshot!(format!("timeline_{w}x{h}"), text);
    }
    // Two rows for two events and more: "N earlier" instead of a silent cut.
    tl.observe(&vip(t0 + 40_000, "k3s-prod-3"));
    let text = frame(80, 4, |f, a| {
        timeline::draw(f, a, &tl, "", &Theme::fallback())
    });
    assert!(text.contains("2 more earlier events"), "{text}");
}

#[test]
fn check_screen_shows_each_finding_with_file_and_line() {
    let findings = vec![
        parity::Finding {
            rule: "k3s-api-host",
            severity: parity::Severity::Violation,
            env: Some("prod".into()),
            file: "clusters/prod/kustomization.yaml".into(),
            line: 12,
            message:
                "K3S_API_HOST is 192.168.2.10, k3s-prod-1's own address, not the VIP 192.168.2.9"
                    .into(),
        },
        parity::Finding {
            rule: "cilium-template",
            severity: parity::Severity::Violation,
            env: None,
            file: "infra/ansible/roles/cilium/templates/values.yaml.j2".into(),
            line: 4,
            message: "the template consumes k3s_api_host, not k3s_apiserver_endpoint".into(),
        },
    ];
    let view = check::CheckView {
        findings: Some(Ok(findings)),
        engine_line: Some("overlays built with kustomize v5.8.1".into()),
        ran_at: Some("12:00:01".into()),
    };
    for (w, h) in SIZES {
        let text = frame(w, h, |f, a| {
            check::draw(f, a, &view, "", 0, &Theme::fallback());
        });
        // A path is wrapped, never cut: its file name and line are on screen whole.
        let flat: String = text.lines().map(|l| l.trim_matches('│').trim()).collect();
        assert!(flat.contains("kustomization.yaml:12"), "{w}x{h}\n{text}");
        insta::assert_snapshot!(format!("check_{w}x{h}"), text);
    }
}

#[test]
fn look_pane_shows_events_with_tabs_for_the_other_looks() {
    let view = look::LookView {
        results: vec![
            LookResult {
                kind: LookKind::Events,
                title: "events pod kube-system/cilium-x2k9q".into(),
                lines: Ok(vec![
                    "12:01:02 Warning Unhealthy (x14): Readiness probe failed: Get \"http://127.0.0.1:9879/healthz\": dial tcp 127.0.0.1:9879: connect: connection refused".into(),
                ]),
            },
            LookResult {
                kind: LookKind::Logs,
                title: "logs pod kube-system/cilium-x2k9q".into(),
                lines: Err("read logs: the server could not find the requested resource (404)".into()),
            },
        ],
        shown: 0,
        pending: vec![LookKind::Describe],
    };
    for (w, h) in SIZES {
        let text = frame(w, h / 2, |f, a| {
            look::draw(f, a, &view, 0, &Theme::fallback())
        });
        assert!(text.contains("Readiness probe failed"), "{text}");
        insta::assert_snapshot!(format!("look_events_{w}x{h}"), text);
    }
}
