//! VPN egress rules: per gateway (service state, exit IP through and around the tunnel,
//! flapping) and across gateways (the eviction loop: same server and same tunnel address).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::{
    clock, could_not, human_ms,
    journald::{parse_journal, PeerAddr, TunnelAddr},
    Look, Pane, Rule, Severity, Timestamp, Verdict,
};

/// What was seen on one gateway host. The service name and interface are the ones used (from
/// hostvars), carried for messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayObs {
    pub env: String,
    pub host: String,
    pub service: String,
    pub interface: String,
    /// systemd ActiveState (`active`, `inactive`, `failed`, `activating`...).
    pub active_state: Look<String>,
    /// Exit IP through the tunnel interface, or the probe's error.
    pub tunnel_exit: Look<Result<IpAddr, String>>,
    /// Exit IP without it (the home ISP's), or the probe's error.
    pub direct_exit: Look<Result<IpAddr, String>>,
    /// The unit's journal lines over the window, `journalctl -o short-iso` format.
    pub journal: Look<Vec<String>>,
}

/// Thresholds of the VPN rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VpnPolicy {
    /// Only (re)connects within `now - window_ms ..= now` count.
    pub window_ms: u64,
    /// Flapping: at least `flap_min_connects` connects in the window whose median interval is
    /// at most `flap_max_period_ms`.
    pub flap_min_connects: usize,
    pub flap_max_period_ms: u64,
}

impl Default for VpnPolicy {
    /// 30 minutes, 3 connects, every 5 minutes or faster.
    fn default() -> Self {
        VpnPolicy {
            window_ms: 30 * 60 * 1000,
            flap_min_connects: 3,
            flap_max_period_ms: 5 * 60 * 1000,
        }
    }
}

/// One gateway as the pane shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayPane {
    pub env: String,
    pub host: String,
    pub active_state: Option<String>,
    pub tunnel_exit: Option<IpAddr>,
    pub direct_exit: Option<IpAddr>,
    pub server: Option<PeerAddr>,
    pub tunnel_addr: Option<TunnelAddr>,
    /// (Re)connects within the window.
    pub connects: Vec<Timestamp>,
    /// Median interval between them, when there are at least two.
    pub connect_period_ms: Option<u64>,
    pub verdicts: Vec<Verdict>,
}

fn median_interval(ts: &[Timestamp]) -> Option<u64> {
    let mut gaps: Vec<u64> = ts
        .windows(2)
        .map(|w| w[1].0.saturating_sub(w[0].0))
        .collect();
    if gaps.is_empty() {
        return None;
    }
    gaps.sort_unstable();
    gaps.get(gaps.len() / 2).copied()
}

/// `~2m` / `~30s`: from 45 s on, whole minutes (59 s reads as "~1m").
fn approx(ms: u64) -> String {
    let s = (ms + 500) / 1000;
    if s >= 45 {
        format!("~{}m", (s + 30) / 60)
    } else {
        format!("~{s}s")
    }
}

/// A flapping unit counts as stopped once quiet for three of its periods, never sooner
/// than this.
pub const FLAP_STOPPED_FLOOR_MS: u64 = 30_000;

/// Judge one gateway: service state, leak, flapping.
pub fn vpn_gateway(obs: &GatewayObs, now: Timestamp, policy: &VpnPolicy) -> GatewayPane {
    let env = obs.env.as_str();
    let host = obs.host.as_str();
    let mut pane = GatewayPane {
        env: env.to_string(),
        host: host.to_string(),
        active_state: None,
        tunnel_exit: None,
        direct_exit: None,
        server: None,
        tunnel_addr: None,
        connects: Vec::new(),
        connect_period_ms: None,
        verdicts: Vec::new(),
    };
    let v = |rule, sev, msg: String| Verdict::new(Pane::VpnEgress, rule, sev, env, host, msg);
    let svc = obs.service.as_str();
    let ifc = obs.interface.as_str();

    match &obs.active_state {
        Look::CouldNotLook { reason } => {
            pane.verdicts
                .push(could_not(Pane::VpnEgress, env, host, reason))
        }
        Look::Seen { value } => {
            pane.active_state = Some(value.clone());
            if value.trim() == "active" {
                pane.verdicts.push(v(
                    Rule::VpnService,
                    Severity::Ok,
                    format!("{svc} is active on {host}"),
                ));
            } else {
                pane.verdicts.push(v(
                    Rule::VpnService,
                    Severity::Critical,
                    format!(
                        "{svc} is {} on {host}: egress through {ifc} is down",
                        if value.trim().is_empty() {
                            "in no state"
                        } else {
                            value.trim()
                        }
                    ),
                ));
            }
        }
    }

    let mut looked_exits = true;
    for look in [&obs.tunnel_exit, &obs.direct_exit] {
        if let Look::CouldNotLook { reason } = look {
            looked_exits = false;
            pane.verdicts
                .push(could_not(Pane::VpnEgress, env, host, reason));
        }
    }
    if looked_exits {
        let t = obs.tunnel_exit.as_seen();
        let d = obs.direct_exit.as_seen();
        pane.tunnel_exit = t.and_then(|r| r.as_ref().ok().copied());
        pane.direct_exit = d.and_then(|r| r.as_ref().ok().copied());
        match (t, d) {
            (Some(Ok(t)), Some(Ok(d))) if t == d => pane.verdicts.push(v(
                Rule::VpnExit,
                Severity::Critical,
                format!(
                    "LEAK: traffic through {ifc} on {host} exits from {t}, the same address as \
                     without the tunnel (the home ISP's)"
                ),
            )),
            (Some(Ok(t)), Some(Ok(d))) => pane.verdicts.push(v(
                Rule::VpnExit,
                Severity::Ok,
                format!("{host} exits through {ifc} from {t} (without it: {d})"),
            )),
            (Some(Err(e)), _) => pane.verdicts.push(v(
                Rule::VpnExit,
                Severity::Critical,
                format!("no exit through {ifc} on {host}: {e}"),
            )),
            (Some(Ok(t)), Some(Err(e))) => pane.verdicts.push(v(
                Rule::VpnExit,
                Severity::Unknown,
                format!(
                    "{host} exits through {ifc} from {t}, but the direct exit probe failed \
                     ({e}), so a leak cannot be ruled out"
                ),
            )),
            _ => {}
        }
    }

    match &obs.journal {
        Look::CouldNotLook { reason } => {
            pane.verdicts
                .push(could_not(Pane::VpnEgress, env, host, reason))
        }
        Look::Seen { value } => {
            let facts = parse_journal(value);
            pane.server = facts.server;
            pane.tunnel_addr = facts.tunnel_addr;
            let from = now.0.saturating_sub(policy.window_ms);
            pane.connects = facts
                .connects
                .into_iter()
                .filter(|t| t.0 >= from && t.0 <= now.0)
                .collect();
            pane.connect_period_ms = median_interval(&pane.connects);
            let n = pane.connects.len();
            // Flapping is what the unit does now: a loop whose last (re)connect is further
            // back than three of its periods (and at least 30 s) has stopped.
            let quiet_ms = pane
                .connects
                .last()
                .map(|t| now.0.saturating_sub(t.0))
                .unwrap_or(u64::MAX);
            let stopped = |p: u64| quiet_ms > p.saturating_mul(3).max(FLAP_STOPPED_FLOOR_MS);
            match pane.connect_period_ms {
                Some(p)
                    if n >= policy.flap_min_connects
                        && p <= policy.flap_max_period_ms
                        && stopped(p) =>
                {
                    let last = pane.connects.last().copied().unwrap_or(now);
                    pane.verdicts.push(v(
                        Rule::VpnFlapping,
                        Severity::Ok,
                        format!(
                            "{svc} on {host} restarted every {} until {} ({n} in the last {}); none since ({})",
                            approx(p),
                            clock(last),
                            human_ms(policy.window_ms),
                            human_ms(quiet_ms)
                        ),
                    ));
                }
                Some(p) if n >= policy.flap_min_connects && p <= policy.flap_max_period_ms => {
                    let shown: Vec<String> = pane
                        .connects
                        .iter()
                        .rev()
                        .take(8)
                        .rev()
                        .map(|t| clock(*t))
                        .collect();
                    let more = if n > shown.len() { "..., " } else { "" };
                    pane.verdicts.push(v(
                        Rule::VpnFlapping,
                        Severity::Warn,
                        format!(
                            "{svc} on {host} restarts every {}: {more}{} ({n} in the last {})",
                            approx(p),
                            shown.join(", "),
                            human_ms(policy.window_ms)
                        ),
                    ));
                }
                _ => pane.verdicts.push(v(
                    Rule::VpnFlapping,
                    Severity::Ok,
                    format!(
                        "{n} (re)connect(s) of {svc} on {host} in the last {}",
                        human_ms(policy.window_ms)
                    ),
                )),
            }
        }
    }
    pane
}

/// The shipped runbook that ends an eviction loop (runbooks/vpn-eviction-fix.yaml), named
/// by the verdict so the operator knows what `x` opens.
pub const EVICTION_FIX: &str = "vpn-eviction-fix";

/// Across all gateways (of all environments): two on the same server (IP and port) with the
/// same tunnel address evict each other. One critical verdict per such pair.
pub fn vpn_across(gateways: &[GatewayPane]) -> Vec<Verdict> {
    let mut out = Vec::new();
    for (i, a) in gateways.iter().enumerate() {
        for b in gateways.iter().skip(i + 1) {
            let (Some(sa), Some(sb)) = (a.server, b.server) else {
                continue;
            };
            let (Some(ta), Some(tb)) = (&a.tunnel_addr, &b.tunnel_addr) else {
                continue;
            };
            if sa != sb || ta.address != tb.address {
                continue;
            }
            let rhythm = match (a.connect_period_ms, b.connect_period_ms) {
                (Some(pa), Some(pb)) => {
                    let apart = interleave(&a.connects, &b.connects)
                        .map(|ms| format!(", {} apart", approx(ms)))
                        .unwrap_or_default();
                    format!(
                        "; {} restarts every {}, {} every {}{apart}",
                        a.host,
                        approx(pa),
                        b.host,
                        approx(pb)
                    )
                }
                _ => String::new(),
            };
            out.push(Verdict::new(
                Pane::VpnEgress,
                Rule::VpnEvictionLoop,
                Severity::Critical,
                &a.env,
                format!("{}/{} + {}/{}", a.env, a.host, b.env, b.host),
                format!(
                    "EVICTION LOOP: {} ({}) and {} ({}) are both on PIA server {sa} with tunnel \
                     address {ta}: each reconnect steals the address from the other{rhythm}. \
                     Point one at another server: runbook {EVICTION_FIX}.",
                    a.host, a.env, b.host, b.env
                ),
            ));
        }
    }
    out
}

/// How long no gateway may have (re)connected before `vpn-loop-gone` holds: longer than the
/// eviction loop's ~2 min period (openvpn's `--ping-restart 60` plus the reconnect), so a
/// quiet stretch this long is not just an up-window between two evictions.
pub const LOOP_GONE_QUIET_MS: u64 = 150_000;

/// What `vpn-loop-gone HOST` makes of one look at every gateway: whether it holds, and a
/// line per gateway (state, exits, server, tunnel address, last connect) plus what is
/// still missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopGone {
    pub holds: bool,
    pub lines: Vec<String>,
}

/// `vpn-loop-gone HOST` over one look (`gateways`, `across` = [`vpn_across`] and the look's
/// other cross-gateway verdicts) at `now`: HOST is among the gateways; every gateway's tunnel
/// is active and exits at an address other than its direct one; no two share a server and
/// tunnel address; and none (re)connected within the last `quiet_ms`.
pub fn loop_gone(
    host: &str,
    gateways: &[GatewayPane],
    across: &[Verdict],
    now: Timestamp,
    quiet_ms: u64,
) -> LoopGone {
    let mut lines = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    if !gateways.iter().any(|g| g.host == host) {
        missing.push(format!("{host} was not among the gateways looked at"));
    }
    for g in gateways {
        let state = g.active_state.as_deref().map(str::trim).unwrap_or("unseen");
        let exits = match (g.tunnel_exit, g.direct_exit) {
            (Some(t), Some(d)) => format!("exits {t} (without the tunnel {d})"),
            (Some(t), None) => format!("exits {t} (direct exit not seen)"),
            _ => "no exit through the tunnel seen".to_string(),
        };
        let server = g
            .server
            .map(|s| s.to_string())
            .unwrap_or_else(|| "?".into());
        let tunnel = g
            .tunnel_addr
            .as_ref()
            .map(|t| t.address.to_string())
            .unwrap_or_else(|| "?".into());
        let last = g.connects.iter().map(|t| t.0).max();
        let ago = match last {
            Some(t) => format!("last (re)connect {} ago", human_ms(now.0.saturating_sub(t))),
            None => format!(
                "no (re)connect in the last {}",
                human_ms(VpnPolicy::default().window_ms)
            ),
        };
        lines.push(format!(
            "{}/{}: {state}, {exits}, server {server}, tunnel address {tunnel}, {ago}",
            g.env, g.host
        ));
        if state != "active" {
            missing.push(format!("{} is {state}", g.host));
        }
        match (g.tunnel_exit, g.direct_exit) {
            (Some(t), Some(d)) if t == d => missing.push(format!(
                "{} exits at its direct address {t}: a leak",
                g.host
            )),
            (Some(_), Some(_)) => {}
            _ => missing.push(format!("{}'s exit addresses were not both seen", g.host)),
        }
        if let Some(t) = last {
            let since = now.0.saturating_sub(t);
            if since < quiet_ms {
                missing.push(format!(
                    "{} (re)connected {} ago; quiet for {} is needed",
                    g.host,
                    human_ms(since),
                    human_ms(quiet_ms)
                ));
            }
        }
    }
    for v in across {
        if v.rule == Rule::VpnEvictionLoop || v.severity == Severity::Critical {
            missing.push(v.message.clone());
        }
    }
    let holds = missing.is_empty();
    if holds {
        lines.push(format!(
            "the loop is gone: every gateway up on its own server and tunnel address, none \
             reconnected in the last {}",
            human_ms(quiet_ms)
        ));
    } else {
        lines.push(format!("waiting: {}", missing.join("; ")));
    }
    LoopGone { holds, lines }
}

/// Median distance from each of `a`'s connects to the nearest of `b`'s.
fn interleave(a: &[Timestamp], b: &[Timestamp]) -> Option<u64> {
    if b.is_empty() {
        return None;
    }
    let mut d: Vec<u64> = a
        .iter()
        .filter_map(|t| b.iter().map(|u| t.0.abs_diff(u.0)).min())
        .collect();
    if d.is_empty() {
        return None;
    }
    d.sort_unstable();
    d.get(d.len() / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pane(env: &str, host: &str, server: &str, tunnel: &str, connects: &[u64]) -> GatewayPane {
        let (ip, port) = server.split_once(':').expect("ip:port");
        GatewayPane {
            env: env.into(),
            host: host.into(),
            active_state: Some("active".into()),
            tunnel_exit: Some("203.0.113.7".parse().expect("ip")),
            direct_exit: Some("198.51.100.200".parse().expect("ip")),
            server: Some(PeerAddr {
                ip: ip.parse().expect("ip"),
                port: port.parse().expect("port"),
            }),
            tunnel_addr: Some(TunnelAddr {
                address: tunnel.parse().expect("ip"),
                mask: String::new(),
            }),
            connects: connects.iter().map(|t| Timestamp(*t)).collect(),
            connect_period_ms: None,
            verdicts: Vec::new(),
        }
    }

    #[test]
    fn loop_gone_waits_for_distinct_servers_and_a_quiet_stretch() {
        let now = Timestamp(10_000_000);
        let q = LOOP_GONE_QUIET_MS;
        // The loop: both on one server and address, reconnecting every 2 minutes.
        let dev = pane(
            "dev",
            "k3s-dev-3",
            "198.51.100.30:1198",
            "10.7.0.10",
            &[9_760_000, 9_880_000],
        );
        let prod = pane(
            "prod",
            "k3s-prod-3",
            "198.51.100.30:1198",
            "10.7.0.10",
            &[9_820_000, 9_940_000],
        );
        let looped = [dev.clone(), prod.clone()];
        let across = vpn_across(&looped);
        let g = loop_gone("k3s-prod-3", &looped, &across, now, q);
        assert!(!g.holds);
        let last = g.lines.last().expect("line");
        assert!(
            last.contains("EVICTION LOOP") && last.contains("k3s-dev-3 (re)connected 2m ago"),
            "{last}"
        );
        assert_eq!(
            g.lines[1],
            "prod/k3s-prod-3: active, exits 203.0.113.7 (without the tunnel 198.51.100.200), \
             server 198.51.100.30:1198, tunnel address 10.7.0.10, last (re)connect 1m ago"
        );
        // Fixed: prod on another server, reconnected once by the apply 1 minute ago.
        let prod2 = pane(
            "prod",
            "k3s-prod-3",
            "198.51.100.31:1198",
            "10.7.0.10",
            &[now.0 - 60_000],
        );
        let dev2 = pane(
            "dev",
            "k3s-dev-3",
            "198.51.100.30:1198",
            "10.7.0.10",
            &[now.0 - 200_000],
        );
        let fixed = [dev2, prod2.clone()];
        assert!(vpn_across(&fixed).is_empty());
        let g = loop_gone("k3s-prod-3", &fixed, &[], now, q);
        assert!(!g.holds, "the apply's own reconnect is too recent");
        assert!(g
            .lines
            .last()
            .expect("line")
            .contains("k3s-prod-3 (re)connected 1m ago; quiet for 2m 30s is needed"));
        // Two and a half minutes on, nobody reconnected: it holds.
        let later = Timestamp(now.0 + 90_000);
        let g = loop_gone("k3s-prod-3", &fixed, &[], later, q);
        assert!(g.holds, "{:?}", g.lines);
        // A tunnel that is down, or leaks, or a host not looked at, never holds.
        let mut down = prod2.clone();
        down.active_state = Some("failed".into());
        let leaking = GatewayPane {
            tunnel_exit: prod2.direct_exit,
            ..prod2.clone()
        };
        for (gws, why) in [
            (vec![fixed[0].clone(), down], "k3s-prod-3 is failed"),
            (vec![fixed[0].clone(), leaking], "a leak"),
            (
                vec![fixed[0].clone()],
                "k3s-prod-3 was not among the gateways looked at",
            ),
        ] {
            let g = loop_gone("k3s-prod-3", &gws, &[], later, q);
            assert!(
                !g.holds && g.lines.last().expect("line").contains(why),
                "{:?}",
                g.lines
            );
        }
    }

    #[test]
    fn approx_and_human() {
        assert_eq!(approx(118_000), "~2m");
        assert_eq!(approx(30_000), "~30s");
        assert_eq!(approx(59_000), "~1m");
        assert_eq!(human_ms(90_000), "1m 30s");
        assert_eq!(human_ms(1_800_000), "30m");
    }
}
