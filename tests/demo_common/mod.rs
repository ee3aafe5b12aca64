//! Test harness shared by the tests that start the embedded demo (`sim::demo`) and reach it
//! with real clients: starting a scenario in a temp dir, the kubeconfig the demo wrote for an
//! environment, and the real kubectl run against a kubeconfig.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use hk_console::sim::demo;

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
    let dir = std::env::var_os("HK_APISERVER_BIN_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/apiserver-bin"));
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
