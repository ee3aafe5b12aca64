//! Test harness shared by the tests that start the embedded demo (`sim::demo`) and reach it
//! with real clients: starting a scenario in a temp dir, the kubeconfig the demo wrote for an
//! environment, and the real kubectl run against a kubeconfig.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use hk_sim::demo;

/// The demo's `name` scenario in a fresh temp dir (kept alive by the returned handle).
pub async fn start(name: &str) -> (tempfile::TempDir, demo::Demo) {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = demo::start(name, dir.path())
        .await
        .unwrap_or_else(|e| panic!("demo {name}: {e}"));
    (dir, d)
}

/// The real kubectl that tests/apiserver/build.sh built beside kube-apiserver
/// ($HK_APISERVER_BIN_DIR, else target/apiserver-bin). Missing = FAIL with the build hint.
pub fn kubectl_bin() -> PathBuf {
    let dir = hk_test_support::tools::apiserver_bin_dir();
    let bin = dir.join("kubectl");
    assert!(
        bin.is_file(),
        "{} not found: run `bash tests/apiserver/build.sh` (it builds kubectl beside kube-apiserver)",
        bin.display()
    );
    bin
}

/// The kubeconfig the demo wrote for `env`'s cluster (under DIR/.cache).
pub fn kubeconfig(dir: &Path, env: &str) -> PathBuf {
    let cache = dir.join(".cache");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&cache)
        .unwrap_or_else(|e| panic!("{}: {e}", cache.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().contains(env))
        })
        .collect();
    found.sort();
    found
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no kubeconfig for {env} in {}", cache.display()))
}

/// `kubectl --kubeconfig KC --request-timeout 10s ARGS...`: stdout, stderr, exit code.
pub fn kubectl(kc: &Path, args: &[&str]) -> (String, String, Option<i32>) {
    let out = Command::new(kubectl_bin())
        .arg("--kubeconfig")
        .arg(kc)
        .args(["--request-timeout", "10s"])
        .args(args)
        .output()
        .expect("run kubectl");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}

/// A kube client on `env`'s API server in the demo `d`, as the demo's kubeconfig reaches it.
pub async fn client(d: &demo::Demo, env: &str) -> kube::Client {
    let target = hk_effects::cluster::kube_target(
        &d.repo,
        env,
        &hk_effects::cluster::KubeOverrides::default(),
    )
    .unwrap_or_else(|e| panic!("{env}'s kubeconfig in the demo: {e}"));
    hk_effects::cluster::client(&target)
        .await
        .unwrap_or_else(|e| panic!("{env}'s client: {e}"))
}

/// Which API server a demo runs its simulated controllers on: the built-in one, or a real
/// kube-apiserver and etcd (`demo --apiserver DIR`). Tests that hold in both run once per mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    BuiltIn,
    Real,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::BuiltIn => "built-in API server",
            Mode::Real => "--apiserver",
        })
    }
}

/// The directory holding the real etcd, kube-apiserver and kubectl that
/// tests/apiserver/build.sh built ($HK_APISERVER_BIN_DIR, else target/apiserver-bin).
/// Missing = FAIL with the build hint, never a skip.
pub fn apiserver_bin_dir() -> PathBuf {
    let dir = hk_test_support::tools::apiserver_bin_dir();
    for b in ["etcd", "kube-apiserver", "kubectl"] {
        assert!(
            dir.join(b).is_file(),
            "{} not found: set HK_APISERVER_BIN_DIR or run `bash tests/apiserver/build.sh`",
            dir.join(b).display()
        );
    }
    dir
}

/// Real demos alive at once in one test binary: each is an etcd and two kube-apiservers
/// (several hundred MB and a burst of CPU at start), on a 2-core machine.
static REAL_DEMOS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

/// A place among [`REAL_DEMOS`] for a real demo started some other way (the binary with
/// `--apiserver`): held until dropped.
pub async fn real_demo_slot() -> tokio::sync::SemaphorePermit<'static> {
    REAL_DEMOS
        .acquire()
        .await
        .expect("the semaphore is never closed")
}

/// A demo's temp dir, and in [`Mode::Real`] its place among [`REAL_DEMOS`], both held until
/// dropped (after the demo: declare the demo after this).
pub struct DemoDir {
    tmp: tempfile::TempDir,
    _slot: Option<tokio::sync::SemaphorePermit<'static>>,
}

impl DemoDir {
    pub fn path(&self) -> &Path {
        self.tmp.path()
    }
}

/// The demo's `scenario` in `mode`, its repo under a fresh temp dir's `repo`.
pub async fn start_in(mode: Mode, scenario: &str) -> (DemoDir, demo::Demo) {
    let (slot, bins) = match mode {
        Mode::BuiltIn => (None, None),
        Mode::Real => {
            let bins = apiserver_bin_dir();
            (Some(real_demo_slot().await), Some(bins))
        }
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let t0 = std::time::Instant::now();
    let d = demo::start_with(scenario, &tmp.path().join("repo"), None, bins.as_deref())
        .await
        .unwrap_or_else(|e| panic!("demo {scenario} ({mode}): {e}"));
    eprintln!("demo {scenario} ({mode}) started in {:?}", t0.elapsed());
    match mode {
        Mode::BuiltIn => assert!(d.real.is_none() && !d.kubes.is_empty()),
        Mode::Real => assert!(d.real.is_some() && d.kubes.is_empty(), "no built-in server"),
    }
    (DemoDir { tmp, _slot: slot }, d)
}

/// One environment's cluster as the simulated controllers write it, through the interface
/// both modes share: the built-in server's store, or a kube client on the real server.
pub enum Cluster {
    BuiltIn(hk_sim::kube::Store),
    Real(hk_sim::kube::api::KubeApi),
}

/// `env`'s cluster in `d`, whichever mode it runs in.
pub fn cluster(d: &demo::Demo, env: &str) -> Cluster {
    match &d.real {
        Some(real) => Cluster::Real(hk_sim::kube::api::KubeApi::new(
            real.servers
                .get(env)
                .unwrap_or_else(|| panic!("no real API server for {env}"))
                .client(),
        )),
        None => Cluster::BuiltIn(
            d.kubes
                .get(env)
                .unwrap_or_else(|| panic!("no built-in API server for {env}"))
                .store()
                .clone(),
        ),
    }
}

impl Cluster {
    /// Every object of a kind (in `namespace`, or everywhere).
    pub async fn objects(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Vec<serde_json::Value> {
        use hk_sim::kube::api::ClusterApi;
        match self {
            Cluster::BuiltIn(s) => ClusterApi::objects(s, api_version, kind, namespace).await,
            Cluster::Real(k) => k.objects(api_version, kind, namespace).await,
        }
        .unwrap_or_else(|e| panic!("list {api_version} {kind} in {namespace:?}: {e}"))
    }

    /// Merge-patch an object's status, as a kubelet or controller would.
    pub async fn patch_status(
        &self,
        r: &hk_sim::kube::ObjRef,
        status: serde_json::Value,
    ) -> serde_json::Value {
        use hk_sim::kube::api::ClusterApi;
        match self {
            Cluster::BuiltIn(s) => ClusterApi::patch_status(s, r, status).await,
            Cluster::Real(k) => k.patch_status(r, status).await,
        }
        .unwrap_or_else(|e| panic!("patch {r} status: {e}"))
    }
}

/// The processes whose command line mentions `needle` (a demo's directory).
pub fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) {
            out.push(format!("{name}: {cmd}"));
        }
    }
    out
}

/// Polls `f` every 200 ms until it answers `Some`, for at most `secs`; then fails naming `what`.
pub fn until<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = std::time::Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(secs),
            "{what} within {secs} s"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// `from` copied to `to`, every file and directory (a fixture repo into a test's own dir).
#[allow(dead_code)]
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir").flatten() {
        let (s, d) = (e.path(), to.join(e.file_name()));
        if e.file_type().expect("type").is_dir() {
            copy_tree(&s, &d);
        } else {
            std::fs::copy(&s, &d).expect("copy");
        }
    }
}
