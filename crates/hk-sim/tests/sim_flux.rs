//! The operator's real Flux CLI (flux v2.9.5, built by tests/flux/build.sh into
//! $HK_FLUX_BIN_DIR) against the demo, as the operator uses it during a rollout: `get`,
//! `diff kustomization` (a local build and a server-side dry-run apply), `reconcile`,
//! `suspend`/`resume` (resume waits for the controller to report Ready for the new
//! generation), `tree` (the Kustomization's `.status.inventory`) and `events` (the
//! controllers' Events, with `--for`). One demo per mode, the commands in sequence: on the
//! built-in API server, then on `demo --apiserver` (a REAL kube-apiserver under the same
//! simulated controllers), with the same answers. Scenario agents-on-node-ip: prod's release
//! runs the founder's address, the repo says the VIP, so the diff has something to show and
//! the reconcile a Helm upgrade to report.
//! Missing flux = FAIL with the build hint; missing etcd/kube-apiserver/kubectl
//! ($HK_APISERVER_BIN_DIR) = FAIL with theirs. Never a skip.

use crate::demo_common::{self, Mode};
use crate::support;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// One flux run: stdout, stderr (its ► ✔ ✗ lines), exit code.
#[derive(Debug)]
struct Ran {
    out: String,
    err: String,
    code: Option<i32>,
}

impl Ran {
    fn text(&self) -> String {
        format!("{}{}", self.out, self.err)
    }
}

/// `flux --kubeconfig KC ARGS...` with its own HOME (never the operator's), no colour.
fn flux(home: &Path, kc: &Path, args: &[&str]) -> Ran {
    let out = Command::new(support::flux_bin())
        .arg("--kubeconfig")
        .arg(kc)
        .args(["--timeout", "60s"])
        .args(args)
        .env("HOME", home)
        .env("NO_COLOR", "1")
        .output()
        .expect("run flux");
    let r = Ran {
        out: String::from_utf8_lossy(&out.stdout).into_owned(),
        err: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code(),
    };
    eprintln!(
        "$ flux {}\n{}{}(exit {:?})",
        args.join(" "),
        r.out,
        r.err,
        r.code
    );
    r
}

fn ok(r: &Ran, what: &str) {
    assert_eq!(r.code, Some(0), "{what}: {}", r.text());
}

fn get_json(kc: &Path, args: &[&str]) -> Value {
    let mut a = vec!["get"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-o", "json"]);
    let (out, err, code) = demo_common::kubectl(kc, &a);
    assert_eq!(code, Some(0), "kubectl get {args:?}: {err}");
    serde_json::from_str(&out).expect("kubectl -o json")
}

/// The lines of `flux diff` that tell the change, without the spinner and timing noise.
fn diff_lines(r: &Ran) -> Vec<String> {
    r.out
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// The sequence against the demo in `dir` (its repo copy and kubeconfigs); returns what the
/// two modes must agree on: the diff before and after the reconcile, and the tree.
fn sequence(dir: &Path, home: &Path) -> Vec<Vec<String>> {
    let kc = demo_common::kubeconfig(dir, "prod");
    let platform = dir.join("platform");
    let platform = platform.to_str().expect("utf-8 path");

    // get: the repo's Kustomization and release, Ready.
    let r = flux(home, &kc, &["get", "ks", "-A"]);
    ok(&r, "get ks");
    assert!(
        r.out.contains("platform") && r.out.contains("True"),
        "{}",
        r.text()
    );
    let r = flux(home, &kc, &["get", "hr", "-n", "kube-system"]);
    ok(&r, "get hr");
    assert!(
        r.out.contains("cilium") && r.out.contains("True"),
        "{}",
        r.text()
    );

    // What the release runs now, and what the repo renders (the overlay's substitution).
    let hr = get_json(&kc, &["hr", "cilium", "-n", "kube-system"]);
    let running = hr["spec"]["values"]["k8sServiceHost"]
        .as_str()
        .expect("k8sServiceHost")
        .to_string();
    let ks = get_json(&kc, &["ks", "platform", "-n", "flux-system"]);
    let rendered = ks["spec"]["postBuild"]["substitute"]["K3S_API_HOST"]
        .as_str()
        .expect("K3S_API_HOST")
        .to_string();
    assert_ne!(running, rendered, "the scenario runs the founder's address");

    // diff: built locally, dry-run applied server-side: the release drifted, by that value.
    let args = [
        "diff",
        "ks",
        "platform",
        "-n",
        "flux-system",
        "--path",
        platform,
        "--progress-bar=false",
    ];
    let before = flux(home, &kc, &args);
    assert_eq!(before.code, Some(1), "differences found: {}", before.text());
    let text = before.out.clone();
    assert!(
        text.contains("HelmRelease/kube-system/cilium drifted"),
        "{}",
        before.text()
    );
    assert!(text.contains("spec.values.k8sServiceHost"), "{text}");
    assert!(
        text.contains(&format!("- {running}")) && text.contains(&format!("+ {rendered}")),
        "{text}"
    );
    // Nothing was stored by the dry run.
    let hr_after = get_json(&kc, &["hr", "cilium", "-n", "kube-system"]);
    assert_eq!(
        hr_after["spec"]["values"]["k8sServiceHost"],
        running.as_str()
    );
    assert_eq!(
        hr_after["metadata"]["resourceVersion"],
        hr["metadata"]["resourceVersion"]
    );

    // While the release is suspended, reconciling the Kustomization upgrades nothing: the
    // drift stays.
    ok(
        &flux(home, &kc, &["suspend", "hr", "cilium", "-n", "kube-system"]),
        "suspend hr",
    );
    let r = flux(
        home,
        &kc,
        &["reconcile", "ks", "platform", "-n", "flux-system"],
    );
    ok(&r, "reconcile ks, release suspended");
    let still = flux(home, &kc, &args);
    assert_eq!(still.code, Some(1), "{}", still.text());
    ok(
        &flux(home, &kc, &["resume", "hr", "cilium", "-n", "kube-system"]),
        "resume hr",
    );

    // reconcile the Kustomization: it applies the repo's release (the drift corrected),
    // then helm-controller upgrades it; the diff has nothing left to show.
    let r = flux(
        home,
        &kc,
        &["reconcile", "ks", "platform", "-n", "flux-system"],
    );
    ok(&r, "reconcile ks");
    assert!(r.err.contains("annotated"), "{}", r.text());
    let hr = get_json(&kc, &["hr", "cilium", "-n", "kube-system"]);
    assert_eq!(hr["spec"]["values"]["k8sServiceHost"], rendered.as_str());
    let after = flux(home, &kc, &args);
    assert_eq!(after.code, Some(0), "no differences: {}", after.text());
    assert!(!after.out.contains("drifted"), "{}", after.text());
    // reconcile the release: in sync now, handled without another upgrade.
    let r = flux(
        home,
        &kc,
        &["reconcile", "hr", "cilium", "-n", "kube-system"],
    );
    ok(&r, "reconcile hr");
    let hr = get_json(&kc, &["hr", "cilium", "-n", "kube-system"]);

    // suspend / resume, a HelmRelease and a Kustomization: resume waits for the controller
    // to report Ready for the generation the resume made.
    for (kind, name, ns) in [
        ("hr", "cilium", "kube-system"),
        ("ks", "platform", "flux-system"),
    ] {
        let r = flux(home, &kc, &["suspend", kind, name, "-n", ns]);
        ok(&r, "suspend");
        let r = flux(home, &kc, &["get", kind, name, "-n", ns]);
        ok(&r, "get suspended");
        let row = r.out.lines().nth(1).unwrap_or("");
        assert!(row.contains("True"), "SUSPENDED True: {}", r.text());
        // A suspended object is not reconciled: the CLI refuses, the controller would skip.
        let r = flux(home, &kc, &["reconcile", kind, name, "-n", ns]);
        assert_ne!(r.code, Some(0), "{}", r.text());
        assert!(r.text().contains("resource is suspended"), "{}", r.text());
        let r = flux(home, &kc, &["resume", kind, name, "-n", ns]);
        ok(&r, "resume");
        assert!(
            r.err.contains("reconciliation completed"),
            "{kind} {name}: {}",
            r.text()
        );
        let obj = get_json(&kc, &[kind, name, "-n", ns]);
        assert_eq!(
            obj["status"]["observedGeneration"], obj["metadata"]["generation"],
            "{obj}"
        );
    }

    // tree: the Kustomization's inventory.
    let tree = flux(home, &kc, &["tree", "ks", "platform", "-n", "flux-system"]);
    ok(&tree, "tree");
    assert!(
        tree.out.contains("HelmRelease/kube-system/cilium"),
        "{}",
        tree.text()
    );

    // events: the controllers' own, for every Flux object and per object.
    let r = flux(home, &kc, &["events", "-A"]);
    ok(&r, "events -A");
    for want in [
        "Progressing",
        "HelmRelease/kube-system/cilium configured",
        "ReconciliationSucceeded",
        "Kustomization/platform",
        "Reconciliation finished in",
        "next run in 10m0s",
        "UpgradeSucceeded",
        "HelmRelease/cilium",
        "Helm upgrade succeeded for release kube-system/cilium.v2 with chart cilium@",
    ] {
        assert!(r.out.contains(want), "{want}: {}", r.text());
    }
    let r = flux(
        home,
        &kc,
        &["events", "--for", "HelmRelease/cilium", "-n", "kube-system"],
    );
    ok(&r, "events --for hr");
    assert!(r.out.contains("UpgradeSucceeded"), "{}", r.text());
    assert!(!r.out.contains("Kustomization/"), "{}", r.text());
    let r = flux(
        home,
        &kc,
        &[
            "events",
            "--for",
            "Kustomization/platform",
            "-n",
            "flux-system",
        ],
    );
    ok(&r, "events --for ks");
    assert!(r.out.contains("ReconciliationSucceeded"), "{}", r.text());
    // No row about the release (the configured message names it, the OBJECT column not).
    assert!(!r.out.contains("HelmRelease/cilium"), "{}", r.text());
    assert!(
        r.out.contains("HelmRelease/kube-system/cilium configured"),
        "{}",
        r.text()
    );
    // Their Event objects as the controllers' recorder writes them.
    let evs = get_json(&kc, &["events", "-n", "kube-system"]);
    let upgrade = evs["items"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["reason"] == "UpgradeSucceeded"))
        .unwrap_or_else(|| panic!("no UpgradeSucceeded event: {evs}"));
    assert_eq!(
        upgrade["reportingComponent"], "helm-controller",
        "{upgrade}"
    );
    assert_eq!(
        upgrade["source"]["component"], "helm-controller",
        "{upgrade}"
    );
    assert_eq!(
        upgrade["involvedObject"]["kind"], "HelmRelease",
        "{upgrade}"
    );
    assert_eq!(
        upgrade["involvedObject"]["uid"], hr["metadata"]["uid"],
        "{upgrade}"
    );
    // One upgrade: the release's own reconcile found it in sync.
    let upgrades = evs["items"].as_array().map_or(0, |a| {
        a.iter()
            .filter(|e| e["reason"] == "UpgradeSucceeded")
            .count()
    });
    assert_eq!(
        (upgrades, &upgrade["count"]),
        (1, &serde_json::json!(1)),
        "{evs}"
    );

    let evs = get_json(&kc, &["events", "-n", "flux-system"]);
    let finished = evs["items"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["reason"] == "ReconciliationSucceeded"))
        .unwrap_or_else(|| panic!("no ReconciliationSucceeded event: {evs}"));
    assert_eq!(
        finished["reportingComponent"], "kustomize-controller",
        "{finished}"
    );
    assert_eq!(
        finished["metadata"]["annotations"]["kustomize.toolkit.fluxcd.io/revision"],
        ks["status"]["lastAppliedRevision"],
        "{finished}"
    );

    // A spec change the simulation cannot play (not suspend): never reported reconciled.
    let (_, err, code) = demo_common::kubectl(
        &kc,
        &[
            "patch",
            "ks",
            "platform",
            "-n",
            "flux-system",
            "--type=merge",
            "-p",
            r#"{"spec":{"interval":"5m"}}"#,
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let row = loop {
        let r = flux(home, &kc, &["get", "ks", "platform", "-n", "flux-system"]);
        let row = r.out.lines().nth(1).unwrap_or("").to_string();
        if row.contains("Unknown") || std::time::Instant::now() > deadline {
            break row;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert!(
        row.contains("Unknown") && row.contains("not simulated"),
        "{row}"
    );

    vec![diff_lines(&before), diff_lines(&after), diff_lines(&tree)]
}

async fn run_in(mode: Mode) -> Vec<Vec<String>> {
    let (dir, d) = demo_common::start_in(mode, "agents-on-node-ip").await;
    let home = tempfile::tempdir().expect("home");
    let demo_dir = d.dir.clone();
    let home_dir = home.path().to_path_buf();
    let seen = tokio::task::spawn_blocking(move || sequence(&demo_dir, &home_dir))
        .await
        .expect("the flux sequence");
    drop(d);
    drop(dir);
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flux_cli_answers_on_both_api_servers_as_against_flux_controllers() {
    support::flux_bin();
    demo_common::apiserver_bin_dir();
    let built_in = run_in(Mode::BuiltIn).await;
    let real = run_in(Mode::Real).await;
    // The same demo repo on the same loopback plan: the same diff, byte for byte (the
    // real server's dry run bumps the generation too), and the same tree.
    assert_eq!(
        built_in, real,
        "the built-in server (left) and the real kube-apiserver (right) differ"
    );
}
