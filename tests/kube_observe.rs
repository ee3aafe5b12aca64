//! `hk-console observe --once` through the real binary, against the real kube-apiserver
//! (crates/hk-sim/tests/support/apiserver.rs) as the read-only observer ServiceAccount.
//!
//! Covers: a healthy cluster exits 0 (`--json` is `checks::live::Snapshot`, the text names
//! holder, pods and nodes); an agent on a node address exits 1 naming pod and node; the
//! Lease name comes from the repo's `kube_vip_lease_name`; a kubeconfig pointing at a closed
//! port exits 2 (could not look, not a crash); `--kubeconfig`/`KUBECONFIG` with several
//! environments is refused (exit 2, "pick one with --env"); a kubeconfig that reaches
//! another environment's cluster exits 2 naming both; the bundled sample and unknown
//! environments are refused; the observer makes zero writes and gets zero 403s.
//! Needs `bash tests/apiserver/build.sh` for the API server tests; fails with that hint.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use hk_console::checks::live::{Endpoint, Pane, Rule, Severity, Snapshot, Verdict};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use kube::Client;
use serde_json::json;
use support::apiserver::*;

/// (environment, servers group, servers and their loopback addresses).
const LAB: (&str, &str, [(&str, &str); 3]) = (
    "lab",
    "lab_servers",
    [
        ("s1", "127.0.10.1"),
        ("s2", "127.0.10.2"),
        ("s3", "127.0.10.3"),
    ],
);
const OTHER: (&str, &str, [(&str, &str); 3]) = (
    "other",
    "other_servers",
    [
        ("o1", "127.0.20.1"),
        ("o2", "127.0.20.2"),
        ("o3", "127.0.20.3"),
    ],
);

/// A two-environment repo. Both environments' VIP is 127.0.0.1:`vip_port`; `lab`'s
/// kubeconfig (`.cache/lab.kubeconfig`) is a copy of `kubeconfig`, `other`'s does not exist.
/// `lease_name`: a `kube_vip_lease_name` for lab's servers.
fn write_repo(dir: &Path, vip_port: u16, kubeconfig: &Path, lease_name: Option<&str>) -> PathBuf {
    let inv = dir.join("infra/ansible/inventory");
    std::fs::create_dir_all(inv.join("group_vars")).expect("mkdir inventory");
    let mut config = String::from(
        "ansible_dir: infra/ansible\ninventory: infra/ansible/inventory/hosts.ini\nenvironments:\n",
    );
    let mut hosts = String::new();
    for (env, group, servers) in [LAB, OTHER] {
        config.push_str(&format!("  {env}:\n    servers: {group}\n"));
        hosts.push_str(&format!("[{group}]\n"));
        for (n, a) in servers {
            hosts.push_str(&format!("{n} ansible_host={a}\n"));
        }
        let mut vars = format!(
            "kube_vip_address: 127.0.0.1\nk3s_api_port: {vip_port}\n\
             cluster_kubeconfig_name: {env}.kubeconfig\n"
        );
        if let (Some(l), "lab") = (lease_name, env) {
            vars.push_str(&format!("kube_vip_lease_name: {l}\n"));
        }
        std::fs::write(inv.join(format!("group_vars/{group}.yml")), vars).expect("group_vars");
    }
    std::fs::write(dir.join("hk-console.yaml"), config).expect("write hk-console.yaml");
    std::fs::write(inv.join("hosts.ini"), hosts).expect("write hosts.ini");
    std::fs::create_dir_all(dir.join(".cache")).expect("mkdir .cache");
    std::fs::copy(kubeconfig, dir.join(".cache/lab.kubeconfig")).expect("copy kubeconfig");
    dir.to_path_buf()
}

fn observe(repo: &Path, args: &[&str], kubeconfig_env: Option<&Path>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hk-console"));
    c.env(
        "XDG_STATE_HOME",
        std::env::temp_dir().join("hk-console-observe-tests"),
    );
    c.env_remove("HK_REPO");
    c.env_remove("HK_RUNBOOKS");
    c.env_remove("KUBECONFIG");
    if let Some(k) = kubeconfig_env {
        c.env("KUBECONFIG", k);
    }
    c.arg("--repo")
        .arg(repo)
        .args(["observe", "--once"])
        .args(args);
    c.output().expect("run hk-console")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn snapshot(out: &Output) -> Snapshot {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "--json is a Snapshot: {e}\nstdout: {}\nstderr: {}",
            text(&out.stdout),
            text(&out.stderr)
        )
    })
}

/// Every verdict but the etcd pane's: this file's repos name servers no SSH reaches (the
/// fixture is an API server alone), so their etcd members are always could-not-look.
fn kube_verdicts(s: &Snapshot) -> Vec<Verdict> {
    s.verdicts()
        .into_iter()
        .filter(|v| v.pane != Pane::Etcd)
        .collect()
}

/// The etcd pane of `env` in `s` says each of `servers` could not be looked at, and names
/// no leader: nothing vouched for that was not seen.
fn etcd_not_seen(s: &Snapshot, env: &str, servers: &[&str]) {
    let p = s
        .etcd
        .iter()
        .find(|p| p.env == env)
        .unwrap_or_else(|| panic!("no etcd pane for {env}: {s:?}"));
    assert_eq!(p.leader, None, "{p:?}");
    for h in servers {
        assert!(
            p.verdicts.iter().any(|v| v.rule == Rule::CouldNotLook
                && v.subject == format!("member {h}")
                && v.message.starts_with(&format!("{h} not answering"))),
            "{h}: {:?}",
            p.verdicts
        );
    }
    assert!(
        p.verdicts
            .iter()
            .all(|v| v.severity != Severity::Ok || v.rule == Rule::EtcdQuorum),
        "{:?}",
        p.verdicts
    );
}

fn show(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// lab as k3s has it: three Ready servers, the Lease held by s2, three agents reading the
/// VIP from a ConfigMap, rolled out.
async fn healthy(admin: &Client, api_port: u16) {
    for (name, ip) in LAB.2 {
        create_node(admin, &FixtureNode::server(name, ip)).await;
    }
    let lease = VipLease {
        lease_duration_seconds: 60,
        ..VipLease::held_by("s2", Duration::ZERO)
    };
    create_vip_lease(admin, &lease).await;
    create_configmap(
        admin,
        KUBE_SYSTEM,
        "cilium-endpoint",
        &[("host", "127.0.0.1"), ("port", &api_port.to_string())],
    )
    .await;
    let env = AgentEnv::from_configmap("cilium-endpoint", "host", "port");
    create_cilium_daemonset(admin, &env).await;
    set_daemonset_status(admin, KUBE_SYSTEM, "cilium", &rollout_status(3, 3, 3)).await;
    for (node, _) in LAB.2 {
        create_cilium_pod(
            admin,
            &CiliumPod {
                name: format!("cilium-{node}"),
                node: node.to_string(),
                env: env.clone(),
                ready: true,
            },
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_exits_0_healthy_then_1_on_a_node_address_agent() {
    let server = ApiServer::start();
    let admin = server.admin_client().await;
    healthy(&admin, server.port).await;
    let observer = server.observer_kubeconfig().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = write_repo(&dir.path().join("repo"), server.port, &observer, None);

    // Healthy: the JSON snapshot has the four kube panes of lab, all ok, and its etcd pane,
    // which could not look (no SSH reaches s1..s3 here): exit 2, not a clean 0.
    let out = observe(&repo, &["--json", "--env", "lab"], None);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let s = snapshot(&out);
    assert_eq!(s.exit_code(), 2);
    assert_eq!(hk_console::checks::live::exit_code(&kube_verdicts(&s)), 0);
    etcd_not_seen(&s, "lab", &["s1", "s2", "s3"]);
    assert_eq!(
        (
            s.vip_lease.len(),
            s.agent_env.len(),
            s.rollout.len(),
            s.nodes.len()
        ),
        (1, 1, 1, 1)
    );
    assert!(s.vpn.is_empty() && s.vpn_across.is_empty());
    assert_eq!(s.vip_lease[0].holder.as_deref(), Some("s2"));
    assert_eq!(s.agent_env[0].agents.len(), 3);
    assert!(s.agent_env[0]
        .agents
        .iter()
        .all(|a| a.endpoint == Endpoint::Vip));
    assert_eq!(s.nodes[0].nodes.len(), 3);
    assert!(
        kube_verdicts(&s)
            .iter()
            .all(|v| v.severity == Severity::Ok && v.env == "lab"),
        "{:?}",
        s.verdicts()
    );

    // The same, for a human: holder, pods and nodes named, severities shown.
    let out = observe(&repo, &["--env", "lab"], None);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let t = text(&out.stdout);
    eprintln!("observe --once --env lab (healthy):\n{t}");
    for want in [
        "lab  (kubeconfig ",
        "holder s2",
        "pod cilium-s1",
        "cilium-s2 on s2",
        "node s3",
        "ok       lease plndr-cp-lock",
        "etcd  3 member(s)  no leader seen",
        "s1 not answering",
        // The three members' metrics and the three servers' IO pressure; quorum unknown:
        // the fixture's observer may not GET /readyz/etcd (403), and says so.
        "quorum not known: /readyz/etcd could not be read",
        "0 critical, 0 warn, 1 unknown, 6 could not look",
    ] {
        assert!(t.contains(want), "missing {want:?} in:\n{t}");
    }

    // Every environment: `other` has no kubeconfig: could not look (exit 2), naming the file.
    let out = observe(&repo, &["--json"], None);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let s = snapshot(&out);
    let other: Vec<_> = s
        .verdicts()
        .into_iter()
        .filter(|v| v.env == "other")
        .collect();
    assert!(!other.is_empty());
    let missing = other
        .iter()
        .find(|v| v.rule == Rule::CouldNotLook)
        .expect("could-not-look for other");
    assert!(
        missing.message.contains("other.kubeconfig") && missing.message.contains("does not exist"),
        "{}",
        missing.message
    );
    assert!(kube_verdicts(&s)
        .iter()
        .filter(|v| v.env == "lab")
        .all(|v| v.severity == Severity::Ok));

    // An agent recreated dialling s1's own address: critical, exit 1, pod and node named.
    let pods: Api<Pod> = Api::namespaced(admin.clone(), KUBE_SYSTEM);
    pods.delete(
        "cilium-s3",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        },
    )
    .await
    .expect("delete cilium-s3");
    while pods.get_opt("cilium-s3").await.expect("get").is_some() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    create_cilium_pod(
        &admin,
        &CiliumPod {
            name: "cilium-s3".into(),
            node: "s3".into(),
            env: AgentEnv::literal("127.0.10.1", server.port),
            ready: true,
        },
    )
    .await;
    let out = observe(&repo, &["--json", "--env", "lab"], None);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let s = snapshot(&out);
    let crit: Vec<_> = s
        .verdicts()
        .into_iter()
        .filter(|v| v.severity == Severity::Critical)
        .collect();
    assert!(
        crit.iter().any(|v| v.rule == Rule::AgentHost
            && v.subject == "pod cilium-s3"
            && v.message.contains("s1's own address")),
        "{crit:?}"
    );
    let out = observe(&repo, &["--env", "lab"], None);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let t = text(&out.stdout);
    eprintln!("observe --once --env lab (drift):\n{t}");
    assert!(
        t.contains("critical pod cilium-s3: cilium-s3 on s3: KUBERNETES_SERVICE_HOST=127.0.10.1 is s1's own address"),
        "{t}"
    );

    // The Lease name from the repo: lab's servers say `hk-custom-lock`, held by s1.
    let custom: Lease = serde_json::from_value(json!({
        "metadata": {"name": "hk-custom-lock", "namespace": KUBE_SYSTEM},
        "spec": {"holderIdentity": "s1", "leaseDurationSeconds": 60,
                 "renewTime": k8s_openapi::jiff::Timestamp::now()
                     .strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()},
    }))
    .expect("lease");
    Api::<Lease>::namespaced(admin.clone(), KUBE_SYSTEM)
        .create(&PostParams::default(), &custom)
        .await
        .expect("create hk-custom-lock");
    let repo2 = write_repo(
        &dir.path().join("repo2"),
        server.port,
        &observer,
        Some("hk-custom-lock"),
    );
    let out = observe(&repo2, &["--json", "--env", "lab"], None);
    let s = snapshot(&out);
    assert_eq!(
        s.vip_lease[0].holder.as_deref(),
        Some("s1"),
        "{}",
        show(&out)
    );
    assert!(s.vip_lease[0]
        .verdicts
        .iter()
        .any(|v| v.subject == "lease hk-custom-lock"));

    // Read-only: nothing written, nothing refused.
    server.audit_settle().await;
    let writes = server.writes_by(OBSERVER_USER);
    assert!(writes.is_empty(), "observer wrote: {writes:?}");
    // The etcd pane's quorum look GETs /readyz/etcd, which this fixture's observer role
    // does not grant: refused (403), and the pane says "quorum not known" (above). Apart
    // from it: nothing refused, one LIST each, no watch.
    let all = server.requests_by(OBSERVER_USER);
    let (readyz, rest): (Vec<_>, Vec<_>) = all
        .iter()
        .partition(|e| e["requestURI"].as_str() == Some("/readyz/etcd"));
    assert_eq!(readyz.len(), 6, "one quorum look a run: {readyz:?}");
    assert!(
        readyz
            .iter()
            .all(|e| e["verb"] == "get" && e["responseStatus"]["code"] == 403),
        "{readyz:?}"
    );
    let codes: Vec<i64> = rest
        .iter()
        .filter_map(|e| e["responseStatus"]["code"].as_i64())
        .collect();
    assert!(!codes.is_empty() && !codes.contains(&403), "{codes:?}");
    let verbs: Vec<String> = rest
        .iter()
        .filter_map(|e| e["verb"].as_str().map(str::to_string))
        .collect();
    assert!(
        verbs.iter().all(|v| v == "list"),
        "one LIST each, no watch: {verbs:?}"
    );
    // 6 runs reached lab's API server: five LISTs each for the kube panes, one of the
    // nodes for the etcd pane's quorum.
    assert_eq!(verbs.len(), 6 * 6, "{verbs:?}");
}

/// A kubeconfig for a server on 127.0.0.1:`port`.
fn kubeconfig_at(path: &Path, port: u16) -> PathBuf {
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\n\
             contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n"
        ),
    )
    .expect("write kubeconfig");
    path.to_path_buf()
}

fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

#[test]
fn once_exits_2_when_the_api_does_not_answer() {
    // The VIP answers (a listener held by the test), the API in the kubeconfig does not.
    let vip = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let dir = tempfile::tempdir().expect("temp dir");
    let kc = kubeconfig_at(&dir.path().join("closed.kubeconfig"), closed_port());
    let repo = write_repo(
        &dir.path().join("repo"),
        vip.local_addr().expect("addr").port(),
        &kc,
        None,
    );
    let out = observe(&repo, &["--json", "--env", "lab"], None);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let s = snapshot(&out);
    let all = kube_verdicts(&s);
    assert!(
        all.iter().all(|v| v.severity != Severity::Critical),
        "{all:?}"
    );
    for (pane, n) in [
        ("vip", s.vip_lease.len()),
        ("agents", s.agent_env.len()),
        ("rollout", s.rollout.len()),
        ("nodes", s.nodes.len()),
    ] {
        assert_eq!(n, 1, "{pane}");
    }
    let cnl: Vec<_> = all
        .iter()
        .filter(|v| v.rule == Rule::CouldNotLook)
        .collect();
    assert_eq!(cnl.len(), 4, "lease, agents, rollout, nodes: {cnl:?}");
    for v in cnl {
        assert!(
            v.message.to_lowercase().contains("connection refused"),
            "{}",
            v.message
        );
    }
    // The text form says the same, and the tally.
    let out = observe(&repo, &["--env", "lab"], None);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        // lease, agents, rollout, nodes, and lab's etcd: 3 members and 3 servers.
        text(&out.stdout).contains("10 could not look"),
        "{}",
        show(&out)
    );
    drop(vip);
}

/// A kubeconfig left pointing at lab, used for `other`: lab's nodes are s1..s3, none of
/// other's servers (o1..o3), so the look is of the wrong cluster: exit 2, both named, even
/// though lab itself is healthy (its verdicts would read as other's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_exits_2_when_the_cluster_reached_is_not_the_environments() {
    let server = ApiServer::start();
    let admin = server.admin_client().await;
    healthy(&admin, server.port).await;
    let observer = server.observer_kubeconfig().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = write_repo(&dir.path().join("repo"), server.port, &observer, None);
    let kc_arg = observer.display().to_string();

    let out = observe(&repo, &["--env", "other", "--kubeconfig", &kc_arg], None);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = text(&out.stderr);
    assert!(
        err.contains("environment `other`") && err.contains("is not other's"),
        "{err}"
    );
    for named in ["o1", "o2", "o3", "s1", "s2", "s3", kc_arg.as_str()] {
        assert!(err.contains(named), "{named} named: {err}");
    }

    // KUBECONFIG the same way; and lab through the same file is lab's: exit 0.
    let out = observe(&repo, &["--json", "--env", "other"], Some(&observer));
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        text(&out.stderr).contains("is not other's"),
        "{}",
        show(&out)
    );
    // (Exit 2 for lab's etcd, which no SSH reaches here; no other complaint.)
    let out = observe(&repo, &["--env", "lab", "--kubeconfig", &kc_arg], None);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        text(&out.stdout).contains("6 could not look"),
        "{}",
        show(&out)
    );
    assert!(!text(&out.stderr).contains("is not"), "{}", show(&out));
}

#[test]
fn a_named_kubeconfig_needs_one_environment() {
    let dir = tempfile::tempdir().expect("temp dir");
    let kc = kubeconfig_at(&dir.path().join("one.kubeconfig"), closed_port());
    let repo = write_repo(&dir.path().join("repo"), closed_port(), &kc, None);
    let kc_arg = kc.display().to_string();

    let out = observe(&repo, &["--kubeconfig", &kc_arg], None);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = text(&out.stderr);
    assert!(
        err.contains("--kubeconfig names one cluster") && err.contains("pick one with --env"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "nothing looked at: {}", show(&out));

    let out = observe(&repo, &["--json"], Some(&kc));
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = text(&out.stderr);
    assert!(
        err.contains("KUBECONFIG names one cluster") && err.contains("pick one with --env"),
        "{err}"
    );

    // With --env it is taken (and then the closed port is what it reports).
    let out = observe(
        &repo,
        &["--json", "--env", "other", "--kubeconfig", &kc_arg],
        None,
    );
    let s = snapshot(&out);
    assert!(!text(&out.stderr).contains("pick one"), "{}", show(&out));
    assert!(s.verdicts().iter().all(|v| v.env == "other"));
    assert!(s
        .verdicts()
        .iter()
        .any(|v| v.rule == Rule::CouldNotLook
            && v.message.to_lowercase().contains("connection refused")));

    let out = observe(&repo, &["--env", "nope"], None);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        text(&out.stderr).contains("no environment `nope`"),
        "{}",
        show(&out)
    );
}

#[test]
fn the_bundled_sample_is_not_looked_at() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory");
    let out = observe(&sample, &["--env", "dev"], None);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        text(&out.stderr).contains("bundled sample"),
        "{}",
        show(&out)
    );
}
