//! The incident console's live story on the running demo, through the REAL watcher: after
//! `holder-dies` the VIP pane warns while the dead node still holds the lease, and the
//! session's timeline records the node going NotReady and the lease moving.

use std::time::{Duration, Instant};

use hk_console::checks::live::{Rule, Severity};
use hk_console::cluster::{client, kube_target, KubeOverrides};
use hk_console::observe::feed::{Feed, Update};
use hk_console::observe::timeline::{Timeline, TrailKind};
use hk_console::sim::demo;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

async fn next(rx: &mut mpsc::Receiver<Update>) -> Update {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("an update within 10 s")
        .expect("the watcher runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_dies_warns_at_once_and_the_timeline_records_the_move() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = demo::start("healthy", dir.path()).await.expect("demo");
    let t = kube_target(&d.repo, "prod", &KubeOverrides::default()).expect("target");
    let c = client(&t).await.expect("client");
    let topo = hk_console::cluster::env_topology(&d.repo, "prod").expect("topology");
    let settings = hk_console::cluster::watch_settings(&d.repo, "prod").expect("settings");
    let (tx, mut rx) = mpsc::channel::<Update>(256);
    let cancel = CancellationToken::new();
    hk_console::observe::watch::spawn_env_watch(c, topo, settings, tx, cancel.clone());

    let mut tl = Timeline::default();
    // Wait for a first VIP pane that is all green and names its holder, and a first Nodes
    // pane (the timeline's baseline for the nodes).
    let mut holder = None;
    let mut nodes_seen = false;
    while holder.is_none() || !nodes_seen {
        let u = next(&mut rx).await;
        tl.observe(&u);
        match &u.feed {
            Feed::Vip(p) if p.holder_node.is_some() => {
                assert!(
                    p.verdicts.iter().all(|v| v.severity == Severity::Ok),
                    "{:#?}",
                    p.verdicts
                );
                holder = p.holder_node.clone();
            }
            Feed::Nodes(_) => nodes_seen = true,
            _ => {}
        }
    }
    let holder = holder.expect("holder");
    let t0 = Instant::now();
    d.fault_injector()
        .inject("prod", "holder-dies")
        .expect("holder-dies is accepted");

    // The VIP pane warns while the dead node still holds the lease.
    let warned = loop {
        let u = next(&mut rx).await;
        tl.observe(&u);
        if let Feed::Vip(p) = &u.feed {
            let w = p
                .verdicts
                .iter()
                .find(|v| v.rule == Rule::LeaseHolderReady && v.severity == Severity::Warn);
            if let Some(w) = w {
                assert_eq!(p.holder_node.as_deref(), Some(holder.as_str()), "{p:#?}");
                break w.clone();
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no warning in 10 s");
    };
    let warn_after = t0.elapsed();
    eprintln!(
        "holder {holder} NotReady -> VIP pane warns {warn_after:?} after the fault: {}",
        warned.message
    );
    assert!(warned.message.contains(&holder), "{}", warned.message);

    // Then the lease moves; the timeline has both, in order.
    loop {
        let u = next(&mut rx).await;
        tl.observe(&u);
        if tl.events().any(|e| e.kind == TrailKind::LeaseMoved) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(40),
            "the lease did not move"
        );
    }
    cancel.cancel();
    let kinds: Vec<TrailKind> = tl.events().map(|e| e.kind).collect();
    let down = kinds
        .iter()
        .position(|k| *k == TrailKind::NodeNotReady)
        .expect("node NotReady recorded");
    let moved = kinds
        .iter()
        .position(|k| *k == TrailKind::LeaseMoved)
        .expect("lease move recorded");
    assert!(down < moved, "{kinds:?}");
    let m = tl
        .events()
        .find(|e| e.kind == TrailKind::LeaseMoved)
        .expect("moved");
    assert!(
        m.text.starts_with(&format!("lease moved {holder} -> ")),
        "{}",
        m.text
    );
    for e in tl.events() {
        eprintln!("{} {} {}", e.clock(), e.env, e.text);
    }
    // The warning came before the move: at once, not when the lease expired.
    assert!(warn_after < Duration::from_secs(d.scenario.env_state("prod").lease_duration_s));
}
