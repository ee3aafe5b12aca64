//! One simulated node's state ([`NodeState`]: systemd units and their journal, block
//! devices and mounts, IO pressure, the VPN tunnel and exit addresses, the process table, a
//! clock), its simulated files, and the facts the utilities share.
//!
//! The state is shared as `Arc<Mutex<NodeState>>`: the SSH server runs commands against it
//! (`login::NodeSession`, with `login`'s and `coreutils`' utilities), a simulation
//! (scenario, fault injection) changes it, tests read it. Data flows one way: the
//! utilities read and change the state; the state imports none of them.
//!
//! Owns: the state model, its simulated files (`/sys/block/*/queue/*`, `/proc/cpuinfo`,
//! `meminfo`, `loadavg`, `mounts`, `uptime`, `/proc/pressure/io`, `/etc/os-release`, ...;
//! every other /proc or /sys path is "not simulated", never ENOENT), the mount table
//! `findmnt`, `df` and `/proc/mounts` share, the output formats of times (journald
//! `short-iso`, systemd's), the process table `ps` and `/proc/loadavg` share.
//! Must not: touch the real host (no process, no file, no network), or run a command (that
//! is `login`'s).
//!
//! One file (over 800 lines): the state and the files rendered from it are one model under
//! one lock.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use regex::Regex;

use super::fs::{FileKind, Fs, FsError, Stat};
use hk_engine::checks::live::parse_journal_time;

// ---------------------------------------------------------------------------------------
// Time
// ---------------------------------------------------------------------------------------

/// A node's clock: simulated ms since the Unix epoch, running `speed` times faster than real
/// time from `epoch_ms` (speed 0 = stopped). Copies share the origin, so nodes given copies
/// of one clock agree on the time.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    origin: Instant,
    epoch_ms: u64,
    speed: f64,
}

impl Clock {
    /// Stopped at `epoch_ms`.
    pub fn fixed(epoch_ms: u64) -> Self {
        Clock {
            origin: Instant::now(),
            epoch_ms,
            speed: 0.0,
        }
    }

    /// Starts at `epoch_ms` now and runs `speed` simulated seconds per real second.
    pub fn running(epoch_ms: u64, speed: f64) -> Self {
        Clock {
            origin: Instant::now(),
            epoch_ms,
            speed: speed.max(0.0),
        }
    }

    /// When the simulated time began (ms since the Unix epoch).
    pub fn began_ms(&self) -> u64 {
        self.epoch_ms
    }

    /// The simulated time, ms since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        let real = self.origin.elapsed().as_secs_f64() * 1000.0;
        self.epoch_ms.saturating_add((real * self.speed) as u64)
    }

    /// How much real time `sim_ms` of simulated time takes (zero on a stopped clock).
    pub fn real_duration(&self, sim_ms: u64) -> Duration {
        if self.speed <= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(sim_ms as f64 / 1000.0 / self.speed)
        }
    }
}

use hk_engine::time::utc_fields;

/// journald's `short-iso`: `2026-09-12T22:57:05+00:00` (the node runs in UTC).
pub fn format_short_iso(ms: u64) -> String {
    let (y, mo, d, h, mi, s, _) = utc_fields(ms);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}+00:00")
}

pub(crate) fn format_short_iso_precise(ms: u64) -> String {
    let (y, mo, d, h, mi, s, frac) = utc_fields(ms);
    format!(
        "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:06}+00:00",
        frac * 1000
    )
}

pub(crate) const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `ls -l`'s time: `Dec  3 06:10`.
pub fn format_clock(ms: u64) -> String {
    let (_, mo, d, h, mi, _, _) = utc_fields(ms);
    let mon = MONTHS.get(mo as usize - 1).copied().unwrap_or("???");
    format!("{mon} {d:>2} {h:02}:{mi:02}")
}

/// A stable locally administered MAC address for a host name.
pub(crate) fn mac_for(host: &str) -> String {
    let h = host.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let b = h.to_be_bytes();
    format!("52:54:00:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2])
}

/// journald's default `short`: `Sep 12 22:57:05`.
pub(crate) fn format_short(ms: u64) -> String {
    let (_, mo, d, h, mi, s, _) = utc_fields(ms);
    let mon = MONTHS.get(mo as usize - 1).copied().unwrap_or("???");
    format!("{mon} {d:02} {h:02}:{mi:02}:{s:02}")
}

/// A systemd time span (`30min`, `1h 30min`, `90s`, `2 days`) in ms.
pub(crate) fn parse_span(s: &str) -> Option<u64> {
    let re = Regex::new(r"^\s*(?:(\d+)\s*([a-z]*)\s*)+$").ok()?;
    if !re.is_match(s) {
        return None;
    }
    let item = Regex::new(r"(\d+)\s*([a-z]*)").ok()?;
    let mut total = 0u64;
    for c in item.captures_iter(s) {
        let n: u64 = c.get(1)?.as_str().parse().ok()?;
        let unit = c.get(2).map(|m| m.as_str()).unwrap_or("");
        let ms = match unit {
            "" | "s" | "sec" | "second" | "seconds" => 1000,
            "ms" | "msec" => 1,
            "m" | "min" | "minute" | "minutes" => 60_000,
            "h" | "hr" | "hour" | "hours" => 3_600_000,
            "d" | "day" | "days" => 86_400_000,
            "w" | "week" | "weeks" => 604_800_000,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(ms)?)?;
    }
    Some(total)
}

/// A journalctl `--since`/`--until` value relative to `now`: `now`, `today`, `yesterday`,
/// `-30min`, `+1h`, `30 min ago`, `@EPOCH`, `YYYY-MM-DD[ HH:MM[:SS]]` (UTC), or ISO 8601.
pub(crate) fn parse_time_spec(s: &str, now: u64) -> Option<u64> {
    let s = s.trim();
    let midnight = now - now % 86_400_000;
    match s {
        "now" => return Some(now),
        "today" => return Some(midnight),
        "yesterday" => return Some(midnight.saturating_sub(86_400_000)),
        "tomorrow" => return Some(midnight + 86_400_000),
        _ => {}
    }
    if let Some(e) = s.strip_prefix('@') {
        return e.parse::<u64>().ok().map(|v| v * 1000);
    }
    if let Some(r) = s.strip_prefix('-') {
        return parse_span(r).map(|d| now.saturating_sub(d));
    }
    if let Some(r) = s.strip_prefix('+') {
        return parse_span(r).map(|d| now + d);
    }
    if let Some(r) = s.strip_suffix("ago") {
        return parse_span(r).map(|d| now.saturating_sub(d));
    }
    let iso = s.replacen(' ', "T", 1);
    let full = match iso.len() {
        10 => format!("{iso}T00:00:00Z"),
        16 => format!("{iso}:00Z"),
        19 => format!("{iso}Z"),
        _ => iso,
    };
    parse_journal_time(&full).map(|t| t.0)
}

// ---------------------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------------------

/// A systemd unit's ActiveState.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitState {
    Active,
    Inactive,
    Failed,
    Activating,
}

impl UnitState {
    pub fn as_str(self) -> &'static str {
        match self {
            UnitState::Active => "active",
            UnitState::Inactive => "inactive",
            UnitState::Failed => "failed",
            UnitState::Activating => "activating",
        }
    }

    pub(crate) fn sub_state(self) -> &'static str {
        match self {
            UnitState::Active => "running",
            UnitState::Inactive => "dead",
            UnitState::Failed => "failed",
            UnitState::Activating => "start",
        }
    }
}

/// One systemd unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    pub state: UnitState,
    pub description: String,
    /// `IOWeight=`; None prints `[not set]`, as systemd does.
    pub io_weight: Option<u64>,
    /// systemd's NRestarts, counted here for every restart.
    pub restarts: u32,
    pub main_pid: u32,
    /// When it last entered `active`.
    pub active_since_ms: u64,
}

/// One journal record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalEntry {
    pub at_ms: u64,
    /// The unit it belongs to (`journalctl -u` selects on it).
    pub unit: String,
    /// `systemd[1]`, `openvpn[1234]`.
    pub ident: String,
    pub message: String,
}

/// A block device's queue settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disk {
    /// The schedulers the kernel offers, in its order.
    pub schedulers: Vec<String>,
    pub scheduler: String,
    pub nr_requests: u32,
    pub rotational: bool,
    /// Its capacity (`/sys/block/DEV/size` is this in 512-byte sectors; `lsblk`'s SIZE).
    pub size_bytes: u64,
}

impl Disk {
    /// A SATA disk as a Debian kernel shows it: mq-deadline, 64 requests.
    pub fn sata(rotational: bool) -> Self {
        Disk {
            schedulers: ["mq-deadline", "kyber", "bfq", "none"]
                .map(String::from)
                .to_vec(),
            scheduler: "mq-deadline".into(),
            nr_requests: 64,
            rotational,
            // A "500 GB" drive: lsblk's 465.8G.
            size_bytes: 500_107_862_016,
        }
    }

    /// NVMe: `none` by default, 1023 requests.
    pub fn nvme() -> Self {
        Disk {
            schedulers: ["none", "mq-deadline", "kyber", "bfq"]
                .map(String::from)
                .to_vec(),
            scheduler: "none".into(),
            nr_requests: 1023,
            rotational: false,
            // A "1 TB" drive: lsblk's 931.5G.
            size_bytes: 1_000_204_886_016,
        }
    }

    /// The `scheduler` file: every option, the current one in brackets.
    fn scheduler_line(&self) -> String {
        let parts: Vec<String> = self
            .schedulers
            .iter()
            .map(|s| {
                if *s == self.scheduler {
                    format!("[{s}]")
                } else {
                    s.clone()
                }
            })
            .collect();
        parts.join(" ")
    }
}

/// A mounted file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub target: String,
    /// `/dev/sda2`.
    pub source: String,
    /// `ext4`, `vfat`.
    pub fstype: String,
    /// The mount options as `/proc/mounts` lists them.
    pub options: String,
}

/// The kernel's memory accounting in KiB: `/proc/meminfo` prints it, `free` derives its
/// columns from it (used = total - free - buff/cache), so the two always agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    pub total: u64,
    pub free: u64,
    pub available: u64,
    pub buffers: u64,
    pub cached: u64,
    pub shmem: u64,
    pub s_reclaimable: u64,
    pub swap_total: u64,
    pub swap_free: u64,
}

impl Memory {
    /// A 16 GiB server running k3s, no swap (the kubelet's default wants none).
    pub fn k3s_server() -> Self {
        Memory {
            total: 16_288_032,
            free: 9_914_828,
            available: 13_574_780,
            buffers: 212_460,
            cached: 3_421_700,
            shmem: 26_940,
            s_reclaimable: 346_488,
            swap_total: 0,
            swap_free: 0,
        }
    }

    /// `free`'s buff/cache column.
    pub fn buff_cache(&self) -> u64 {
        self.buffers + self.cached + self.s_reclaimable
    }

    /// `free`'s used column.
    pub fn used(&self) -> u64 {
        self.total
            .saturating_sub(self.free)
            .saturating_sub(self.buff_cache())
    }
}

/// `/proc/pressure/io`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Psi {
    pub some_avg10: f64,
    pub some_avg60: f64,
    pub some_avg300: f64,
    pub some_total_us: u64,
    pub full_avg10: f64,
    pub full_avg60: f64,
    pub full_avg300: f64,
    pub full_total_us: u64,
}

impl Psi {
    /// A quiet disk.
    pub fn idle() -> Self {
        Psi::stalled(0.10, 0.05)
    }

    /// Some/full pressure at these percentages over every window.
    pub fn stalled(some: f64, full: f64) -> Self {
        Psi {
            some_avg10: some,
            some_avg60: some,
            some_avg300: some,
            some_total_us: (some * 1e7) as u64,
            full_avg10: full,
            full_avg60: full,
            full_avg300: full,
            full_total_us: (full * 1e7) as u64,
        }
    }

    pub fn render(&self) -> String {
        format!(
            "some avg10={:.2} avg60={:.2} avg300={:.2} total={}\nfull avg10={:.2} avg60={:.2} avg300={:.2} total={}\n",
            self.some_avg10,
            self.some_avg60,
            self.some_avg300,
            self.some_total_us,
            self.full_avg10,
            self.full_avg60,
            self.full_avg300,
            self.full_total_us
        )
    }
}

/// The OpenVPN egress tunnel on a gateway node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VpnTunnel {
    /// The systemd unit (hk-console.yaml `names.vpn_unit`, by default
    /// `vpn-egress-tunnel.service`).
    pub unit: String,
    /// The tunnel interface (`names.vpn_interface`, by default `tun0`).
    pub interface: String,
    /// The address traffic through the tunnel leaves at.
    pub exit_ip: IpAddr,
    /// The VPN server (`Peer Connection Initiated with [AF_INET]IP:PORT`).
    pub server: SocketAddr,
    /// The address the server pushes (`ifconfig A.B.C.D MASK`).
    pub tunnel_addr: Ipv4Addr,
    pub netmask: Ipv4Addr,
}

/// What a VPN server gives a client that connects to it: the exit its traffic leaves at
/// (TEST-NET-3, one per server) and a tunnel address from that server's own pool, both
/// derived from the server's address so two servers never hand out the same.
pub fn server_assigns(server: SocketAddr) -> (IpAddr, Ipv4Addr) {
    let n: u32 = match server.ip() {
        IpAddr::V4(a) => u32::from(a),
        IpAddr::V6(a) => a
            .segments()
            .iter()
            .fold(0u32, |h, s| h.rotate_left(5) ^ u32::from(*s)),
    };
    let last = u8::try_from(n % 250).unwrap_or(0) + 1;
    let pool = u8::try_from((n / 250) % 200).unwrap_or(0) + 20;
    (
        IpAddr::V4(Ipv4Addr::new(203, 0, 113, last)),
        Ipv4Addr::new(10, pool, last, 6),
    )
}

/// Everything a simulated node knows about itself.
#[derive(Debug, Clone)]
pub struct NodeState {
    pub hostname: String,
    pub clock: Clock,
    pub boot_ms: u64,
    pub os_release: String,
    pub units: BTreeMap<String, Unit>,
    /// Kept sorted by time.
    pub journal: Vec<JournalEntry>,
    /// By kernel name (`sda`).
    pub disks: BTreeMap<String, Disk>,
    /// Partition kernel name -> its disk (`sda2` -> `sda`).
    pub partitions: BTreeMap<String, String>,
    /// Partition kernel name -> its size in bytes (`lsblk`'s SIZE).
    pub partition_sizes: BTreeMap<String, u64>,
    /// Online CPUs (`nproc`, `/proc/cpuinfo`); the kubelet's capacity says the same.
    pub cpus: u32,
    /// What `/proc/meminfo` and `free` report.
    pub memory: Memory,
    pub mounts: Vec<Mount>,
    pub io_pressure: Psi,
    /// The node's own (ISP) exit address, seen without the tunnel.
    pub direct_exit_ip: IpAddr,
    /// The interface of the default route.
    pub default_interface: String,
    /// False = no route out at all (curl cannot resolve anything).
    pub online: bool,
    pub vpn: Option<VpnTunnel>,
    /// The URLs that answer with the caller's exit address (`https://ipinfo.io/ip`).
    pub exit_ip_urls: Vec<String>,
    /// Every command line this node was sent, in order (capped at 1000).
    pub commands: Vec<String>,
    next_pid: u32,
    /// Its files: what a playbook, `scp` or `sftp` writes there, the next `cat` reads.
    pub fs: Fs,
    /// The name `ls -l` shows for uid 1000 (the last non-root login).
    pub login_user: String,
    /// `uname -r` and `uname -v`.
    pub kernel_release: String,
    pub kernel_version: String,
    /// The LAN address on the default interface, its prefix length and gateway.
    pub lan_addr: Ipv4Addr,
    pub lan_prefix: u8,
    pub lan_gateway: Ipv4Addr,
    /// The default interface's MAC address.
    pub mac: String,
    /// Whether this server's etcd member leads (its `/metrics` says
    /// `etcd_server_is_leader 1`); the demo makes each environment's first server the leader.
    pub etcd_leader: bool,
    /// Whether this server's etcd member runs (false: the server died, its metrics
    /// listener refuses).
    pub etcd_up: bool,
    /// Whether this member sees a leader (`etcd_server_has_leader`): false once a majority
    /// of the members is down and no election can be won.
    pub etcd_has_leader: bool,
    /// This server's etcd member as etcd's client API shows it (servers only).
    pub etcd: Option<SimEtcd>,
    /// `demo --apiserver`: this server's REAL etcd member's client URL (plain HTTP on
    /// loopback). etcd's client API on the server (`curl https://127.0.0.1:2379/...`) is
    /// then that member's answer, and the metrics' leadership its own.
    pub etcd_real: Option<String>,
    /// The control-plane VIP while this server's kube-vip holds the Lease: kube-vip adds it
    /// to the default interface as a /32 and removes it when leadership goes.
    pub vip_held: Option<Ipv4Addr>,
    /// A reboot asked for (`shutdown -r`, `reboot`, `systemctl reboot`) and when it goes
    /// down; whoever runs the node's time ([`super::userland`]) carries it out.
    pub reboot_at_ms: Option<u64>,
    /// Between a reboot's shutdown and the next boot: no unit runs, SSH refuses.
    pub down: bool,
    /// Boots since the simulation started (each one a new boot id, even on a stopped clock).
    pub boots: u32,
}

const OS_RELEASE: &str =
    "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\n\
VERSION_ID=\"12\"\nVERSION=\"12 (bookworm)\"\nVERSION_CODENAME=bookworm\nID=debian\n\
HOME_URL=\"https://www.debian.org/\"\nSUPPORT_URL=\"https://www.debian.org/support\"\n\
BUG_REPORT_URL=\"https://bugs.debian.org/\"\n";

/// Where k3s keeps etcd's CA and its own etcd client certificate (`--data-dir` default).
pub const K3S_ETCD_TLS_DIR: &str = "/var/lib/rancher/k3s/server/tls/etcd";

/// One server's etcd member, as etcd's client API (its JSON gateway on the client port)
/// answers for it. The demo sets who the members are; `follow_etcd` keeps the leader, the
/// term and the applied index in step with the servers' deaths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimEtcd {
    pub cluster_id: u64,
    pub member_id: u64,
    /// Every member: (id, name, peer URL, client URL).
    pub members: Vec<(u64, String, String, String)>,
    /// The leader this member follows (None: it sees none).
    pub leader: Option<u64>,
    pub term: u64,
    pub applied: u64,
    /// Raised alarms: (member id, NOSPACE | CORRUPT).
    pub alarms: Vec<(u64, String)>,
    /// Learners added and never started: (id, peer URL); listed without a name.
    pub learners: Vec<(u64, String)>,
    /// A leadership transfer this member (the leader) accepted (MoveLeader's target id);
    /// the demo's etcd follower carries it out on its next look.
    pub transfer_to: Option<u64>,
}

impl SimEtcd {
    /// etcd's MoveLeader (`POST /v3/maintenance/transfer-leadership`): accepted only by the
    /// leader, for another started member, as etcd answers it (its refusals' words).
    pub fn transfer(&mut self, body: &str) -> String {
        use serde_json::json;
        let target = serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .and_then(|v| v["targetID"].as_str().and_then(|t| t.parse::<u64>().ok()));
        let refuse = |message: &str| json!({"code": 9, "message": message}).to_string();
        if self.leader != Some(self.member_id) {
            return refuse("etcdserver: not leader");
        }
        match target {
            Some(t) if t != self.member_id && self.members.iter().any(|m| m.0 == t) => {
                self.transfer_to = Some(t);
                json!({"header": self.header()}).to_string()
            }
            _ => refuse("etcdserver: bad leader transferee"),
        }
    }

    fn header(&self) -> serde_json::Value {
        serde_json::json!({
            "cluster_id": self.cluster_id.to_string(),
            "member_id": self.member_id.to_string(),
            "revision": self.applied.to_string(),
            "raft_term": self.term.to_string(),
        })
    }

    /// The gateway's answer to `POST path` (an etcd 3.6 member's JSON, uint64s as strings,
    /// zero values left out); None for a path the model does not serve.
    pub fn answer(&self, path: &str, db_size: u64) -> Option<String> {
        use serde_json::json;
        let no_leader = || json!({"code": 14, "message": "etcdserver: request timed out"});
        let v = match path {
            "/v3/cluster/member/list" => {
                let mut members: Vec<(u64, serde_json::Value)> = self
                    .members
                    .iter()
                    .map(|(id, name, peer, client)| {
                        (
                            *id,
                            json!({
                                "ID": id.to_string(),
                                "name": name,
                                "peerURLs": [peer],
                                "clientURLs": [client],
                            }),
                        )
                    })
                    .collect();
                for (id, peer) in &self.learners {
                    members.push((
                        *id,
                        json!({"ID": id.to_string(), "peerURLs": [peer], "isLearner": true}),
                    ));
                }
                // etcd lists its members by id.
                members.sort_by_key(|(id, _)| *id);
                json!({
                    "header": self.header(),
                    "members": members.into_iter().map(|(_, m)| m).collect::<Vec<_>>(),
                })
            }
            "/v3/maintenance/status" => {
                let mut v = json!({
                    "header": self.header(),
                    "version": "3.6.4",
                    "dbSize": db_size.to_string(),
                    "raftIndex": self.applied.to_string(),
                    "raftTerm": self.term.to_string(),
                    "raftAppliedIndex": self.applied.to_string(),
                    "dbSizeInUse": (db_size / 2).to_string(),
                    "storageVersion": "3.6.0",
                    "downgradeInfo": {},
                });
                let mut errors: Vec<String> = Vec::new();
                match self.leader {
                    Some(l) => v["leader"] = json!(l.to_string()),
                    None => errors.push("etcdserver: no leader".into()),
                }
                for (m, a) in &self.alarms {
                    errors.push(format!("memberID:{m} alarm:{a} "));
                }
                if !errors.is_empty() {
                    v["errors"] = json!(errors);
                }
                v
            }
            "/v3/maintenance/alarm" => {
                let mut v = json!({"header": self.header()});
                if !self.alarms.is_empty() {
                    v["alarms"] = json!(self
                        .alarms
                        .iter()
                        .map(|(m, a)| json!({"memberID": m.to_string(), "alarm": a}))
                        .collect::<Vec<_>>());
                }
                v
            }
            "/v3/kv/range" => match self.leader {
                Some(_) => json!({"header": self.header()}),
                None => no_leader(),
            },
            // A member serves its snapshot from its own database, leader or not.
            "/v3/maintenance/snapshot" => return Some(snapshot_stream()),
            _ => return None,
        };
        Some(v.to_string())
    }
}

/// What a simulated member's snapshot holds: the model keeps no bbolt database, so it
/// serves a real one, taken once from an etcd 3.6.4 built by tests/apiserver/build.sh (a
/// fresh member, one key: `/hk-sim/note`) through the same `POST /v3/maintenance/snapshot`
/// and decoded: the database, then etcd's sha256 of it.
const SNAPSHOT: &[u8] = include_bytes!("etcd-3.6.4.snapshot.db");

/// [`SNAPSHOT`] as etcd's gateway streams it: one JSON object per line, 32 KiB of the
/// database per message, `remaining_bytes` where more follows, the checksum last.
fn snapshot_stream() -> String {
    use serde_json::json;
    let (db, sum) = SNAPSHOT.split_at(SNAPSHOT.len() - 32);
    let mut out = String::new();
    let mut sent = 0;
    for chunk in db.chunks(32 * 1024) {
        sent += chunk.len();
        let mut result = json!({
            "blob": data_encoding::BASE64.encode(chunk),
            "version": "3.6.0",
        });
        if sent < db.len() {
            result["remaining_bytes"] = json!((db.len() - sent).to_string());
        }
        out.push_str(&json!({ "result": result }).to_string());
        out.push('\n');
    }
    out.push_str(
        &json!({"result": {"blob": data_encoding::BASE64.encode(sum), "version": "3.6.0"}})
            .to_string(),
    );
    out.push('\n');
    out
}

/// Journal records a node keeps (the oldest go first).
pub const JOURNAL_CAP: usize = 20_000;

/// The tunnel unit's OpenVPN client config (`openvpn --config` of the unit's ExecStart).
pub const EGRESS_CONF: &str = "/etc/openvpn/client/egress.conf";

/// The seed repo's VPN unit, the default of hk-console.yaml `names.vpn_unit` (defined once,
/// in the config; the demo runs whatever `gateway_spec` resolves for the repo).
pub use hk_engine::repo::config::DEFAULT_VPN_UNIT as VPN_UNIT;

/// A unit the node does not have, in systemd's words (`systemctl` prints it after
/// `Failed to start X:`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Unit {name} not found.")]
pub struct UnitNotFound {
    pub name: String,
}

impl NodeState {
    /// A healthy Debian 12 k3s server: booted a day before the clock's now, `k3s.service`,
    /// `ssh.service` and `system.slice` active, one SATA disk `sda` (`/` on `sda2`, the k3s
    /// data dir under it), quiet IO, online with a documentation-range exit address.
    pub fn new(hostname: &str, clock: Clock) -> Self {
        let now = clock.now_ms();
        let boot_ms = now.saturating_sub(86_400_000);
        let mut s = NodeState {
            hostname: hostname.to_string(),
            clock,
            boot_ms,
            os_release: OS_RELEASE.to_string(),
            units: BTreeMap::new(),
            journal: Vec::new(),
            disks: BTreeMap::from([("sda".to_string(), Disk::sata(false))]),
            partitions: BTreeMap::from([
                ("sda1".to_string(), "sda".to_string()),
                ("sda2".to_string(), "sda".to_string()),
            ]),
            // A 512 MiB EFI partition, the rest `/` (1 MiB aligned at both ends).
            partition_sizes: BTreeMap::from([
                ("sda1".to_string(), 536_870_912),
                ("sda2".to_string(), 500_107_862_016 - 536_870_912 - 2 * 1_048_576),
            ]),
            cpus: 4,
            memory: Memory::k3s_server(),
            mounts: vec![
                Mount {
                    target: "/".into(),
                    source: "/dev/sda2".into(),
                    fstype: "ext4".into(),
                    options: "rw,relatime,errors=remount-ro".into(),
                },
                Mount {
                    target: "/boot/efi".into(),
                    source: "/dev/sda1".into(),
                    fstype: "vfat".into(),
                    options: "rw,relatime,fmask=0077,dmask=0077,codepage=437,iocharset=ascii,shortname=mixed,utf8,errors=remount-ro".into(),
                },
            ],
            io_pressure: Psi::idle(),
            direct_exit_ip: IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)),
            default_interface: "eth0".into(),
            online: true,
            vpn: None,
            exit_ip_urls: [
                "https://ipinfo.io/ip",
                "https://ifconfig.me/ip",
                "https://api.ipify.org",
                "https://icanhazip.com",
            ]
            .map(String::from)
            .to_vec(),
            commands: Vec::new(),
            next_pid: 700,
            fs: Fs::debian(boot_ms),
            login_user: "debian".into(),
            kernel_release: "6.1.0-28-amd64".into(),
            kernel_version: "#1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22)".into(),
            lan_addr: Ipv4Addr::new(192, 0, 2, 10),
            lan_prefix: 24,
            lan_gateway: Ipv4Addr::new(192, 0, 2, 1),
            mac: mac_for(hostname),
            etcd_leader: false,
            etcd_up: true,
            etcd_has_leader: true,
            etcd: None,
            etcd_real: None,
            vip_held: None,
            reboot_at_ms: None,
            down: false,
            boots: 0,
        };
        for (name, desc) in [
            ("system.slice", "System Slice"),
            ("ssh.service", "OpenBSD Secure Shell server"),
            ("k3s.service", "Lightweight Kubernetes"),
        ] {
            s.add_unit(name, desc, boot_ms);
        }
        s.seed_etc();
        s
    }

    /// Adds (or replaces) an active unit, started at `at_ms`, with its start in the journal.
    pub fn add_unit(&mut self, name: &str, description: &str, at_ms: u64) {
        let name = unit_name(name);
        let pid = self.pid();
        self.units.insert(
            name.clone(),
            Unit {
                state: UnitState::Active,
                description: description.to_string(),
                io_weight: None,
                restarts: 0,
                main_pid: pid,
                active_since_ms: at_ms,
            },
        );
        if !name.ends_with(".slice") {
            self.log(
                at_ms,
                &name,
                "systemd[1]",
                &format!("Started {name} - {description}."),
            );
        }
    }

    /// Makes this node a VPN gateway: the tunnel unit active and connected at `at_ms`.
    pub fn with_vpn(mut self, vpn: VpnTunnel, at_ms: u64) -> Self {
        let unit = unit_name(&vpn.unit);
        self.vpn = Some(VpnTunnel {
            unit: unit.clone(),
            ..vpn
        });
        self.add_unit(&unit, "PIA OpenVPN egress tunnel", at_ms);
        // The client config the unit runs (`openvpn --config EGRESS_CONF`): its `remote` line
        // is the server the tunnel dials, and what vpn.egress.gateway.yml lays down from
        // `vpn_egress_gateway_pia_remote`; the unit reads it again on every start.
        if let Some(v) = &self.vpn {
            let conf = format!(
                "client\ndev {}\nproto udp\nremote {} {}\nping 10\nping-restart 60\n",
                v.interface,
                v.server.ip(),
                v.server.port()
            );
            for d in ["/etc/openvpn", "/etc/openvpn/client"] {
                let _ = self.fs.mkdir(d, 0o755, 0, at_ms);
            }
            let _ = self.write_file(EGRESS_CONF, conf.as_bytes());
        }
        self.log_vpn_connect(at_ms);
        self
    }

    /// The server the tunnel's config names: its first `remote HOST PORT` line whose HOST is
    /// an address (a name would need DNS, which the simulation does not model).
    fn configured_vpn_server(&self) -> Option<SocketAddr> {
        let conf = self.read_file(EGRESS_CONF).ok()?;
        conf.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            match (w.next(), w.next(), w.next()) {
                (Some("remote"), Some(host), Some(port)) => {
                    Some(SocketAddr::new(host.parse().ok()?, port.parse().ok()?))
                }
                _ => None,
            }
        })
    }

    /// The simulated time now.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    fn pid(&mut self) -> u32 {
        self.next_pid += 1 + self.next_pid % 7;
        self.next_pid
    }

    /// Appends a journal record, keeping the journal in time order.
    pub fn log(&mut self, at_ms: u64, unit: &str, ident: &str, message: &str) {
        let e = JournalEntry {
            at_ms,
            unit: unit.to_string(),
            ident: ident.to_string(),
            message: message.to_string(),
        };
        let pos = self.journal.partition_point(|x| x.at_ms <= at_ms);
        self.journal.insert(pos, e);
        // journald rotates too (SystemMaxUse): a node whose tunnel restarts all day keeps
        // its recent history, not all of it.
        if self.journal.len() > JOURNAL_CAP {
            let excess = self.journal.len() - JOURNAL_CAP;
            self.journal.drain(..excess);
        }
    }

    /// OpenVPN 2.6's lines for one successful connect of the tunnel, from `at_ms`.
    fn log_vpn_connect(&mut self, at_ms: u64) {
        let Some(v) = self.vpn.clone() else { return };
        let pid = self.units.get(&v.unit).map(|u| u.main_pid).unwrap_or(1);
        let ident = format!("openvpn[{pid}]");
        let server = match v.server {
            SocketAddr::V4(a) => format!("[AF_INET]{a}"),
            SocketAddr::V6(a) => format!("[AF_INET6]{a}"),
        };
        let prefix = mask_prefix(v.netmask);
        let gw = Ipv4Addr::from(u32::from(v.tunnel_addr) & u32::from(v.netmask) | 1);
        let lines = [
            "OpenVPN 2.6.3 x86_64-pc-linux-gnu [SSL (OpenSSL)] [LZO] [LZ4] [EPOLL] [PKCS11] [MH/PKTINFO] [AEAD] [DCO]".to_string(),
            format!("TCP/UDP: Preserving recently used remote address: {server}"),
            format!("UDPv4 link remote: {server}"),
            format!("[{}] Peer Connection Initiated with {server}", "pia-server"),
            format!(
                "PUSH: Received control message: 'PUSH_REPLY,redirect-gateway def1,dhcp-option DNS 10.0.0.243,route-gateway {gw},topology subnet,ping 10,ping-restart 60,ifconfig {} {},peer-id 3,cipher AES-128-GCM'",
                v.tunnel_addr, v.netmask
            ),
            format!("TUN/TAP device {} opened", v.interface),
            format!("net_addr_v4_add: {}/{prefix} dev {}", v.tunnel_addr, v.interface),
            "Initialization Sequence Completed".to_string(),
        ];
        for (k, l) in lines.iter().enumerate() {
            self.log(at_ms + 40 * k as u64, &v.unit, &ident, l);
        }
    }

    /// Starts a unit at `at_ms` (journal: `Started`; the VPN unit also logs its connect).
    pub fn start_unit_at(&mut self, name: &str, at_ms: u64) -> Result<(), UnitNotFound> {
        let name = unit_name(name);
        let pid = self.pid();
        let u = self
            .units
            .get_mut(&name)
            .ok_or_else(|| UnitNotFound { name: name.clone() })?;
        if u.state == UnitState::Active {
            return Ok(());
        }
        u.state = UnitState::Active;
        u.main_pid = pid;
        u.active_since_ms = at_ms;
        let desc = u.description.clone();
        self.log(
            at_ms,
            &name,
            "systemd[1]",
            &format!("Started {name} - {desc}."),
        );
        if self.vpn.as_ref().is_some_and(|v| v.unit == name) {
            // openvpn reads its config when it starts: a changed `remote` takes effect now.
            if let Some(server) = self.configured_vpn_server() {
                if let Some(v) = self.vpn.as_mut() {
                    if v.server != server {
                        // Another server: its own exit, and the address it pushes from its
                        // own pool (the one before belonged to the old server).
                        let (exit, tunnel) = server_assigns(server);
                        v.exit_ip = exit;
                        v.tunnel_addr = tunnel;
                    }
                    v.server = server;
                }
            }
            self.log_vpn_connect(at_ms + 100);
        }
        Ok(())
    }

    /// This boot's id (`/proc/sys/kernel/random/boot_id`): a new one after each boot, the
    /// same for the whole of one (derived from the host name and the boot time).
    pub fn boot_id(&self) -> String {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&self.hostname, self.boot_ms, self.boots).hash(&mut h);
        let a = h.finish();
        (a, "boot").hash(&mut h);
        let b = h.finish();
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0x0fff,
            0x8000 | ((b >> 48) & 0x3fff),
            b & 0xffff_ffff_ffff
        )
    }

    /// A reboot's first half at `at_ms`: every running unit stopped (k3s with it, so the
    /// cluster sees the server go), the node down. Returns the units to start at boot.
    pub fn shut_down(&mut self, at_ms: u64) -> Vec<String> {
        let running: Vec<String> = self
            .units
            .iter()
            .filter(|(_, u)| u.state == UnitState::Active)
            .map(|(n, _)| n.clone())
            .collect();
        self.log(at_ms, "", "systemd-logind", "The system will reboot now!");
        for u in running.iter().rev() {
            let _ = self.stop_unit_at(u, at_ms);
        }
        self.log(at_ms + 40, "", "systemd-shutdown[1]", "Rebooting.");
        self.reboot_at_ms = None;
        self.down = true;
        running
    }

    /// A reboot's second half: a new boot at `at_ms` (a new boot id), `units` started.
    pub fn boot(&mut self, at_ms: u64, units: &[String]) {
        self.boot_ms = at_ms;
        self.boots += 1;
        self.down = false;
        self.log(
            at_ms,
            "",
            "kernel",
            &format!("Linux version {}", self.kernel_release),
        );
        for u in units {
            let _ = self.start_unit_at(u, at_ms + 500);
        }
    }

    /// Stops a unit at `at_ms` (journal: `Stopping`, `Stopped`).
    pub fn stop_unit_at(&mut self, name: &str, at_ms: u64) -> Result<(), UnitNotFound> {
        let name = unit_name(name);
        let u = self
            .units
            .get_mut(&name)
            .ok_or_else(|| UnitNotFound { name: name.clone() })?;
        if u.state != UnitState::Active {
            u.state = UnitState::Inactive;
            return Ok(());
        }
        u.state = UnitState::Inactive;
        let (desc, pid) = (u.description.clone(), u.main_pid);
        self.log(
            at_ms,
            &name,
            "systemd[1]",
            &format!("Stopping {name} - {desc}..."),
        );
        if self.vpn.as_ref().is_some_and(|v| v.unit == name) {
            let ident = format!("openvpn[{pid}]");
            self.log(
                at_ms + 10,
                &name,
                &ident,
                "SIGTERM[hard,] received, process exiting",
            );
        }
        self.log(
            at_ms + 20,
            &name,
            "systemd[1]",
            &format!("{name}: Deactivated successfully."),
        );
        self.log(
            at_ms + 30,
            &name,
            "systemd[1]",
            &format!("Stopped {name} - {desc}."),
        );
        Ok(())
    }

    /// A restart at `at_ms`: stop, start, NRestarts + 1. A simulation backfills history
    /// with past times; `systemctl restart` uses now.
    pub fn restart_unit_at(&mut self, name: &str, at_ms: u64) -> Result<(), UnitNotFound> {
        self.stop_unit_at(name, at_ms)?;
        self.start_unit_at(name, at_ms + 50)?;
        if let Some(u) = self.units.get_mut(&unit_name(name)) {
            u.restarts += 1;
        }
        Ok(())
    }

    /// The unit's main process dies at `at_ms` (a fault): `failed`, as systemd logs it.
    pub fn fail_unit_at(&mut self, name: &str, at_ms: u64) -> Result<(), UnitNotFound> {
        let name = unit_name(name);
        let u = self
            .units
            .get_mut(&name)
            .ok_or_else(|| UnitNotFound { name: name.clone() })?;
        u.state = UnitState::Failed;
        self.log(
            at_ms,
            &name,
            "systemd[1]",
            &format!("{name}: Main process exited, code=exited, status=1/FAILURE"),
        );
        self.log(
            at_ms + 1,
            &name,
            "systemd[1]",
            &format!("{name}: Failed with result 'exit-code'."),
        );
        Ok(())
    }

    /// `running`, or `degraded` when a unit failed.
    pub fn system_state(&self) -> &'static str {
        if self.units.values().any(|u| u.state == UnitState::Failed) {
            "degraded"
        } else {
            "running"
        }
    }

    /// The tunnel, when its interface exists (its unit is active).
    pub fn tunnel(&self) -> Option<&VpnTunnel> {
        self.tunnel_up()
    }

    /// Whether the tunnel interface exists (its unit is active).
    pub(crate) fn tunnel_up(&self) -> Option<&VpnTunnel> {
        let v = self.vpn.as_ref()?;
        let up = self
            .units
            .get(&v.unit)
            .is_some_and(|u| u.state == UnitState::Active);
        up.then_some(v)
    }

    /// The member's DB size (what its metrics and its status both say).
    pub fn etcd_db_size(&self) -> u64 {
        25_165_824
    }

    /// The etcd member's Prometheus metrics: leadership from [`NodeState::etcd_leader`], WAL
    /// fsync latencies that follow the IO pressure (a starved disk makes every fsync wait:
    /// idle ~2 ms, 11% PSI ~1 s at the tail), a fixed 24 MiB DB of a 2 GiB quota. The
    /// histogram counts 100 fsyncs, then 20 a simulated second, all shaped as the disk is now (as if
    /// it had always been so): two scrapes differ by the fsyncs between them, as a real
    /// member's do, and each scrape's p99 is the disk's now.
    pub fn etcd_metrics(&self) -> String {
        let psi = self.io_pressure.some_avg10.max(0.0);
        // Where the 99th percentile lands: 2 ms at rest, doubling per PSI point past 1%.
        let p99_s = if psi < 1.0 {
            0.002
        } else {
            (0.002 * 2f64.powf(psi - 1.0)).min(8.0)
        };
        let count = 100 + self.now_ms().saturating_sub(self.clock.began_ms()) / 50;
        let mut out = String::from(
            "# HELP etcd_server_is_leader Whether or not this member is a leader. 1 if is, 0 otherwise.\n\
             # TYPE etcd_server_is_leader gauge\n",
        );
        out.push_str(&format!(
            "etcd_server_is_leader {}\netcd_server_has_leader {}\n\
             etcd_server_leader_changes_seen_total 1\n\
             etcd_mvcc_db_total_size_in_bytes {}\n\
             etcd_server_quota_backend_bytes 2147483648\n\
             # TYPE etcd_disk_wal_fsync_duration_seconds histogram\n",
            u8::from(self.etcd_leader),
            u8::from(self.etcd_has_leader),
            self.etcd_db_size()
        ));
        let bounds = [
            0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048,
            4.096, 8.192,
        ];
        for le in bounds {
            // 98% of fsyncs at or under 1 ms, the last 2% at the p99 bound.
            let cum = if le >= p99_s {
                count
            } else if le >= 0.001 {
                count * 98 / 100
            } else {
                0
            };
            out.push_str(&format!(
                "etcd_disk_wal_fsync_duration_seconds_bucket{{le=\"{le}\"}} {cum}\n"
            ));
        }
        out.push_str(&format!(
            "etcd_disk_wal_fsync_duration_seconds_bucket{{le=\"+Inf\"}} {count}\n\
             etcd_disk_wal_fsync_duration_seconds_sum {:.3}\n\
             etcd_disk_wal_fsync_duration_seconds_count {count}\n",
            count as f64 * (0.98 * 0.001 + 0.02 * p99_s)
        ));
        out
    }

    /// The disk behind a `/sys/block/DEV/queue/FILE` path.
    fn queue_file(&self, path: &str) -> Option<(String, String)> {
        let rest = path.strip_prefix("/sys/block/")?;
        let (dev, file) = rest.split_once("/queue/")?;
        self.disks
            .contains_key(dev)
            .then(|| (dev.to_string(), file.to_string()))
    }

    /// A file's contents (as root): the computed ones first, then the file tree.
    pub fn read_file(&self, path: &str) -> Result<String, FsError> {
        self.read_path(path, 0)
            .map(|d| String::from_utf8_lossy(&d).into_owned())
    }

    /// Writes a file as root (truncating).
    pub fn write_file(&mut self, path: &str, data: &[u8]) -> Result<(), FsError> {
        let now = self.now_ms();
        self.write_path(path, data, false, 0, now)
    }

    /// Metadata of a file the node computes (sysfs, /proc, /dev, os-release).
    fn virtual_stat(&self, path: &str) -> Option<Stat> {
        let file = |mode: u32, size: u64| Stat {
            kind: FileKind::File,
            mode,
            uid: 0,
            size,
            mtime_ms: self.boot_ms,
            symlink: false,
        };
        let dir = |symlink: bool| Stat {
            kind: FileKind::Dir,
            mode: 0o755,
            uid: 0,
            size: 0,
            mtime_ms: self.boot_ms,
            symlink,
        };
        if let Some(rest) = path.strip_prefix("/sys/block/") {
            let mut parts = rest.split('/');
            let disk = parts.next()?;
            if !self.disks.contains_key(disk) {
                return None;
            }
            return match (parts.next(), parts.next(), parts.next()) {
                (None, _, _) => Some(dir(true)),
                (Some("queue"), None, _) => Some(dir(false)),
                (Some("queue"), Some("scheduler" | "nr_requests"), None) => Some(file(0o644, 4096)),
                (Some("queue"), Some("rotational"), None) => Some(file(0o444, 4096)),
                (Some("size"), None, _) => Some(file(0o444, 4096)),
                _ => None,
            };
        }
        if let Some(dev) = path.strip_prefix("/dev/") {
            if dev == "null" {
                return Some(Stat {
                    kind: FileKind::CharDev,
                    mode: 0o666,
                    ..file(0, 0)
                });
            }
            if self.disks.contains_key(dev) || self.partitions.contains_key(dev) {
                return Some(Stat {
                    kind: FileKind::BlockDev,
                    mode: 0o660,
                    ..file(0, 0)
                });
            }
            return None;
        }
        match path {
            "/proc/pressure" => Some(dir(false)),
            // procfs files report size 0.
            "/proc/pressure/io" | "/proc/uptime" | "/proc/cpuinfo" | "/proc/meminfo"
            | "/proc/loadavg" | "/proc/mounts" | "/proc/version" => Some(file(0o444, 0)),
            "/etc/os-release" | "/usr/lib/os-release" => {
                Some(file(0o644, self.os_release.len() as u64))
            }
            "/etc/hostname" => Some(file(0o644, self.hostname.len() as u64 + 1)),
            _ => None,
        }
    }

    /// True for a file the node computes rather than stores.
    pub fn is_virtual(&self, path: &str) -> bool {
        self.virtual_stat(path).is_some()
    }

    /// A path under /proc or /sys the model neither computes nor knows to be absent: a
    /// real node has most of them, so reading, listing or testing one must say "not
    /// simulated", never ENOENT. The model knows every disk, so another name under
    /// /sys/block is truly absent.
    pub fn unmodelled(&self, path: &str) -> bool {
        let under = |root: &str| path == root || path.starts_with(&format!("{root}/"));
        if !(under("/proc") || under("/sys")) || self.virtual_stat(path).is_some() {
            return false;
        }
        if matches!(path, "/proc" | "/sys" | "/sys/block") {
            return false;
        }
        match path.strip_prefix("/sys/block/") {
            Some(rest) => self
                .disks
                .contains_key(rest.split('/').next().unwrap_or(rest)),
            None => true,
        }
    }

    /// A directory whose listing the model gives only in part (a real /proc has every
    /// process, a real queue directory thirty files): `ls` of it is not simulated.
    fn listing_unmodelled(&self, path: &str) -> bool {
        let under = |root: &str| path == root || path.starts_with(&format!("{root}/"));
        (under("/proc") || under("/sys")) && path != "/sys/block"
    }

    /// A path's metadata, following links.
    pub fn stat(&self, path: &str) -> Option<Stat> {
        self.virtual_stat(path).or_else(|| self.fs.stat(path))
    }

    /// A file's bytes as `uid` reads them.
    pub fn read_path(&self, path: &str, uid: u32) -> Result<Vec<u8>, FsError> {
        if self.unmodelled(path) {
            return Err(FsError::NotSimulated);
        }
        match self.virtual_stat(path) {
            Some(st) if st.kind == FileKind::Dir => Err(FsError::IsADirectory),
            Some(_) => self.read_virtual(path).map(String::into_bytes),
            None => self.fs.read(path, uid),
        }
    }

    /// Writes a file as `uid`: computed files by their rules, the rest into the tree.
    pub fn write_path(
        &mut self,
        path: &str,
        data: &[u8],
        append: bool,
        uid: u32,
        now_ms: u64,
    ) -> Result<(), FsError> {
        match self.virtual_stat(path) {
            Some(_) if path == "/dev/null" => Ok(()),
            Some(st) if st.kind == FileKind::Dir => Err(FsError::IsADirectory),
            Some(_) if uid != 0 => Err(FsError::PermissionDenied),
            Some(_) => self.write_virtual(path, data),
            None if self.unmodelled(path) => Err(FsError::NotSimulated),
            None if path.starts_with("/proc/") || path.starts_with("/sys/") => {
                Err(FsError::NotFound)
            }
            None => self.fs.write(path, data, append, uid, now_ms),
        }
    }

    /// The names in a directory: the computed ones and the stored ones.
    pub fn list_path(&self, path: &str, uid: u32) -> Result<Vec<String>, FsError> {
        if self.listing_unmodelled(path) {
            return Err(FsError::NotSimulated);
        }
        let mut names: Vec<String> = match path {
            "/sys/block" => self.disks.keys().cloned().collect(),
            "/dev" => std::iter::once("null".to_string())
                .chain(self.disks.keys().cloned())
                .chain(self.partitions.keys().cloned())
                .collect(),
            "/proc" => vec!["pressure".into(), "uptime".into()],
            "/proc/pressure" => vec!["io".into()],
            "/etc" => vec!["hostname".into(), "os-release".into()],
            "/usr/lib" => vec!["os-release".into()],
            p => match self.virtual_stat(p) {
                Some(st) if st.kind == FileKind::Dir && !p.ends_with("/queue") => {
                    vec!["queue".into()]
                }
                Some(st) if st.kind == FileKind::Dir => {
                    vec![
                        "nr_requests".into(),
                        "rotational".into(),
                        "scheduler".into(),
                    ]
                }
                Some(_) => return Err(FsError::NotADirectory),
                None => Vec::new(),
            },
        };
        match self.fs.list(path, uid) {
            Ok(more) => names.extend(more),
            // A directory the model holds in part: the computed names would not make it whole.
            Err(FsError::NotSimulated) => return Err(FsError::NotSimulated),
            Err(e) if names.is_empty() && !self.is_virtual(path) => return Err(e),
            Err(_) => {}
        }
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// A file the node computes: its contents, or Err (ENOENT when it is not one).
    fn read_virtual(&self, path: &str) -> Result<String, FsError> {
        if let Some(d) = path
            .strip_prefix("/sys/block/")
            .and_then(|r| r.strip_suffix("/size"))
            .and_then(|dev| self.disks.get(dev))
        {
            return Ok(format!("{}\n", d.size_bytes / 512));
        }
        if let Some((dev, file)) = self.queue_file(path) {
            let d = self.disks.get(&dev).ok_or(FsError::NotFound)?;
            return match file.as_str() {
                "scheduler" => Ok(format!("{}\n", d.scheduler_line())),
                "nr_requests" => Ok(format!("{}\n", d.nr_requests)),
                "rotational" => Ok(format!("{}\n", u8::from(d.rotational))),
                _ => Err(FsError::NotFound),
            };
        }
        let now = self.now_ms();
        match path {
            "/etc/os-release" | "/usr/lib/os-release" => Ok(self.os_release.clone()),
            "/etc/hostname" => Ok(format!("{}\n", self.hostname)),
            "/proc/pressure/io" => Ok(self.io_pressure.render()),
            "/proc/uptime" => {
                let up = now.saturating_sub(self.boot_ms) as f64 / 1000.0;
                // Idle time is summed over the CPUs: mostly idle, as a quiet server is.
                Ok(format!("{up:.2} {:.2}\n", up * f64::from(self.cpus) * 0.9))
            }
            "/proc/cpuinfo" => Ok(self.cpuinfo()),
            "/proc/meminfo" => Ok(self.meminfo()),
            "/proc/loadavg" => {
                let l = self.load_average();
                let procs = process_count(self);
                // The newest pid is the reading `cat`'s, the one after its shell's.
                Ok(format!(
                    "{l:.2} {l:.2} {l:.2} 1/{procs} {}\n",
                    SESSION_PID + 1
                ))
            }
            "/proc/mounts" => Ok(self
                .mount_table()
                .iter()
                .map(|m| format!("{} {} {} {} 0 0\n", m.source, m.target, m.fstype, m.options))
                .collect()),
            "/proc/version" => Ok(format!(
                "Linux version {} (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14) 12.2.0, GNU ld (GNU Binutils for Debian) 2.40) {}\n",
                self.kernel_release, self.kernel_version
            )),
            "/dev/null" => Ok(String::new()),
            _ => Err(FsError::NotFound),
        }
    }

    /// Writes a file the node computes: only the writable sysfs queue files, by the
    /// kernel's rules.
    fn write_virtual(&mut self, path: &str, data: &[u8]) -> Result<(), FsError> {
        if path == "/dev/null" {
            return Ok(());
        }
        let text = String::from_utf8_lossy(data);
        let value = text.trim();
        let Some((dev, file)) = self.queue_file(path) else {
            return Err(FsError::PermissionDenied);
        };
        let disk = self.disks.get_mut(&dev).ok_or(FsError::NotFound)?;
        // Opening for writing truncates nothing in sysfs; an empty write is no change.
        if value.is_empty() {
            return Ok(());
        }
        match file.as_str() {
            "scheduler" => {
                if !disk.schedulers.iter().any(|s| s == value) {
                    return Err(FsError::InvalidArgument);
                }
                disk.scheduler = value.to_string();
                Ok(())
            }
            "nr_requests" => match value.parse::<u32>() {
                Ok(n) if (4..=2048).contains(&n) => {
                    disk.nr_requests = n;
                    Ok(())
                }
                _ => Err(FsError::InvalidArgument),
            },
            _ => Err(FsError::PermissionDenied),
        }
    }
}

/// The kernel's own mounts on a Debian 12 server, in the order systemd makes them, with
/// the node's block-device mounts (the root first) placed where the kernel lists them.
const KERNEL_MOUNTS_EARLY: [(&str, &str, &str, &str); 5] = [
    ("/sys", "sysfs", "sysfs", "rw,nosuid,nodev,noexec,relatime"),
    ("/proc", "proc", "proc", "rw,nosuid,nodev,noexec,relatime"),
    (
        "/dev",
        "udev",
        "devtmpfs",
        "rw,nosuid,relatime,size=8117212k,nr_inodes=2029303,mode=755,inode64",
    ),
    (
        "/dev/pts",
        "devpts",
        "devpts",
        "rw,nosuid,noexec,relatime,gid=5,mode=620,ptmxmode=000",
    ),
    (
        "/run",
        "tmpfs",
        "tmpfs",
        "rw,nosuid,nodev,noexec,relatime,size=1628804k,mode=755,inode64",
    ),
];
const KERNEL_MOUNTS_LATE: [(&str, &str, &str, &str); 6] = [
    (
        "/sys/kernel/security",
        "securityfs",
        "securityfs",
        "rw,nosuid,nodev,noexec,relatime",
    ),
    ("/dev/shm", "tmpfs", "tmpfs", "rw,nosuid,nodev,inode64"),
    (
        "/run/lock",
        "tmpfs",
        "tmpfs",
        "rw,nosuid,nodev,noexec,relatime,size=5120k,inode64",
    ),
    (
        "/sys/fs/cgroup",
        "cgroup2",
        "cgroup2",
        "rw,nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot",
    ),
    (
        "/sys/fs/pstore",
        "pstore",
        "pstore",
        "rw,nosuid,nodev,noexec,relatime",
    ),
    (
        "/sys/fs/bpf",
        "bpf",
        "bpf",
        "rw,nosuid,nodev,noexec,relatime,mode=700",
    ),
];

/// `/proc/meminfo`'s line: the name and colon in 16 columns, the value in 8, then `kB`.
pub(crate) fn meminfo_line(name: &str, kib: u64) -> String {
    format!("{:<16}{kib:>8} kB\n", format!("{name}:"))
}

impl NodeState {
    /// Every mount, in `/proc/mounts` order: the kernel's, then the root, then the rest of
    /// [`NodeState::mounts`]. `findmnt`, `df` and `/proc/mounts` all read this one list.
    pub fn mount_table(&self) -> Vec<Mount> {
        let m = |(target, source, fstype, options): (&str, &str, &str, &str)| Mount {
            target: target.into(),
            source: source.into(),
            fstype: fstype.into(),
            options: options.into(),
        };
        let mut v: Vec<Mount> = KERNEL_MOUNTS_EARLY.into_iter().map(m).collect();
        v.extend(self.mounts.iter().filter(|x| x.target == "/").cloned());
        v.extend(KERNEL_MOUNTS_LATE.into_iter().map(m));
        v.extend(self.mounts.iter().filter(|x| x.target != "/").cloned());
        v
    }

    /// The /etc files every Debian server has and scripts read, written from the model:
    /// fstab from the block-device mounts (by the UUIDs `lsblk -f` shows), hosts, and
    /// resolv.conf (the LAN's gateway resolves). Ordinary files: a playbook may rewrite them.
    fn seed_etc(&mut self) {
        let mut fstab = String::from(
            "# /etc/fstab: static file system information.\n\
             # <file system> <mount point>   <type>  <options>       <dump>  <pass>\n",
        );
        for m in &self.mounts {
            let Some(dev) = m.source.strip_prefix("/dev/") else {
                continue;
            };
            let (opts, pass) = match (m.fstype.as_str(), m.target.as_str()) {
                ("vfat", _) => ("umask=0077", 1),
                (_, "/") => ("errors=remount-ro", 1),
                _ => ("defaults", 2),
            };
            fstab.push_str(&format!(
                "# {} was on {} during installation\nUUID={} {:<15} {:<7} {:<15} 0       {pass}\n",
                m.target,
                m.source,
                fs_uuid(self, dev, &m.fstype),
                m.target,
                m.fstype,
                opts
            ));
        }
        let hosts = format!(
            "127.0.0.1\tlocalhost\n127.0.1.1\t{}\n\n\
             # The following lines are desirable for IPv6 capable hosts\n\
             ::1     localhost ip6-localhost ip6-loopback\nff02::1 ip6-allnodes\n\
             ff02::2 ip6-allrouters\n",
            self.hostname
        );
        let now = self.boot_ms;
        for (path, text) in [
            ("/etc/fstab", fstab),
            ("/etc/hosts", hosts),
            ("/etc/resolv.conf", self.resolv_conf()),
        ] {
            // Root writes into a directory the tree has: nothing to refuse.
            let _ = self.fs.write(path, text.as_bytes(), false, 0, now);
        }
    }

    fn resolv_conf(&self) -> String {
        format!("nameserver {}\n", self.lan_gateway)
    }

    /// Places the node on its LAN: the default interface's address, prefix and gateway
    /// (`ip`, `hostname -I`, etcd's listeners in `ss` all read them).
    pub fn set_lan(&mut self, addr: Ipv4Addr, prefix: u8, gateway: Ipv4Addr) {
        self.lan_addr = addr;
        self.lan_prefix = prefix.min(32);
        self.lan_gateway = gateway;
        let conf = self.resolv_conf();
        let now = self.boot_ms;
        let _ = self
            .fs
            .write("/etc/resolv.conf", conf.as_bytes(), false, 0, now);
    }

    /// The 1/5/15-minute load average: a quiet server's 0.3, raised by IO stalls (a task
    /// waiting on the disk counts towards the load).
    pub fn load_average(&self) -> f64 {
        self.io_pressure.some_avg10 / 10.0 + 0.3
    }

    fn cpuinfo(&self) -> String {
        let mut out = String::new();
        for k in 0..self.cpus {
            out.push_str(&format!(
                "processor\t: {k}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 94\n\
                 model name\t: Intel(R) Core(TM) i5-6500T CPU @ 2.50GHz\nstepping\t: 3\n\
                 microcode\t: 0xf0\ncpu MHz\t\t: 2500.000\ncache size\t: 6144 KB\n\
                 physical id\t: 0\nsiblings\t: {n}\ncore id\t\t: {k}\ncpu cores\t: {n}\n\
                 apicid\t\t: {a}\ninitial apicid\t: {a}\nfpu\t\t: yes\nfpu_exception\t: yes\n\
                 cpuid level\t: 22\nwp\t\t: yes\n\
                 flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat \
                 pse36 clflush dts acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp \
                 lm constant_tsc arch_perfmon nopl xtopology nonstop_tsc cpuid aperfmperf pni \
                 pclmulqdq monitor vmx est ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt \
                 aes xsave avx f16c rdrand lahf_lm abm fsgsbase bmi1 avx2 smep bmi2 erms \
                 invpcid rdseed adx smap clflushopt xsaveopt xsavec xgetbv1 xsaves arat md_clear\n\
                 bugs\t\t: cpu_meltdown spectre_v1 spectre_v2 spec_store_bypass l1tf mds swapgs \
                 taa itlb_multihit srbds mmio_stale_data retbleed gds\n\
                 bogomips\t: 4999.90\nclflush size\t: 64\ncache_alignment\t: 64\n\
                 address sizes\t: 39 bits physical, 48 bits virtual\npower management:\n\n",
                n = self.cpus,
                a = k * 2,
            ));
        }
        out
    }

    fn meminfo(&self) -> String {
        let m = &self.memory;
        let active = m.total.saturating_sub(m.free) / 3;
        [
            ("MemTotal", m.total),
            ("MemFree", m.free),
            ("MemAvailable", m.available),
            ("Buffers", m.buffers),
            ("Cached", m.cached),
            ("SwapCached", 0),
            ("Active", active),
            ("Inactive", active / 2),
            ("SwapTotal", m.swap_total),
            ("SwapFree", m.swap_free),
            ("Dirty", 124),
            ("Writeback", 0),
            ("Shmem", m.shmem),
            ("SReclaimable", m.s_reclaimable),
            ("SUnreclaim", 98_312),
            ("CommitLimit", m.total / 2 + m.swap_total),
            ("Committed_AS", m.used() * 2),
        ]
        .iter()
        .map(|(n, v)| meminfo_line(n, *v))
        .collect()
    }
}

pub(crate) fn mask_prefix(mask: Ipv4Addr) -> u32 {
    u32::from(mask).count_ones()
}

/// systemd's unit name completion: a bare name is a `.service`.
pub fn unit_name(name: &str) -> String {
    const TYPES: [&str; 11] = [
        ".service",
        ".socket",
        ".target",
        ".slice",
        ".scope",
        ".mount",
        ".timer",
        ".path",
        ".device",
        ".swap",
        ".automount",
    ];
    if TYPES.iter().any(|t| name.ends_with(t)) {
        name.to_string()
    } else {
        format!("{name}.service")
    }
}

// ---------------------------------------------------------------------------------------
// Facts the utilities and the simulated files share
// ---------------------------------------------------------------------------------------

/// (pid, ppid, user, command) of the node's processes: init, the active units' main
/// processes, and the session's shell.
/// The pid of the shell a command runs under (`ps` shows it and itself after it).
pub const SESSION_PID: u32 = 4242;

/// How many processes `/proc/loadavg` counts: the node's, plus the reading shell and `cat`.
pub fn process_count(s: &NodeState) -> usize {
    processes(s).len() + 2
}

pub fn processes(s: &NodeState) -> Vec<(u32, u32, String, String)> {
    let mut v = vec![
        (1, 0, "root".to_string(), "/sbin/init".to_string()),
        (2, 0, "root".to_string(), "[kthreadd]".to_string()),
    ];
    for (name, u) in &s.units {
        if u.state != UnitState::Active || name.ends_with(".slice") {
            continue;
        }
        let cmd = match name.as_str() {
            "k3s.service" => "/usr/local/bin/k3s server".to_string(),
            "ssh.service" => "sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups".to_string(),
            n if s.vpn.as_ref().is_some_and(|v| v.unit == n) => {
                format!("/usr/sbin/openvpn --config {EGRESS_CONF}")
            }
            n => format!("/usr/bin/{}", n.trim_end_matches(".service")),
        };
        v.push((u.main_pid, 1, "root".to_string(), cmd));
    }
    v.sort_by_key(|p| p.0);
    v
}

/// A stable file-system UUID for a device (ext4's 8-4-4-4-12, FAT's XXXX-XXXX).
pub fn fs_uuid(s: &NodeState, name: &str, fstype: &str) -> String {
    let h = format!("{}/{name}", s.hostname)
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
    let h2 = h.rotate_left(29).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    if fstype == "vfat" {
        let x = format!("{:08X}", h >> 32);
        return format!("{}-{}", &x[..4], &x[4..]);
    }
    let x = format!("{h:016x}{h2:016x}");
    format!(
        "{}-{}-{}-{}-{}",
        &x[..8],
        &x[8..12],
        &x[12..16],
        &x[16..20],
        &x[20..32]
    )
}
