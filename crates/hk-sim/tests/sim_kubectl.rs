//! The real kubectl (built by tests/apiserver/build.sh from the same k8s.io/kubernetes
//! module and version as the test kube-apiserver, into $HK_APISERVER_BIN_DIR) against the
//! demo's simulated API server, with the demo's kubeconfig, for what issue 17 has made
//! work so far: `auth can-i`, the health endpoints, `get` of the served kinds, and the
//! loud refusal of what is not simulated (a server-side dry run).
//! Missing kubectl = FAIL with the build hint.

use crate::demo_common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use demo_common::{kubeconfig, kubectl, kubectl_bin};
use hk_sim::demo::{self, Demo};

/// The demo on scenario `healthy` in a fresh directory, and prod's kubeconfig. The
/// directory goes when the first is dropped: keep it for as long as the demo.
async fn healthy_demo() -> (tempfile::TempDir, Demo, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = demo::start("healthy", dir.path())
        .await
        .unwrap_or_else(|e| panic!("demo: {e}"));
    let kc = kubeconfig(&d.dir, "prod");
    (dir, d, kc)
}

/// `kubectl ARGS` must succeed: its stdout (both streams echoed for a failure's context).
fn ok(kc: &Path, args: &[&str]) -> String {
    let (o, e, code) = kubectl(kc, args);
    assert_eq!(code, Some(0), "kubectl {args:?}: {o} {e}");
    eprintln!("$ kubectl {}\n{o}{e}", args.join(" "));
    o
}

/// `kubectl ARGS` must fail, its stderr saying `says`: the stderr.
fn refused(kc: &Path, args: &[&str], says: &str) -> String {
    let (o, e, code) = kubectl(kc, args);
    assert_ne!(code, Some(0), "kubectl {args:?} must fail: {o}{e}");
    assert!(e.contains(says), "kubectl {args:?}: no {says:?} in:\n{e}");
    e
}

/// `kubectl ARGS` left running (a watch, `logs -f`), its stdout piped.
fn spawn_kubectl(kc: &Path, args: &[&str]) -> Child {
    Command::new(kubectl_bin())
        .arg("--kubeconfig")
        .arg(kc)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("kubectl {args:?}: {e}"))
}

/// Everything a spawned kubectl printed, once it has ended (killed first unless `ended`).
fn output_of(mut child: Child, ended: bool) -> String {
    if !ended {
        let _ = child.kill();
    }
    let _ = child.wait();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().expect("stdout"), &mut out)
        .expect("read kubectl's output");
    out
}

/// Polls `f` every `every` until it answers `Some`; fails naming `what` after `secs`.
fn until<T>(secs: u64, every: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(secs),
            "{what} within {secs} s"
        );
        std::thread::sleep(every);
    }
}

/// kube-system's first Lease (kube-vip's) and its holder.
fn vip_lease(kc: &Path) -> (String, String) {
    let jp = "jsonpath={range .items[*]}{.metadata.name} {.spec.holderIdentity}{\"\\n\"}{end}";
    let o = ok(kc, &["get", "leases", "-n", "kube-system", "-o", jp]);
    o.lines()
        .find_map(|l| l.split_once(' '))
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .unwrap_or_else(|| panic!("no lease in kube-system: {o}"))
}

/// The name of the kube-system pod matching `selector` on `node`.
fn pod_on(kc: &Path, selector: &str, node: &str) -> String {
    let jp = "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{\"\\n\"}{end}";
    let out = ok(
        kc,
        &["get", "pods", "-n", "kube-system", "-l", selector, "-o", jp],
    );
    out.lines()
        .filter_map(|l| l.split_once(' '))
        .find(|(_, n)| *n == node)
        .map(|(p, _)| p.to_string())
        .unwrap_or_else(|| panic!("no {selector} pod on {node}: {out}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_against_the_demo() {
    let (_dir, d, kc) = healthy_demo().await;
    tokio::task::spawn_blocking(move || {
        let ok = |args: &[&str]| ok(&kc, args);
        assert_eq!(
            ok(&["auth", "can-i", "list", "pods", "-n", "kube-system"]),
            "yes\n"
        );
        assert_eq!(
            ok(&["auth", "can-i", "delete", "daemonsets", "-A"]),
            "yes\n"
        );
        let ready = ok(&["get", "--raw", "/readyz?verbose"]);
        assert!(ready.contains("[+]etcd ok"), "{ready}");
        assert_eq!(ok(&["get", "--raw", "/livez"]), "ok");
        let nodes = ok(&["get", "nodes", "-o", "name"]);
        assert_eq!(nodes.lines().count(), 3, "{nodes}");
        assert!(nodes.lines().all(|l| l.starts_with("node/")), "{nodes}");
        let pods = ok(&[
            "get",
            "pods",
            "-n",
            "kube-system",
            "-l",
            "k8s-app=cilium",
            "-o",
            "name",
        ]);
        assert_eq!(pods.lines().count(), 3, "{pods}");
        // Not simulated: said so, not done.
        // (kubectl sends a delete's dry run in the DeleteOptions body, a create's in the query.)
        refused(
            &kc,
            &["delete", "ns", "kube-system", "--dry-run=server"],
            "hk-console simulation: `DeleteOptions.dryRun=All` is not simulated",
        );
        assert_eq!(
            ok(&["get", "ns", "kube-system", "-o", "name"]),
            "namespace/kube-system\n"
        );
        // Logs are served since issue 17; a container that never restarted has no previous
        // log, and the kubelet says so.
        refused(
            &kc,
            &["logs", "-n", "kube-system", "cilium-g1-n1", "--previous"],
            "Error from server (BadRequest): previous terminated container \"cilium-agent\" in pod \"cilium-g1-n1\" not found",
        );
        // A pod's processes are not simulated: exec is refused by name, never run.
        refused(
            &kc,
            &["exec", "-n", "kube-system", "cilium-g1-n1", "--", "true"],
            "`pods/exec` is not simulated",
        );
    })
    .await
    .expect("kubectl checks");
    let _ = d;
}

/// The first line of kubectl's table output, split into its column headers.
fn headers(out: &str) -> Vec<String> {
    let first = out.lines().next().unwrap_or("");
    // Headers are separated by runs of two or more spaces; a header itself holds at most one.
    first
        .split("  ")
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_tables_have_the_real_servers_columns() {
    let (_dir, d, kc) = healthy_demo().await;
    tokio::task::spawn_blocking(move || {
        let ok = |args: &[&str]| ok(&kc, args);
        let cases: &[(&[&str], &[&str])] = &[
            (
                &["get", "nodes"],
                &["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
            ),
            (
                &["get", "nodes", "-o", "wide"],
                &[
                    "NAME",
                    "STATUS",
                    "ROLES",
                    "AGE",
                    "VERSION",
                    "INTERNAL-IP",
                    "EXTERNAL-IP",
                    "OS-IMAGE",
                    "KERNEL-VERSION",
                    "CONTAINER-RUNTIME",
                ],
            ),
            (
                &["get", "pods", "-n", "kube-system"],
                &["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
            ),
            (
                &["get", "pods", "-n", "kube-system", "-o", "wide"],
                &[
                    "NAME",
                    "READY",
                    "STATUS",
                    "RESTARTS",
                    "AGE",
                    "IP",
                    "NODE",
                    "NOMINATED NODE",
                    "READINESS GATES",
                ],
            ),
            (
                &["get", "ds", "-n", "kube-system"],
                &[
                    "NAME",
                    "DESIRED",
                    "CURRENT",
                    "READY",
                    "UP-TO-DATE",
                    "AVAILABLE",
                    "NODE SELECTOR",
                    "AGE",
                ],
            ),
            (
                &["get", "leases", "-n", "kube-system"],
                &["NAME", "HOLDER", "AGE"],
            ),
            (&["get", "ns"], &["NAME", "STATUS", "AGE"]),
            (
                &["get", "hr", "-n", "kube-system"],
                &["NAME", "AGE", "READY", "STATUS"],
            ),
        ];
        for (args, want) in cases {
            let out = ok(args);
            assert_eq!(headers(&out), *want, "kubectl {args:?}:\n{out}");
        }
    })
    .await
    .expect("kubectl checks");
    let _ = d;
}

/// What an operator does to the agents during a rollout, with the real kubectl: delete a
/// pod (kubectl waits for it to go; the DaemonSet controller replaces it), `rollout restart`
/// and `rollout status` (a new generation, one node at a time), the events that tells, and
/// `describe` of a node and a pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_rollout_events_describe() {
    let (_dir, d, kc) = healthy_demo().await;
    tokio::task::spawn_blocking(move || {
        let ok = |args: &[&str]| ok(&kc, args);
        let ks = ["-n", "kube-system"];
        let names = |sel: &str| -> Vec<String> {
            let mut a = vec!["get", "pods", "-l", sel, "-o", "name"];
            a.extend(ks);
            ok(&a).lines().map(str::to_string).collect()
        };
        let before = names("k8s-app=cilium");
        assert_eq!(before.len(), 3, "{before:?}");
        // `kubectl delete pod` waits until the pod is gone (its grace period, scaled).
        let t0 = Instant::now();
        let out = ok(&["delete", "-n", "kube-system", "pod", "cilium-g1-n2"]);
        assert_eq!(
            out,
            "pod \"cilium-g1-n2\" deleted from kube-system namespace\n"
        );
        assert!(t0.elapsed() < Duration::from_secs(8), "{:?}", t0.elapsed());
        // The DaemonSet controller puts a new pod on that node, and it becomes ready.
        ok(&[
            "wait",
            "-n",
            "kube-system",
            "--for=condition=Ready",
            "pod",
            "-l",
            "k8s-app=cilium",
            "--timeout=20s",
        ]);
        let after = names("k8s-app=cilium");
        assert_eq!(after.len(), 3, "{after:?}");
        assert!(
            after.contains(&"pod/cilium-g1-n2-1".to_string()),
            "{after:?}"
        );
        let wide = ok(&["get", "pods", "-n", "kube-system", "-o", "wide"]);
        assert!(
            wide.lines().any(|l| l.starts_with("cilium-g1-n2-1 ")
                && l.contains("1/1")
                && l.contains("Running")
                && l.contains("k3s-prod-2")),
            "{wide}"
        );
        // rollout restart: generation 2 rolls node by node, and rollout status ends.
        let out = ok(&["rollout", "restart", "-n", "kube-system", "ds/cilium"]);
        assert_eq!(out, "daemonset.apps/cilium restarted\n");
        let status = ok(&[
            "rollout",
            "status",
            "-n",
            "kube-system",
            "ds/cilium",
            "--timeout=30s",
        ]);
        assert!(
            status.contains("daemon set \"cilium\" successfully rolled out"),
            "{status}"
        );
        let gen2 = names("pod-template-generation=2");
        assert_eq!(gen2.len(), 3, "{gen2:?}");
        // What happened, as events (both kubectl commands).
        let evs = ok(&["get", "events", "-n", "kube-system"]);
        assert_eq!(
            headers(&evs),
            ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
        );
        for want in [
            "Killing",
            "SuccessfulDelete",
            "SuccessfulCreate",
            "Scheduled",
            "Started",
            "pod/cilium-g1-n2",
            "daemonset/cilium",
        ] {
            assert!(evs.contains(want), "{want} missing:\n{evs}");
        }
        let evs = ok(&["events", "-n", "kube-system", "--for", "pod/cilium-g1-n2-1"]);
        assert!(
            evs.contains("Successfully assigned kube-system/cilium-g1-n2-1 to k3s-prod-2"),
            "{evs}"
        );
        let v1 = ok(&[
            "get",
            "events.v1.events.k8s.io",
            "-n",
            "kube-system",
            "-o",
            "name",
        ]);
        assert!(v1.lines().count() >= 10, "{v1}");
        // describe: allocatable, requests as percentages of it, the node's Lease.
        let node = ok(&["describe", "node", "k3s-prod-1"]);
        for want in [
            "Allocatable:",
            "memory:",
            "16288032Ki",
            "HolderIdentity:  k3s-prod-1",
            "Ready            True",
        ] {
            assert!(node.contains(want), "{want} missing:\n{node}");
        }
        for bad in ["-9223372036854775808", "Failed to get lease", "<unknown>"] {
            assert!(!node.contains(bad), "{bad} in:\n{node}");
        }
        let pod = ok(&["describe", "pod", "-n", "kube-system", "cilium-g2-n1"]);
        assert!(pod.contains("State:          Running"), "{pod}");
        assert!(pod.contains("Ready:          True"), "{pod}");
        assert!(!pod.contains("Waiting"), "{pod}");
        // Logs: each agent's recent lines, in cilium's format, naming the API server it dials.
        let logs = ok(&["logs", "-n", "kube-system", "cilium-g2-n1"]);
        let dial = logs
            .lines()
            .find(|l| l.contains("msg=\"Establishing connection to apiserver\""))
            .unwrap_or_else(|| panic!("{logs}"));
        assert!(
            dial.starts_with("time=20") && dial.contains(" level=info "),
            "{dial}"
        );
        assert!(dial.contains("ipAddr=https://127.0.11.100:"), "{dial}");
        assert!(
            logs.contains("msg=\"Daemon initialization completed\""),
            "{logs}"
        );
        let one = ok(&[
            "logs",
            "-n",
            "kube-system",
            "cilium-g2-n1",
            "--tail=1",
            "--timestamps",
        ]);
        assert_eq!(one.lines().count(), 1, "{one}");
        let all = ok(&[
            "logs",
            "-n",
            "kube-system",
            "-l",
            "k8s-app=cilium",
            "--prefix",
        ]);
        assert!(
            all.contains("[pod/cilium-g2-n3/cilium-agent] time="),
            "{all}"
        );
        // `logs -f` follows until the pod goes (deleted here: its last line, then the end).
        let mut follow = spawn_kubectl(&kc, &["logs", "-f", "-n", "kube-system", "cilium-g2-n3"]);
        std::thread::sleep(Duration::from_millis(700));
        ok(&["delete", "pod", "-n", "kube-system", "cilium-g2-n3"]);
        let status = until(10, Duration::from_millis(100), "logs -f ending", || {
            follow.try_wait().expect("wait")
        });
        let followed = output_of(follow, true);
        assert!(status.success(), "{followed}");
        assert!(followed.contains("msg=\"Starting hive\""), "{followed}");
        assert!(
            followed.trim_end().ends_with("msg=\"Stopping hive\""),
            "{followed}"
        );
        // kubectl sends `create namespace` as protobuf: read, not refused.
        assert_eq!(
            ok(&["create", "namespace", "rehearsal"]),
            "namespace/rehearsal created\n"
        );
        let ns = ok(&["get", "ns", "rehearsal"]);
        assert!(
            ns.lines()
                .nth(1)
                .is_some_and(|l| l.starts_with("rehearsal") && l.contains("Active")),
            "{ns}"
        );
        let svc = ok(&["get", "svc,endpointslices", "-n", "default"]);
        assert!(
            svc.contains("10.43.0.1") && svc.contains("443/TCP"),
            "{svc}"
        );
        assert!(svc.contains("127.0.11.1,127.0.11.2,127.0.11.3"), "{svc}");
    })
    .await
    .expect("kubectl checks");
    let _ = d;
}

/// `kubectl apply` as an operator types it: default (Strict) validation, which kubectl does
/// on the server once the OpenAPI v3 documents say PATCH takes `fieldValidation`; a typo'd
/// field is refused by name; `--server-side` too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_with_validation() {
    let (dir, d, kc) = healthy_demo().await;
    let manifests = dir.path().join("manifests");
    std::fs::create_dir_all(&manifests).expect("mkdir");
    tokio::task::spawn_blocking(move || {
        let write = |name: &str, text: &str| {
            let p = manifests.join(name);
            std::fs::write(&p, text).expect("write manifest");
            p.display().to_string()
        };
        let ok = |args: &[&str]| ok(&kc, args);
        let cm = write(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: rehearsal\n  namespace: kube-system\ndata:\n  a: \"1\"\n",
        );
        assert_eq!(
            ok(&["apply", "-f", &cm]),
            "configmap/rehearsal created\n"
        );
        let cm2 = write(
            "cm2.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: rehearsal\n  namespace: kube-system\ndata:\n  a: \"2\"\n  b: \"3\"\n",
        );
        assert_eq!(
            ok(&["apply", "-f", &cm2]),
            "configmap/rehearsal configured\n"
        );
        let got = ok(&["get", "cm", "-n", "kube-system", "rehearsal", "-o", "jsonpath={.data.a}{.data.b}"]);
        assert_eq!(got, "23");
        // A typo: refused by the server, naming the field (nothing applied).
        let bad = write(
            "bad.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: rehearsal\n  namespace: kube-system\n  lables: {x: y}\ndata:\n  a: \"4\"\n",
        );
        refused(&kc, &["apply", "-f", &bad], "strict decoding error: unknown field \"metadata.lables\"");
        assert_eq!(
            ok(&["get", "cm", "-n", "kube-system", "rehearsal", "-o", "jsonpath={.data.a}"]),
            "2"
        );
        let bad_pod = write(
            "pod.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: typo\n  namespace: kube-system\nspec:\n  containers:\n  - name: c\n    image: busybox\n    imagePullPolicyy: Always\n",
        );
        refused(&kc, &["apply", "-f", &bad_pod], "unknown field \"spec.containers[0].imagePullPolicyy\"");
        // Server-side apply.
        let ssa = write(
            "ssa.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: rehearsal-ssa\n  namespace: kube-system\ndata:\n  k: v\n",
        );
        assert_eq!(
            ok(&["apply", "--server-side", "-f", &ssa]),
            "configmap/rehearsal-ssa serverside-applied\n"
        );
        // Field ownership is modelled (crates/hk-sim/tests/sim_kubectl_ssa.rs): applying the same again
        // without --force-conflicts owns the same fields, no conflict; forced, it applies.
        assert_eq!(
            ok(&["apply", "--server-side", "-f", &ssa]),
            "configmap/rehearsal-ssa serverside-applied\n"
        );
        assert_eq!(
            ok(&["apply", "--server-side", "--force-conflicts", "-f", &ssa]),
            "configmap/rehearsal-ssa serverside-applied\n"
        );
        // The documents kubectl reads.
        let idx = ok(&["get", "--raw", "/openapi/v3"]);
        assert!(idx.contains("\"apis/apps/v1\""), "{idx}");
        let (_, e, code) = kubectl(&kc, &["get", "--raw", "/openapi/v2"]);
        assert_ne!(code, Some(0));
        assert!(e.contains("is not simulated") || e.contains("NotFound"), "{e}");
    })
    .await
    .expect("kubectl apply checks");
    let _ = d;
}

/// What a fault looks like through kubectl: `get -w` (a watch of Tables) shows the node go
/// NotReady, and the events say so, then that the VIP lease moved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_watch_and_events_of_a_fault() {
    let (_dir, d, kc) = healthy_demo().await;
    let faults = d.fault_injector();
    tokio::task::spawn_blocking(move || {
        let watch = spawn_kubectl(&kc, &["get", "nodes", "-w"]);
        std::thread::sleep(Duration::from_millis(800));
        faults
            .inject("prod", "holder-dies")
            .unwrap_or_else(|e| panic!("inject: {e}"));
        std::thread::sleep(Duration::from_millis(1500));
        let seen = output_of(watch, false);
        // The header once, the three nodes, then the holder's change.
        assert_eq!(
            headers(&seen),
            ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
            "{seen}"
        );
        assert_eq!(seen.matches("NAME ").count(), 1, "{seen}");
        assert!(
            seen.lines()
                .any(|l| l.starts_with("k3s-prod-1 ") && l.contains("NotReady")),
            "{seen}"
        );
        // NodeNotReady at once; the lease moves once the dead holder's has run out (15 s).
        let t0 = Instant::now();
        loop {
            let (o, e, code) = kubectl(&kc, &["get", "events", "-A"]);
            assert_eq!(code, Some(0), "{e}");
            let moved = o.contains("LeaderElection") && o.contains("k3s-prod-2 became leader");
            if o.contains("NodeNotReady")
                && o.contains("Node k3s-prod-1 status is now: NodeNotReady")
                && moved
            {
                assert!(o.contains("node/k3s-prod-1") && o.contains("lease/"), "{o}");
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(40),
                "events never told the fault:\n{o}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    })
    .await
    .expect("kubectl checks");
    drop(d);
}

/// kube-vip as a k3s HA install runs it: the `kube-vip-ds` DaemonSet's pod on every server,
/// Running, whose logs tell the leader election as kube-vip and client-go write it, and
/// follow the Lease when its holder dies; the cilium DaemonSet never counts them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_kube_vip_pods_and_their_leader_election() {
    let (_dir, d, kc) = healthy_demo().await;
    let faults = d.fault_injector();
    tokio::task::spawn_blocking(move || {
        let ok = |args: &[&str]| ok(&kc, args);
        let sel = "app.kubernetes.io/name=kube-vip-ds";
        let nodes: Vec<String> = ok(&["get", "nodes", "-o", "name"])
            .lines()
            .map(|l| l.trim_start_matches("node/").to_string())
            .collect();
        assert_eq!(nodes.len(), 3, "{nodes:?}");
        // One Running, ready pod per server.
        let wide = ok(&["get", "pods", "-n", "kube-system", "-l", sel, "-o", "wide"]);
        assert_eq!(wide.lines().count(), 4, "{wide}");
        for n in &nodes {
            assert_eq!(
                wide.lines()
                    .filter(|l| l.starts_with("kube-vip-ds-")
                        && l.contains(" 1/1 ")
                        && l.contains("Running")
                        && l.split_whitespace().any(|w| w == n))
                    .count(),
                1,
                "{n}: {wide}"
            );
        }
        // The cilium DaemonSet and its pods are untouched by them.
        let cilium = ok(&[
            "get",
            "pods",
            "-n",
            "kube-system",
            "-l",
            "k8s-app=cilium",
            "-o",
            "name",
        ]);
        assert_eq!(cilium.lines().count(), 3, "{cilium}");
        let ds = ok(&["get", "ds", "-n", "kube-system"]);
        assert!(
            ds.lines()
                .any(|l| l.starts_with("kube-vip-ds ") && l.contains(" 3 ")),
            "{ds}"
        );
        let desired = ok(&[
            "get",
            "ds",
            "-n",
            "kube-system",
            "cilium",
            "-o",
            "jsonpath={.status.desiredNumberScheduled}/{.status.numberReady}",
        ]);
        assert_eq!(desired, "3/3");
        // The Lease's holder, and each node's kube-vip pod.
        let (lease, holder) = vip_lease(&kc);
        let pod_of = |node: &str| pod_on(&kc, sel, node);
        let leader_line = |n: &str| format!("Node [{n}] is assuming leadership of the cluster");
        let acquired = format!("successfully acquired lease kube-system/{lease}");
        let logs = ok(&["logs", "-n", "kube-system", &pod_of(&holder)]);
        assert!(logs.contains(&leader_line(&holder)), "{logs}");
        assert!(logs.contains(&acquired), "{logs}");
        // logrus' text format for kube-vip's own lines, klog's for client-go's.
        assert!(
            logs.lines()
                .any(|l| l.starts_with("time=\"") && l.contains("\" level=info msg=\"Node [")),
            "{logs}"
        );
        assert!(
            logs.lines()
                .any(|l| l.starts_with('I') && l.contains(" leaderelection.go:")),
            "{logs}"
        );
        let followers: Vec<&String> = nodes.iter().filter(|n| **n != holder).collect();
        for f in &followers {
            let l = ok(&["logs", "-n", "kube-system", &pod_of(f)]);
            assert!(l.contains(&leader_line(&holder)), "{f}: {l}");
            assert!(!l.contains(&acquired), "{f}: {l}");
            assert!(l.contains(&format!("id [{f}]")), "{f}: {l}");
        }
        // Follow one follower's log while the holder dies and the Lease moves.
        let follower_pod = pod_of(followers[1]);
        let follow = spawn_kubectl(&kc, &["logs", "-f", "-n", "kube-system", &follower_pod]);
        std::thread::sleep(Duration::from_millis(800));
        faults
            .inject("prod", "holder-dies")
            .unwrap_or_else(|e| panic!("inject: {e}"));
        let t0 = Instant::now();
        let new_holder = until(
            40,
            Duration::from_millis(500),
            &format!("the lease moving from {holder}"),
            || {
                let h = ok(&[
                    "get",
                    "lease",
                    "-n",
                    "kube-system",
                    &lease,
                    "-o",
                    "jsonpath={.spec.holderIdentity}",
                ]);
                (h != holder).then_some(h)
            },
        );
        println!(
            "kube-vip: lease moved {holder} -> {new_holder} in {:?}",
            t0.elapsed()
        );
        let logs = ok(&["logs", "-n", "kube-system", &pod_of(&new_holder)]);
        assert!(logs.contains(&leader_line(&new_holder)), "{logs}");
        assert!(logs.contains(&acquired), "{logs}");
        std::thread::sleep(Duration::from_millis(500));
        let seen = output_of(follow, false);
        assert!(seen.contains(&leader_line(&new_holder)), "{seen}");
        // The dead holder's kube-vip pod is no longer Ready.
        let ready = ok(&[
            "get",
            "pod",
            "-n",
            "kube-system",
            &pod_of(&holder),
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ]);
        assert_eq!(ready, "False");
        // rollout restart of kube-vip's DaemonSet rolls the live servers' pods.
        ok(&["rollout", "restart", "-n", "kube-system", "ds/kube-vip-ds"]);
        let gen2 = (0..40)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(250));
                ok(&[
                    "get",
                    "pods",
                    "-n",
                    "kube-system",
                    "-l",
                    "app.kubernetes.io/name=kube-vip-ds,pod-template-generation=2",
                    "-o",
                    "name",
                ])
            })
            .find(|o| o.lines().count() == 2)
            .unwrap_or_else(|| panic!("kube-vip-ds never rolled onto the two live servers"));
        assert_eq!(gen2.lines().count(), 2, "{gen2}");
        let cilium = ok(&[
            "get",
            "ds",
            "-n",
            "kube-system",
            "cilium",
            "-o",
            "jsonpath={.status.desiredNumberScheduled}/{.status.updatedNumberScheduled}",
        ]);
        assert_eq!(cilium, "3/3");
    })
    .await
    .expect("kubectl checks");
    drop(d);
}

/// The holder's k3s stops (a playbook's `systemctl stop k3s`, over OpenSSH): its kube-vip
/// logs that it cannot reach the API to renew, the Lease moves once it has run out, and the
/// old holder's kube-vip gives up leadership and restarts (its pod counts the restart).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_vip_logs_renew_failures_when_the_holders_k3s_stops() {
    let (_dir, d, kc) = healthy_demo().await;
    let addrs: std::collections::BTreeMap<String, std::net::SocketAddr> =
        d.nodes.iter().map(|(h, n)| (h.clone(), n.addr())).collect();
    let demo_dir = d.dir.clone();
    tokio::task::spawn_blocking(move || {
        let ok = |args: &[&str]| ok(&kc, args);
        let (lease, holder) = vip_lease(&kc);
        let node = addrs.get(&holder).expect("the holder's SSH node");
        let out = std::process::Command::new("ssh")
            .args([
                "-o",
                "BatchMode=yes",
                "-o",
                "StrictHostKeyChecking=yes",
                "-F",
                "/dev/null",
            ])
            .arg("-o")
            .arg(format!(
                "UserKnownHostsFile={}",
                demo_dir.join("known_hosts").display()
            ))
            .arg("-i")
            .arg(demo_dir.join(".ssh").join("demo_ed25519"))
            .args(["-p", &node.port().to_string()])
            .arg(format!("ops@{}", node.ip()))
            .arg("systemctl stop k3s")
            .output()
            .expect("ssh (install openssh-client)");
        assert!(out.status.success(), "{out:?}");
        let pod = pod_on(&kc, "app.kubernetes.io/name=kube-vip-ds", &holder);
        let t0 = Instant::now();
        let new_holder = until(
            40,
            Duration::from_millis(500),
            &format!("the lease leaving {holder}"),
            || {
                let (_, h) = vip_lease(&kc);
                (h != holder).then_some(h)
            },
        );
        println!(
            "kube-vip: {holder}'s k3s stopped; the lease went to {new_holder} after {:?}",
            t0.elapsed()
        );
        // The instance that lost leadership exited: its lines are the previous log; the
        // restarted one's log starts afresh.
        let current = ok(&["logs", "-n", "kube-system", &pod]);
        assert!(
            current.contains(&format!(
                "Node [{new_holder}] is assuming leadership of the cluster"
            )) && !current.contains("lost leadership"),
            "{current}"
        );
        let logs = ok(&["logs", "-n", "kube-system", &pod, "--previous"]);
        assert!(
            logs.lines().any(|l| l.starts_with('E')
                && l.contains(&format!(
                    "error retrieving resource lock kube-system/{lease}"
                ))
                && l.contains("connect: connection refused")),
            "{logs}"
        );
        assert!(
            logs.contains(&format!("failed to renew lease kube-system/{lease}")),
            "{logs}"
        );
        assert!(
            logs.contains("level=fatal msg=\"lost leadership, restarting kube-vip\""),
            "{logs}"
        );
        let restarts = ok(&[
            "get",
            "pod",
            "-n",
            "kube-system",
            &pod,
            "-o",
            "jsonpath={.status.containerStatuses[0].restartCount}",
        ]);
        assert_eq!(restarts, "1");
    })
    .await
    .expect("kubectl checks");
    drop(d);
}
