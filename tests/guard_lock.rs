//! The run lock (`kube-system/hk-console-run-lock`) against the REAL kube-apiserver
//! (crates/hk-sim/tests/support/apiserver.rs): taken, renewed and released; a second console refused
//! naming the holder; a stale lock reported with its last renewal and taken over only with
//! the environment's name typed and a reason (the old holder then finds it lost); a
//! read-only observer sees the holder and writes nothing (audit log).
//! Needs `bash tests/apiserver/build.sh`; fails with that hint.

use crate::support;

use std::time::Duration;

use hk_console::cluster::lock::{
    acquire, look, take_over, takeover_of, Claimant, LockError, LockState, ENV_ANNOTATION,
    LOCK_NAME, LOCK_NAMESPACE, RUNBOOK_ANNOTATION, RUN_ID_ANNOTATION,
};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use support::apiserver::*;

fn ann() -> Claimant {
    Claimant {
        holder: "ann@console-a".into(),
        run_id: "20261203T090000000Z-etcd-io-priority-lab".into(),
        runbook: "etcd-io-priority".into(),
        env: "lab".into(),
    }
}

fn bob() -> Claimant {
    Claimant {
        holder: "bob@console-b".into(),
        run_id: "20261203T091500000Z-memattr-survey-lab".into(),
        runbook: "memattr-survey".into(),
        env: "lab".into(),
    }
}

async fn lease(client: &kube::Client) -> Lease {
    Api::<Lease>::namespaced(client.clone(), LOCK_NAMESPACE)
        .get(LOCK_NAME)
        .await
        .expect("the lock Lease")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taken_renewed_refused_to_a_second_console_and_released() {
    let server = ApiServer::start();
    let admin = server.admin_client().await;
    assert_eq!(look(&admin).await.expect("look"), LockState::Free);

    let mut held = acquire(&admin, &ann(), 30)
        .await
        .expect("free lock is taken");
    let l = lease(&admin).await;
    let spec = l.spec.clone().expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("ann@console-a"));
    assert_eq!(spec.lease_duration_seconds, Some(30));
    let a = l.metadata.annotations.clone().expect("annotations");
    assert_eq!(a[RUN_ID_ANNOTATION], ann().run_id);
    assert_eq!(a[RUNBOOK_ANNOTATION], "etcd-io-priority");
    assert_eq!(a[ENV_ANNOTATION], "lab");

    // Renewed: renewTime moves, the holder and acquireTime stay.
    tokio::time::sleep(Duration::from_millis(50)).await;
    held.renew().await.expect("renew");
    let renewed = lease(&admin).await.spec.expect("spec");
    assert!(renewed.renew_time.as_ref().map(|t| t.0) > spec.renew_time.as_ref().map(|t| t.0));
    assert_eq!(renewed.acquire_time, spec.acquire_time);
    assert_eq!(renewed.holder_identity.as_deref(), Some("ann@console-a"));

    // A second console (another identity, another run) is refused, naming the holder.
    let err = acquire(&admin, &bob(), 30).await.expect_err("held");
    match &err {
        LockError::Held { record } => {
            assert_eq!(record.holder, "ann@console-a");
            assert_eq!(record.runbook.as_deref(), Some("etcd-io-priority"));
        }
        other => panic!("expected Held: {other}"),
    }
    let text = err.to_string();
    assert!(
        text.starts_with("another console holds the run lock: ann@console-a running etcd-io-priority (run 20261203T090000000Z-etcd-io-priority-lab) since "),
        "{text}"
    );
    // Even typed and with a reason, a fresh lock is not taken over.
    assert!(matches!(
        take_over(&admin, &bob(), 30, "lab", "ann left").await,
        Err(LockError::Held { .. })
    ));
    // The same run taking it again (a resumed console) keeps it.
    let again = acquire(&admin, &ann(), 30).await.expect("same run");
    assert_eq!(
        again
            .lease()
            .spec
            .as_ref()
            .and_then(|s| s.acquire_time.clone()),
        spec.acquire_time
    );

    again.release().await.expect("release");
    assert_eq!(look(&admin).await.expect("look"), LockState::Free);
    // `held` wrote an older version: it cannot renew what was released.
    assert!(matches!(held.renew().await, Err(LockError::Lost { .. })));
    // Free again: the second console takes it.
    acquire(&admin, &bob(), 30)
        .await
        .expect("bob takes the free lock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_lock_is_reported_and_taken_over_only_with_the_typed_answer() {
    let server = ApiServer::start();
    let admin = server.admin_client().await;
    // Ann's console dies: it took the lock for 1 s and never renews.
    let mut dead = acquire(&admin, &ann(), 1).await.expect("taken");
    tokio::time::sleep(Duration::from_millis(1600)).await;

    let state = look(&admin).await.expect("look");
    let LockState::Stale { record, age_ms } = &state else {
        panic!("expected stale: {state:?}");
    };
    assert_eq!(record.holder, "ann@console-a");
    assert!(*age_ms > 1000, "{age_ms}");
    assert!(record.renewed.is_some());
    let err = acquire(&admin, &bob(), 30)
        .await
        .expect_err("stale is not free");
    assert!(
        err.to_string()
            .starts_with("the run lock is stale: ann@console-a running etcd-io-priority"),
        "{err}"
    );
    assert!(err.to_string().contains(", last renewed "), "{err}");

    // Only the environment's name, and a reason.
    let before = lease(&admin).await.metadata.resource_version;
    match take_over(&admin, &bob(), 30, "prod", "ann's laptop died").await {
        Err(LockError::TakeoverRefused(why)) => assert_eq!(
            why,
            "type the environment's name `lab` to take over its run lock (got `prod`)"
        ),
        other => panic!("{other:?}"),
    }
    match take_over(&admin, &bob(), 30, "lab", "  ").await {
        Err(LockError::TakeoverRefused(why)) => assert!(why.contains("reason"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        lease(&admin).await.metadata.resource_version,
        before,
        "a refused take-over writes nothing"
    );

    let (held, takeover) = take_over(&admin, &bob(), 30, "lab", "ann's laptop died")
        .await
        .expect("taken over");
    assert_eq!(takeover.previous.holder, "ann@console-a");
    assert_eq!(
        takeover.previous.run_id.as_deref(),
        Some(ann().run_id.as_str())
    );
    assert_eq!(takeover.by, bob());
    assert_eq!(takeover.reason, "ann's laptop died");
    // The record is what both journals hold: it serialises.
    let json = serde_json::to_value(&takeover).expect("json");
    assert_eq!(json["previous"]["holder"], "ann@console-a");
    let l = lease(&admin).await;
    assert_eq!(
        l.spec.as_ref().and_then(|s| s.holder_identity.as_deref()),
        Some("bob@console-b")
    );
    assert_eq!(l.spec.as_ref().and_then(|s| s.lease_transitions), Some(2));
    assert_eq!(held.me, bob());

    // Ann's console wakes up: its renewal finds the lock lost, naming who has it.
    match dead.renew().await {
        Err(LockError::Lost { now_held_by }) => assert_eq!(now_held_by, "bob@console-b"),
        other => panic!("expected Lost: {other:?}"),
    }
    // ...and the Lease tells Ann's run who took it over and why: that run journals it too.
    let mark = takeover_of(&admin, &ann().run_id)
        .await
        .expect("read")
        .expect("the take-over of ann's run is on the Lease");
    assert_eq!(mark.from, "ann@console-a");
    assert_eq!(mark.by, "bob@console-b");
    assert_eq!(mark.by_run.as_deref(), Some(bob().run_id.as_str()));
    assert_eq!(mark.reason, "ann's laptop died");
    // Issue 34: stamped when this console read it (its own clock), not with the taking
    // console's clock: here both are this machine's, so no earlier than the take-over.
    assert!(
        mark.at.is_some_and(|t| t >= takeover.at),
        "{:?} vs {:?}",
        mark.at,
        takeover.at
    );
    assert_eq!(
        takeover_of(&admin, &bob().run_id).await.expect("read"),
        None,
        "the mark names only the run it was taken from"
    );
    // Bob's release leaves the mark for Ann's run to find later.
    held.release().await.expect("released");
    assert!(takeover_of(&admin, &ann().run_id)
        .await
        .expect("read")
        .is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_observer_sees_the_holder_and_never_writes() {
    let server = ApiServer::start();
    let admin = server.admin_client().await;
    let _held = acquire(&admin, &ann(), 30).await.expect("taken");
    let observer = client_for(&server.observer_kubeconfig().await).await;
    for _ in 0..3 {
        match look(&observer).await.expect("the observer may read leases") {
            LockState::Held { record } => assert_eq!(record.holder, "ann@console-a"),
            other => panic!("{other:?}"),
        }
    }
    // An observer that tried to take it would be refused by RBAC; the console never tries
    // (observe mode only looks), and the audit log says so.
    server.audit_settle().await;
    assert_eq!(
        server.writes_by(OBSERVER_USER),
        Vec::<serde_json::Value>::new()
    );
    let reads = server.requests_by(OBSERVER_USER);
    assert!(
        reads
            .iter()
            .filter(|e| e.pointer("/objectRef/name").and_then(|v| v.as_str()) == Some(LOCK_NAME))
            .count()
            >= 3,
        "{reads:#?}"
    );
    assert!(!server.status_codes_by(OBSERVER_USER).contains(&403));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewing_console_finds_out_when_its_lock_is_taken() {
    let server = ApiServer::start();
    let admin = server.admin_client().await;
    let renewer = acquire(&admin, &ann(), 6)
        .await
        .expect("taken")
        .keep_renewed();
    // Someone rewrites the Lease under it (what a take-over from a console that wrongly
    // judged it stale would do).
    let api = Api::<Lease>::namespaced(admin.clone(), LOCK_NAMESPACE);
    let mut l = lease(&admin).await;
    if let Some(spec) = l.spec.as_mut() {
        spec.holder_identity = Some("bob@console-b".into());
    }
    api.replace(LOCK_NAME, &Default::default(), &l)
        .await
        .expect("rewrite the lock");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let trouble = loop {
        if let Some(t) = renewer.trouble() {
            break t;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the loss was never noticed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(trouble, "the run lock was lost: bob@console-b holds it now");
    match renewer.release().await {
        Err(LockError::Lost { now_held_by }) => assert_eq!(now_held_by, "bob@console-b"),
        other => panic!("{other:?}"),
    }
    // The lock it lost is left to its new holder.
    assert_eq!(
        lease(&admin)
            .await
            .spec
            .and_then(|s| s.holder_identity)
            .as_deref(),
        Some("bob@console-b")
    );
}

/// A run lock Lease written by ANOTHER console (not through this process), holder `holder`,
/// its renewTime `renewed_ms` by that console's clock, for `duration_s`.
async fn foreign_lock(client: &kube::Client, holder: &str, renewed_ms: i64, duration_s: i32) {
    let t = k8s_openapi::jiff::Timestamp::from_millisecond(renewed_ms).expect("time");
    let l: Lease = serde_json::from_value(serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": LOCK_NAME, "namespace": LOCK_NAMESPACE,
            "annotations": {RUN_ID_ANNOTATION: "20261203T080000000Z-etcd-io-priority-lab",
                ENV_ANNOTATION: "lab", RUNBOOK_ANNOTATION: "etcd-io-priority"}},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration_s,
            "leaseTransitions": 1,
            "acquireTime": t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
            "renewTime": t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()},
    }))
    .expect("Lease");
    Api::<Lease>::namespaced(client.clone(), LOCK_NAMESPACE)
        .create(&kube::api::PostParams::default(), &l)
        .await
        .expect("create the foreign lock");
}

/// Issue 34: a console judged another console's lock stale by comparing its renewTime with
/// the local wall clock, so a console 600 s ahead (`faketime -f +600s`) took over a lock
/// renewed every 2 s. Freshness is what THIS console saw change: a record it has just
/// seen for the first time is held, however old its renewTime reads; it turns stale only
/// after being watched unchanged for its duration, and only then can it be taken over. A
/// holder whose renewTime is far ahead of this machine is named, as information.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_is_stale_only_after_this_console_watched_it_unchanged() {
    let server = ApiServer::start();
    let admin = server.admin_client().await;
    let wall = k8s_openapi::jiff::Timestamp::now().as_millisecond();
    // Renewed 10 min ago by its holder's clock (or this machine is 10 min ahead).
    foreign_lock(&admin, "carol@console-c", wall - 600_000, 2).await;
    match look(&admin).await.expect("look") {
        LockState::Held { record } => assert_eq!(record.holder, "carol@console-c"),
        other => panic!("first seen now: held, not {other:?}"),
    }
    match take_over(&admin, &bob(), 30, "lab", "carol's console looks dead").await {
        Err(LockError::Held { record }) => assert_eq!(record.holder, "carol@console-c"),
        other => panic!("a record first seen now is not taken over: {other:?}"),
    }
    tokio::time::sleep(Duration::from_millis(2300)).await;
    let state = look(&admin).await.expect("look");
    let LockState::Stale { record, age_ms } = &state else {
        panic!("watched unchanged past its 2 s: stale, not {state:?}");
    };
    assert_eq!(record.holder, "carol@console-c");
    assert!(
        (2000..60_000).contains(age_ms),
        "the age is what this console watched, not the holder's renewTime: {age_ms}"
    );
    let (_held, takeover) = take_over(&admin, &bob(), 30, "lab", "carol's console stopped")
        .await
        .expect("taken over once watched stale");
    assert_eq!(takeover.previous.holder, "carol@console-c");

    // A holder 600 s ahead of this machine, renewing: held, its clock named.
    let server = ApiServer::start();
    let admin = server.admin_client().await;
    let wall = k8s_openapi::jiff::Timestamp::now().as_millisecond();
    foreign_lock(&admin, "dave@console-d", wall + 600_000, 30).await;
    match look(&admin).await.expect("look") {
        LockState::Held { record } => {
            let note = record.clock_note.clone().unwrap_or_default();
            let ahead: u64 = note
                .strip_prefix("its renewTime is ")
                .and_then(|r| r.split(" s ahead of this machine").next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{note}"));
            assert!((540..=600).contains(&ahead), "{note}");
        }
        other => panic!("{other:?}"),
    }
}
