//! Live observations of the running platform (VIP lease, cilium-agents, rollout, nodes, VPN
//! egress).
//!
//! Owns: [`feed`], the [`feed::Update`]s that live sources send on a channel to the UI (each
//! carries one pane of `checks::live`, judged), and the VPN egress source over SSH
//! ([`vpn`]), the etcd members' look over SSH ([`etcd`]); the kube sources are `cluster`'s.
//! Must not: know the terminal, or judge (the verdict rules are `checks::live`'s). Only
//! `vpn` and `etcd` do IO.
pub mod etcd;
pub mod feed;
pub mod vpn;
