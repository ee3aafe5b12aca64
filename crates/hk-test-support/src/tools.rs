//! Where the tests find the real programs tests/run-all.sh builds or installs beside
//! Ansible (whose lookup is [`crate::ansible`]).

use std::path::PathBuf;

/// The real etcd, kube-apiserver and kubectl tests/apiserver/build.sh builds:
/// `$HK_APISERVER_BIN_DIR`, else `<root>/target/apiserver-bin`. Whether they are there is
/// for the caller to check (each says how to build what it misses).
pub fn apiserver_bin_dir() -> PathBuf {
    match std::env::var_os("HK_APISERVER_BIN_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => crate::root().join("target/apiserver-bin"),
    }
}
