//! Live observations of the running platform (VIP lease, cilium-agents, rollout, nodes, VPN
//! egress).
//!
//! Owns: [`feed`], the [`feed::Update`]s that live sources send on a channel to the UI (each
//! carries one pane of `checks::live`, judged); the VPN egress source over SSH ([`vpn`]);
//! starting the console's live sources ([`sources`]: the kube watchers, which are
//! `cluster::watch`'s, and the VPN poller); and one look at every pane ([`snapshot`]).
//! Must not: know the terminal, or judge (the verdict rules are `checks::live`'s).
pub mod feed;
pub mod snapshot;
pub mod sources;
pub mod vpn;
