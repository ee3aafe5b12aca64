//! etcd: per server, the member's metrics ([`parse_etcd_metrics`]) and IO pressure
//! ([`parse_psi`]); exactly one leader among the servers; and quorum ([`judge_quorum`]):
//! `/readyz/etcd` through the API endpoint and the servers' Ready conditions counted
//! against a majority of the members.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{could_not, ConditionStatus, Look, Pane, Rule, Severity, Timestamp, Verdict};
/// `/readyz/etcd` of the API server the environment's endpoint reaches.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case", tag = "etcd")]
pub enum EtcdReady {
    Ok,
    /// The endpoint answered, not `ok`: its answer (or the error).
    Failed {
        detail: String,
    },
}

/// `/proc/pressure/io`: the share of wall time some (or all) tasks waited on IO, as the
/// kernel averages it over 10 and 60 s, in percent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IoPressure {
    pub some_avg10: f64,
    pub some_avg60: f64,
    /// Absent on kernels that do not report `full` for IO (before 5.13 it is always there;
    /// a missing line is not a zero).
    pub full_avg10: Option<f64>,
}

// f64 fields: the values are parsed from text and compared, never hashed or looked up.
impl Eq for IoPressure {}

/// Why an etcd member's `/metrics` or a server's `/proc/pressure/io` could not be read as
/// such; the text quotes the offending line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("not PSI text: {line:?}")]
    NotPsi { line: String },
    #[error("not PSI text: {key}={value:?} in {line:?}")]
    PsiValue {
        key: String,
        value: String,
        line: String,
    },
    #[error("not PSI text (no avg10/avg60): {line:?}")]
    PsiAverages { line: String },
    #[error("not PSI text: no `some` line")]
    NoSomeLine,
    #[error("no etcd_server_is_leader sample: this is not an etcd member's /metrics")]
    NotEtcd,
}

/// Parse `/proc/pressure/io`. The `some` line is required; anything that is no PSI text is
/// an error quoting the line.
pub fn parse_psi(text: &str) -> Result<IoPressure, ParseError> {
    let mut some = None;
    let mut full = None;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut words = line.split_whitespace();
        let kind = words.next().unwrap_or_default();
        let mut avg10 = None;
        let mut avg60 = None;
        for w in words {
            let Some((k, v)) = w.split_once('=') else {
                return Err(ParseError::NotPsi { line: line.into() });
            };
            let parse = || {
                v.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| ParseError::PsiValue {
                        key: k.into(),
                        value: v.into(),
                        line: line.into(),
                    })
            };
            match k {
                "avg10" => avg10 = Some(parse()?),
                "avg60" => avg60 = Some(parse()?),
                _ => {}
            }
        }
        let (Some(a10), Some(a60)) = (avg10, avg60) else {
            return Err(ParseError::PsiAverages { line: line.into() });
        };
        match kind {
            "some" => some = Some((a10, a60)),
            "full" => full = Some(a10),
            _ => return Err(ParseError::NotPsi { line: line.into() }),
        }
    }
    let (some_avg10, some_avg60) = some.ok_or(ParseError::NoSomeLine)?;
    Ok(IoPressure {
        some_avg10,
        some_avg60,
        full_avg10: full,
    })
}

/// What one etcd member's Prometheus metrics say (k3s serves them on each server,
/// `http://127.0.0.1:2381/metrics` by default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EtcdMetrics {
    /// `etcd_server_is_leader`.
    pub is_leader: bool,
    /// `etcd_server_has_leader` (None when not exposed).
    pub has_leader: Option<bool>,
    /// `etcd_mvcc_db_total_size_in_bytes`.
    pub db_size_bytes: Option<u64>,
    /// `etcd_server_quota_backend_bytes`.
    pub quota_bytes: Option<u64>,
    /// The 99th percentile of `etcd_disk_wal_fsync_duration_seconds`, as the upper bound of
    /// the histogram bucket it falls in (ms). None when the histogram has no samples.
    pub wal_fsync_p99_ms: Option<f64>,
    /// `etcd_disk_wal_fsync_duration_seconds_count`.
    pub wal_fsync_count: Option<u64>,
    /// `etcd_server_leader_changes_seen_total`.
    pub leader_changes: Option<u64>,
    /// The WAL fsync histogram as scraped: (bucket bound in µs, `u64::MAX` for `+Inf`;
    /// cumulative count), by bound. Cumulative since the member started: a p99 over a
    /// window is the difference of two scrapes ([`fsync_window`]). Not serialized.
    #[serde(skip)]
    pub wal_fsync_buckets: Vec<(u64, u64)>,
    /// Where `wal_fsync_p99_ms` covers only the fsyncs of the last looks (the difference of
    /// two scrapes, [`FSYNC_WINDOW_MS`] or a little more), how many seconds they span;
    /// None: it is the whole histogram, since the member started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wal_fsync_window_s: Option<u64>,
}

/// How far back the etcd look judges a member's WAL fsyncs: the disk now, not its history
/// (a month of quick fsyncs hides a disk that turned slow a minute ago in the cumulative
/// histogram etcd serves).
pub const FSYNC_WINDOW_MS: u64 = 60_000;

/// Fewer fsyncs than this in a window say nothing about a disk's 99th percentile (of 20,
/// the p99 is the slowest one, and rounding alone moves it a bucket: CI held a gate on
/// a "before" read off 20 fsyncs).
pub const FSYNC_MIN_SAMPLES: u64 = 100;

/// The WAL fsync p99 (ms) over the fsyncs between two scrapes, where there were at least
/// [`FSYNC_MIN_SAMPLES`]; None: too few (the whole histogram is all there is).
pub fn fsync_p99_between(base: &[(u64, u64)], now: &[(u64, u64)]) -> Option<f64> {
    let (us, n) = fsync_p99_us(&fsync_window(base, now))?;
    (n >= FSYNC_MIN_SAMPLES).then_some(if us == u64::MAX {
        f64::INFINITY
    } else {
        us as f64 / 1000.0
    })
}

impl Eq for EtcdMetrics {}

/// The 99th percentile of a WAL fsync histogram (`(bound µs, cumulative count)` by bound),
/// as the bound of the bucket it falls in, and how many fsyncs it counts. None: no fsync.
pub fn fsync_p99_us(buckets: &[(u64, u64)]) -> Option<(u64, u64)> {
    let total = buckets.last().map(|b| b.1)?;
    if total == 0 {
        return None;
    }
    let want = (total as f64) * 0.99;
    buckets
        .iter()
        .find(|(_, cum)| *cum as f64 >= want)
        .map(|(le, _)| (*le, total))
}

/// The fsyncs between two scrapes of one member's histogram: `after - before`, bucket by
/// bucket. Where the buckets differ or a count went down, the member restarted between
/// them (its histogram starts again at zero): then `after` is the window (since the
/// restart).
pub fn fsync_window(before: &[(u64, u64)], after: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let same = before.len() == after.len()
        && before
            .iter()
            .zip(after)
            .all(|(b, a)| b.0 == a.0 && b.1 <= a.1);
    if !same {
        return after.to_vec();
    }
    before
        .iter()
        .zip(after)
        .map(|(b, a)| (a.0, a.1 - b.1))
        .collect()
}

/// A bucket bound in µs as the operator reads it (see [`human_fsync`]).
pub fn human_bound_us(us: u64) -> String {
    if us == u64::MAX {
        human_fsync(f64::INFINITY)
    } else {
        human_fsync(us as f64 / 1000.0)
    }
}

/// One sample line `name{labels} value` -> (name, labels text, value).
fn sample(line: &str) -> Option<(&str, &str, f64)> {
    let (head, value) = line.rsplit_once(' ')?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        v => v.parse().ok()?,
    };
    match head.split_once('{') {
        Some((name, labels)) => Some((name, labels.strip_suffix('}')?, value)),
        None => Some((head, "", value)),
    }
}

/// The `le` label of a histogram bucket.
fn le(labels: &str) -> Option<f64> {
    let start = labels.find("le=\"")? + 4;
    let rest = &labels[start..];
    let v = &rest[..rest.find('"')?];
    match v {
        "+Inf" => Some(f64::INFINITY),
        v => v.parse().ok(),
    }
}

/// Parse the text exposition format of an etcd member's `/metrics`. `etcd_server_is_leader`
/// is required (without it this is not etcd's endpoint); the rest are read when present.
pub fn parse_etcd_metrics(text: &str) -> Result<EtcdMetrics, ParseError> {
    let mut is_leader = None;
    let mut m = EtcdMetrics {
        is_leader: false,
        has_leader: None,
        db_size_bytes: None,
        quota_bytes: None,
        wal_fsync_p99_ms: None,
        wal_fsync_count: None,
        leader_changes: None,
        wal_fsync_buckets: Vec::new(),
        wal_fsync_window_s: None,
    };
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((name, labels, value)) = sample(line) else {
            continue;
        };
        let count = || (value.is_finite() && value >= 0.0).then_some(value as u64);
        match name {
            "etcd_server_is_leader" => is_leader = Some(value == 1.0),
            "etcd_server_has_leader" => m.has_leader = Some(value == 1.0),
            "etcd_mvcc_db_total_size_in_bytes" => m.db_size_bytes = count(),
            "etcd_server_quota_backend_bytes" => m.quota_bytes = count(),
            "etcd_server_leader_changes_seen_total" => m.leader_changes = count(),
            "etcd_disk_wal_fsync_duration_seconds_count" => m.wal_fsync_count = count(),
            "etcd_disk_wal_fsync_duration_seconds_bucket" => {
                if let Some(le) = le(labels) {
                    buckets.push((le, value));
                }
            }
            _ => {}
        }
    }
    m.is_leader = is_leader.ok_or(ParseError::NotEtcd)?;
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    m.wal_fsync_buckets = buckets
        .iter()
        .map(|(le, cum)| {
            let us = if le.is_finite() {
                (le * 1_000_000.0).round() as u64
            } else {
                u64::MAX
            };
            (
                us,
                if cum.is_finite() && *cum >= 0.0 {
                    *cum as u64
                } else {
                    0
                },
            )
        })
        .collect();
    let total = buckets.last().map(|b| b.1).unwrap_or(0.0);
    if total > 0.0 {
        let want = total * 0.99;
        m.wal_fsync_p99_ms = buckets
            .iter()
            .find(|(_, cum)| *cum >= want)
            .map(|(le, _)| le * 1000.0);
    }
    Ok(m)
}

/// Thresholds of the etcd rules. WAL fsync: etcd's own guidance is a p99 under 10 ms;
/// past 500 ms heartbeats (100 ms) are missed and elections follow. IO PSI: the 2026-09-07
/// servers read 1.29 (mitigate) and 11.36 (starving).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EtcdPolicy {
    pub fsync_warn_ms: f64,
    pub fsync_critical_ms: f64,
    pub psi_warn: f64,
    pub psi_critical: f64,
    /// Share of the backend quota a DB may fill before it is a warning.
    pub db_quota_warn: f64,
}

impl Default for EtcdPolicy {
    fn default() -> Self {
        EtcdPolicy {
            fsync_warn_ms: 10.0,
            fsync_critical_ms: 500.0,
            psi_warn: 1.0,
            psi_critical: 10.0,
            db_quota_warn: 0.8,
        }
    }
}

/// What was seen on one server of the environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtcdMemberObs {
    pub host: String,
    /// As the inventory gives it (`ansible_host`): an address or a name.
    pub address: String,
    pub metrics: Look<EtcdMetrics>,
    pub io_pressure: Look<IoPressure>,
}

/// One member as the etcd pane shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtcdMemberRow {
    pub host: String,
    pub address: String,
    pub metrics: Option<EtcdMetrics>,
    pub io_pressure: Option<IoPressure>,
}

/// The etcd pane of one environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtcdPane {
    pub env: String,
    pub members: Vec<EtcdMemberRow>,
    /// The member whose metrics say it leads (None: none seen leading).
    pub leader: Option<String>,
    pub verdicts: Vec<Verdict>,
    /// What the members answered on etcd's client API (membership, status, alarms) and the
    /// pre-flight judged from it; None where it was not read.
    #[serde(default)]
    pub client: Option<super::EtcdClientView>,
}

/// `24.0 MiB`-style size.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// `12 ms` / `0.8 ms` / `>8 s` for a bucket bound.
pub fn human_fsync(ms: f64) -> String {
    if ms.is_infinite() {
        "beyond the largest bucket".to_string()
    } else if ms >= 1000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else if ms >= 10.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

/// Judge the environment's etcd: one leader among the servers (none, or two, is critical;
/// a member without a leader is critical), each member's WAL fsync p99 and DB size against
/// its quota, and each server's IO pressure (the documented starvation sign).
pub fn etcd(env: &str, members: &[EtcdMemberObs], policy: &EtcdPolicy) -> EtcdPane {
    etcd_since(env, members, policy, &BTreeMap::new())
}

/// [`etcd`] with, per host, since when its member has not answered (its first failed look
/// after the last one that answered, as the poller remembers it): a member that does not
/// answer is said to be "not answering since" then, and is never the leader.
pub fn etcd_since(
    env: &str,
    members: &[EtcdMemberObs],
    policy: &EtcdPolicy,
    silent_since: &BTreeMap<String, Timestamp>,
) -> EtcdPane {
    let v = |rule, sev, subject: String, msg: String| {
        Verdict::new(Pane::Etcd, rule, sev, env, subject, msg)
    };
    let mut pane = EtcdPane {
        env: env.to_string(),
        members: Vec::new(),
        leader: None,
        verdicts: Vec::new(),
        client: None,
    };
    let mut leaders = Vec::new();
    let mut seen = 0usize;
    for m in members {
        let subject = format!("member {}", m.host);
        match &m.metrics {
            Look::CouldNotLook { reason } => {
                let since = silent_since
                    .get(&m.host)
                    .map(|t| format!(" since {}", super::clock(*t)))
                    .unwrap_or_default();
                pane.verdicts.push(v(
                    Rule::CouldNotLook,
                    Severity::Unknown,
                    subject.clone(),
                    format!("{} not answering{since}: {reason}", m.host),
                ));
            }
            Look::Seen { value } => {
                seen += 1;
                if value.is_leader {
                    leaders.push(m.host.clone());
                }
                let mut sev = Severity::Ok;
                let mut parts = Vec::new();
                if value.has_leader == Some(false) {
                    sev = Severity::Critical;
                    parts.push("has no leader".to_string());
                }
                match value.wal_fsync_p99_ms {
                    Some(p99) => {
                        let s = if p99 > policy.fsync_critical_ms {
                            Severity::Critical
                        } else if p99 > policy.fsync_warn_ms {
                            Severity::Warn
                        } else {
                            Severity::Ok
                        };
                        sev = sev.worst(s);
                        let why = if s == Severity::Ok {
                            String::new()
                        } else {
                            format!(" (over {} ms: the disk starves etcd)", policy.fsync_warn_ms)
                        };
                        let over = match value.wal_fsync_window_s {
                            Some(w) => format!(" over the last {w} s"),
                            None => String::new(),
                        };
                        parts.push(format!("WAL fsync p99 {}{over}{why}", human_fsync(p99)));
                    }
                    None => parts.push("no WAL fsync samples".to_string()),
                }
                match (value.db_size_bytes, value.quota_bytes) {
                    (Some(db), Some(q)) if q > 0 => {
                        let share = db as f64 / q as f64;
                        if share > policy.db_quota_warn {
                            sev = sev.worst(Severity::Warn);
                        }
                        parts.push(format!(
                            "DB {} of {} quota ({:.0}%)",
                            human_bytes(db),
                            human_bytes(q),
                            share * 100.0
                        ));
                    }
                    (Some(db), _) => parts.push(format!("DB {}", human_bytes(db))),
                    (None, _) => {}
                }
                let role = if value.is_leader {
                    "leader"
                } else {
                    "follower"
                };
                pane.verdicts.push(v(
                    Rule::EtcdMember,
                    sev,
                    subject.clone(),
                    format!("{} ({role}): {}", m.host, parts.join(", ")),
                ));
            }
        }
        let io_subject = format!("server {}", m.host);
        match &m.io_pressure {
            Look::CouldNotLook { reason } => {
                pane.verdicts
                    .push(could_not(Pane::Etcd, env, &io_subject, reason));
            }
            Look::Seen { value } => {
                let p = value.some_avg10;
                let sev = if p >= policy.psi_critical {
                    Severity::Critical
                } else if p >= policy.psi_warn {
                    Severity::Warn
                } else {
                    Severity::Ok
                };
                let tail = match sev {
                    Severity::Critical => ": etcd's WAL fsyncs wait on the disk (starvation)",
                    Severity::Warn => ": the disk is contended",
                    _ => "",
                };
                pane.verdicts.push(v(
                    Rule::EtcdIoPressure,
                    sev,
                    io_subject,
                    format!(
                        "{} IO pressure some avg10 {:.2}% avg60 {:.2}%{tail}",
                        m.host, value.some_avg10, value.some_avg60
                    ),
                ));
            }
        }
        pane.members.push(EtcdMemberRow {
            host: m.host.clone(),
            address: m.address.clone(),
            metrics: m.metrics.as_seen().cloned(),
            io_pressure: m.io_pressure.as_seen().copied(),
        });
    }
    match leaders.as_slice() {
        [one] => {
            pane.leader = Some(one.clone());
            pane.verdicts.push(v(
                Rule::EtcdLeader,
                Severity::Ok,
                "leader".into(),
                format!("{one} leads ({seen} of {} members seen)", members.len()),
            ));
        }
        [] if seen == 0 => {}
        [] if seen < members.len() => pane.verdicts.push(v(
            Rule::EtcdLeader,
            Severity::Unknown,
            "leader".into(),
            format!(
                "none of the {seen} members seen leads; the leader may be among the {} not seen",
                members.len() - seen
            ),
        )),
        [] => pane.verdicts.push(v(
            Rule::EtcdLeader,
            Severity::Critical,
            "leader".into(),
            format!("no member of {env} leads: etcd has no leader, the API cannot write"),
        )),
        many => pane.verdicts.push(v(
            Rule::EtcdLeader,
            Severity::Critical,
            "leader".into(),
            format!("{} all say they lead (split brain)", many.join(", ")),
        )),
    }
    pane
}

/// What the cluster's API says of etcd, read through the environment's API endpoint (the
/// VIP where its kubeconfig names it): the live source of quorum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtcdApiObs {
    /// `GET /readyz/etcd`: `ok`, or what the server answered (a real one: 500
    /// `[-]etcd failed: reason withheld` once its etcd cannot reach a quorum).
    pub readyz: Look<EtcdReady>,
    /// Each server's Node Ready condition, by host (`None`: no Ready condition). A k3s
    /// server runs its kubelet and its etcd member in one process: a server whose node
    /// stopped posting is counted as a member down, and the message says it was counted so.
    pub servers_ready: Look<Vec<(String, Option<ConditionStatus>)>>,
}

/// Judge quorum into `pane` (whose members are the environment's servers): a majority
/// (`n/2 + 1`) must be up for etcd to commit. Adds one `quorum` verdict, one per member
/// counted down (its row turns with it), and, when etcd fails through the API, takes the
/// ✓ off the leader the metrics name: a leader that cannot commit is no good news.
pub fn judge_quorum(pane: &mut EtcdPane, api: &EtcdApiObs) {
    let env = pane.env.clone();
    let n = pane.members.len();
    if n == 0 {
        return;
    }
    let v = |sev, subject: String, msg: String| {
        Verdict::new(Pane::Etcd, Rule::EtcdQuorum, sev, &env, subject, msg)
    };
    let majority = n / 2 + 1;
    // (host, why counted down)
    let down: Option<Vec<(String, &'static str)>> = match &api.servers_ready {
        Look::CouldNotLook { .. } => None,
        Look::Seen { value } => Some(
            pane.members
                .iter()
                .filter_map(|m| {
                    let why = match value.iter().find(|(h, _)| *h == m.host) {
                        None => "not listed by the cluster",
                        Some((_, Some(ConditionStatus::True))) => return None,
                        // As kubectl shows both: False and Unknown (kubelet silent).
                        Some((_, Some(_))) => "NotReady",
                        Some((_, None)) => "without a Ready condition",
                    };
                    Some((m.host.clone(), why))
                })
                .collect(),
        ),
    };
    let mut out = Vec::new();
    if let Some(down) = &down {
        for (host, why) in down {
            out.push(v(
                Severity::Critical,
                format!("member {host}"),
                format!("{host} {why}: its etcd member is counted down"),
            ));
        }
    }
    let listed = |d: &[(String, &str)]| {
        d.iter()
            .map(|(h, why)| format!("{h} {why}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let quorum = |sev, msg: String| v(sev, "quorum".to_string(), msg);
    let verdict = match (&api.readyz, &down) {
        (Look::Seen { value: EtcdReady::Failed { detail } }, Some(d)) if n - d.len() < majority => {
            quorum(
                Severity::Critical,
                format!(
                    "{} of {n} members down ({}): no quorum (etcd needs {majority} of {n}); /readyz/etcd through the API endpoint: {detail}; the API cannot write",
                    d.len(),
                    listed(d)
                ),
            )
        }
        (Look::Seen { value: EtcdReady::Failed { detail } }, d) => quorum(
            Severity::Critical,
            format!(
                "/readyz/etcd through the API endpoint fails: {detail}; {}",
                match d {
                    Some(d) if d.is_empty() => format!("all {n} servers Ready"),
                    Some(d) => format!("{} of {n} members down ({})", d.len(), listed(d)),
                    None => "the servers' Ready conditions could not be read".to_string(),
                }
            ),
        ),
        (readyz, Some(d)) if n - d.len() < majority => quorum(
            Severity::Critical,
            format!(
                "{} of {n} members down ({}): no quorum (etcd needs {majority} of {n}); /readyz/etcd {}",
                d.len(),
                listed(d),
                match readyz {
                    Look::Seen { .. } => "still answers ok through the API endpoint".to_string(),
                    Look::CouldNotLook { reason } => format!("could not be read: {reason}"),
                }
            ),
        ),
        (Look::Seen { value: EtcdReady::Ok }, Some(d)) if d.is_empty() => quorum(
            Severity::Ok,
            format!("quorum: {n} of {n} members up, /readyz/etcd ok through the API endpoint"),
        ),
        (Look::Seen { value: EtcdReady::Ok }, Some(d)) => quorum(
            Severity::Warn,
            format!(
                "{} of {n} members down ({}): quorum holds ({} of {n} up, {majority} needed); /readyz/etcd ok",
                d.len(),
                listed(d),
                n - d.len()
            ),
        ),
        (Look::Seen { value: EtcdReady::Ok }, None) => quorum(
            Severity::Ok,
            "/readyz/etcd ok through the API endpoint (the servers' Ready conditions could not be read)".to_string(),
        ),
        (Look::CouldNotLook { reason }, _) => quorum(
            Severity::Unknown,
            format!("quorum not known: /readyz/etcd could not be read: {reason}"),
        ),
    };
    let failed = verdict.severity == Severity::Critical;
    out.insert(0, verdict);
    // A member counted down is never the leader, whatever its last metrics said: its
    // node stopped posting, and its etcd (the same k3s process) cannot lead a cluster.
    if let (Some(l), Some(d)) = (pane.leader.clone(), &down) {
        if let Some((_, why)) = d.iter().find(|(h, _)| *h == l) {
            pane.leader = None;
            for x in pane
                .verdicts
                .iter_mut()
                .filter(|x| x.rule == Rule::EtcdLeader)
            {
                x.severity = Severity::Unknown;
                x.message = format!(
                    "no leader known: {l}'s metrics say it leads, but {l} is {why} and counted down"
                );
            }
        }
    }
    if failed {
        for l in pane
            .verdicts
            .iter_mut()
            .filter(|x| x.rule == Rule::EtcdLeader && x.severity == Severity::Ok)
        {
            l.severity = Severity::Unknown;
            l.message = format!(
                "{}'s metrics say it leads, but without quorum no leader can commit",
                pane.leader.as_deref().unwrap_or("a member")
            );
        }
    }
    pane.verdicts.extend(out);
}

#[cfg(test)]
mod tests {
    use super::super::worst;
    use super::*;

    const METRICS: &str = "# HELP etcd_server_is_leader Whether or not this member is a leader.\n\
# TYPE etcd_server_is_leader gauge\n\
etcd_server_is_leader 1\n\
etcd_server_has_leader 1\n\
etcd_mvcc_db_total_size_in_bytes 2.5165824e+07\n\
etcd_server_quota_backend_bytes 2.147483648e+09\n\
etcd_server_leader_changes_seen_total 2\n\
etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.001\"} 10\n\
etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.002\"} 90\n\
etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.004\"} 99\n\
etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.008\"} 100\n\
etcd_disk_wal_fsync_duration_seconds_bucket{le=\"+Inf\"} 100\n\
etcd_disk_wal_fsync_duration_seconds_sum 0.2\n\
etcd_disk_wal_fsync_duration_seconds_count 100\n";

    #[test]
    fn etcd_metrics_and_psi_parse() {
        let m = parse_etcd_metrics(METRICS).expect("metrics");
        assert!(m.is_leader);
        assert_eq!(m.has_leader, Some(true));
        assert_eq!(m.db_size_bytes, Some(25_165_824));
        assert_eq!(m.quota_bytes, Some(2_147_483_648));
        assert_eq!(m.leader_changes, Some(2));
        assert_eq!(m.wal_fsync_count, Some(100));
        // 99 of 100 samples are at or under 4 ms.
        assert_eq!(m.wal_fsync_p99_ms, Some(4.0));
        let e = parse_etcd_metrics("up 1\n").expect_err("not etcd");
        assert!(e.to_string().contains("etcd_server_is_leader"), "{e}");
        assert_eq!(
            e.to_string(),
            "no etcd_server_is_leader sample: this is not an etcd member's /metrics"
        );
        assert_eq!(
            parse_psi("some avg10=x avg60=1")
                .expect_err("bad value")
                .to_string(),
            r#"not PSI text: avg10="x" in "some avg10=x avg60=1""#
        );
        assert_eq!(
            parse_psi("hello").expect_err("no averages").to_string(),
            r#"not PSI text (no avg10/avg60): "hello""#
        );
        assert_eq!(
            parse_psi("").expect_err("empty").to_string(),
            "not PSI text: no `some` line"
        );

        let p = parse_psi(
            "some avg10=11.36 avg60=9.80 avg300=5.00 total=123\nfull avg10=5.68 avg60=4.00 avg300=2.00 total=55\n",
        )
        .expect("psi");
        assert_eq!(p.some_avg10, 11.36);
        assert_eq!(p.some_avg60, 9.80);
        assert_eq!(p.full_avg10, Some(5.68));
        for bad in ["", "hello", "some avg10=x avg60=1", "other avg10=1 avg60=1"] {
            assert!(parse_psi(bad).is_err(), "{bad:?}");
        }
    }

    /// A month of quick fsyncs, then a minute of slow ones: the cumulative histogram etcd
    /// serves still says 2 ms; the window between two scrapes says the disk now.
    #[test]
    fn the_p99_between_two_scrapes_is_the_disk_now_not_its_history() {
        let text = |fast: u64, slow: u64| {
            let mut t = String::from("etcd_server_is_leader 0\n");
            for (le, cum) in [
                ("0.001", 0),
                ("0.002", fast),
                ("0.512", fast),
                ("1.024", fast + slow),
                ("+Inf", fast + slow),
            ] {
                t.push_str(&format!(
                    "etcd_disk_wal_fsync_duration_seconds_bucket{{le=\"{le}\"}} {cum}\n"
                ));
            }
            t
        };
        let month = parse_etcd_metrics(&text(5_000_000, 0)).expect("metrics");
        let now = parse_etcd_metrics(&text(5_000_100, 1_200)).expect("metrics");
        assert_eq!(now.wal_fsync_p99_ms, Some(2.0), "the history hides it");
        assert_eq!(
            now.wal_fsync_buckets.last(),
            Some(&(u64::MAX, 5_001_300)),
            "+Inf is the top bound"
        );
        assert_eq!(
            fsync_p99_between(&month.wal_fsync_buckets, &now.wal_fsync_buckets),
            Some(1024.0)
        );
        // Too few fsyncs between them: no window.
        let idle = parse_etcd_metrics(&text(5_000_010, 0)).expect("metrics");
        assert_eq!(
            fsync_p99_between(&month.wal_fsync_buckets, &idle.wal_fsync_buckets),
            None
        );
        // The member restarted between them: the window is since the restart.
        let restarted = parse_etcd_metrics(&text(300, 0)).expect("metrics");
        assert_eq!(
            fsync_p99_between(&month.wal_fsync_buckets, &restarted.wal_fsync_buckets),
            Some(2.0)
        );
        // The verdict says which it is.
        let mut m = now.clone();
        m.wal_fsync_p99_ms = Some(1024.0);
        m.wal_fsync_window_s = Some(61);
        let obs = EtcdMemberObs {
            host: "k3s-prod-1".into(),
            address: "192.168.2.10".into(),
            metrics: Look::seen(m),
            io_pressure: Look::could_not("not read"),
        };
        let pane = etcd("prod", &[obs], &EtcdPolicy::default());
        assert!(
            pane.verdicts.iter().any(|v| v.message.contains(
                "WAL fsync p99 1.0 s over the last 61 s (over 10 ms: the disk starves etcd)"
            )),
            "{:#?}",
            pane.verdicts
        );
    }

    fn member(host: &str, leader: bool, p99: Option<f64>, psi: f64) -> EtcdMemberObs {
        let mut m = parse_etcd_metrics(METRICS).expect("metrics");
        m.is_leader = leader;
        m.wal_fsync_p99_ms = p99;
        EtcdMemberObs {
            host: host.into(),
            address: "192.168.2.10".into(),
            metrics: Look::seen(m),
            io_pressure: Look::seen(IoPressure {
                some_avg10: psi,
                some_avg60: psi,
                full_avg10: None,
            }),
        }
    }

    #[test]
    fn etcd_starvation_and_leadership() {
        let pol = EtcdPolicy::default();
        let calm = etcd(
            "prod",
            &[
                member("k3s-prod-1", true, Some(2.0), 0.1),
                member("k3s-prod-2", false, Some(2.0), 0.1),
                member("k3s-prod-3", false, Some(2.0), 0.1),
            ],
            &pol,
        );
        assert_eq!(worst(&calm.verdicts), Severity::Ok, "{:#?}", calm.verdicts);
        assert_eq!(calm.leader.as_deref(), Some("k3s-prod-1"));

        let starving = etcd(
            "prod",
            &[
                member("k3s-prod-1", true, Some(1024.0), 11.36),
                member("k3s-prod-2", false, Some(2.0), 0.1),
                member("k3s-prod-3", false, Some(16.0), 1.29),
            ],
            &pol,
        );
        let sev = |rule: Rule, subject: &str| {
            starving
                .verdicts
                .iter()
                .find(|v| v.rule == rule && v.subject == subject)
                .map(|v| v.severity)
        };
        assert_eq!(
            sev(Rule::EtcdIoPressure, "server k3s-prod-1"),
            Some(Severity::Critical)
        );
        assert_eq!(
            sev(Rule::EtcdIoPressure, "server k3s-prod-3"),
            Some(Severity::Warn)
        );
        assert_eq!(
            sev(Rule::EtcdIoPressure, "server k3s-prod-2"),
            Some(Severity::Ok)
        );
        assert_eq!(
            sev(Rule::EtcdMember, "member k3s-prod-1"),
            Some(Severity::Critical)
        );
        assert_eq!(
            sev(Rule::EtcdMember, "member k3s-prod-3"),
            Some(Severity::Warn)
        );

        let leaderless = etcd(
            "prod",
            &[
                member("k3s-prod-1", false, Some(2.0), 0.1),
                member("k3s-prod-2", false, Some(2.0), 0.1),
            ],
            &pol,
        );
        assert!(leaderless
            .verdicts
            .iter()
            .any(|v| v.rule == Rule::EtcdLeader && v.severity == Severity::Critical));
        let two = etcd(
            "prod",
            &[
                member("k3s-prod-1", true, Some(2.0), 0.1),
                member("k3s-prod-2", true, Some(2.0), 0.1),
            ],
            &pol,
        );
        let v = two
            .verdicts
            .iter()
            .find(|v| v.rule == Rule::EtcdLeader)
            .expect("leader verdict");
        assert_eq!(v.severity, Severity::Critical);
        assert!(
            v.message.contains("k3s-prod-1, k3s-prod-2"),
            "{}",
            v.message
        );

        // One member unseen and no leader among the others: cannot tell, not critical.
        let mut blind = member("k3s-prod-1", false, None, 0.1);
        blind.metrics = Look::could_not("k3s-prod-1: connection refused");
        let partial = etcd(
            "prod",
            &[blind, member("k3s-prod-2", false, Some(2.0), 0.1)],
            &pol,
        );
        let v = partial
            .verdicts
            .iter()
            .find(|v| v.rule == Rule::EtcdLeader)
            .expect("leader verdict");
        assert_eq!(v.severity, Severity::Unknown);
        assert!(partial
            .verdicts
            .iter()
            .any(|v| v.rule == Rule::CouldNotLook && v.subject == "member k3s-prod-1"));
    }

    fn three() -> EtcdPane {
        etcd(
            "prod",
            &[
                member("k3s-prod-1", true, Some(2.0), 0.1),
                member("k3s-prod-2", false, Some(2.0), 0.1),
                member("k3s-prod-3", false, Some(2.0), 0.1),
            ],
            &EtcdPolicy::default(),
        )
    }

    fn ready(down: &[&str]) -> Look<Vec<(String, Option<ConditionStatus>)>> {
        Look::seen(
            ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"]
                .iter()
                .map(|h| {
                    let st = if down.contains(h) {
                        ConditionStatus::False
                    } else {
                        ConditionStatus::True
                    };
                    (h.to_string(), Some(st))
                })
                .collect(),
        )
    }

    fn quorum_of(p: &EtcdPane) -> &Verdict {
        p.verdicts
            .iter()
            .find(|v| v.rule == Rule::EtcdQuorum && v.subject == "quorum")
            .expect("a quorum verdict")
    }

    #[test]
    fn quorum_is_a_majority_of_members_and_readyz_through_the_endpoint() {
        let mut lost = three();
        judge_quorum(
            &mut lost,
            &EtcdApiObs {
                readyz: Look::seen(EtcdReady::Failed {
                    detail: "500 [-]etcd failed: reason withheld".into(),
                }),
                servers_ready: ready(&["k3s-prod-1", "k3s-prod-2"]),
            },
        );
        let q = quorum_of(&lost);
        assert_eq!(q.severity, Severity::Critical);
        assert_eq!(
            q.message,
            "2 of 3 members down (k3s-prod-1 NotReady, k3s-prod-2 NotReady): no quorum (etcd needs 2 of 3); /readyz/etcd through the API endpoint: 500 [-]etcd failed: reason withheld; the API cannot write"
        );
        assert_eq!(worst(&lost.verdicts), Severity::Critical);
        // The metrics' leader is no ✓ once etcd cannot commit.
        assert!(lost
            .verdicts
            .iter()
            .filter(|v| v.rule == Rule::EtcdLeader)
            .all(|v| v.severity == Severity::Unknown));
        let member_down = |p: &EtcdPane, h: &str| {
            p.verdicts
                .iter()
                .any(|v| v.rule == Rule::EtcdQuorum && v.subject == format!("member {h}"))
        };
        assert!(member_down(&lost, "k3s-prod-2"));
        assert!(!member_down(&lost, "k3s-prod-3"));

        let mut one = three();
        judge_quorum(
            &mut one,
            &EtcdApiObs {
                readyz: Look::seen(EtcdReady::Ok),
                servers_ready: ready(&["k3s-prod-1"]),
            },
        );
        let q = quorum_of(&one);
        assert_eq!(q.severity, Severity::Warn, "{}", q.message);
        assert!(
            q.message.starts_with(
                "1 of 3 members down (k3s-prod-1 NotReady): quorum holds (2 of 3 up, 2 needed)"
            ),
            "{}",
            q.message
        );

        let mut calm = three();
        judge_quorum(
            &mut calm,
            &EtcdApiObs {
                readyz: Look::seen(EtcdReady::Ok),
                servers_ready: ready(&[]),
            },
        );
        assert_eq!(quorum_of(&calm).severity, Severity::Ok);
        assert_eq!(worst(&calm.verdicts), Severity::Ok);

        // Not read is not ok.
        let mut blind = three();
        judge_quorum(
            &mut blind,
            &EtcdApiObs {
                readyz: Look::could_not("GET /readyz/etcd: no answer within 10 s"),
                servers_ready: Look::could_not("list nodes: no answer within 10 s"),
            },
        );
        assert_eq!(quorum_of(&blind).severity, Severity::Unknown);
    }

    /// The 2026 drill: the holder died. Its node is NotReady and its metrics (the last
    /// ones, or a member that still thinks so) say it leads: it is not the leader, and
    /// nothing says it leads.
    #[test]
    fn a_member_counted_down_is_never_the_leader() {
        let mut p = three();
        judge_quorum(
            &mut p,
            &EtcdApiObs {
                readyz: Look::seen(EtcdReady::Ok),
                servers_ready: ready(&["k3s-prod-1"]),
            },
        );
        assert_eq!(p.leader, None, "{:#?}", p.verdicts);
        let l = p
            .verdicts
            .iter()
            .find(|v| v.rule == Rule::EtcdLeader)
            .expect("a leader verdict");
        assert_eq!(l.severity, Severity::Unknown, "{l}");
        assert!(!l.message.contains("k3s-prod-1 leads"), "{l}");
        assert!(l.message.contains("k3s-prod-1 is NotReady"), "{l}");
    }

    /// A member that does not answer says since when, and a leader is only ever one of
    /// the members that answered.
    #[test]
    fn a_silent_member_is_not_answering_since_and_never_leads() {
        let mut dead = member("k3s-prod-1", true, Some(2.0), 0.1);
        dead.metrics = Look::could_not("k3s-prod-1: `curl` exited 7");
        let since = BTreeMap::from([("k3s-prod-1".to_string(), Timestamp(1_780_000_000_000))]);
        let p = etcd_since(
            "prod",
            &[
                dead,
                member("k3s-prod-2", true, Some(2.0), 0.1),
                member("k3s-prod-3", false, Some(2.0), 0.1),
            ],
            &EtcdPolicy::default(),
            &since,
        );
        assert_eq!(p.leader.as_deref(), Some("k3s-prod-2"));
        let silent = p
            .verdicts
            .iter()
            .find(|v| v.subject == "member k3s-prod-1")
            .expect("the silent member's verdict");
        assert_eq!(silent.severity, Severity::Unknown);
        assert_eq!(
            silent.message,
            format!(
                "k3s-prod-1 not answering since {}: k3s-prod-1: `curl` exited 7",
                crate::time::clock(Timestamp(1_780_000_000_000))
            )
        );
        let l = p
            .verdicts
            .iter()
            .find(|v| v.rule == Rule::EtcdLeader)
            .expect("a leader verdict");
        assert_eq!(l.message, "k3s-prod-2 leads (2 of 3 members seen)");
    }
}
