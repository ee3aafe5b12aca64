//! Live observations of the running platform (VIP lease, cilium-agent env, VPN egress).
//!
//! Owns: the typed observations live sources send on a channel to the UI ([`types`],
//! [`feed`]) and the VPN egress source over SSH ([`vpn`]); the kube sources are `cluster`'s.
//! Must not: judge (`checks::live` does) or know the terminal. Only `vpn` does IO.
pub mod feed;
pub mod types;
pub mod vpn;
