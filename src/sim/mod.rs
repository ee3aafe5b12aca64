//! The embedded simulated homelab: what `hk-console demo` and the end-to-end tests run
//! against, reached through the console's real clients over loopback.
//!
//! Owns: the simulated parts, one module each ([`kube`]: the Kubernetes API server).
//! Must not: listen on or send to anything outside 127.0.0.0/8.

pub mod kube;
