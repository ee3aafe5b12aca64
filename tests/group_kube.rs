//! Test group `kube`: The kube client, watchers and steps against a real kube-apiserver and etcd.
//!
//! One binary for these files (Cargo.toml: `autotests = false`): one link instead of one
//! per file, and their tests share the binary's threads. Each file stays a module under
//! its own name (`kube::FILE::test`).

#[path = "kube_apiserver.rs"]
mod kube_apiserver;
#[path = "kube_flux_preview.rs"]
mod kube_flux_preview;
#[path = "kube_observe.rs"]
mod kube_observe;
#[path = "kube_wait.rs"]
mod kube_wait;
#[path = "kube_watch.rs"]
mod kube_watch;

// The helpers the files share, once for the binary (each file `use crate::...`s them).
mod support;
