//! `kubectl apply` as an operator types it, client-side and `--server-side`, with field
//! ownership: ONE sequence of real kubectl commands run against the demo's built-in API
//! server and against the demo on a real kube-apiserver (`demo --apiserver`), which must
//! give the same exit codes, the same conflict text and the same field managers.
//! The sequence: client-side apply then server-side apply (kubectl's upgrade of the
//! client-side fields), a conflict with `kubectl create`'s field, `--force-conflicts`, an
//! apply that stops applying a field (it goes), and a conflict with a field the
//! simulation's own controller manages (the kube-vip Lease's duration).
//! Needs kubectl, kube-apiserver and etcd in $HK_APISERVER_BIN_DIR: missing = FAIL with the
//! hint, never a skip.

use crate::demo_common;

use std::path::{Path, PathBuf};

use demo_common::kubectl;
use serde_json::Value;

/// What one step gave: its exit code and the text the comparison uses.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Step {
    what: String,
    code: Option<i32>,
    text: String,
}

/// Each managedFields entry whole (its fields, whether it has a time), in the server's order.
fn entries(obj: &Value) -> String {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|e| {
                    format!(
                        "{} {} {} {} timed={}",
                        managers(&serde_json::json!({"metadata": {"managedFields": [e]}})).join(""),
                        e["apiVersion"],
                        e["fieldsType"],
                        e["fieldsV1"],
                        e.get("time").is_some()
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// `(manager, operation, subresource)` of each managedFields entry, in the server's order.
fn managers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|e| {
                    format!(
                        "{}/{}{}",
                        e["manager"].as_str().unwrap_or(""),
                        e["operation"].as_str().unwrap_or(""),
                        e["subresource"]
                            .as_str()
                            .map(|s| format!("/{s}"))
                            .unwrap_or_default()
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn configmap(name: &str, data: &[(&str, &str)]) -> String {
    let mut y = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: scratch\ndata:\n"
    );
    for (k, v) in data {
        y.push_str(&format!("  {k}: \"{v}\"\n"));
    }
    y
}

/// A kubectl run: (step, args) to (stdout, stderr, exit code).
type Run<'a> = dyn FnMut(&str, &[&str]) -> (String, String, Option<i32>) + 'a;

/// The sequence, against the cluster `kc` reaches; files written under `work`.
fn sequence(kc: &Path, work: &Path) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut run = |_step: &str, args: &[&str]| -> (String, String, Option<i32>) {
        let (out, err, code) = kubectl(kc, args);
        eprintln!("$ kubectl {}\n{out}{err}(exit {code:?})", args.join(" "));
        (out, err, code)
    };
    let file = |name: &str, text: &str| -> String {
        let p = work.join(name);
        std::fs::write(&p, text).expect("write manifest");
        p.to_string_lossy().into_owned()
    };
    let record = |steps: &mut Vec<Step>, what: &str, code: Option<i32>, text: String| {
        steps.push(Step {
            what: what.to_string(),
            code,
            text,
        });
    };
    let get = |run: &mut Run<'_>, args: &[&str]| -> Value {
        let mut a = vec!["get"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["-o", "json", "--show-managed-fields"]);
        let (out, err, code) = run("get", &a);
        assert_eq!(code, Some(0), "kubectl get {args:?}: {err}");
        serde_json::from_str(&out).expect("kubectl get -o json")
    };

    let (out, err, code) = run("create ns", &["create", "ns", "scratch"]);
    assert_eq!(code, Some(0), "{err}");
    record(&mut steps, "create ns", code, out);

    // Client-side apply creates; server-side apply of the same takes the fields over.
    let cm1 = file("note-1.yaml", &configmap("note", &[("a", "1")]));
    let (out, err, code) = run("csa", &["apply", "-f", &cm1]);
    assert_eq!(
        (out.as_str(), code),
        ("configmap/note created\n", Some(0)),
        "{err}"
    );
    record(&mut steps, "csa create", code, out);
    let (out, err, code) = run("ssa", &["apply", "--server-side", "-f", &cm1]);
    assert_eq!(
        (out.as_str(), code),
        ("configmap/note serverside-applied\n", Some(0)),
        "{err}"
    );
    record(&mut steps, "ssa after csa", code, out);
    let cm2 = file("note-2.yaml", &configmap("note", &[("a", "2")]));
    let (out, err, code) = run("ssa", &["apply", "--server-side", "-f", &cm2]);
    assert_eq!(
        (out.as_str(), code),
        ("configmap/note serverside-applied\n", Some(0)),
        "{err}"
    );
    record(&mut steps, "ssa changes a", code, out);
    let note = get(&mut run, &["cm", "note", "-n", "scratch"]);
    assert_eq!(note["data"]["a"], "2", "{note}");
    let m = managers(&note);
    assert_eq!(m, ["kubectl-last-applied/Apply", "kubectl/Apply"], "{note}");
    record(&mut steps, "note managers", None, entries(&note));
    // kubectl hides managedFields unless asked.
    let (out, _, code) = run("get", &["get", "cm", "note", "-n", "scratch", "-o", "yaml"]);
    assert!(!out.contains("managedFields"), "{out}");
    record(&mut steps, "hidden", code, String::new());

    // A field `kubectl create` set: a conflict, the real server's words.
    let (out, err, code) = run(
        "create cm",
        &[
            "create",
            "cm",
            "other",
            "-n",
            "scratch",
            "--from-literal=a=1",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    record(&mut steps, "create cm", code, out);
    let other5 = file("other-5.yaml", &configmap("other", &[("a", "5")]));
    let (out, err, code) = run("ssa conflict", &["apply", "--server-side", "-f", &other5]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.contains(
            "Apply failed with 1 conflict: conflict with \"kubectl-create\" using v1: .data.a"
        ),
        "{err}"
    );
    assert!(err.contains("--force-conflicts"), "{err}");
    record(&mut steps, "ssa conflict", code, err);
    let other = get(&mut run, &["cm", "other", "-n", "scratch"]);
    assert_eq!(other["data"]["a"], "1", "a refused apply changes nothing");
    record(&mut steps, "other managers", None, entries(&other));

    // Forced, it applies and takes the field.
    let (out, err, code) = run(
        "ssa forced",
        &["apply", "--server-side", "--force-conflicts", "-f", &other5],
    );
    assert_eq!(
        (out.as_str(), code),
        ("configmap/other serverside-applied\n", Some(0)),
        "{err}"
    );
    record(&mut steps, "ssa forced", code, out);
    let other = get(&mut run, &["cm", "other", "-n", "scratch"]);
    assert_eq!(other["data"]["a"], "5");
    record(&mut steps, "forced managers", None, entries(&other));

    // A field the applier stops applying, owned by nobody else, goes.
    let both = file(
        "other-b.yaml",
        &configmap("other", &[("a", "5"), ("b", "x")]),
    );
    let (out, err, code) = run("ssa adds b", &["apply", "--server-side", "-f", &both]);
    assert_eq!(code, Some(0), "{err}");
    record(&mut steps, "ssa adds b", code, out);
    let (out, err, code) = run("ssa drops b", &["apply", "--server-side", "-f", &other5]);
    assert_eq!(code, Some(0), "{err}");
    record(&mut steps, "ssa drops b", code, out);
    let other = get(&mut run, &["cm", "other", "-n", "scratch"]);
    assert_eq!(other["data"], serde_json::json!({"a": "5"}), "{other}");
    record(&mut steps, "dropped data", None, other["data"].to_string());
    record(&mut steps, "dropped managers", None, entries(&other));

    // A field the simulation's kube-vip manages: its forced applies own it.
    let leases = get(&mut run, &["leases", "-n", "kube-system"]);
    let lease = leases["items"]
        .as_array()
        .and_then(|a| {
            a.iter().find(|l| {
                managers(l).iter().any(|m| m == "hk-console-sim/Apply")
                    && l.pointer("/spec/leaseDurationSeconds").is_some()
            })
        })
        .unwrap_or_else(|| panic!("no Lease applied by hk-console-sim: {leases}"));
    let name = lease["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();
    let duration = lease["spec"]["leaseDurationSeconds"]
        .as_i64()
        .expect("duration");
    let manifest = file(
        "lease.yaml",
        &format!(
            "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: {name}\n  namespace: kube-system\nspec:\n  leaseDurationSeconds: {}\n",
            duration + 7
        ),
    );
    let (out, err, code) = run(
        "ssa sim conflict",
        &["apply", "--server-side", "-f", &manifest],
    );
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.contains(
            "Apply failed with 1 conflict: conflict with \"hk-console-sim\": .spec.leaseDurationSeconds"
        ),
        "{err}"
    );
    record(&mut steps, "ssa sim conflict", code, err);

    // Through a keyed list: the agent container's image, which the simulation's DaemonSet
    // controller applies.
    let ds = get(&mut run, &["ds", "cilium", "-n", "kube-system"]);
    let container = ds
        .pointer("/spec/template/spec/containers/0/name")
        .and_then(Value::as_str)
        .expect("a container")
        .to_string();
    let manifest = file(
        "ds.yaml",
        &format!(
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: cilium\n  namespace: kube-system\nspec:\n  selector:\n    matchLabels:\n      k8s-app: cilium\n  template:\n    metadata:\n      labels:\n        k8s-app: cilium\n    spec:\n      containers:\n      - name: {container}\n        image: example.invalid/cilium:rehearsal\n"
        ),
    );
    let (out, err, code) = run(
        "ssa list conflict",
        &["apply", "--server-side", "-f", &manifest],
    );
    assert_eq!(code, Some(1), "{out}{err}");
    let want = format!(
        "Apply failed with 1 conflict: conflict with \"hk-console-sim\": .spec.template.spec.containers[name=\"{container}\"].image"
    );
    assert!(err.contains(&want), "{err}");
    record(&mut steps, "ssa list conflict", code, err);
    steps
}

async fn run_against(kc: PathBuf, work: PathBuf) -> Vec<Step> {
    tokio::task::spawn_blocking(move || sequence(&kc, &work))
        .await
        .expect("the kubectl sequence")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_on_the_simulation_answers_as_the_real_apiserver() {
    let bin = demo_common::apiserver_bin_dir();
    demo_common::kubectl_bin();

    let tmp = tempfile::tempdir().expect("tempdir");
    let sim_dir = tmp.path().join("sim");
    let sim_work = tmp.path().join("sim-work");
    std::fs::create_dir_all(&sim_work).expect("mkdir");
    let d = hk_sim::demo::start("healthy", &sim_dir)
        .await
        .unwrap_or_else(|e| panic!("demo: {e}"));
    let sim = run_against(demo_common::kubeconfig(&sim_dir, "prod"), sim_work).await;
    drop(d);

    let real_dir = tmp.path().join("real");
    let real_work = tmp.path().join("real-work");
    std::fs::create_dir_all(&real_work).expect("mkdir");
    let d = hk_sim::demo::start_with("healthy", &real_dir, None, Some(&bin))
        .await
        .unwrap_or_else(|e| panic!("demo --apiserver: {e}"));
    let real = run_against(demo_common::kubeconfig(&real_dir, "prod"), real_work).await;
    drop(d);

    assert_eq!(sim.len(), real.len());
    for (s, r) in sim.iter().zip(&real) {
        assert_eq!(
            s, r,
            "the simulation (left) and the real kube-apiserver (right) differ"
        );
    }
}
