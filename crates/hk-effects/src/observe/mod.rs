//! Live observations of the running platform (VIP lease, cilium-agents, rollout, nodes, VPN
//! egress, etcd).
//!
//! Owns: [`feed`], the [`feed::Update`]s that live sources send on a channel to the UI (each
//! carries one pane of `checks::live`, judged); the VPN egress source over SSH ([`vpn`]);
//! the etcd members' look over SSH ([`etcd`]); the kube watchers of one environment
//! ([`watch`]) and one LIST of each for `observe --once` ([`once`]), both over `cluster`'s
//! client; starting the console's live sources ([`sources`]: the kube watchers, the VPN and
//! etcd pollers; [`ssh_look`]: the read-only SSH path the VPN and etcd looks share);
//! one look at every pane ([`snapshot`]); one look at what a gate's blast radius needs
//! ([`gate_look`]); the trail of what changed ([`timeline`]); every
//! environment at a glance with its next steps ([`summary`]); and the read-only looks a
//! next step opens ([`look`]: events, logs, describe).
//! Must not: know the terminal, or judge (the verdict rules are `checks::live`'s). Only
//! `vpn`, `etcd`, `watch`, `once`, `look`, `gate_look` and `sources` do IO over the network; `timeline` writes a run's
//! trail file.
pub mod etcd;
pub mod feed;
pub mod gate_look;
/// Kept here for the paths that name it: the helpers live in `crate::hostvar`.
pub use crate::hostvar;
pub mod look;
pub mod once;
pub mod snapshot;
pub mod sources;
pub mod ssh_look;
pub mod summary;
pub mod timeline;
pub mod vip_outage;
pub mod vpn;
pub mod watch;
