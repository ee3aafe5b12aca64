//! How the idle simulation's memory behaves over minutes (issue 17: the idle demo console
//! grew ~0.36 MB/min). Starts the demo with watchers shaped like the console's (nodes,
//! pods, leases, daemonsets, helmreleases, events, all namespaces), prints this process's
//! RSS every 30 s and each store's size, and asserts that what the stores keep stays
//! within their bounds. `HK_MEM_MINUTES` (default 1) sets the length; the long runs behind
//! the report's figures used 8.

use std::time::{Duration, Instant};

use futures::StreamExt;
use hk_sim::demo;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_simulation_memory_stays_bounded() {
    let minutes: u64 = std::env::var("HK_MEM_MINUTES")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(1);
    let dir = tempfile::tempdir().expect("tempdir");
    let d = demo::start("healthy", dir.path())
        .await
        .unwrap_or_else(|e| panic!("demo: {e}"));
    let mut watchers = Vec::new();
    for kube in d.kubes.values() {
        let client = kube.client().await.expect("client");
        for (g, v, k, p) in [
            ("", "v1", "Node", "nodes"),
            ("", "v1", "Pod", "pods"),
            ("", "v1", "Event", "events"),
            ("coordination.k8s.io", "v1", "Lease", "leases"),
            ("apps", "v1", "DaemonSet", "daemonsets"),
            (
                "helm.toolkit.fluxcd.io",
                "v2",
                "HelmRelease",
                "helmreleases",
            ),
        ] {
            let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, v, k), p);
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
            watchers.push(tokio::spawn(async move {
                let mut s = watcher(api, watcher::Config::default()).boxed();
                while let Some(ev) = s.next().await {
                    let _ = ev;
                }
            }));
        }
    }
    let t0 = Instant::now();
    let mut samples = Vec::new();
    while t0.elapsed() < Duration::from_secs(minutes * 60) {
        samples.push((t0.elapsed().as_secs(), rss_kib()));
        eprintln!(
            "{:>4}s rss {} KiB; stores: {}",
            t0.elapsed().as_secs(),
            rss_kib(),
            d.kubes
                .values()
                .map(|k| format!(
                    "{:?} requests kept {}",
                    k.store(),
                    k.requests().records().len()
                ))
                .collect::<Vec<_>>()
                .join("; ")
        );
        tokio::time::sleep(Duration::from_secs(30)).await;
    }
    for kube in d.kubes.values() {
        let text = format!("{:?}", kube.store());
        let history: usize = text
            .split("history: ")
            .nth(1)
            .and_then(|t| t.trim_end_matches(" }").parse().ok())
            .expect("the store's Debug names its history");
        assert!(history <= 1000, "{text}");
    }
    for w in watchers {
        w.abort();
    }
    eprintln!("samples (s, KiB): {samples:?}");
    drop(d);
}
