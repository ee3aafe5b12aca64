//! Live observations of the running platform (VIP lease, cilium-agent env, VPN egress).
//!
//! Owns: the typed [`types::Observation`]s that live sources send on a channel to the UI.
//! The sources themselves (kube API, SSH, TCP probes) come in another issue; this module
//! holds only the vocabulary they and the UI share.
//! Must not: do IO or know the terminal.
pub mod feed;
pub mod types;
pub mod vpn;
