//! Live observations of the running platform (VIP lease, cilium-agents, rollout, nodes, VPN
//! egress).
//!
//! Owns: [`feed`], the [`feed::Update`]s that live sources send on a channel to the UI (each
//! carries one pane of `checks::live`, judged), and the VPN egress source over SSH
//! ([`vpn`]), the etcd members' look over SSH ([`etcd`]), and the trail of what changed
//! ([`timeline`]), and every environment at a glance with its next steps ([`summary`]);
//! the read-only looks a next step opens ([`look`]: events, logs, describe); the kube
//! sources are `cluster`'s.
//! Must not: know the terminal, or judge (the verdict rules are `checks::live`'s). Only
//! `vpn`, `etcd` and `look` do IO over the network; `timeline` writes a run's trail file.
pub mod etcd;
pub mod feed;
pub mod look;
pub mod summary;
pub mod timeline;
pub mod vpn;
