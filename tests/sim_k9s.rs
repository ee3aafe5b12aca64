//! The real k9s (built by tests/k9s/build.sh into $HK_K9S_BIN_DIR) against the demo's
//! simulated API server, in a tmux terminal: the views an operator opens during a rollout
//! (pods, nodes, daemonsets, leases, events, helmreleases, crds) fill with the simulation's
//! objects, the logs view shows an agent's lines, and `--readonly` on the read-only user
//! works. Every request k9s made that the server refused is checked against what a real
//! API server would refuse too. Missing k9s = FAIL with the build hint.
//!
//! The same views against `demo --apiserver` (a REAL kube-apiserver and etcd under the
//! simulated controllers), and `--readonly` on its read-only user; there the logs view has
//! no kubelet behind it, and k9s' own failure is checked for. Missing etcd/kube-apiserver
//! ($HK_APISERVER_BIN_DIR) = FAIL with the build hint.

use crate::tmux_common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use hk_console::sim::demo::{self, Demo};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use serde_json::Value;
use tmux_common::{apiserver_bin_dir, Tmux};

fn k9s() -> PathBuf {
    let dir = std::env::var_os("HK_K9S_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/k9s-bin"));
    let bin = dir.join("k9s");
    assert!(
        bin.is_file(),
        "{} not found: run `bash tests/k9s/build.sh` (tests/run-all.sh does, and exports HK_K9S_BIN_DIR)",
        bin.display()
    );
    bin
}

/// The kubeconfig the demo wrote for `env`'s cluster (`readonly`: the read-only user's).
fn kubeconfig(dir: &Path, env: &str, readonly: bool) -> PathBuf {
    let mut cache = dir.join(".cache");
    if readonly {
        cache = cache.join("readonly");
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(&cache)
        .unwrap_or_else(|e| panic!("{}: {e}", cache.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().contains(env))
        })
        .collect();
    found.sort();
    found
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no kubeconfig for {env} in {}", cache.display()))
}

/// Names of the objects of a kind in the demo's `prod` store.
fn names(d: &Demo, api_version: &str, kind: &str, ns: Option<&str>) -> Vec<String> {
    let objs = d.kubes["prod"]
        .store()
        .objects(api_version, kind, ns)
        .expect("store objects");
    objs.iter()
        .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

/// k9s in a tmux terminal with its own HOME, TMPDIR (client-go's klog writes its files
/// there), XDG and k9s directories under `home` (never the operator's), no release check (there is no network), `extra` flags.
fn launch(home: &Path, kc: &Path, extra: &str) -> Tmux {
    let cfg = home.join("k9s-config");
    std::fs::create_dir_all(&cfg).expect("k9s config dir");
    // skipLatestRevCheck: k9s otherwise asks GitHub for its latest release.
    std::fs::write(
        cfg.join("config.yaml"),
        "k9s:\n  skipLatestRevCheck: true\n  ui:\n    splashless: true\n",
    )
    .expect("k9s config");
    let q = |p: &Path| format!("'{}'", p.display());
    let cmd = format!(
        "env HOME={h} TMPDIR={h} XDG_CONFIG_HOME={h}/xdg-config XDG_DATA_HOME={h}/xdg-data XDG_STATE_HOME={h}/xdg-state XDG_CACHE_HOME={h}/xdg-cache K9S_CONFIG_DIR={c} K9S_LOGS_DIR={h}/logs {k9s} --kubeconfig {kc} --logoless --logLevel debug {extra}; sleep 600",
        h = q(home),
        c = q(&cfg),
        k9s = q(&k9s()),
        kc = q(kc),
    );
    Tmux::launch(
        // One tmux server per test: the tests run in parallel.
        format!(
            "hk-k9s-{}-{}",
            std::process::id(),
            home.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        ),
        &cmd,
        "200",
        "50",
    )
}

/// Wait for every one of `what` on the screen at once; on failure show the screen and
/// k9s' own log.
fn wait_all(t: &Tmux, home: &Path, view: &str, what: &[String]) -> String {
    let log = home.join("logs/k9s.log");
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    loop {
        let s = t.screen();
        if what.iter().all(|w| s.contains(w.as_str())) {
            return s;
        }
        if std::time::Instant::now() > deadline {
            let missing: Vec<&String> = what.iter().filter(|w| !s.contains(w.as_str())).collect();
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(40).collect();
            panic!(
                "{view}: never saw {missing:?}; the screen was:\n{s}\nk9s log (newest first):\n{}",
                tail.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `:VIEW` Enter, as an operator types it.
fn open(t: &Tmux, view: &str) {
    t.send(&[":"]);
    std::thread::sleep(Duration::from_millis(300));
    t.send(&["-l", view]);
    t.send(&["Enter"]);
}

/// k9s `--readonly` as the read-only user: `pod` listed Running and every one of `nodes`
/// in their view, nothing denied, no delete offered, and ctrl-d on a pod opens no delete
/// dialog. The session stays open for more views.
fn readonly_walk(home: &Path, kc: &Path, pod: &str, nodes: &[String]) -> Tmux {
    let t = launch(home, kc, "--readonly --all-namespaces --command pods");
    let s = wait_all(
        &t,
        home,
        "read-only pods",
        &["[R]".into(), pod.into(), "Running".into()],
    );
    assert!(!s.contains("access denied"), "{s}");
    assert!(
        !s.contains("<ctrl-d>"),
        "delete offered in read-only mode:\n{s}"
    );
    open(&t, "nodes");
    wait_all(&t, home, "read-only nodes", nodes);
    // Deleting is not offered in read-only mode; the keystroke changes nothing.
    open(&t, "pods");
    wait_all(&t, home, "read-only pods again", &[pod.into()]);
    t.send(&["C-d"]);
    std::thread::sleep(Duration::from_millis(800));
    let s = t.screen();
    assert!(
        !s.contains("Delete"),
        "a delete dialog in read-only mode:\n{s}"
    );
    t
}

/// The logs view of `pod`: the pods view filtered to it, the pod selected, `l`.
fn open_logs(t: &Tmux, home: &Path, pod: &str) {
    open(t, "pods");
    wait_all(t, home, "pods again", &[pod.into()]);
    t.send(&["/"]);
    std::thread::sleep(Duration::from_millis(300));
    t.send(&["-l", pod]);
    t.send(&["Enter"]);
    // `l` opens the logs of the selected row: only once the filter has left `pod` the one
    // agent row (under CI's load a fixed pause was too short once, and `l` opened another
    // agent's logs).
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    loop {
        let s = t.screen();
        // Rows, not the title (which quotes the filter): an agent's row says Running.
        let agents: Vec<&str> = s
            .lines()
            .filter(|l| l.contains("cilium-g") && l.contains("Running"))
            .collect();
        if agents.len() == 1 && agents[0].contains(pod) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the pods view never came down to {pod}:\n{s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    t.send(&["l"]);
}

/// What a real API server refuses too, given what the demo serves: k9s probes for these and
/// carries on without them.
fn refused_by_a_real_server_too(path: &str, code: u16) -> bool {
    // metrics-server is not installed on the demo's clusters (nor served: discovery says so).
    let metrics = path.starts_with("/apis/metrics.k8s.io");
    metrics && code == 404
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k9s_views_fill_against_the_demo() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = demo::start("healthy", dir.path())
        .await
        .unwrap_or_else(|e| panic!("demo: {e}"));
    let home = tempfile::tempdir().expect("k9s home");
    let kc = kubeconfig(&d.dir, "prod", false);
    let nodes = names(&d, "v1", "Node", None);
    let pods = names(&d, "v1", "Pod", Some("kube-system"));
    let leases = names(&d, "coordination.k8s.io/v1", "Lease", None);
    assert_eq!(nodes.len(), 3, "{nodes:?}");
    assert!(!pods.is_empty());
    // A pod recreated on server 1 gives the events view the controllers' events.
    d.fault_injector()
        .inject("prod", "agent-drifts 1")
        .unwrap_or_else(|e| panic!("inject: {e}"));
    let home_path = home.path().to_path_buf();
    let log = d.kubes["prod"].requests().clone();
    tokio::task::spawn_blocking(move || {
        let t = launch(&home_path, &kc, "--all-namespaces --command pods");
        let h = home_path.as_path();
        let s = wait_all(
            &t,
            h,
            "pods",
            &["cilium-g1-n2".to_string(), "Running".to_string()],
        );
        assert!(!s.contains("access denied"), "{s}");
        open(&t, "nodes");
        let mut want = nodes.clone();
        want.push("Ready".into());
        wait_all(&t, h, "nodes", &want);
        open(&t, "daemonsets");
        wait_all(
            &t,
            h,
            "daemonsets",
            &["cilium".into(), "kube-system".into()],
        );
        open(&t, "leases");
        wait_all(&t, h, "leases", &leases);
        open(&t, "events");
        wait_all(
            &t,
            h,
            "events",
            &["SuccessfulCreate".into(), "Scheduled".into()],
        );
        open(&t, "helmreleases");
        wait_all(
            &t,
            h,
            "helmreleases",
            &["cilium".into(), "Helm upgrade succeeded".into()],
        );
        // The custom kinds' CRDs, as on a cluster where Flux is installed.
        open(&t, "crds");
        wait_all(
            &t,
            h,
            "crds",
            &[
                "helm.toolkit.fluxcd.io".into(),
                "HelmRelease".into(),
                "kustomize.toolkit.fluxcd.io".into(),
                "Kustomization".into(),
                "Namespaced".into(),
            ],
        );
        // The logs view of one agent: filter the pods to it, select it, `l`.
        open_logs(&t, h, "cilium-g1-n2");
        wait_all(
            &t,
            h,
            "logs",
            &[
                "Connected to apiserver".into(),
                "Establishing connection to apiserver".into(),
            ],
        );
        let _ = pods;
    })
    .await
    .expect("k9s checks");
    let refused: Vec<String> = log
        .records()
        .into_iter()
        .filter(|r| r.code >= 400 && !refused_by_a_real_server_too(&r.path, r.code))
        .map(|r| format!("{} {} {}?{}", r.code, r.method, r.path, r.query))
        .collect();
    assert!(
        refused.is_empty(),
        "k9s asked for what the simulation refused:\n{}",
        refused.join("\n")
    );
    let _ = d;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k9s_readonly_on_the_read_only_user() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = demo::start("healthy", dir.path())
        .await
        .unwrap_or_else(|e| panic!("demo: {e}"));
    let home = tempfile::tempdir().expect("k9s home");
    let kc = kubeconfig(&d.dir, "prod", true);
    let nodes = names(&d, "v1", "Node", None);
    let home_path = home.path().to_path_buf();
    let log = d.kubes["prod"].requests().clone();
    tokio::task::spawn_blocking(move || {
        readonly_walk(&home_path, &kc, "cilium-g1-n1", &nodes);
    })
    .await
    .expect("k9s checks");
    // Nothing was written, and nothing was refused: k9s read what the read-only user may.
    let records = log.records();
    let writes: Vec<String> = records
        .iter()
        .filter(|r| r.method != "GET" && !r.path.contains("selfsubject"))
        .map(|r| format!("{} {} {}", r.code, r.method, r.path))
        .collect();
    assert!(
        writes.is_empty(),
        "k9s wrote as the read-only user: {writes:?}"
    );
    let refused: Vec<String> = records
        .iter()
        .filter(|r| r.code >= 400 && !refused_by_a_real_server_too(&r.path, r.code))
        .map(|r| format!("{} {} {}?{}", r.code, r.method, r.path, r.query))
        .collect();
    assert!(refused.is_empty(), "refused:\n{}", refused.join("\n"));
    let _ = d;
}

/// The names the real API server lists for a kind: what k9s must show.
async fn real_names<K>(api: Api<K>) -> Vec<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list: {e}"))
        .items
        .iter()
        .filter_map(|o| o.meta().name.clone())
        .collect()
}

/// k9s on `demo --apiserver`: every view an operator opens fills from the real server, the
/// logs view (no kubelet in that mode) does not pretend, and `--readonly` on the read-only
/// user reads everything and offers no write. One demo start for both k9s runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k9s_views_fill_against_the_demo_on_a_real_apiserver() {
    let bin = apiserver_bin_dir(&["etcd", "kube-apiserver"]);
    // Missing k9s fails here, before a demo starts.
    k9s();
    let dir = tempfile::tempdir().expect("tempdir");
    let t0 = std::time::Instant::now();
    let d = demo::start_with("healthy", &dir.path().join("demo"), None, Some(&bin))
        .await
        .unwrap_or_else(|e| panic!("demo --apiserver: {e}"));
    println!("demo --apiserver started in {:?}", t0.elapsed());
    let real = d.real.as_ref().expect("the real API servers");
    let client = real.servers["prod"].client();
    let nodes = real_names(Api::<Node>::all(client.clone())).await;
    let leases = real_names(Api::<Lease>::all(client.clone())).await;
    assert_eq!(nodes.len(), 3, "{nodes:?}");
    assert!(leases.iter().any(|l| l == "plndr-cp-lock"), "{leases:?}");
    // A pod recreated on server 1: the controllers' events for the events view.
    d.fault_injector()
        .inject("prod", "agent-drifts 1")
        .unwrap_or_else(|e| panic!("inject: {e}"));
    let pods = Api::<Pod>::namespaced(client.clone(), "kube-system");
    let t = std::time::Instant::now();
    loop {
        let names = real_names(pods.clone()).await;
        if names.iter().any(|n| n == "cilium-g1-n1-1") {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the drifted agent was never recreated: {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let home = tempfile::tempdir().expect("k9s home");
    let ro_home = tempfile::tempdir().expect("k9s home (read-only)");
    let kc = kubeconfig(&d.dir, "prod", false);
    let ro_kc = kubeconfig(&d.dir, "prod", true);
    let (home_path, ro_home_path) = (home.path().to_path_buf(), ro_home.path().to_path_buf());
    let t1 = std::time::Instant::now();
    tokio::task::spawn_blocking(move || {
        let t = launch(&home_path, &kc, "--all-namespaces --command pods");
        let h = home_path.as_path();
        let s = wait_all(
            &t,
            h,
            "pods",
            &[
                "cilium-g1-n1-1".into(),
                "cilium-g1-n2".into(),
                "kube-vip-ds-n3".into(),
                "Running".into(),
                "k3s-prod-3".into(),
            ],
        );
        assert!(!s.contains("access denied"), "{s}");
        // The real server's own version, not the built-in one's.
        assert!(s.contains("K8s Rev: v1.34.4"), "{s}");
        open(&t, "nodes");
        let mut want = nodes.clone();
        want.extend(["Ready".into(), "control-plane,etcd,master".into()]);
        wait_all(&t, h, "nodes", &want);
        open(&t, "daemonsets");
        wait_all(
            &t,
            h,
            "daemonsets",
            &["cilium".into(), "kube-vip-ds".into(), "kube-system".into()],
        );
        open(&t, "leases");
        let mut want = leases.clone();
        want.push("kube-node-lease".into());
        wait_all(&t, h, "leases", &want);
        open(&t, "events");
        wait_all(
            &t,
            h,
            "events",
            &[
                "SuccessfulCreate".into(),
                "Created pod: cilium-g1-n1-1".into(),
                "Scheduled".into(),
                "Killing".into(),
            ],
        );
        open(&t, "helmreleases");
        wait_all(
            &t,
            h,
            "helmreleases",
            &["cilium".into(), "Helm upgrade succeeded".into()],
        );
        // The logs view of one agent: no kubelet answers in this mode. k9s v0.50.16 retries
        // the stream and records each failure in its own log only (internal/dao/pod.go,
        // "Stream logs failed"), so the screen must stay at its placeholder with no line
        // made up, and k9s' log must name the kubelet's logs endpoint it could not reach.
        open_logs(&t, h, "cilium-g1-n2");
        let s = wait_all(
            &t,
            h,
            "logs",
            &[
                "Logs(kube-system/cilium-g1-n2:cilium-agent)".into(),
                "Waiting for logs...".into(),
            ],
        );
        let log = h.join("logs/k9s.log");
        let deadline = std::time::Instant::now() + Duration::from_secs(40);
        let failed = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(l) = text.lines().find(|l| {
                l.contains("Stream logs failed")
                    && l.contains(":10250/containerLogs/kube-system/cilium-g1-n2/cilium-agent")
            }) {
                break l.to_string();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "k9s never recorded the failed log stream in {}:\n{text}\nscreen:\n{s}",
                log.display()
            );
            std::thread::sleep(Duration::from_millis(200));
        };
        println!("k9s on the real server, logs: {failed}");
        let s = t.screen();
        for made_up in ["level=info", "Connected to apiserver", "log stream closed"] {
            assert!(
                !s.contains(made_up),
                "a log line with no kubelet: {made_up}\n{s}"
            );
        }
        drop(t);

        // --readonly as the read-only user: it reads every view, offers no write.
        let t = readonly_walk(&ro_home_path, &ro_kc, "cilium-g1-n1-1", &nodes);
        let h = ro_home_path.as_path();
        let s = t.screen();
        assert!(s.contains("hk-sim-prod-readonly [R]"), "{s}");
        open(&t, "leases");
        wait_all(&t, h, "read-only leases", &leases);
        open(&t, "helmreleases");
        wait_all(
            &t,
            h,
            "read-only helmreleases",
            &["Helm upgrade succeeded".into()],
        );
    })
    .await
    .expect("k9s checks");
    println!("k9s on the real server: both runs took {:?}", t1.elapsed());
    // Nothing was deleted: the read-only run wrote nothing the admin could see.
    let left = real_names(pods).await;
    assert!(left.iter().any(|n| n == "cilium-g1-n1-1"), "{left:?}");
    drop(d);
}
