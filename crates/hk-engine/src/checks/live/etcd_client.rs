//! etcd read as etcd (issue 39): what each member answers on its own client API (the JSON
//! gateway etcd serves beside gRPC on its client port: member list, status, alarms, and a
//! linearizable read), parsed ([`parse_member_list`], [`parse_status`], [`parse_alarms`],
//! [`parse_range`]) and judged into the pane and the pre-flight of a step that disrupts a
//! server ([`judge_members`]).
//!
//! The pre-flight's rules and where each number comes from (docs/etcd-gates.md):
//! - a member that does not answer, has not started, sees no leader, or names another leader
//!   than the rest; members that disagree on the membership; a learner; a member etcd lists
//!   that is no server of the environment: each refuses (Talos refuses an upgrade on any);
//! - a linearizable read that fails within the probe's deadline (15 s, Talos's): refuses;
//! - any alarm (NOSPACE, CORRUPT): refuses;
//! - two voting members only (losing either loses quorum, Talos's rule): refuses;
//! - 4 or more leader changes within 15 min (etcd's own alert, `etcdHighNumberOfLeaderChanges`):
//!   refuses;
//! - a DB over 95% of its quota (etcd's alert `etcdDatabaseQuotaLowSpace`): refuses;
//! - a WAL fsync p99 over 1 s (etcd's critical alert): refuses; over 0.5 s (etcd's warning)
//!   and over 10 ms (etcd's disk guidance): shown, not refusing.
//!
//! Must not: do IO or read the clock (the caller hands in what was read and when).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    clock, human_fsync, human_ms, EtcdPane, Look, Pane, Rule, Severity, Timestamp, Verdict,
};

/// One member as etcd lists it. A member added but never started has no name and no client
/// URLs (`etcdctl member list` prints it `unstarted`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtcdMemberInfo {
    pub id: u64,
    pub name: String,
    pub peer_urls: Vec<String>,
    pub client_urls: Vec<String>,
    pub learner: bool,
}

impl EtcdMemberInfo {
    pub fn started(&self) -> bool {
        !self.name.is_empty()
    }

    /// `name (id)`, or `unstarted member id at PEER` for one that never started.
    pub fn label(&self) -> String {
        if self.started() {
            format!("{} ({:x})", self.name, self.id)
        } else {
            format!(
                "unstarted member {:x} at {}",
                self.id,
                self.peer_urls.join(",")
            )
        }
    }
}

/// `/v3/cluster/member/list` as one member answered it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtcdMemberList {
    pub cluster_id: u64,
    /// The member that answered.
    pub answered_by: u64,
    pub members: Vec<EtcdMemberInfo>,
}

/// `/v3/maintenance/status` of the member asked (each server asks its own, on its loopback).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtcdStatus {
    pub member_id: u64,
    /// The leader this member follows (None: it sees none).
    pub leader: Option<u64>,
    pub raft_term: u64,
    pub raft_index: u64,
    pub applied_index: u64,
    pub db_size: u64,
    pub db_size_in_use: Option<u64>,
    pub learner: bool,
    /// What the member reports wrong with itself (`etcdserver: no leader`, an alarm).
    pub errors: Vec<String>,
    pub version: String,
}

/// One raised alarm (`/v3/maintenance/alarm`, action GET).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtcdAlarm {
    pub member_id: u64,
    pub alarm: String,
}

/// How many leader changes a member saw over the span the probe has history for (at most
/// the window, 15 min).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderChanges {
    pub count: u64,
    pub over_ms: u64,
}

/// What one server's member answered on its client API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtcdClientObs {
    pub host: String,
    pub members: Look<EtcdMemberList>,
    pub status: Look<EtcdStatus>,
    pub alarms: Look<Vec<EtcdAlarm>>,
    /// A linearizable read through this member (it needs a leader and a quorum): seen when
    /// it answered within the deadline.
    pub quorum_read: Look<()>,
    pub leader_changes: Option<LeaderChanges>,
}

/// Why an answer is not what etcd's gateway gives for the request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientParseError {
    #[error("not JSON ({why}): {text:?}")]
    NotJson { why: String, text: String },
    #[error("etcd answered an error (code {code}): {message}")]
    Etcd { code: i64, message: String },
    #[error("no `{field}` in etcd's answer: {text:?}")]
    Missing { field: String, text: String },
    #[error("`{field}` is no unsigned integer: {value}")]
    NotNumber { field: String, value: String },
}

fn cut(text: &str) -> String {
    let t = text.trim();
    match t.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &t[..i]),
        None => t.to_string(),
    }
}

/// The answer as JSON; etcd's error form (`{"code":14,"message":"etcdserver: ..."}`, or
/// `{"error": ...}` from older gateways) is an error naming etcd's message.
fn answer(text: &str) -> Result<Value, ClientParseError> {
    let v: Value = serde_json::from_str(text.trim()).map_err(|e| ClientParseError::NotJson {
        why: e.to_string(),
        text: cut(text),
    })?;
    if !v.is_object() {
        return Err(ClientParseError::NotJson {
            why: "not an object".into(),
            text: cut(text),
        });
    }
    if v.get("header").is_none() {
        if let Some(message) = v.get("message").or_else(|| v.get("error")) {
            return Err(ClientParseError::Etcd {
                code: v.get("code").and_then(Value::as_i64).unwrap_or(-1),
                message: message
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| message.to_string()),
            });
        }
    }
    Ok(v)
}

/// A uint64 field: the gateway writes them as JSON strings (proto3 JSON) and leaves out
/// zeros; a number is taken too.
fn u64_of(v: &Value, field: &str) -> Result<Option<u64>, ClientParseError> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => s
            .parse()
            .map(Some)
            .map_err(|_| ClientParseError::NotNumber {
                field: field.into(),
                value: s.clone(),
            }),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| ClientParseError::NotNumber {
                field: field.into(),
                value: n.to_string(),
            }),
        Some(other) => Err(ClientParseError::NotNumber {
            field: field.into(),
            value: other.to_string(),
        }),
    }
}

fn strings(v: &Value, field: &str) -> Vec<String> {
    v.get(field)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn header_member(v: &Value, text: &str) -> Result<u64, ClientParseError> {
    let h = v.get("header").ok_or_else(|| ClientParseError::Missing {
        field: "header".into(),
        text: cut(text),
    })?;
    u64_of(h, "member_id")?.ok_or_else(|| ClientParseError::Missing {
        field: "header.member_id".into(),
        text: cut(text),
    })
}

/// `POST /v3/cluster/member/list` with `{}`.
pub fn parse_member_list(text: &str) -> Result<EtcdMemberList, ClientParseError> {
    let v = answer(text)?;
    let answered_by = header_member(&v, text)?;
    let cluster_id = v
        .get("header")
        .map(|h| u64_of(h, "cluster_id"))
        .transpose()?
        .flatten()
        .unwrap_or(0);
    let list =
        v.get("members")
            .and_then(Value::as_array)
            .ok_or_else(|| ClientParseError::Missing {
                field: "members".into(),
                text: cut(text),
            })?;
    let mut members = Vec::new();
    for m in list {
        members.push(EtcdMemberInfo {
            id: u64_of(m, "ID")?.ok_or_else(|| ClientParseError::Missing {
                field: "members[].ID".into(),
                text: cut(text),
            })?,
            name: m
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            peer_urls: strings(m, "peerURLs"),
            client_urls: strings(m, "clientURLs"),
            learner: m.get("isLearner").and_then(Value::as_bool).unwrap_or(false),
        });
    }
    Ok(EtcdMemberList {
        cluster_id,
        answered_by,
        members,
    })
}

/// `POST /v3/maintenance/status` with `{}`.
pub fn parse_status(text: &str) -> Result<EtcdStatus, ClientParseError> {
    let v = answer(text)?;
    let member_id = header_member(&v, text)?;
    let need =
        |field: &str| -> Result<u64, ClientParseError> { Ok(u64_of(&v, field)?.unwrap_or(0)) };
    if v.get("version").is_none() {
        return Err(ClientParseError::Missing {
            field: "version".into(),
            text: cut(text),
        });
    }
    Ok(EtcdStatus {
        member_id,
        leader: u64_of(&v, "leader")?.filter(|l| *l != 0),
        raft_term: need("raftTerm")?,
        raft_index: need("raftIndex")?,
        applied_index: need("raftAppliedIndex")?,
        db_size: need("dbSize")?,
        db_size_in_use: u64_of(&v, "dbSizeInUse")?,
        learner: v.get("isLearner").and_then(Value::as_bool).unwrap_or(false),
        errors: strings(&v, "errors"),
        version: v
            .get("version")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    })
}

/// `POST /v3/maintenance/alarm` with `{}` (action GET): the raised alarms, none when the
/// answer lists none.
pub fn parse_alarms(text: &str) -> Result<Vec<EtcdAlarm>, ClientParseError> {
    let v = answer(text)?;
    header_member(&v, text)?;
    let mut out = Vec::new();
    for a in v
        .get("alarms")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        out.push(EtcdAlarm {
            member_id: u64_of(a, "memberID")?.unwrap_or(0),
            // The gateway names the enum; NONE (0) is left out of the JSON.
            alarm: a
                .get("alarm")
                .and_then(Value::as_str)
                .unwrap_or("NONE")
                .to_string(),
        });
    }
    Ok(out)
}

/// `POST /v3/kv/range` (linearizable: the default): etcd answered with a header, not an
/// error (`etcdserver: request timed out` without quorum).
pub fn parse_range(text: &str) -> Result<(), ClientParseError> {
    let v = answer(text)?;
    header_member(&v, text).map(|_| ())
}

/// etcd's client view of one environment: the membership, each server's member and status,
/// the alarms, etcd's own leader, and the pre-flight's findings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtcdClientView {
    /// The membership as the answering members list it (the first answer; disagreement is a
    /// finding).
    pub members: Vec<EtcdMemberInfo>,
    /// Per server (inventory name), the id of the member that answered on it.
    pub member_of: BTreeMap<String, u64>,
    pub status: BTreeMap<String, EtcdStatus>,
    pub alarms: Vec<EtcdAlarm>,
    /// The leader the answering members follow, and its server when one answered as it.
    pub leader_id: Option<u64>,
    pub leader_host: Option<String>,
    pub preflight: Vec<Finding>,
    /// Per server, its member's WAL fsync histogram as scraped with this look (see
    /// `EtcdMetrics::wal_fsync_buckets`), where its metrics were seen. Not serialized.
    #[serde(skip)]
    pub wal_fsync: BTreeMap<String, Vec<(u64, u64)>>,
    /// Per server, its member's WAL fsync p99 (µs) as seen right before this run changed
    /// it (the leader look before its change), where one was. Not serialized.
    #[serde(skip)]
    pub fsync_before_change_us: BTreeMap<String, u64>,
}

impl EtcdClientView {
    /// The server (inventory name) whose member is `id`.
    pub fn host_of(&self, id: u64) -> Option<&str> {
        self.member_of
            .iter()
            .find(|(_, m)| **m == id)
            .map(|(h, _)| h.as_str())
    }

    /// Whether any finding refuses a step that disrupts a server.
    pub fn refuses(&self) -> bool {
        self.preflight.iter().any(|f| f.blocks)
    }

    /// How far `host`'s member's applied index trails the leader's (None: not known).
    pub fn lag(&self, host: &str) -> Option<u64> {
        let mine = self.status.get(host)?;
        let leader = self.status.get(self.leader_host.as_deref()?)?;
        Some(leader.applied_index.saturating_sub(mine.applied_index))
    }
}

/// The subject of a verdict about a member's client API that could not be read
/// (`etcd-client HOST`): the gate shows it as a pre-flight line, not again as the host's.
pub const CLIENT_SUBJECT: &str = "etcd-client ";

/// One pre-flight finding: refusing (`blocks`) or shown only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub severity: Severity,
    pub blocks: bool,
    pub text: String,
}

/// The pre-flight's thresholds (see the module's doc for their sources).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PreflightPolicy {
    pub leader_changes_refuse: u64,
    pub leader_changes_window_ms: u64,
    pub db_quota_refuse: f64,
    pub fsync_refuse_ms: f64,
    pub fsync_warn_ms: f64,
    pub fsync_disk_ms: f64,
    pub quorum_read_deadline_ms: u64,
}

impl Default for PreflightPolicy {
    fn default() -> Self {
        PreflightPolicy {
            leader_changes_refuse: 4,
            leader_changes_window_ms: 15 * 60 * 1000,
            db_quota_refuse: 0.95,
            fsync_refuse_ms: 1000.0,
            fsync_warn_ms: 500.0,
            fsync_disk_ms: 10.0,
            quorum_read_deadline_ms: 15_000,
        }
    }
}

/// The membership as a comparable set: (id, learner, peer URLs).
fn shape(l: &EtcdMemberList) -> BTreeSet<(u64, bool, Vec<String>)> {
    l.members
        .iter()
        .map(|m| {
            let mut p = m.peer_urls.clone();
            p.sort();
            (m.id, m.learner, p)
        })
        .collect()
}

/// Judge what the members answered on their client API into `pane` (whose rows are the
/// environment's servers, judged from their metrics already): etcd's own leader replaces
/// the one the metrics suggest, the membership and the findings are kept in
/// `pane.client`, and each finding is also a verdict of the pane. `silent_since` says
/// since when a member has not answered.
pub fn judge_members(
    pane: &mut EtcdPane,
    obs: &[EtcdClientObs],
    policy: &PreflightPolicy,
    silent_since: &BTreeMap<String, Timestamp>,
) {
    let env = pane.env.clone();
    let mut view = EtcdClientView::default();
    let mut findings: Vec<(Rule, String, Finding)> = Vec::new();
    let mut refuse = |rule: Rule, subject: String, text: String| {
        findings.push((
            rule,
            subject,
            Finding {
                severity: Severity::Critical,
                blocks: true,
                text,
            },
        ))
    };
    // Each server's own member, from the status it answered.
    for o in obs {
        match &o.status {
            Look::Seen { value } => {
                view.member_of.insert(o.host.clone(), value.member_id);
                view.status.insert(o.host.clone(), value.clone());
            }
            Look::CouldNotLook { reason } => {
                let since = silent_since
                    .get(&o.host)
                    .map(|t| format!(" since {}", clock(*t)))
                    .unwrap_or_default();
                refuse(
                    Rule::CouldNotLook,
                    format!("{CLIENT_SUBJECT}{}", o.host),
                    format!("{}'s etcd member not answering{since}: {reason}", o.host),
                );
            }
        }
    }
    // The membership: every answering member must list the same one.
    let lists: Vec<(&str, &EtcdMemberList)> = obs
        .iter()
        .filter_map(|o| o.members.as_seen().map(|l| (o.host.as_str(), l)))
        .collect();
    for o in obs {
        if let (Look::CouldNotLook { reason }, Some(_)) = (&o.members, o.status.as_seen()) {
            refuse(
                Rule::CouldNotLook,
                format!("{CLIENT_SUBJECT}{}", o.host),
                format!("{}'s member list could not be read: {reason}", o.host),
            );
        }
    }
    if let Some((first_host, first)) = lists.first() {
        view.members = first.members.clone();
        let differing: Vec<&str> = lists
            .iter()
            .filter(|(_, l)| shape(l) != shape(first))
            .map(|(h, _)| *h)
            .collect();
        if !differing.is_empty() {
            let describe = |l: &EtcdMemberList| {
                l.members
                    .iter()
                    .map(EtcdMemberInfo::label)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let other = lists
                .iter()
                .find(|(h, _)| *h == differing[0])
                .map(|(_, l)| describe(l))
                .unwrap_or_default();
            refuse(
                Rule::EtcdMembership,
                "membership".into(),
                format!(
                    "members disagree on the membership: {first_host} lists {}; {} lists {other}",
                    describe(first),
                    differing[0]
                ),
            );
        }
        for m in &first.members {
            if !m.started() {
                refuse(
                    Rule::EtcdMembership,
                    format!("member {:x}", m.id),
                    if m.learner {
                        format!(
                            "{} is a learner that has not started (a join that stopped half way): finish or remove it first",
                            m.label()
                        )
                    } else {
                        format!(
                            "{} is listed but has not started: etcd counts it for quorum",
                            m.label()
                        )
                    },
                );
            } else if m.learner {
                refuse(
                    Rule::EtcdMembership,
                    format!("member {}", m.name),
                    format!(
                        "{} is a learner, not yet a voting member: finish or remove it first",
                        m.label()
                    ),
                );
            }
        }
        let voting = first.members.iter().filter(|m| !m.learner).count();
        if voting == 2 {
            refuse(
                Rule::EtcdMembership,
                "membership".into(),
                "only 2 voting members: losing either one loses quorum (3 or more are needed to disrupt one)".into(),
            );
        }
        // Every member a server of the environment: all servers answered, and a listed
        // member none of them is.
        if view.member_of.len() == obs.len() {
            for m in first.members.iter().filter(|m| m.started()) {
                if view.host_of(m.id).is_none() {
                    refuse(
                        Rule::EtcdMembership,
                        format!("member {}", m.name),
                        format!(
                            "etcd lists {} but no server of {env} in the inventory is it: the quorum arithmetic would be wrong",
                            m.label()
                        ),
                    );
                }
            }
        }
    }
    // Leadership, in etcd's own word.
    let leaders: BTreeSet<u64> = view.status.values().filter_map(|s| s.leader).collect();
    for (host, s) in &view.status {
        if s.leader.is_none() {
            refuse(
                Rule::EtcdStatus,
                format!("member {host}"),
                format!("{host}'s etcd member sees no leader"),
            );
        }
        let own: Vec<&String> = s
            .errors
            .iter()
            .filter(|e| !e.contains("alarm:") && !e.contains("no leader"))
            .collect();
        if !own.is_empty() {
            refuse(
                Rule::EtcdStatus,
                format!("member {host}"),
                format!(
                    "{host}'s etcd member reports: {}",
                    own.iter()
                        .map(|e| e.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            );
        }
    }
    let label = |id: u64, view: &EtcdClientView| match view.host_of(id) {
        Some(h) => h.to_string(),
        None => format!("member {id:x}"),
    };
    match leaders.len() {
        1 => {
            let id = leaders.iter().next().copied().unwrap_or(0);
            view.leader_id = Some(id);
            view.leader_host = view.host_of(id).map(str::to_string);
        }
        0 => {}
        _ => {
            let who: Vec<String> = view
                .status
                .iter()
                .filter_map(|(h, s)| s.leader.map(|l| format!("{h} follows {}", label(l, &view))))
                .collect();
            refuse(
                Rule::EtcdStatus,
                "leader".into(),
                format!("members name different leaders: {}", who.join(", ")),
            );
        }
    }
    // Alarms: any answering member lists the cluster's.
    let mut alarms: Vec<EtcdAlarm> = obs
        .iter()
        .filter_map(|o| o.alarms.as_seen())
        .flatten()
        .cloned()
        .collect();
    alarms.sort_by(|a, b| (a.member_id, &a.alarm).cmp(&(b.member_id, &b.alarm)));
    alarms.dedup();
    for a in &alarms {
        refuse(
            Rule::EtcdAlarm,
            format!("member {}", label(a.member_id, &view)),
            format!(
                "alarm {} raised on {}{}",
                a.alarm,
                label(a.member_id, &view),
                match a.alarm.as_str() {
                    "NOSPACE" => ": the DB hit its quota, etcd takes no writes until it is compacted, defragmented and the alarm disarmed",
                    "CORRUPT" => ": a member's data differs from the others'",
                    _ => "",
                }
            ),
        );
    }
    view.alarms = alarms;
    for o in obs {
        if let (Look::CouldNotLook { reason }, Some(_)) = (&o.alarms, o.status.as_seen()) {
            refuse(
                Rule::CouldNotLook,
                format!("{CLIENT_SUBJECT}{}", o.host),
                format!("{}'s alarms could not be read: {reason}", o.host),
            );
        }
        if let (Look::CouldNotLook { reason }, Some(_)) = (&o.quorum_read, o.status.as_seen()) {
            refuse(
                Rule::EtcdQuorumRead,
                format!("member {}", o.host),
                format!(
                    "a quorum read through {} did not answer within {}: {reason}",
                    o.host,
                    human_ms(policy.quorum_read_deadline_ms)
                ),
            );
        }
        if let Some(c) = o.leader_changes {
            if c.count >= policy.leader_changes_refuse {
                refuse(
                    Rule::EtcdStatus,
                    format!("member {}", o.host),
                    format!(
                        "{}'s member saw {} leader changes in {} ({} or more within {}: etcd's own alert)",
                        o.host,
                        c.count,
                        human_ms(c.over_ms),
                        policy.leader_changes_refuse,
                        human_ms(policy.leader_changes_window_ms)
                    ),
                );
            }
        }
    }
    // The members' metrics, read beside: DB against its quota, WAL fsync p99.
    let mut shown: Vec<(Rule, String, Finding)> = Vec::new();
    for row in &pane.members {
        let Some(m) = &row.metrics else { continue };
        let db = view
            .status
            .get(&row.host)
            .map(|s| s.db_size)
            .or(m.db_size_bytes);
        if let (Some(db), Some(q)) = (db, m.quota_bytes.filter(|q| *q > 0)) {
            let share = db as f64 / q as f64;
            if share > policy.db_quota_refuse {
                refuse(
                    Rule::EtcdStatus,
                    format!("member {}", row.host),
                    format!(
                        "{}'s DB is {} of its {} quota ({:.0}%, over {:.0}%): NOSPACE is near",
                        row.host,
                        super::human_bytes(db),
                        super::human_bytes(q),
                        share * 100.0,
                        policy.db_quota_refuse * 100.0
                    ),
                );
            }
        }
        if let Some(p99) = m.wal_fsync_p99_ms {
            let text = |over: f64, what: &str| {
                format!(
                    "{}'s disk: etcd's WAL fsync p99 is {} (over {}: {what})",
                    row.host,
                    human_fsync(p99),
                    human_fsync(over)
                )
            };
            if p99 > policy.fsync_refuse_ms {
                refuse(
                    Rule::EtcdStatus,
                    format!("member {}", row.host),
                    text(policy.fsync_refuse_ms, "etcd's critical alert"),
                );
            } else if p99 > policy.fsync_disk_ms {
                let what = if p99 > policy.fsync_warn_ms {
                    "etcd's warning: heartbeats are missed"
                } else {
                    "etcd's disk guidance"
                };
                let over = if p99 > policy.fsync_warn_ms {
                    policy.fsync_warn_ms
                } else {
                    policy.fsync_disk_ms
                };
                shown.push((
                    Rule::EtcdStatus,
                    format!("member {}", row.host),
                    Finding {
                        severity: Severity::Warn,
                        blocks: false,
                        text: text(over, what),
                    },
                ));
            }
        }
    }
    findings.extend(shown);
    // etcd's own leader replaces the one the metrics suggest, and the leader verdict says
    // so where the two differ (metrics a look behind a move, or none leading in them).
    if let Some(h) = &view.leader_host {
        if pane.leader.as_deref() != Some(h.as_str()) {
            let before = pane.leader.clone();
            for v in pane
                .verdicts
                .iter_mut()
                .filter(|v| v.rule == Rule::EtcdLeader)
            {
                v.severity = Severity::Ok;
                v.message = match &before {
                    Some(m) => {
                        format!("{h} leads (etcd's status; {m}'s metrics still said it led)")
                    }
                    None => format!("{h} leads (etcd's status; no member's metrics said so)"),
                };
            }
        }
        pane.leader = Some(h.clone());
    }
    for (rule, subject, f) in &findings {
        if *rule == Rule::CouldNotLook {
            // What could not be read is unknown on the pane (and refuses in the gate); where
            // the member's metrics could not be read either, the pane says so already.
            let host = subject.trim_start_matches(CLIENT_SUBJECT);
            let metrics_seen = pane
                .members
                .iter()
                .any(|m| m.host == host && m.metrics.is_some());
            if metrics_seen {
                pane.verdicts.push(Verdict::new(
                    Pane::Etcd,
                    Rule::CouldNotLook,
                    Severity::Unknown,
                    &env,
                    subject.clone(),
                    f.text.clone(),
                ));
            }
            continue;
        }
        pane.verdicts.push(Verdict::new(
            Pane::Etcd,
            *rule,
            f.severity,
            &env,
            subject.clone(),
            f.text.clone(),
        ));
    }
    if findings.iter().all(|(_, _, f)| !f.blocks) && !obs.is_empty() {
        let voting = view.members.iter().filter(|m| !m.learner).count();
        pane.verdicts.push(Verdict::new(
            Pane::Etcd,
            Rule::EtcdMembership,
            Severity::Ok,
            &env,
            "membership",
            format!(
                "{voting} voting members agree on the membership and on the leader{}; no alarm; quorum reads answer",
                view.leader_host
                    .as_deref()
                    .map(|h| format!(" ({h})"))
                    .unwrap_or_default()
            ),
        ));
    }
    view.preflight = findings.into_iter().map(|(_, _, f)| f).collect();
    pane.client = Some(view);
}

/// Leader changes over the last `window_ms`, from a member's counter samples (time,
/// `etcd_server_leader_changes_seen_total`), oldest first: the rise from the last sample at
/// or before the window's start (the oldest sample when none is that old) to the newest.
/// None with fewer than two samples. A counter that fell (the member restarted) counts from
/// its restart.
pub fn leader_changes(samples: &[(Timestamp, u64)], window_ms: u64) -> Option<LeaderChanges> {
    let (Timestamp(newest_t), _) = *samples.last()?;
    let start = newest_t.saturating_sub(window_ms);
    let from = samples.iter().rposition(|(t, _)| t.0 <= start).unwrap_or(0);
    let span = &samples[from..];
    if span.len() < 2 {
        return None;
    }
    let mut count = 0;
    for w in span.windows(2) {
        let (a, b) = (w[0].1, w[1].1);
        count += if b >= a { b - a } else { b };
    }
    Some(LeaderChanges {
        count,
        over_ms: newest_t.saturating_sub(span[0].0 .0),
    })
}

#[cfg(test)]
mod tests {
    use super::super::{etcd, parse_etcd_metrics, EtcdMemberObs, EtcdPolicy, IoPressure};
    use super::*;

    // Answers of a real etcd 3.6.4 (three members on loopback, TLS), as its gateway wrote them.
    const LIST: &str = r#"{"header":{"cluster_id":"2554524598222108137","member_id":"1526894772021103729","raft_term":"2"},"members":[{"ID":"1526894772021103729","name":"m1","peerURLs":["https://127.0.0.11:2380"],"clientURLs":["https://127.0.0.11:2379"]},{"ID":"5528195433179464213","name":"m2","peerURLs":["https://127.0.0.12:2380"],"clientURLs":["https://127.0.0.12:2379"]},{"ID":"15323219374994545507","name":"m3","peerURLs":["https://127.0.0.13:2380"],"clientURLs":["https://127.0.0.13:2379"]}]}"#;
    const LIST_LEARNER: &str = r#"{"header":{"cluster_id":"2554524598222108137","member_id":"5528195433179464213","raft_term":"3"},"members":[{"ID":"1526894772021103729","name":"m1","peerURLs":["https://127.0.0.11:2380"],"clientURLs":["https://127.0.0.11:2379"]},{"ID":"5528195433179464213","name":"m2","peerURLs":["https://127.0.0.12:2380"],"clientURLs":["https://127.0.0.12:2379"]},{"ID":"12960210813855797085","peerURLs":["https://127.0.0.14:2380"],"isLearner":true},{"ID":"15323219374994545507","name":"m3","peerURLs":["https://127.0.0.13:2380"],"clientURLs":["https://127.0.0.13:2379"]}]}"#;
    const STATUS_1: &str = r#"{"header":{"cluster_id":"2554524598222108137","member_id":"1526894772021103729","revision":"1","raft_term":"2"},"version":"3.6.4","dbSize":"40960","leader":"1526894772021103729","raftIndex":"8","raftTerm":"2","raftAppliedIndex":"8","dbSizeInUse":"24576","storageVersion":"3.6.0","downgradeInfo":{}}"#;
    const STATUS_NO_LEADER: &str = r#"{"header":{"cluster_id":"2554524598222108137","member_id":"1526894772021103729","revision":"1","raft_term":"4"},"version":"3.6.4","dbSize":"40960","raftIndex":"15","raftTerm":"4","raftAppliedIndex":"15","errors":["etcdserver: no leader","memberID:5528195433179464213 alarm:NOSPACE "],"dbSizeInUse":"24576","storageVersion":"3.6.0","downgradeInfo":{}}"#;
    const ALARMS_NONE: &str = r#"{"header":{"cluster_id":"2554524598222108137","member_id":"1526894772021103729","revision":"1","raft_term":"2"}}"#;
    const ALARMS_NOSPACE: &str = r#"{"header":{"cluster_id":"2554524598222108137","member_id":"15323219374994545507","revision":"1","raft_term":"3"},"alarms":[{"memberID":"5528195433179464213","alarm":"NOSPACE"}]}"#;
    const TIMED_OUT: &str = r#"{"code":14,"message":"etcdserver: request timed out"}"#;

    const M1: u64 = 1526894772021103729;
    const M2: u64 = 5528195433179464213;
    const M3: u64 = 15323219374994545507;

    #[test]
    fn real_answers_parse() {
        let l = parse_member_list(LIST).expect("list");
        assert_eq!(l.answered_by, M1);
        assert_eq!(l.cluster_id, 2554524598222108137);
        assert_eq!(
            l.members.iter().map(|m| m.id).collect::<Vec<_>>(),
            vec![M1, M2, M3]
        );
        assert!(l.members.iter().all(|m| m.started() && !m.learner));
        let l = parse_member_list(LIST_LEARNER).expect("learner list");
        let learner = &l.members[2];
        assert!(learner.learner && !learner.started());
        assert_eq!(
            learner.label(),
            "unstarted member b3dbeb11ae0d0f5d at https://127.0.0.14:2380"
        );
        let s = parse_status(STATUS_1).expect("status");
        assert_eq!((s.member_id, s.leader), (M1, Some(M1)));
        assert_eq!((s.raft_term, s.applied_index, s.db_size), (2, 8, 40960));
        let s = parse_status(STATUS_NO_LEADER).expect("status without leader");
        assert_eq!(s.leader, None);
        assert_eq!(s.errors.len(), 2);
        assert!(parse_alarms(ALARMS_NONE).expect("none").is_empty());
        assert_eq!(
            parse_alarms(ALARMS_NOSPACE).expect("nospace"),
            vec![EtcdAlarm {
                member_id: M2,
                alarm: "NOSPACE".into()
            }]
        );
        assert_eq!(
            parse_range(TIMED_OUT).expect_err("timed out").to_string(),
            "etcd answered an error (code 14): etcdserver: request timed out"
        );
        assert!(parse_range(ALARMS_NONE).is_ok());
        let e = parse_status("<html>").expect_err("not json");
        assert!(e.to_string().starts_with("not JSON"), "{e}");
        let e = parse_status(ALARMS_NONE).expect_err("no version");
        assert!(e.to_string().contains("`version`"), "{e}");
        let e =
            parse_member_list(r#"{"header":{"member_id":"x"},"members":[]}"#).expect_err("bad id");
        assert_eq!(e.to_string(), "`member_id` is no unsigned integer: x");
    }

    const METRICS: &str = "etcd_server_is_leader 0\netcd_server_has_leader 1\n\
etcd_mvcc_db_total_size_in_bytes 40960\netcd_server_quota_backend_bytes 2147483648\n\
etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.002\"} 100\n\
etcd_disk_wal_fsync_duration_seconds_bucket{le=\"+Inf\"} 100\n";

    fn base() -> EtcdPane {
        let obs: Vec<EtcdMemberObs> = ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"]
            .iter()
            .map(|h| EtcdMemberObs {
                host: h.to_string(),
                address: "10.0.0.1".into(),
                metrics: Look::seen(parse_etcd_metrics(METRICS).expect("metrics")),
                io_pressure: Look::seen(IoPressure {
                    some_avg10: 0.1,
                    some_avg60: 0.1,
                    full_avg10: None,
                }),
            })
            .collect();
        etcd("prod", &obs, &EtcdPolicy::default())
    }

    fn healthy() -> Vec<EtcdClientObs> {
        let list = parse_member_list(LIST).expect("list");
        [("k3s-prod-1", M1), ("k3s-prod-2", M2), ("k3s-prod-3", M3)]
            .iter()
            .map(|(h, id)| {
                let mut s = parse_status(STATUS_1).expect("status");
                s.member_id = *id;
                EtcdClientObs {
                    host: h.to_string(),
                    members: Look::seen(list.clone()),
                    status: Look::seen(s),
                    alarms: Look::seen(vec![]),
                    quorum_read: Look::seen(()),
                    leader_changes: Some(LeaderChanges {
                        count: 0,
                        over_ms: 60_000,
                    }),
                }
            })
            .collect()
    }

    fn judged(obs: &[EtcdClientObs]) -> EtcdPane {
        let mut p = base();
        judge_members(&mut p, obs, &PreflightPolicy::default(), &BTreeMap::new());
        p
    }

    fn refusals(p: &EtcdPane) -> Vec<String> {
        p.client
            .as_ref()
            .expect("client view")
            .preflight
            .iter()
            .filter(|f| f.blocks)
            .map(|f| f.text.clone())
            .collect()
    }

    #[test]
    fn a_healthy_cluster_passes_and_etcd_names_its_leader() {
        let p = judged(&healthy());
        assert_eq!(refusals(&p), Vec::<String>::new());
        // The metrics said no one leads; etcd's status says k3s-prod-1's member does.
        assert_eq!(p.leader.as_deref(), Some("k3s-prod-1"));
        let lv = p
            .verdicts
            .iter()
            .find(|v| v.rule == Rule::EtcdLeader)
            .expect("leader verdict");
        assert_eq!(
            (lv.severity, lv.message.as_str()),
            (
                Severity::Ok,
                "k3s-prod-1 leads (etcd's status; no member's metrics said so)"
            )
        );
        let v = p.client.as_ref().expect("view");
        assert_eq!(v.lag("k3s-prod-3"), Some(0));
        assert!(p
            .verdicts
            .iter()
            .any(|v| v.rule == Rule::EtcdMembership && v.severity == Severity::Ok));
    }

    #[test]
    fn each_preflight_rule_refuses_with_its_reason() {
        let case = |f: &dyn Fn(&mut Vec<EtcdClientObs>), want: &str| {
            let mut o = healthy();
            f(&mut o);
            let r = refusals(&judged(&o));
            assert!(
                r.iter().any(|t| t.contains(want)),
                "want {want:?} in {r:#?}"
            );
        };
        case(
            &|o| o[2].status = Look::could_not("curl: (7) Failed to connect"),
            "k3s-prod-3's etcd member not answering: curl: (7)",
        );
        case(
            &|o| o[1].members = Look::seen(parse_member_list(LIST_LEARNER).expect("l")),
            "members disagree on the membership",
        );
        case(
            &|o| {
                for x in o.iter_mut() {
                    x.members = Look::seen(parse_member_list(LIST_LEARNER).expect("l"));
                }
            },
            "is a learner that has not started",
        );
        case(
            &|o| o[0].alarms = Look::seen(parse_alarms(ALARMS_NOSPACE).expect("a")),
            "alarm NOSPACE raised on k3s-prod-2",
        );
        case(
            &|o| o[0].quorum_read = Look::could_not(TIMED_OUT),
            "a quorum read through k3s-prod-1 did not answer within 15s",
        );
        case(
            &|o| {
                if let Look::Seen { value } = &mut o[1].status {
                    value.leader = Some(M2);
                }
            },
            "members name different leaders",
        );
        case(
            &|o| {
                if let Look::Seen { value } = &mut o[1].status {
                    value.leader = None;
                }
            },
            "k3s-prod-2's etcd member sees no leader",
        );
        case(
            &|o| {
                o[2].leader_changes = Some(LeaderChanges {
                    count: 4,
                    over_ms: 600_000,
                })
            },
            "saw 4 leader changes in 10m",
        );
        case(
            &|o| {
                o.pop();
                for x in o.iter_mut() {
                    if let Look::Seen { value } = &mut x.members {
                        value.members.pop();
                    }
                }
            },
            "only 2 voting members",
        );
        case(
            &|o| {
                o.pop();
            },
            "etcd lists m3 (d4a702d5edeedb63) but no server of prod",
        );
    }

    #[test]
    fn db_and_fsync_from_the_metrics() {
        let mut p = base();
        if let Some(m) = p.members[1].metrics.as_mut() {
            m.quota_bytes = Some(41_000);
            m.wal_fsync_p99_ms = Some(2048.0);
        }
        if let Some(m) = p.members[2].metrics.as_mut() {
            m.wal_fsync_p99_ms = Some(512.0);
        }
        judge_members(
            &mut p,
            &healthy(),
            &PreflightPolicy::default(),
            &BTreeMap::new(),
        );
        let v = p.client.as_ref().expect("view");
        let texts: Vec<(bool, &str)> = v
            .preflight
            .iter()
            .map(|f| (f.blocks, f.text.as_str()))
            .collect();
        assert!(
            texts.contains(&(true, "k3s-prod-2's DB is 40.0 KiB of its 40.0 KiB quota (100%, over 95%): NOSPACE is near")),
            "{texts:#?}"
        );
        assert!(
            texts.contains(&(true, "k3s-prod-2's disk: etcd's WAL fsync p99 is 2.0 s (over 1.0 s: etcd's critical alert)")),
            "{texts:#?}"
        );
        assert!(
            texts.contains(&(false, "k3s-prod-3's disk: etcd's WAL fsync p99 is 512 ms (over 500 ms: etcd's warning: heartbeats are missed)")),
            "{texts:#?}"
        );
    }

    #[test]
    fn leader_changes_over_the_window() {
        let min = 60_000;
        let t = Timestamp;
        assert_eq!(leader_changes(&[(t(0), 1)], 15 * min), None);
        let s = [
            (t(0), 1),
            (t(5 * min), 2),
            (t(10 * min), 4),
            (t(20 * min), 6),
        ];
        // From the sample at 5 min (the last at or before 20 - 15) to 20 min: 2 -> 6.
        assert_eq!(
            leader_changes(&s, 15 * min),
            Some(LeaderChanges {
                count: 4,
                over_ms: 15 * min
            })
        );
        // A restart resets the counter: 5 -> 1 counts 1.
        assert_eq!(
            leader_changes(&[(t(0), 5), (t(min), 1)], 15 * min).map(|c| c.count),
            Some(1)
        );
    }
}
