//! The etcd pane and the looks, through hk-console's REAL clients against the demo's
//! simulated homelab: the probe over SSH to every server (its metrics listener and
//! /proc/pressure/io), and the read-only kube looks at a stuck pod.

use crate::demo_common;

use std::time::Duration;

use demo_common::start;
use hk_effects::cluster::{client, kube_target, KubeOverrides};
use hk_effects::exec::settings::{SshConfig, SshDefaults};
use hk_effects::observe::etcd::EtcdProbe;
use hk_engine::checks::live::{Rule, Severity};
use hk_sim::demo;
use tokio_util::sync::CancellationToken;

/// The pre-flight's refusing findings, in words.
fn refusals(view: &hk_engine::checks::live::EtcdClientView) -> Vec<&str> {
    view.preflight
        .iter()
        .filter(|f| f.blocks)
        .map(|f| f.text.as_str())
        .collect()
}

fn probe(d: &demo::Demo) -> EtcdProbe {
    EtcdProbe::for_repo_with(
        &d.repo,
        d.ssh_options(),
        &SshConfig::empty(),
        &SshDefaults::from_env(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_etcd_has_one_leader_per_environment_and_calm_disks() {
    let (_dir, d) = start("healthy").await;
    let p = probe(&d);
    let cancel = CancellationToken::new();
    for env in ["dev", "prod"] {
        let started = std::time::Instant::now();
        let (pane, _) = p.look(&d.repo, env, &cancel).await;
        eprintln!("{env}: etcd look over 3 servers in {:?}", started.elapsed());
        assert_eq!(pane.members.len(), 3, "{pane:#?}");
        let founder = d.repo.environment(env).expect("env").servers[0]
            .name
            .clone();
        assert_eq!(pane.leader.as_deref(), Some(founder.as_str()), "{pane:#?}");
        for v in &pane.verdicts {
            assert_eq!(v.severity, Severity::Ok, "{env}: {v}");
        }
        for m in &pane.members {
            let metrics = m.metrics.as_ref().expect("metrics seen");
            assert_eq!(metrics.db_size_bytes, Some(25_165_824));
            assert!(m.io_pressure.expect("psi seen").some_avg10 < 1.0);
        }
        // One connection per server, reused by every command.
        for m in &pane.members {
            assert_eq!(p.connects(&m.host), 1, "{}", m.host);
        }
        // etcd's client API, read through `sudo -n curl` with k3s's own certificates: the
        // three members agree, the founder's member leads, nothing refuses a step.
        let view = pane.client.as_ref().expect("etcd's client API read");
        assert_eq!(view.members.len(), 3, "{view:#?}");
        assert_eq!(view.member_of.len(), 3, "{view:#?}");
        assert_eq!(view.leader_host.as_deref(), Some(founder.as_str()));
        assert!(
            view.preflight.iter().all(|f| !f.blocks),
            "{:#?}",
            view.preflight
        );
        for m in &view.members {
            assert!(m.name.starts_with(&format!("k3s-{env}-")), "{m:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_io_starvation_lights_the_pane_on_prod_only() {
    let (_dir, d) = start("etcd-io-starvation").await;
    let p = probe(&d);
    let cancel = CancellationToken::new();
    let (prod, _) = p.look(&d.repo, "prod", &cancel).await;
    let starving: Vec<_> = prod
        .verdicts
        .iter()
        .filter(|v| v.rule == Rule::EtcdIoPressure && v.severity == Severity::Critical)
        .collect();
    // One server starves (the scenario's server 1); its peers' disks do not: 1.29 on
    // server 3 is contended (a warning), server 2 is quiet, as in the 2026-09-07 incident.
    let servers: Vec<String> = d
        .repo
        .environment("prod")
        .expect("prod")
        .servers
        .iter()
        .map(|s| s.name.clone())
        .collect();
    assert_eq!(starving.len(), 1, "{:#?}", prod.verdicts);
    for v in &starving {
        assert!(v.message.contains("11.36"), "{v}");
        assert!(v.message.contains("starvation"), "{v}");
        assert!(v.message.starts_with(&servers[0]), "{v}");
    }
    let psi_of = |host: &str| {
        prod.members
            .iter()
            .find(|m| m.host == host)
            .and_then(|m| m.io_pressure)
            .map(|p| p.some_avg10)
            .unwrap_or_else(|| panic!("{host}: no PSI seen: {:#?}", prod.members))
    };
    assert!((psi_of(&servers[0]) - 11.36).abs() < 0.01);
    assert!(psi_of(&servers[1]) < 1.0, "{}", psi_of(&servers[1]));
    assert!((psi_of(&servers[2]) - 1.29).abs() < 0.01);
    let pressure_of = |host: &str| {
        prod.verdicts
            .iter()
            .find(|v| v.rule == Rule::EtcdIoPressure && v.message.starts_with(host))
            .map(|v| v.severity)
            .unwrap_or_else(|| panic!("{host}: no IO pressure verdict"))
    };
    assert_eq!(pressure_of(&servers[1]), Severity::Ok);
    assert_eq!(pressure_of(&servers[2]), Severity::Warn);
    assert!(
        prod.verdicts
            .iter()
            .any(|v| v.rule == Rule::EtcdMember && v.severity == Severity::Critical),
        "the WAL fsync tail follows the pressure: {:#?}",
        prod.verdicts
    );
    let (dev, _) = p.look(&d.repo, "dev", &cancel).await;
    assert!(
        dev.verdicts.iter().all(|v| v.severity == Severity::Ok),
        "{:#?}",
        dev.verdicts
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_k3s_is_down_is_could_not_look_naming_it() {
    let (_dir, d) = start("healthy").await;
    let p = probe(&d);
    // An environment the repo lacks: one could-not-look naming it, not a panic or a pass.
    let (pane, _) = p.look(&d.repo, "staging", &CancellationToken::new()).await;
    assert_eq!(pane.verdicts.len(), 1, "{:#?}", pane.verdicts);
    assert_eq!(pane.verdicts[0].rule, Rule::CouldNotLook);
    assert!(
        pane.verdicts[0].message.contains("staging"),
        "{:?}",
        pane.verdicts[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stuck_pods_events_and_logs_are_one_look_away() {
    use hk_effects::observe::look::take;
    use hk_effects::observe::summary::{Look, LookKind, ObjectRef};
    let (_dir, d) = start("rollout-stuck").await;
    let t = kube_target(&d.repo, "prod", &KubeOverrides::default()).expect("target");
    let c = client(&t).await.expect("client");
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(c.clone(), "kube-system");
    let list = pods
        .list(&kube::api::ListParams::default().labels("k8s-app=cilium"))
        .await
        .expect("pods");
    let name = list.items[0].metadata.name.clone().expect("name");
    let look = Look {
        env: "prod".into(),
        object: ObjectRef {
            kind: "Pod".into(),
            namespace: Some("kube-system".into()),
            name: name.clone(),
        },
        kinds: vec![LookKind::Events, LookKind::Logs, LookKind::Describe],
        container: Some("cilium-agent".into()),
    };
    for kind in [LookKind::Describe, LookKind::Events, LookKind::Logs] {
        let r = take(&c, &look, kind, Duration::from_secs(5)).await;
        eprintln!("{}: {:?}", r.title, r.lines);
        assert!(r.title.contains(&name), "{}", r.title);
        if kind == LookKind::Describe {
            let lines = r.lines.expect("describe reads the pod");
            assert!(lines.iter().any(|l| l.starts_with("Node:")), "{lines:?}");
        }
    }
}

/// Two `holder-dies` (the first holder, then the server the lease moved to): two of
/// prod's three etcd members are down. The simulated API server answers as a real one
/// without quorum (`/readyz/etcd` 500, `/readyz` naming `[-]etcd failed`, a write 500
/// `etcdserver: request timed out`) and the etcd pane, read through prod's API endpoint,
/// names the quorum lost: critical, the two members named, the metrics' leader no ✓.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_of_three_members_down_is_no_quorum_through_the_api() {
    use hk_effects::cluster::WatchSettings;
    use hk_engine::checks::live::EtcdReady;
    let (_dir, d) = start("healthy").await;
    let t = kube_target(&d.repo, "prod", &KubeOverrides::default()).expect("target");
    let c = client(&t).await.expect("client");
    let p = probe(&d).with_api("prod", c.clone(), WatchSettings::default());
    let cancel = CancellationToken::new();
    let quorum = |pane: &hk_engine::checks::live::EtcdPane| {
        pane.verdicts
            .iter()
            .find(|v| v.rule == Rule::EtcdQuorum && v.subject == "quorum")
            .cloned()
            .unwrap_or_else(|| panic!("a quorum verdict: {:#?}", pane.verdicts))
    };
    let (calm, _) = p.look(&d.repo, "prod", &cancel).await;
    let q = quorum(&calm);
    assert_eq!(q.severity, Severity::Ok, "{q}");
    assert_eq!(
        q.message,
        "quorum: 3 of 3 members up, /readyz/etcd ok through the API endpoint"
    );

    let faults = d.fault_injector();
    let first = faults.inject("prod", "holder-dies").expect("accepted");
    // The fault reaches the simulated controllers over a channel (the CI run that looked
    // at once saw 3 of 3 up): wait until the API lists k3s-prod-1 NotReady, then look.
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(c.clone());
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let n = nodes.get("k3s-prod-1").await.expect("node");
        let ready = n
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        if !ready {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "k3s-prod-1 still Ready 5 s after {first}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // One of three down: quorum holds, a warning naming the member.
    let (one, _) = p.look(&d.repo, "prod", &cancel).await;
    let q = quorum(&one);
    assert_eq!(q.severity, Severity::Warn, "{first}: {q}");
    assert!(
        q.message
            .starts_with("1 of 3 members down (k3s-prod-1 NotReady): quorum holds"),
        "{q}"
    );
    // The second fault kills whoever holds the lease once it has moved off the dead node.
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    let second = loop {
        let said = faults.inject("prod", "holder-dies").expect("accepted");
        if !said.contains("already dead") {
            break said;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the lease never moved: {said}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(
        second.contains("k3s-prod-2 (lease holder) died"),
        "{second}"
    );

    let readyz = |path: &'static str| {
        let c = c.clone();
        async move {
            let req = http::Request::get(path).body(Vec::new()).expect("request");
            c.request_text(req).await
        }
    };
    // The fault reaches the simulated controllers over a channel: wait for it to land.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let first = loop {
        let r = readyz("/readyz/etcd").await;
        if r.is_err() || std::time::Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    match first {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 500, "{s:?}");
            assert!(s.message.contains("internal server error"), "{s:?}");
        }
        other => panic!("/readyz/etcd without quorum: {other:?}"),
    }
    match readyz("/readyz").await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 500, "{s:?}");
            assert!(
                s.message.contains("[-]etcd failed: reason withheld")
                    && s.message.contains("[+]ping ok")
                    && s.message.contains("readyz check failed"),
                "{s:?}"
            );
        }
        other => panic!("/readyz without quorum: {other:?}"),
    }
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(c.clone(), "default");
    let cm: k8s_openapi::api::core::v1::ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "quorum-probe"}}))
            .expect("configmap");
    match cms.create(&Default::default(), &cm).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 500, "{s:?}");
            assert_eq!(s.message, "etcdserver: request timed out", "{s:?}");
        }
        other => panic!("a write without quorum: {other:?}"),
    }
    // Reads are the server's cache: they still answer.
    assert!(cms.list(&Default::default()).await.is_ok());

    let (lost, _) = p.look(&d.repo, "prod", &cancel).await;
    let q = quorum(&lost);
    assert_eq!(q.severity, Severity::Critical, "{q}");
    assert!(
        q.message.starts_with(
            "2 of 3 members down (k3s-prod-1 NotReady, k3s-prod-2 NotReady): no quorum (etcd needs 2 of 3); /readyz/etcd through the API endpoint: 500"
        ),
        "{q}"
    );
    assert!(
        !lost
            .verdicts
            .iter()
            .any(|v| v.rule == Rule::EtcdLeader && v.severity == Severity::Ok),
        "no ✓ leader without quorum: {:#?}",
        lost.verdicts
    );
    // The API side of the health gate reads the same endpoint and agrees.
    let gate = hk_effects::cluster::health_probe::readyz_etcd(&c, &WatchSettings::default()).await;
    assert!(
        matches!(
            &gate,
            hk_engine::checks::live::Look::Seen {
                value: EtcdReady::Failed { .. }
            }
        ),
        "{gate:?}"
    );
}

/// One `holder-dies` (issue 38): the dead server's etcd member stops answering and the two
/// left elect a leader. The pane, read over SSH and through prod's API, names the new
/// leader from the members that answer, says the dead one is "not answering since", and
/// nothing says the dead node leads (the console once showed `✓ k3s-prod-1 leads (3 of 3
/// members seen)` while it was NotReady).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_holder_is_never_the_etcd_leader() {
    use hk_effects::cluster::WatchSettings;
    let (_dir, d) = start("healthy").await;
    let t = kube_target(&d.repo, "prod", &KubeOverrides::default()).expect("target");
    let c = client(&t).await.expect("client");
    let p = probe(&d).with_api("prod", c, WatchSettings::default());
    let cancel = CancellationToken::new();
    let (calm, _) = p.look(&d.repo, "prod", &cancel).await;
    assert_eq!(calm.leader.as_deref(), Some("k3s-prod-1"), "{calm:#?}");
    let said = d
        .fault_injector()
        .inject("prod", "holder-dies")
        .expect("accepted");
    assert!(said.contains("k3s-prod-1"), "{said}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let pane = loop {
        let (pane, _) = p.look(&d.repo, "prod", &cancel).await;
        // Never, on any look after the fault landed, the dead node as leader with it down.
        let down = pane
            .verdicts
            .iter()
            .any(|v| v.rule == Rule::EtcdQuorum && v.subject == "member k3s-prod-1");
        if down {
            assert_ne!(pane.leader.as_deref(), Some("k3s-prod-1"), "{pane:#?}");
        }
        // The members are looked at side by side: a look can straddle the election (the
        // dead member's metrics read just before its listener went, the new leader's just
        // after; seen once in CI), so the whole story is waited for in one look.
        let silent = pane
            .verdicts
            .iter()
            .any(|v| v.rule == Rule::CouldNotLook && v.subject == "member k3s-prod-1");
        if pane.leader.as_deref() == Some("k3s-prod-2") && down && silent {
            break pane;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no new leader 10 s after {said}: {pane:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for v in &pane.verdicts {
        assert!(!v.message.contains("k3s-prod-1 leads"), "{v}");
    }
    let silent = pane
        .verdicts
        .iter()
        .find(|v| v.rule == Rule::CouldNotLook && v.subject == "member k3s-prod-1")
        .unwrap_or_else(|| panic!("the dead member's verdict: {:#?}", pane.verdicts));
    assert!(
        silent
            .message
            .starts_with("k3s-prod-1 not answering since "),
        "{silent}"
    );
    let leader = pane
        .verdicts
        .iter()
        .find(|v| v.rule == Rule::EtcdLeader)
        .expect("a leader verdict");
    assert_eq!(leader.severity, Severity::Ok, "{leader}");
    assert_eq!(leader.message, "k3s-prod-2 leads (2 of 3 members seen)");
    // etcd's own word: the two that answer follow k3s-prod-2; the pre-flight refuses to
    // disrupt another server while k3s-prod-1's member does not answer.
    let view = pane.client.as_ref().expect("etcd's client API read");
    assert_eq!(view.leader_host.as_deref(), Some("k3s-prod-2"), "{view:#?}");
    let refusals = refusals(view);
    assert!(
        refusals.iter().any(
            |t| t.starts_with("k3s-prod-1's etcd member not answering since ")
                && t.contains("Couldn't connect to server")
        ),
        "{refusals:#?}"
    );
}

/// `:fault prod etcd-learner-added`: a learner that never started joins prod's membership
/// (a server join that stopped half way). Writes go on, the nodes stay Ready: only etcd's
/// own member list says it, and the pre-flight refuses to disrupt a server until it is
/// gone (`etcd-learner-removed`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_joined_learner_is_seen_only_by_etcd_and_refuses_the_preflight() {
    let (_dir, d) = start("healthy").await;
    let p = probe(&d);
    let cancel = CancellationToken::new();
    let faults = d.fault_injector();
    let said = faults
        .inject("prod", "etcd-learner-added")
        .expect("accepted");
    assert!(said.contains("added as a learner"), "{said}");
    let (pane, _) = p.look(&d.repo, "prod", &cancel).await;
    let view = pane.client.as_ref().expect("etcd's client API read");
    assert_eq!(view.members.len(), 4, "{view:#?}");
    let refusals = refusals(view);
    assert!(
        refusals
            .iter()
            .any(|t| t.starts_with("unstarted member ") && t.contains("has not started")),
        "{refusals:#?}"
    );
    // The pane says it too, critical; dev is untouched.
    assert!(
        pane.verdicts.iter().any(|v| v.rule == Rule::EtcdMembership
            && v.severity == Severity::Critical
            && v.message.contains("192.0.2.250")),
        "{:#?}",
        pane.verdicts
    );
    let (dev, _) = p.look(&d.repo, "dev", &cancel).await;
    assert!(
        !dev.client.as_ref().expect("dev read").refuses(),
        "{dev:#?}"
    );

    let said = faults
        .inject("prod", "etcd-learner-removed")
        .expect("accepted");
    assert!(said.contains("removed"), "{said}");
    let again = faults
        .inject("prod", "etcd-learner-removed")
        .expect("accepted");
    assert!(again.contains("nothing changed"), "{again}");
    let (pane, _) = p.look(&d.repo, "prod", &cancel).await;
    assert!(
        !pane.client.as_ref().expect("read").refuses(),
        "{:#?}",
        pane.client
    );
}

/// etcd's gateway on member `host` of prod's REAL etcd (`demo --apiserver`), from the test.
fn real_gateway(d: &demo::Demo, host: &str, path: &str, body: &str) -> serde_json::Value {
    let etcd = d
        .real
        .as_ref()
        .and_then(|r| r.cluster.etcd("prod"))
        .expect("prod's real etcd");
    let url = etcd.client_url(host).expect("a member per server");
    let (code, text) = hk_sim::apiserver::http_call(
        &format!("{url}{path}"),
        "POST",
        Some(body),
        Duration::from_secs(10),
    )
    .unwrap_or_else(|e| panic!("{url}{path}: {e:?}"));
    assert_eq!(code, 200, "{url}{path}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{url}{path}: {e}: {text}"))
}

/// `demo --apiserver`: each server's etcd endpoint (`sudo -n curl https://127.0.0.1:2379`
/// over SSH, as the console asks it) answers from that server's REAL member. The pane
/// names the members etcd names (the hosts), the leader etcd elected (the metrics' and the
/// status' agree), and a leadership moved with etcd's own API is seen with a higher raft
/// term; a learner fault adds a real learner, which the pre-flight refuses; with two
/// members stopped (their k3s) the quorum read through the last one times out and the
/// pre-flight refuses on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_apiserver_the_etcd_pane_reads_each_servers_real_member() {
    let (_dir, d) = demo_common::start_in(demo_common::Mode::Real, "healthy").await;
    let p = probe(&d);
    let cancel = CancellationToken::new();
    let (pane, _) = p.look(&d.repo, "prod", &cancel).await;
    let view = pane.client.as_ref().expect("etcd's client API read");
    assert!(refusals(view).is_empty(), "{view:#?}");
    let mut names: Vec<&str> = view.members.iter().map(|m| m.name.as_str()).collect();
    names.sort();
    // etcd's own names (the model's are `k3s-prod-1-xxxxxxxx`).
    assert_eq!(
        names,
        ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"],
        "{view:#?}"
    );
    assert_eq!(view.member_of.len(), 3, "{view:#?}");
    for m in &view.members {
        assert!(
            m.client_urls
                .iter()
                .all(|u| u.starts_with("http://127.0.11.")),
            "the real member's URLs: {m:?}"
        );
    }
    let leader = view.leader_host.clone().expect("etcd names a leader");
    assert_eq!(pane.leader.as_deref(), Some(leader.as_str()), "{pane:#?}");
    // The real member's own status says the same leader.
    let status = real_gateway(&d, &leader, "/v3/maintenance/status", "{}");
    assert_eq!(status["leader"], status["header"]["member_id"], "{status}");
    let term = view.status[&leader].raft_term;

    // Leadership moved with etcd's own API, asked of the member that leads now (etcd may
    // have moved it on its own since the look).
    let hosts = ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"];
    let id_of = |h: &str| {
        real_gateway(&d, h, "/v3/maintenance/status", "{}")["header"]["member_id"]
            .as_str()
            .expect("member_id")
            .to_string()
    };
    let ids: Vec<String> = hosts.iter().map(|h| id_of(h)).collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let to = loop {
        let now = real_gateway(&d, hosts[0], "/v3/maintenance/status", "{}");
        let at = ids.iter().position(|id| now["leader"] == id.as_str());
        if let Some(from) = at {
            let to = (from + 1) % 3;
            let url = d
                .real
                .as_ref()
                .and_then(|r| r.cluster.etcd("prod"))
                .and_then(|e| e.client_url(hosts[from]))
                .expect("the leader's URL");
            let said = hk_sim::apiserver::http_call(
                &format!("{url}/v3/maintenance/transfer-leadership"),
                "POST",
                Some(&format!(r#"{{"targetID":"{}"}}"#, ids[to])),
                Duration::from_secs(10),
            );
            if matches!(&said, Ok((200, _))) {
                break hosts[to];
            }
            eprintln!("transfer-leadership from {}: {said:?}", hosts[from]);
        }
        assert!(std::time::Instant::now() < deadline, "no transfer: {now}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let moved = loop {
        let (pane, _) = p.look(&d.repo, "prod", &cancel).await;
        let v = pane.client.clone().expect("read");
        if v.leader_host.as_deref() == Some(to) && pane.leader.as_deref() == Some(to) {
            break v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the move to {to} never seen: {pane:#?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(moved.status[to].raft_term > term, "{moved:#?}");

    // A learner, in etcd's own membership. Right after a leadership move etcd may not
    // answer within the fault's few seconds (the change goes on): asked again until it is
    // a member.
    let faults = d.fault_injector();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let said = faults
            .inject("prod", "etcd-learner-added")
            .expect("accepted");
        if said.contains("added as a learner") || said.contains("already a member") {
            break;
        }
        eprintln!("etcd-learner-added: {said}");
        assert!(
            said.contains("has not answered") && std::time::Instant::now() < deadline,
            "{said}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let list = real_gateway(&d, to, "/v3/cluster/member/list", "{}");
    assert_eq!(list["members"].as_array().map(Vec::len), Some(4), "{list}");
    let (pane, _) = p.look(&d.repo, "prod", &cancel).await;
    let view = pane.client.as_ref().expect("read");
    assert!(
        refusals(view).iter().any(|t| t.contains("has not started")),
        "{view:#?}"
    );
    let said = faults
        .inject("prod", "etcd-learner-removed")
        .expect("accepted");
    assert!(said.contains("removed"), "{said}");
    let (pane, _) = p.look(&d.repo, "prod", &cancel).await;
    assert!(
        refusals(pane.client.as_ref().expect("read")).is_empty(),
        "{pane:#?}"
    );

    // Two members stopped with their k3s: the last one cannot answer a quorum read.
    let left = "k3s-prod-1";
    for host in ["k3s-prod-2", "k3s-prod-3"] {
        let state = d.node_state(host).expect("node");
        let mut n = state.lock().expect("state");
        let now = n.now_ms();
        n.stop_unit_at("k3s.service", now).expect("k3s.service");
    }
    let etcd = d
        .real
        .as_ref()
        .and_then(|r| r.cluster.etcd("prod"))
        .expect("prod's etcd");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while etcd.pid("k3s-prod-2").is_some() || etcd.pid("k3s-prod-3").is_some() {
        assert!(std::time::Instant::now() < deadline, "members still run");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(etcd.pid(left).is_some());
    let (pane, _) = p.look(&d.repo, "prod", &cancel).await;
    let view = pane.client.as_ref().expect("read");
    let r = refusals(view);
    assert!(
        r.iter()
            .any(|t| t.contains(&format!("a quorum read through {left} did not answer"))),
        "{r:#?}"
    );
    assert!(
        r.iter()
            .any(|t| t.contains("k3s-prod-2's etcd member not answering")),
        "{r:#?}"
    );
    // A membership change etcd cannot commit now: the fault (the console's `:fault`, which
    // waits on it) answers within its few seconds, saying so, and adds nothing.
    let asked = std::time::Instant::now();
    let said = faults
        .inject("prod", "etcd-learner-added")
        .expect("accepted");
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{said} after {:?}",
        asked.elapsed()
    );
    assert!(
        said.contains("has not answered") || said.contains("etcd refused"),
        "{said}"
    );
}

/// A member whose k3s stopped misses the entries its leader appends meanwhile; once k3s
/// runs again it replays them and catches up, as etcd's followers do. In the simulation it
/// trailed by what it missed forever, so a health gate waiting for the member to catch up
/// after a server's reboot never passed (found rehearsing a public repo's reboot).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_back_from_a_stop_catches_up_with_its_leader() {
    let (_dir, d) = start("healthy").await;
    let p = probe(&d);
    let cancel = CancellationToken::new();
    let host = "k3s-dev-3";
    let set = |active: bool| {
        let state = d.node_state(host).expect("node");
        let mut n = state.lock().expect("node state");
        let now = n.now_ms();
        if active {
            n.start_unit_at("k3s.service", now)
        } else {
            n.stop_unit_at("k3s.service", now)
        }
        .expect("k3s.service");
    };
    set(false);
    tokio::time::sleep(Duration::from_secs(4)).await;
    set(true);
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let mut lags = Vec::new();
    loop {
        let (pane, _) = p.look(&d.repo, "dev", &cancel).await;
        let lag = pane.client.as_ref().and_then(|v| v.lag(host));
        lags.push(lag);
        // Level with the leader (it missed a few seconds of entries: behind by those
        // for as long as it did not replay them).
        if lag == Some(0) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{host}'s member did not catch up within 15 s of its k3s starting: lags {lags:?}"
        );
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}
