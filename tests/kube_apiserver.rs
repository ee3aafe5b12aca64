//! The kube test harness itself (crates/hk-sim/tests/support/apiserver.rs) against the real
//! kube-apiserver and etcd: fixtures made by the admin are readable by the observer, the
//! observer's writes are refused (RBAC is enforced), the audit log sees every request, two
//! servers in one process are isolated, and nothing outlives the test process.
//! Needs `bash tests/apiserver/build.sh` (tests/run-all.sh runs it); fails with that hint.

use crate::support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret};
use kube::api::{
    Api, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::Client;
use serde_json::json;
use support::apiserver::*;

const NODES: [(&str, &str); 3] = [
    ("k3s-dev-1", "192.168.1.50"),
    ("k3s-dev-2", "192.168.1.51"),
    ("k3s-dev-3", "192.168.1.52"),
];
const VIP: &str = "192.168.1.49";

/// The 403 a refused request gets, or a failure naming what happened instead.
fn assert_forbidden<T: std::fmt::Debug>(what: &str, r: Result<T, kube::Error>) {
    match r {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{what}: {s:?}"),
        other => panic!("{what}: expected 403 Forbidden, got {other:?}"),
    }
}

/// A dev-like cluster: three Ready servers, the VIP lease, cilium reading its endpoint from
/// a ConfigMap (two pods) or literally (one pod), a HelmRelease and a Kustomization.
async fn make_fixtures(admin: &Client) {
    install_flux_crds(admin).await;
    for (name, ip) in NODES {
        create_node(admin, &FixtureNode::server(name, ip)).await;
    }
    create_vip_lease(
        admin,
        &VipLease::held_by("k3s-dev-2", Duration::from_secs(1)),
    )
    .await;
    create_configmap(
        admin,
        KUBE_SYSTEM,
        "cilium-endpoint",
        &[("host", VIP), ("port", "6443")],
    )
    .await;
    let env = AgentEnv::from_configmap("cilium-endpoint", "host", "port");
    create_cilium_daemonset(admin, &env).await;
    set_daemonset_status(admin, KUBE_SYSTEM, "cilium", &rollout_status(3, 3, 3)).await;
    for (i, (node, _)) in NODES.iter().enumerate() {
        let env = if i == 2 {
            AgentEnv::literal(NODES[0].1, 6443)
        } else {
            env.clone()
        };
        let pod = CiliumPod {
            name: format!("cilium-{i}"),
            node: node.to_string(),
            env,
            ready: true,
        };
        create_cilium_pod(admin, &pod).await;
    }
    for (ar, name) in [
        (helm_release_resource(), "cilium"),
        (kustomization_resource(), "platform"),
    ] {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": ar.api_version, "kind": ar.kind,
            "metadata": {"name": name, "namespace": "flux-system"},
            "spec": {"interval": "10m"},
        }))
        .expect("flux object");
        ensure_namespace(admin, "flux-system").await;
        Api::<DynamicObject>::namespaced_with(admin.clone(), "flux-system", &ar)
            .create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("create {} {name}: {e}", ar.kind));
    }
}

async fn ensure_namespace(admin: &Client, name: &str) {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin.clone());
    if api.get_opt(name).await.expect("get namespace").is_none() {
        let ns = serde_json::from_value(json!({"metadata": {"name": name}})).expect("ns");
        api.create(&PostParams::default(), &ns)
            .await
            .expect("create namespace");
    }
}

fn env_of(pod: &Pod, name: &str) -> serde_json::Value {
    let c = &pod.spec.as_ref().expect("pod spec").containers[0];
    let e = c
        .env
        .as_ref()
        .expect("env")
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("{name} not in {}", c.name));
    serde_json::to_value(e).expect("env json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observer_reads_what_the_admin_made_and_cannot_write() {
    let server = ApiServer::start();
    eprintln!(
        "kube-apiserver {} ready in {:?}",
        server.url(),
        server.startup
    );
    let admin = server.admin_client().await;
    make_fixtures(&admin).await;

    let observer = client_for(&server.observer_kubeconfig().await).await;
    let nodes = Api::<Node>::all(observer.clone())
        .list(&ListParams::default())
        .await
        .expect("observer lists nodes");
    assert_eq!(nodes.items.len(), 3);
    for n in &nodes.items {
        let labels = n.metadata.labels.as_ref().expect("labels");
        assert_eq!(
            labels.get("node-role.kubernetes.io/control-plane"),
            Some(&"true".to_string())
        );
        let status = n.status.as_ref().expect("node status");
        let ip = &status.addresses.as_ref().expect("addresses")[0];
        assert_eq!(ip.type_, "InternalIP");
        let want = NODES
            .iter()
            .find(|(name, _)| Some(*name) == n.metadata.name.as_deref())
            .expect("known node")
            .1;
        assert_eq!(ip.address, want);
        let ready = status
            .conditions
            .as_ref()
            .expect("conditions")
            .iter()
            .find(|c| c.type_ == "Ready")
            .expect("Ready");
        assert_eq!(ready.status, "True");
    }

    let lease = Api::<Lease>::namespaced(observer.clone(), KUBE_SYSTEM)
        .get(VIP_LEASE)
        .await
        .expect("observer gets the kube-vip lease");
    let spec = lease.spec.expect("lease spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("k3s-dev-2"));
    assert_eq!(spec.lease_duration_seconds, Some(5));
    let renewed = spec.renew_time.expect("renewTime").0;
    let age = k8s_openapi::jiff::Timestamp::now().duration_since(renewed);
    assert!(
        age.as_secs() >= 1 && age.as_secs() < 60,
        "renewTime age {age:?}"
    );

    let ds = Api::<DaemonSet>::namespaced(observer.clone(), KUBE_SYSTEM)
        .get("cilium")
        .await
        .expect("observer gets the cilium daemonset");
    let st = ds.status.expect("ds status");
    assert_eq!((st.desired_number_scheduled, st.number_ready), (3, 3));
    assert_eq!(st.observed_generation, ds.metadata.generation);

    let pods = Api::<Pod>::namespaced(observer.clone(), KUBE_SYSTEM)
        .list(&ListParams::default().labels("k8s-app=cilium"))
        .await
        .expect("observer lists cilium pods");
    assert_eq!(pods.items.len(), 3);
    for p in &pods.items {
        let name = p.metadata.name.as_deref().expect("name");
        let st = p.status.as_ref().expect("pod status");
        assert_eq!(st.phase.as_deref(), Some("Running"), "{name}");
        let host = env_of(p, "KUBERNETES_SERVICE_HOST");
        if name == "cilium-2" {
            assert_eq!(host["value"], NODES[0].1);
        } else {
            assert_eq!(host["valueFrom"]["configMapKeyRef"]["key"], "host");
        }
        assert!(p.spec.as_ref().expect("spec").node_name.is_some());
        let owner = &p.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("DaemonSet", "cilium")
        );
    }
    let cm = Api::<ConfigMap>::namespaced(observer.clone(), KUBE_SYSTEM)
        .get("cilium-endpoint")
        .await
        .expect("observer gets the configmap");
    assert_eq!(cm.data.expect("data")["host"], VIP);
    for ar in [helm_release_resource(), kustomization_resource()] {
        let l = Api::<DynamicObject>::namespaced_with(observer.clone(), "flux-system", &ar)
            .list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("observer lists {}: {e}", ar.plural));
        assert_eq!(l.items.len(), 1, "{}", ar.plural);
    }

    // A watch: the observer sees a ConfigMap the admin creates after it started watching.
    let cms = Api::<ConfigMap>::namespaced(observer.clone(), KUBE_SYSTEM);
    let rv = cms
        .list(&ListParams::default())
        .await
        .expect("list configmaps")
        .metadata
        .resource_version
        .expect("rv");
    let mut stream = cms
        .watch(&WatchParams::default().timeout(20), &rv)
        .await
        .expect("observer watches configmaps")
        .boxed();
    create_configmap(&admin, KUBE_SYSTEM, "late", &[("k", "v")]).await;
    let seen = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(ev) = stream.try_next().await.expect("watch event") {
            if let WatchEvent::Added(cm) = ev {
                if cm.metadata.name.as_deref() == Some("late") {
                    return true;
                }
            }
        }
        false
    })
    .await
    .expect("watch event within 20s");
    assert!(seen, "the watch ended without the new ConfigMap");
    drop(stream);

    // After only reads: requests in the audit log, none refused, none a write.
    server.audit_settle().await;
    let reqs = server.requests_by(OBSERVER_USER);
    let verbs: Vec<&str> = reqs.iter().filter_map(|e| e["verb"].as_str()).collect();
    for v in ["list", "get", "watch"] {
        assert!(verbs.contains(&v), "no {v} by the observer in {verbs:?}");
    }
    let mut seen: Vec<String> = reqs
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["verb"].as_str().unwrap_or("?"),
                e["objectRef"]["resource"].as_str().unwrap_or("?")
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            "get configmaps",
            "get daemonsets",
            "get leases",
            "list configmaps",
            "list helmreleases",
            "list kustomizations",
            "list nodes",
            "list pods",
            "watch configmaps",
        ],
        "the observer's requests, as the audit log saw them"
    );
    let codes = server.status_codes_by(OBSERVER_USER);
    assert!(
        codes.iter().all(|c| *c == 200),
        "observer got non-200s: {codes:?}"
    );
    assert_eq!(
        server.writes_by(OBSERVER_USER),
        Vec::<serde_json::Value>::new()
    );
    assert!(
        !server.writes_by(ADMIN_USER).is_empty(),
        "the admin's fixture writes are not in the audit log"
    );

    // Writes and reads outside the role are refused: RBAC is enforced.
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "nope"}})).expect("cm");
    assert_forbidden(
        "observer creates a configmap",
        cms.create(&PostParams::default(), &cm).await,
    );
    assert_forbidden(
        "observer patches a node",
        Api::<Node>::all(observer.clone())
            .patch(
                NODES[0].0,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
            )
            .await,
    );
    assert_forbidden(
        "observer deletes a pod",
        Api::<Pod>::namespaced(observer.clone(), KUBE_SYSTEM)
            .delete("cilium-0", &Default::default())
            .await,
    );
    assert_forbidden(
        "observer lists secrets",
        Api::<Secret>::namespaced(observer.clone(), KUBE_SYSTEM)
            .list(&ListParams::default())
            .await,
    );
    let admin_cms = Api::<ConfigMap>::namespaced(admin.clone(), KUBE_SYSTEM);
    assert!(admin_cms.get_opt("nope").await.expect("get").is_none());
    let node = Api::<Node>::all(admin.clone())
        .get(NODES[0].0)
        .await
        .expect("node");
    assert!(!node.metadata.labels.expect("labels").contains_key("x"));

    server.audit_settle().await;
    let writes = server.writes_by(OBSERVER_USER);
    let mut attempted: Vec<(&str, u64)> = writes
        .iter()
        .map(|e| {
            (
                e["verb"].as_str().expect("verb"),
                e["responseStatus"]["code"].as_u64().expect("code"),
            )
        })
        .collect();
    attempted.sort();
    assert_eq!(
        attempted,
        vec![("create", 403), ("delete", 403), ("patch", 403)]
    );
    assert_eq!(
        server
            .status_codes_by(OBSERVER_USER)
            .iter()
            .filter(|c| **c == 403)
            .count(),
        4
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixtures_change_the_way_a_live_cluster_does() {
    let server = ApiServer::start();
    eprintln!(
        "kube-apiserver {} ready in {:?}",
        server.url(),
        server.startup
    );
    let admin = server.admin_client().await;
    create_node(&admin, &FixtureNode::server("k3s-prod-1", "192.168.2.10")).await;
    let n = set_node_ready(&admin, "k3s-prod-1", false).await;
    let ready = n
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    assert_eq!(ready.status, "Unknown");

    create_vip_lease(&admin, &VipLease::held_by("k3s-prod-1", Duration::ZERO)).await;
    let mut moved = VipLease::held_by("k3s-prod-3", Duration::ZERO);
    moved.transitions = 1;
    let lease = update_vip_lease(&admin, &moved).await.spec.expect("spec");
    assert_eq!(lease.holder_identity.as_deref(), Some("k3s-prod-3"));
    assert_eq!(lease.lease_transitions, Some(1));

    let before = create_cilium_daemonset(&admin, &AgentEnv::literal("192.168.2.10", 6443)).await;
    let after = set_cilium_daemonset_env(&admin, &AgentEnv::literal("192.168.2.9", 6443)).await;
    assert_eq!(
        after.metadata.generation,
        before.metadata.generation.map(|g| g + 1),
        "an env change is a new template generation"
    );
    let ds = set_daemonset_status(&admin, KUBE_SYSTEM, "cilium", &rollout_status(3, 1, 2)).await;
    let st = ds.status.expect("status");
    assert_eq!(st.observed_generation, after.metadata.generation);
    assert_eq!(st.updated_number_scheduled, Some(1));

    let pod = CiliumPod {
        name: "cilium-x".into(),
        node: "k3s-prod-1".into(),
        env: AgentEnv::literal("192.168.2.9", 6443),
        ready: false,
    };
    let p = create_cilium_pod(&admin, &pod).await;
    let labels = p.metadata.labels.clone().expect("labels");
    assert_eq!(
        labels.get("pod-template-generation"),
        after.metadata.generation.map(|g| g.to_string()).as_ref()
    );
    let ready_of = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status.clone())
    };
    assert_eq!(ready_of(&p).as_deref(), Some("False"));
    let p = set_pod_ready(&admin, KUBE_SYSTEM, "cilium-x", true).await;
    assert_eq!(ready_of(&p).as_deref(), Some("True"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_in_one_process_do_not_see_each_other() {
    let (a, b) = (ApiServer::start(), ApiServer::start());
    eprintln!(
        "two kube-apiservers ready in {:?} and {:?}",
        a.startup, b.startup
    );
    assert_ne!(a.etcd_prefix, b.etcd_prefix);
    let (ca, cb) = (a.admin_client().await, b.admin_client().await);
    create_node(&ca, &FixtureNode::server("only-in-a", "10.0.0.1")).await;
    create_configmap(&ca, "default", "only-in-a", &[("k", "v")]).await;
    create_configmap(&cb, "default", "only-in-b", &[("k", "v")]).await;

    let nodes_b = Api::<Node>::all(cb.clone())
        .list(&ListParams::default())
        .await
        .expect("list nodes in b");
    assert!(nodes_b.items.is_empty(), "b sees a's nodes");
    let names = |c: &Client| {
        let api = Api::<ConfigMap>::namespaced(c.clone(), "default");
        async move {
            let mut v: Vec<String> = api
                .list(&ListParams::default())
                .await
                .expect("list configmaps")
                .items
                .into_iter()
                .filter_map(|cm| cm.metadata.name)
                .filter(|n| n.starts_with("only-in-"))
                .collect();
            v.sort();
            v
        }
    };
    assert_eq!(names(&ca).await, vec!["only-in-a"]);
    assert_eq!(names(&cb).await, vec!["only-in-b"]);
    // Each server audits only its own requests.
    let mentions = |s: &ApiServer, name: &str| {
        s.audit_events()
            .iter()
            .any(|e| e["objectRef"]["name"].as_str() == Some(name))
    };
    a.audit_settle().await;
    b.audit_settle().await;
    assert!(mentions(&a, "only-in-a") && !mentions(&a, "only-in-b"));
    assert!(mentions(&b, "only-in-b") && !mentions(&b, "only-in-a"));

    // Dropping a server ends its process and removes its directory; the other lives on.
    let (pid, dir) = (a.pid(), a.dir.clone());
    drop(a);
    assert!(!alive(pid), "kube-apiserver {pid} survived its ApiServer");
    assert!(!dir.exists(), "{} survived its ApiServer", dir.display());
    assert!(alive(b.pid()) && alive(etcd_pid()));
    assert_eq!(names(&cb).await, vec!["only-in-b"]);
}

// --- Cleanup: a child test process holds etcd and an apiserver, then ends.

const CHILD_ENV: &str = "HK_APISERVER_CHILD_MODE";

/// Entry point for the cleanup tests below: a child test process that starts etcd and a
/// kube-apiserver, prints the pids, its startup time and the directories, then sleeps until
/// killed (mode `kill`) or (mode `exit`) leaks the server, as a forgetful test would, and
/// returns: the process ends normally with etcd in its static. Run directly (no mode), it
/// only checks that the server and etcd run.
#[test]
#[ignore = "a child process of the cleanup tests"]
fn child_holding_etcd_and_apiservers() {
    let a = ApiServer::start();
    assert!(alive(etcd_pid()) && alive(a.pid()));
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    println!("HK-CHILD startup_ms={}", a.startup.as_millis());
    println!(
        "HK-CHILD pids={} {} dirs={} {}",
        etcd_pid(),
        a.pid(),
        shared_dir().display(),
        a.dir.display()
    );
    if mode == "kill" {
        std::thread::sleep(Duration::from_secs(600));
    }
    std::mem::forget(a);
}

/// The child test's name as this binary's harness knows it: `kube_apiserver::child_...`
/// when the file is a module of a group binary, the bare name when it is a binary alone.
fn child_test_name() -> String {
    match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::child_holding_etcd_and_apiservers"),
        None => "child_holding_etcd_and_apiservers".to_string(),
    }
}

struct ChildReport {
    pids: Vec<u32>,
    dirs: Vec<String>,
    startup_ms: u64,
}

fn run_child(mode: &str) -> (std::process::Child, ChildReport) {
    let mut child = Command::new(std::env::current_exe().expect("current exe"))
        .args([
            "--exact",
            &child_test_name(),
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, mode)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the child test process");
    let mut out = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut r = ChildReport {
        pids: vec![],
        dirs: vec![],
        startup_ms: 0,
    };
    for line in out.by_ref() {
        let line = line.expect("child stdout");
        // libtest prints `test NAME ... ` before the test's own output, on the same line.
        let Some(rest) = line.split_once("HK-CHILD ").map(|(_, r)| r) else {
            continue;
        };
        if let Some(t) = rest.strip_prefix("startup_ms=") {
            r.startup_ms = t.parse().expect("ms");
        } else if let Some(t) = rest.strip_prefix("pids=") {
            let (p, d) = t.split_once(" dirs=").expect("pids and dirs");
            r.pids = p.split(' ').map(|x| x.parse().expect("pid")).collect();
            r.dirs = d.split(' ').map(String::from).collect();
            break;
        }
    }
    assert_eq!(r.pids.len(), 2, "the child test never reported its pids");
    // Keep draining: a child writing its test summary into a closed pipe would fail.
    std::thread::spawn(move || out.for_each(drop));
    (child, r)
}

/// Every process gone and every directory removed, within 10 s.
fn assert_all_gone(r: &ChildReport, how: &str) {
    let t0 = Instant::now();
    loop {
        let left: Vec<u32> = r.pids.iter().copied().filter(|p| alive(*p)).collect();
        let dirs: Vec<&String> = r
            .dirs
            .iter()
            .filter(|d| std::path::Path::new(d).exists())
            .collect();
        if left.is_empty() && dirs.is_empty() {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "after the child test process {how}: still running {left:?}, still on disk {dirs:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn nothing_survives_a_test_process_that_is_killed() {
    let (mut child, r) = run_child("kill");
    assert!(
        r.pids.iter().all(|p| alive(*p)),
        "{:?} not all running",
        r.pids
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL the child test process");
    let _ = child.wait();
    assert_all_gone(&r, "was SIGKILLed");
}

#[test]
fn nothing_survives_a_test_process_that_exits() {
    let (mut child, r) = run_child("exit");
    eprintln!(
        "child process: first start() took {} ms (etcd and the PKI included)",
        r.startup_ms
    );
    let st = child.wait().expect("wait for the child test process");
    assert!(st.success(), "child test process failed: {st}");
    assert_all_gone(&r, "exited");
}

/// A kube-apiserver that dies at startup fails start() with the tail of its log (a child
/// process, since the binary directory is process-wide), and leaves nothing behind.
#[test]
fn a_dying_apiserver_fails_start_with_its_log() {
    let bins = tempfile::tempdir().expect("temp dir");
    std::os::unix::fs::symlink(bin_dir().join("etcd"), bins.path().join("etcd"))
        .expect("link the real etcd");
    let broken = bins.path().join("kube-apiserver");
    std::fs::write(
        &broken,
        "#!/bin/sh\necho 'E0000 hk-test: refusing to start (a deliberately broken binary)' >&2\nexit 3\n",
    )
    .expect("write the broken apiserver");
    let mut perm = std::fs::metadata(&broken).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&broken, perm).expect("chmod");
    let out = Command::new(std::env::current_exe().expect("current exe"))
        .args([
            "--exact",
            &child_test_name(),
            "--ignored",
            "--test-threads=1",
        ])
        .env("HK_APISERVER_BIN_DIR", bins.path())
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .output()
        .expect("run the child test process");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.status.success(),
        "start() passed with a broken binary:\n{text}"
    );
    for want in [
        "did not become ready",
        "exited",
        "refusing to start (a deliberately broken binary)",
    ] {
        assert!(text.contains(want), "no {want:?} in:\n{text}");
    }
    // Its etcd ran from the linked path: no process may still be running from there.
    let dir = bins.path().display().to_string();
    let t0 = Instant::now();
    while let Some(pid) = pids_running_from(&dir).first() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "pid {pid} still runs from {dir}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Live processes whose command line mentions `path`.
fn pids_running_from(path: &str) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(path))
                && alive(*pid)
        })
        .collect()
}
