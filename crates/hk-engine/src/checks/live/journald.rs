//! The OpenVPN unit's journal, parsed: the peer server, the tunnel address and the
//! (re)connect times the VPN rules judge; and the exit IP a lookup service answered.

use std::fmt;
use std::net::IpAddr;
use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::Timestamp;

/// An OpenVPN peer (`[AF_INET]IP:PORT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PeerAddr {
    pub ip: IpAddr,
    pub port: u16,
}

impl fmt::Display for PeerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ip {
            IpAddr::V4(ip) => write!(f, "{ip}:{}", self.port),
            IpAddr::V6(ip) => write!(f, "[{ip}]:{}", self.port),
        }
    }
}

/// The tunnel address the server handed out, with its netmask or peer as logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TunnelAddr {
    pub address: IpAddr,
    /// As logged: a netmask (`255.255.192.0`), `/18`, or `peer 10.8.0.5`; empty if none.
    pub mask: String,
}

impl fmt::Display for TunnelAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.mask.is_empty() {
            write!(f, "{}", self.address)
        } else if self.mask.starts_with('/') {
            write!(f, "{}{}", self.address, self.mask)
        } else {
            write!(f, "{} {}", self.address, self.mask)
        }
    }
}

/// What the journal of the tunnel unit says. Server and address are the LAST ones logged
/// (the current connection); for an address logged in several forms, the first form of it
/// (the PUSH_REPLY's netmask) is kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalFacts {
    pub server: Option<PeerAddr>,
    pub tunnel_addr: Option<TunnelAddr>,
    /// Times of `Initialization Sequence Completed`, or, if the journal has none, of systemd
    /// `Started` lines: each is a (re)connect. Sorted.
    pub connects: Vec<Timestamp>,
    /// Times of systemd `Stopped` lines (reported, not used by the rules).
    pub stops: Vec<Timestamp>,
    /// Lines whose first field is not an accepted timestamp (still searched for server and
    /// address; cannot place a restart in time).
    pub untimed_lines: usize,
}

/// Parse a journald `short-iso` / `short-iso-precise` timestamp, as printed by
/// `journalctl -o short-iso`: `2026-09-12T22:57:05+0000`, `2026-09-12T22:57:05.123456+00:00`,
/// or with `Z`. Any UTC offset is applied. Returns None for anything else (including the
/// default `Sep 12 22:57:05` form, which has no year).
pub fn parse_journal_time(s: &str) -> Option<Timestamp> {
    let b = s.as_bytes();
    if b.len() < 20 || b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    if b.get(10) != Some(&b'T') || b.get(13) != Some(&b':') || b.get(16) != Some(&b':') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u64> {
        let part = s.get(r)?;
        if part.is_empty() || !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut rest = s.get(19..)?;
    let mut ms = 0u64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let mut f3 = frac.get(..digits.min(3))?.to_string();
        while f3.len() < 3 {
            f3.push('0');
        }
        ms = f3.parse().ok()?;
        rest = frac.get(digits..)?;
    }
    let offset_s: i64 = if rest == "Z" {
        0
    } else {
        let sign = match rest.as_bytes().first() {
            Some(b'+') => 1,
            Some(b'-') => -1,
            _ => return None,
        };
        let digits: String = rest.get(1..)?.chars().filter(|c| *c != ':').collect();
        if digits.len() != 4 || !digits.bytes().all(|c| c.is_ascii_digit()) || rest.len() > 6 {
            return None;
        }
        let oh: i64 = digits.get(0..2)?.parse().ok()?;
        let om: i64 = digits.get(2..4)?.parse().ok()?;
        sign * (oh * 3600 + om * 60)
    };
    if y < 1970 {
        return None;
    }
    let local = i64::try_from(crate::time::utc_seconds(y, mo, d, h, mi, se)?).ok()?;
    let utc = u64::try_from(local - offset_s).ok()?;
    Some(Timestamp(utc.checked_mul(1000)?.checked_add(ms)?))
}

fn re(cell: &'static OnceLock<Option<Regex>>, pattern: &str) -> Option<&'static Regex> {
    cell.get_or_init(|| Regex::new(pattern).ok()).as_ref()
}

fn peer_re() -> Option<&'static Regex> {
    static R: OnceLock<Option<Regex>> = OnceLock::new();
    re(&R, r"Peer Connection Initiated with \[AF_INET6?\](\S+)")
}

/// The forms OpenVPN 2.4-2.6 log the tunnel address in:
/// - PUSH_REPLY option: `ifconfig 10.72.192.7 255.255.192.0` (topology subnet) or
///   `ifconfig 10.8.0.6 10.8.0.5` (net30/p2p);
/// - iproute2: `/sbin/ip addr add dev tun0 10.72.192.7/18 broadcast ...` and
///   `/sbin/ip addr add dev tun0 local 10.8.0.6 peer 10.8.0.5`;
/// - netlink (2.5+ default on Linux): `net_addr_v4_add: 10.72.192.7/18 dev tun0` and
///   `net_addr_ptp_v4_add: 10.8.0.6 peer 10.8.0.5 dev tun0`;
/// - net-tools: `/sbin/ifconfig tun0 10.72.192.7 netmask 255.255.192.0 mtu 1500 ...`.
fn addr_res() -> Vec<&'static Regex> {
    static A: OnceLock<Option<Regex>> = OnceLock::new();
    static B: OnceLock<Option<Regex>> = OnceLock::new();
    static C: OnceLock<Option<Regex>> = OnceLock::new();
    static D: OnceLock<Option<Regex>> = OnceLock::new();
    static E: OnceLock<Option<Regex>> = OnceLock::new();
    static F: OnceLock<Option<Regex>> = OnceLock::new();
    const IP: &str = r"(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})";
    [
        re(&A, &format!(r"(?:^|[\s,'])ifconfig {IP} {IP}(?:[,'\s]|$)")),
        re(&B, &format!(r"ip addr add dev \S+ {IP}(/\d{{1,2}})")),
        re(&C, &format!(r"ip addr add dev \S+ local {IP} (peer {IP})")),
        re(&D, &format!(r"net_addr_v4_add: {IP}(/\d{{1,2}})")),
        re(&E, &format!(r"net_addr_ptp_v4_add: {IP} (peer {IP})")),
        re(&F, &format!(r"ifconfig \S+ {IP} netmask {IP}")),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Split a `journalctl -o short-iso` line into (time, identifier, message). A line whose first
/// field is no timestamp is all message (e.g. `-o cat`).
fn split_line(line: &str) -> (Option<Timestamp>, &str, &str) {
    let mut fields = line.splitn(3, ' ');
    let first = fields.next().unwrap_or_default();
    let Some(t) = parse_journal_time(first) else {
        return (None, "", line);
    };
    let _host = fields.next();
    let rest = fields.next().unwrap_or_default();
    match rest.split_once(": ") {
        Some((ident, msg)) if !ident.contains(' ') => (Some(t), ident, msg),
        _ => (Some(t), "", rest),
    }
}

/// Parse the tunnel unit's journal lines (see [`parse_journal_time`] for the accepted time
/// formats). Never fails: what is not understood is skipped.
pub fn parse_journal(lines: &[String]) -> JournalFacts {
    let mut facts = JournalFacts::default();
    let mut inits = Vec::new();
    let mut starts = Vec::new();
    let addr_res = addr_res();
    for line in lines {
        let (t, ident, msg) = split_line(line);
        if t.is_none() {
            facts.untimed_lines += 1;
        }
        if let Some(c) = peer_re().and_then(|r| r.captures(msg)) {
            if let Some(peer) = c.get(1).and_then(|m| parse_peer(m.as_str())) {
                facts.server = Some(peer);
            }
        }
        for r in &addr_res {
            // The last match on the line wins, like the last line.
            if let Some(c) = r.captures_iter(msg).last() {
                let addr = c.get(1).and_then(|m| m.as_str().parse::<IpAddr>().ok());
                if let Some(address) = addr {
                    // One connection logs its address twice (PUSH_REPLY `ifconfig A MASK`,
                    // then `net_addr_v4_add: A/N`): keep the pushed form as OpenVPN quotes it.
                    let same = facts
                        .tunnel_addr
                        .as_ref()
                        .is_some_and(|t| t.address == address);
                    if !same {
                        facts.tunnel_addr = Some(TunnelAddr {
                            address,
                            mask: c.get(2).map(|m| m.as_str().to_string()).unwrap_or_default(),
                        });
                    }
                }
            }
        }
        if let Some(t) = t {
            let from_systemd = ident.starts_with("systemd");
            if msg.contains("Initialization Sequence Completed") {
                inits.push(t);
            } else if from_systemd && msg.starts_with("Started ") {
                starts.push(t);
            } else if from_systemd && msg.starts_with("Stopped ") {
                facts.stops.push(t);
            }
        }
    }
    // Each systemd start is followed by an Initialization Sequence Completed when it
    // connects; soft restarts (--ping-restart) log only the latter. Counting both would count
    // one reconnect twice.
    facts.connects = if inits.is_empty() { starts } else { inits };
    facts.connects.sort();
    facts.stops.sort();
    facts
}

/// `158.173.241.112:1198` or `2001:db8::1:1198` (last colon separates the port); a trailing
/// `,` or `)` is not part of it.
fn parse_peer(s: &str) -> Option<PeerAddr> {
    let s = s.trim_end_matches([',', ')', '.', ';']);
    let (ip, port) = s.rsplit_once(':')?;
    let ip = ip.trim_start_matches('[').trim_end_matches(']');
    // `[AF_INET6]::ffff:1.2.3.4:1198` (a v4 peer on a dual-stack socket) is that v4 peer.
    let ip: IpAddr = ip.parse().ok()?;
    Some(PeerAddr {
        ip: ip.to_canonical(),
        port: port.parse().ok()?,
    })
}

/// Parse the body of an exit-IP probe (e.g. `curl https://ipinfo.io/ip`): one address,
/// surrounding whitespace allowed.
pub fn parse_exit_ip(body: &str) -> Result<IpAddr, NotAnIpAddress> {
    let t = body.trim();
    t.parse::<IpAddr>().map_err(|source| NotAnIpAddress {
        shown: t.chars().take(60).collect(),
        source,
    })
}

/// An exit-IP probe's body that is not one address (a rate-limit page, an error text);
/// `shown` is its first 60 characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("exit-IP probe returned {shown:?}, not an IP address")]
pub struct NotAnIpAddress {
    pub shown: String,
    #[source]
    pub source: std::net::AddrParseError,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_time_forms() {
        let base = parse_journal_time("2026-09-12T22:57:05+0000").expect("short-iso");
        assert_eq!(base.to_string(), "2026-09-12T22:57:05.000Z");
        assert_eq!(parse_journal_time("2026-09-12T22:57:05Z"), Some(base));
        assert_eq!(parse_journal_time("2026-09-12T22:57:05+00:00"), Some(base));
        assert_eq!(parse_journal_time("2026-09-13T00:57:05+0200"), Some(base));
        assert_eq!(
            parse_journal_time("2026-09-12T22:57:05.123456+0000"),
            Some(Timestamp(base.0 + 123))
        );
        for bad in [
            "Sep 12 22:57:05",
            "2026-13-12T22:57:05+0000",
            "2026-09-12T22:57:05",
            "2026-09-12T22:57:05+00",
            "2026-09-12 22:57:05+0000",
            "2026-09-12T22:57:05.+0000",
            "",
            "1969-12-31T23:59:59+0000",
            "1970-01-01T00:00:00+0100",
        ] {
            assert_eq!(parse_journal_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn days_from_civil_matches_known_dates() {
        let days_from_civil =
            |y, m, d| crate::time::utc_seconds(y, m, d, 0, 0, 0).map(|s| s / 86_400);
        assert_eq!(days_from_civil(1970, 1, 1), Some(0));
        assert_eq!(days_from_civil(2000, 3, 1), Some(11_017));
        assert_eq!(days_from_civil(2026, 9, 12), Some(20_708));
    }

    #[test]
    fn tunnel_address_forms() {
        let cases = [
            (
                "PUSH: Received control message: 'PUSH_REPLY,route-gateway 10.72.192.1,topology subnet,ifconfig 10.72.192.7 255.255.192.0,peer-id 0'",
                "10.72.192.7",
                "255.255.192.0",
            ),
            ("/sbin/ip addr add dev tun0 10.72.192.7/18 broadcast 10.72.255.255", "10.72.192.7", "/18"),
            ("/sbin/ip addr add dev tun0 local 10.8.0.6 peer 10.8.0.5", "10.8.0.6", "peer 10.8.0.5"),
            ("net_addr_v4_add: 10.72.192.7/18 dev tun0", "10.72.192.7", "/18"),
            ("net_addr_ptp_v4_add: 10.8.0.6 peer 10.8.0.5 dev tun0", "10.8.0.6", "peer 10.8.0.5"),
            ("/sbin/ifconfig tun0 10.72.192.7 netmask 255.255.192.0 mtu 1500 broadcast 10.72.255.255", "10.72.192.7", "255.255.192.0"),
        ];
        for (line, addr, mask) in cases {
            let f = parse_journal(&[line.to_string()]);
            let t = f.tunnel_addr.expect(line);
            assert_eq!(t.address.to_string(), addr, "{line}");
            assert_eq!(t.mask, mask, "{line}");
        }
        // ifconfig-ipv6 is not the v4 tunnel address.
        let f = parse_journal(&["PUSH_REPLY,ifconfig-ipv6 fd00::2/64 fd00::1".to_string()]);
        assert_eq!(f.tunnel_addr, None);
    }

    #[test]
    fn peer_forms() {
        let p = parse_peer("158.173.241.112:1198").expect("v4");
        assert_eq!(p.to_string(), "158.173.241.112:1198");
        let p6 = parse_peer("2001:db8::1:1194").expect("v6");
        assert_eq!(p6.port, 1194);
        let mapped = parse_peer("::ffff:158.173.241.112:1198").expect("mapped");
        assert_eq!(mapped, p);
        assert!(parse_peer("158.173.241.112").is_none());
        assert!(parse_peer("x:y").is_none());
    }
}
