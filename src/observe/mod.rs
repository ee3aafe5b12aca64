//! Live observations of the running platform (VIP lease, cilium-agents, rollout, nodes, VPN
//! egress).
//!
//! Owns: [`feed`], the [`feed::Update`]s that live sources send on a channel to the UI (each
//! carries one pane of `checks::live`, judged). The sources themselves (kube watchers, the
//! VPN look over SSH) fill them.
//! Must not: know the terminal, or judge (the verdict rules are `checks::live`'s).
pub mod feed;
