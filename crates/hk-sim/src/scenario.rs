//! Scenarios of the simulated homelab: what each environment looks like when the demo
//! starts, and what happens to it on a timeline.
//!
//! Owns: the scenario file format (`assets/scenarios/*.yaml`, embedded; a file of the same
//! name in `--scenarios DIR` replaces one), strict parsing with file:line messages, and
//! looking one up by name. Servers and gateways are named by their position in the
//! environment's server list (1-based), never by a homelab host name, so one scenario fits
//! any inventory with enough servers. The faults' names and their one-line form
//! ([`Fault::from_words`]), shared by scenario events and the console's `:fault`.
//! Must not: do IO beyond reading a named file, or know how the simulation applies it.

use std::collections::BTreeMap;

use serde::Deserialize;

/// One scenario, as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// What the operator should see, one or two sentences (shown in the demo banner).
    pub description: String,
    /// Simulated seconds per real second for journal times and restart periods (>= 1).
    #[serde(default = "one")]
    pub time_scale: u32,
    /// The state of every environment unless `environments` says otherwise.
    #[serde(default)]
    pub defaults: EnvState,
    /// Per-environment state, replacing `defaults` field by field where given.
    #[serde(default)]
    pub environments: BTreeMap<String, EnvPatch>,
    /// What happens after the start, in order of `at_s` (simulated seconds).
    #[serde(default)]
    pub events: Vec<Event>,
    /// Whether the file sets `defaults.vpn`. When it does not, each environment's gateway
    /// gets a VPN server and tunnel address of its own ([`VpnState::distinct`]): healthy
    /// gateways never share one, whatever the repo's environments are called.
    #[serde(skip)]
    pub defaults_vpn_given: bool,
}

fn one() -> u32 {
    1
}

/// Where the cilium agents dial the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum AgentsDial {
    /// The environment's VIP (healthy).
    #[default]
    Vip,
    /// The founder's own address (the 2026-09-06 single-node dependency).
    Founder,
    /// Each agent its own node's address.
    OwnNode,
}

/// The state of one environment.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EnvState {
    /// The server (1-based) holding the kube-vip lease.
    pub lease_holder: usize,
    pub lease_duration_s: u64,
    pub lease_renew_every_s: u64,
    pub agents_dial: AgentsDial,
    /// After a Flux reconcile of the cilium release, the agents dial this (the fix landed
    /// in git); `None`: the reconcile changes nothing.
    pub agents_dial_after_reconcile: Option<AgentsDial>,
    /// The server (1-based) whose updated cilium pod never becomes ready in a rollout.
    pub rollout_stuck_on: Option<usize>,
    pub vpn: VpnState,
    /// Every server's disk, unless `server_disks` says otherwise.
    pub disks: DiskState,
    /// Per server (1-based), replacing `disks` field by field on that server only: one
    /// node's disk starves while its peers' do not (the 2026-09-07 incident).
    pub server_disks: BTreeMap<usize, DiskPatch>,
}

impl Default for EnvState {
    fn default() -> Self {
        EnvState {
            lease_holder: 1,
            lease_duration_s: 15,
            lease_renew_every_s: 2,
            agents_dial: AgentsDial::Vip,
            agents_dial_after_reconcile: Some(AgentsDial::Vip),
            rollout_stuck_on: None,
            vpn: VpnState::default(),
            disks: DiskState::default(),
            server_disks: BTreeMap::new(),
        }
    }
}

impl EnvState {
    /// The state one host of the environment starts in: server `position` (1-based) gets its
    /// `server_disks` entry on top of `disks`; a host that is no server (`None`) gets `disks`.
    pub fn on_server(&self, position: Option<usize>) -> EnvState {
        let mut s = self.clone();
        if let Some(p) = position.and_then(|n| self.server_disks.get(&n)) {
            s.disks.apply(p);
        }
        s
    }
}

/// A VPN gateway's tunnel.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VpnState {
    /// systemd ActiveState of the tunnel unit.
    pub active: String,
    /// The VPN server (`IP:PORT`) the tunnel connects to.
    pub server: String,
    /// The tunnel address the server hands out.
    pub tunnel_addr: String,
    /// The exit IP through the tunnel, and the home ISP's without it.
    pub tunnel_exit: String,
    pub direct_exit: String,
    /// Reconnect period in simulated seconds while another gateway is on the same server
    /// with the same tunnel address (they evict each other); 0: connected once, stays up.
    pub restart_every_s: u64,
    /// The repo pins `server` for this environment's gateways: the demo writes it into
    /// each gateway's `host_vars` as `vpn_egress_gateway_pia_remote` (over what the repo
    /// said), so the repo says what the gateways run, and a fix starts with a repo edit.
    pub pinned: bool,
}

impl VpnState {
    /// The healthy tunnel of the environment at `index` (hk-console.yaml's order): its own
    /// server, tunnel address and exit, all documentation or private addresses. Index 0 is
    /// [`VpnState::default`].
    pub fn distinct(index: usize) -> VpnState {
        // 24 distinct values fit in the documentation range's last octet.
        let i = u8::try_from(index % 24).unwrap_or(0);
        VpnState {
            server: format!("198.51.100.{}:1198", 10 + 10 * (i % 24)),
            tunnel_addr: format!("10.{}.0.{}", 8 + i, 6 + 8 * (i % 31)),
            tunnel_exit: format!("198.51.100.{}", 77 + 11 * (i % 16)),
            ..VpnState::default()
        }
    }
}

impl Default for VpnState {
    fn default() -> Self {
        // Documentation addresses (RFC 5737) and CGNAT-style tunnel space: none is dialled.
        VpnState {
            active: "active".into(),
            server: "198.51.100.10:1198".into(),
            tunnel_addr: "10.8.0.6".into(),
            tunnel_exit: "198.51.100.77".into(),
            direct_exit: "203.0.113.5".into(),
            restart_every_s: 0,
            pinned: false,
        }
    }
}

/// The k3s data disk's queue and the IO weights (the etcd I/O priority mitigation).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DiskState {
    pub device: String,
    pub scheduler: String,
    pub nr_requests: u32,
    pub io_weight: u32,
    /// `some avg10` of /proc/pressure/io, percent.
    pub io_pressure_avg10: f64,
}

impl DiskState {
    fn apply(&mut self, p: &DiskPatch) {
        macro_rules! take {
            ($f:ident) => {
                if let Some(v) = &p.$f {
                    self.$f = v.clone();
                }
            };
        }
        take!(device);
        take!(scheduler);
        take!(nr_requests);
        take!(io_weight);
        take!(io_pressure_avg10);
    }
}

impl Default for DiskState {
    fn default() -> Self {
        DiskState {
            device: "sda".into(),
            scheduler: "mq-deadline".into(),
            nr_requests: 64,
            io_weight: 100,
            io_pressure_avg10: 0.4,
        }
    }
}

/// Field-by-field replacement of [`EnvState`] for one environment.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct EnvPatch {
    pub lease_holder: Option<usize>,
    pub lease_duration_s: Option<u64>,
    pub lease_renew_every_s: Option<u64>,
    pub agents_dial: Option<AgentsDial>,
    pub agents_dial_after_reconcile: Option<Option<AgentsDial>>,
    pub rollout_stuck_on: Option<usize>,
    pub vpn: Option<VpnPatch>,
    pub disks: Option<DiskPatch>,
    /// Per server (1-based): an entry replaces the defaults' entry for that server.
    pub server_disks: Option<BTreeMap<usize, DiskPatch>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct VpnPatch {
    pub active: Option<String>,
    pub server: Option<String>,
    pub tunnel_addr: Option<String>,
    pub tunnel_exit: Option<String>,
    pub direct_exit: Option<String>,
    pub restart_every_s: Option<u64>,
    pub pinned: Option<bool>,
}

/// Field-by-field replacement of [`DiskState`].
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct DiskPatch {
    pub device: Option<String>,
    pub scheduler: Option<String>,
    pub nr_requests: Option<u32>,
    pub io_weight: Option<u32>,
    pub io_pressure_avg10: Option<f64>,
}

/// Something that happens to one environment at a simulated time.
// No deny_unknown_fields here (serde cannot combine it with flatten): the fault's own
// variant refuses unknown keys instead.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Event {
    pub at_s: u64,
    pub env: String,
    #[serde(flatten)]
    pub fault: Fault,
}

/// The faults a scenario or the console's `:fault` can inject.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "fault", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Fault {
    /// The lease holder's node dies: NotReady (at once, not after the node-monitor grace
    /// period) with every pod on it unready, stops renewing; the next server takes the
    /// lease once it expires.
    HolderDies,
    /// Server N's cilium agent is recreated dialling its own node address.
    AgentDrifts { server: usize },
    /// The tunnel unit of the environment's gateway fails.
    VpnDown,
    /// The tunnel unit of the environment's gateway is started again (undoes `vpn-down`).
    VpnUp,
    /// A member is added to the environment's etcd as a learner and never starts (a server
    /// join that stopped half way): writes go on, the membership is no longer clean.
    EtcdLearnerAdded,
    /// The learner is removed again (undoes `etcd-learner-added`).
    EtcdLearnerRemoved,
}

/// Every fault by its kebab name (what `fault:` says in a scenario and `:fault` types), with
/// the name of its one argument if it takes one. [`Fault::name`] keeps it complete.
pub const FAULTS: &[(&str, Option<&str>)] = &[
    ("holder-dies", None),
    ("agent-drifts", Some("server")),
    ("vpn-down", None),
    ("vpn-up", None),
    ("etcd-learner-added", None),
    ("etcd-learner-removed", None),
];

impl Fault {
    /// The kebab name, as in [`FAULTS`].
    pub fn name(&self) -> &'static str {
        match self {
            Fault::HolderDies => "holder-dies",
            Fault::AgentDrifts { .. } => "agent-drifts",
            Fault::VpnDown => "vpn-down",
            Fault::VpnUp => "vpn-up",
            Fault::EtcdLearnerAdded => "etcd-learner-added",
            Fault::EtcdLearnerRemoved => "etcd-learner-removed",
        }
    }

    /// The faults as a usage list: `holder-dies, agent-drifts N, vpn-down, vpn-up`.
    pub fn usage() -> String {
        FAULTS
            .iter()
            .map(|(n, arg)| match arg {
                Some(_) => format!("{n} N"),
                None => (*n).to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A fault as typed on one line (`agent-drifts 2`): the name, then its argument if it
    /// takes one. The words become the same fields a scenario event has and go through the
    /// same deserializer, so the two cannot disagree on a name.
    pub fn from_words(words: &str) -> Result<Fault, FaultWordsError> {
        let mut it = words.split_whitespace();
        let Some(name) = it.next() else {
            return Err(FaultWordsError::Empty {
                usage: Fault::usage(),
            });
        };
        let Some(&(name, arg)) = FAULTS.iter().find(|(n, _)| *n == name) else {
            return Err(FaultWordsError::Unknown {
                name: name.to_string(),
                usage: Fault::usage(),
            });
        };
        let mut fields = serde_json::Map::new();
        fields.insert("fault".into(), serde_json::Value::from(name));
        if let Some(field) = arg {
            let Some(v) = it.next() else {
                return Err(FaultWordsError::NoServer { fault: name });
            };
            let n: usize = v.parse().map_err(|_| FaultWordsError::NotAServer {
                fault: name,
                word: v.to_string(),
            })?;
            if n == 0 {
                return Err(FaultWordsError::ServerZero { fault: name });
            }
            fields.insert(field.to_string(), serde_json::Value::from(n));
        }
        let rest: Vec<&str> = it.collect();
        if !rest.is_empty() {
            return Err(FaultWordsError::Extra {
                fault: name,
                takes: if arg.is_some() {
                    "one argument"
                } else {
                    "no argument"
                },
                extra: rest.join(" "),
            });
        }
        serde_json::from_value(serde_json::Value::Object(fields)).map_err(|e| {
            FaultWordsError::Fields {
                fault: name,
                detail: e.to_string(),
            }
        })
    }
}

/// Why words typed as a fault (`:fault ENV ...`) are not one: what was expected instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultWordsError {
    #[error("no fault given: expected one of {usage}")]
    Empty { usage: String },
    #[error("unknown fault `{name}`: expected one of {usage}")]
    Unknown { name: String, usage: String },
    #[error("{fault} needs a server number: {fault} N (servers are numbered from 1)")]
    NoServer { fault: &'static str },
    #[error("{fault}: `{word}` is not a server number (servers are numbered from 1)")]
    NotAServer { fault: &'static str, word: String },
    #[error("{fault}: servers are numbered from 1")]
    ServerZero { fault: &'static str },
    #[error("{fault} takes {takes}, not `{extra}`")]
    Extra {
        fault: &'static str,
        takes: &'static str,
        extra: String,
    },
    /// [`FAULTS`] and [`Fault`]'s serde names disagree (a fault added to one only). The
    /// deserializer's text, not the error: this enum is compared in tests, and
    /// `serde_json::Error` is not comparable.
    #[error("{fault}: {detail}")]
    Fields { fault: &'static str, detail: String },
}

impl Scenario {
    /// The state of `env` at the start: `defaults` with the environment's patch applied.
    pub fn env_state(&self, env: &str) -> EnvState {
        self.patched(env, self.defaults.clone())
    }

    /// [`Scenario::env_state`] for the environment at `index` in the repo's order: unless the
    /// scenario sets `defaults.vpn`, its gateway's tunnel is [`VpnState::distinct`].
    pub fn env_state_at(&self, env: &str, index: usize) -> EnvState {
        let mut base = self.defaults.clone();
        if !self.defaults_vpn_given {
            base.vpn = VpnState::distinct(index);
        }
        self.patched(env, base)
    }

    /// Every server position of `env`'s state past its `servers` (1-based), as
    /// `lease_holder: N`, `rollout_stuck_on: N` or `server_disks.N`: the demo refuses them
    /// rather than quietly give the lease to the last server, roll past a stuck node that
    /// does not exist, or leave the named disk unstarved.
    pub fn servers_beyond(&self, env: &str, servers: usize) -> Vec<String> {
        let st = self.env_state(env);
        let mut out = Vec::new();
        if st.lease_holder > servers {
            out.push(format!("lease_holder: {}", st.lease_holder));
        }
        if let Some(n) = st.rollout_stuck_on.filter(|n| *n > servers) {
            out.push(format!("rollout_stuck_on: {n}"));
        }
        out.extend(
            st.server_disks
                .keys()
                .filter(|n| **n > servers)
                .map(|n| format!("server_disks.{n}")),
        );
        out
    }

    /// Every environment the scenario names (its patches and its events) that is not one
    /// of `known`: a scenario written for other environments would silently run as healthy
    /// there, so the demo refuses it instead.
    pub fn unknown_environments(&self, known: &[&str]) -> Vec<String> {
        let mut out: Vec<String> = self
            .environments
            .keys()
            .chain(self.events.iter().map(|e| &e.env))
            .filter(|e| !known.contains(&e.as_str()))
            .cloned()
            .collect();
        out.sort();
        out.dedup();
        out
    }

    fn patched(&self, env: &str, mut s: EnvState) -> EnvState {
        if let Some(p) = self.environments.get(env) {
            macro_rules! take {
                ($dst:expr, $src:expr) => {
                    if let Some(v) = $src.clone() {
                        $dst = v;
                    }
                };
            }
            take!(s.lease_holder, p.lease_holder);
            take!(s.lease_duration_s, p.lease_duration_s);
            take!(s.lease_renew_every_s, p.lease_renew_every_s);
            take!(s.agents_dial, p.agents_dial);
            take!(s.agents_dial_after_reconcile, p.agents_dial_after_reconcile);
            if p.rollout_stuck_on.is_some() {
                s.rollout_stuck_on = p.rollout_stuck_on;
            }
            if let Some(v) = &p.vpn {
                take!(s.vpn.active, v.active);
                take!(s.vpn.server, v.server);
                take!(s.vpn.tunnel_addr, v.tunnel_addr);
                take!(s.vpn.tunnel_exit, v.tunnel_exit);
                take!(s.vpn.direct_exit, v.direct_exit);
                take!(s.vpn.restart_every_s, v.restart_every_s);
                take!(s.vpn.pinned, v.pinned);
            }
            if let Some(d) = &p.disks {
                s.disks.apply(d);
            }
            if let Some(per) = &p.server_disks {
                s.server_disks
                    .extend(per.iter().map(|(n, d)| (*n, d.clone())));
            }
        }
        s
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScenarioError {
    #[error("no scenario `{name}` (known: {known})")]
    Unknown { name: String, known: String },
    #[error("{file}:{line}:{col}: {message}")]
    Invalid {
        file: String,
        line: usize,
        col: usize,
        message: String,
    },
    #[error("{file}: {message}")]
    Semantics { file: String, message: String },
}

/// Parse one scenario file; `file` names it in messages.
pub fn parse(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
    let mut s: Scenario = serde_yaml::from_str(text).map_err(|e| {
        let (line, col) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
        ScenarioError::Invalid {
            file: file.to_string(),
            line,
            col,
            message: e.to_string(),
        }
    })?;
    // The file parsed, so it is a mapping; only whether `defaults.vpn` is written matters.
    s.defaults_vpn_given = serde_yaml::from_str::<serde_yaml::Value>(text)
        .ok()
        .and_then(|v| v.get("defaults").and_then(|d| d.get("vpn")).cloned())
        .is_some();
    let bad = |message: String| ScenarioError::Semantics {
        file: file.to_string(),
        message,
    };
    if s.time_scale == 0 {
        return Err(bad("time_scale must be at least 1".into()));
    }
    for (name, st) in std::iter::once(("defaults".to_string(), s.defaults.clone())).chain(
        s.environments
            .keys()
            .map(|e| (format!("environments.{e}"), s.env_state(e))),
    ) {
        if st.lease_holder == 0
            || st.rollout_stuck_on == Some(0)
            || st.server_disks.contains_key(&0)
        {
            return Err(bad(format!(
                "{name}: servers are numbered from 1 (lease_holder, rollout_stuck_on, server_disks)"
            )));
        }
        if st.lease_renew_every_s == 0 || st.lease_renew_every_s >= st.lease_duration_s {
            return Err(bad(format!(
                "{name}: lease_renew_every_s must be at least 1 and below lease_duration_s"
            )));
        }
    }
    let mut last = 0;
    for e in &s.events {
        if e.at_s < last {
            return Err(bad(format!(
                "events must be in order of at_s ({} comes after {last})",
                e.at_s
            )));
        }
        last = e.at_s;
        if let Fault::AgentDrifts { server: 0 } = e.fault {
            return Err(bad("agent-drifts: servers are numbered from 1".into()));
        }
    }
    Ok(s)
}

/// The names of the embedded scenarios (file names without `.yaml`), sorted.
pub fn names() -> Vec<String> {
    super::demo_repo::scenario_files()
        .iter()
        .filter_map(|(f, _)| f.strip_suffix(".yaml").map(str::to_string))
        .collect()
}

/// The embedded scenario `name`.
pub fn load(name: &str) -> Result<Scenario, ScenarioError> {
    let file = format!("{name}.yaml");
    match super::demo_repo::scenario_files()
        .iter()
        .find(|(f, _)| *f == file)
    {
        Some((f, text)) => parse(&format!("assets/scenarios/{f}"), text),
        None => Err(ScenarioError::Unknown {
            name: name.to_string(),
            known: names().join(", "),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_scenario_parses() {
        let names = names();
        for n in [
            "healthy",
            "agents-on-node-ip",
            "vip-failover",
            "vpn-eviction-loop",
            "etcd-io-starvation",
            "rollout-stuck",
        ] {
            assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
        }
        for n in &names {
            load(n).unwrap_or_else(|e| panic!("{n}: {e}"));
        }
    }

    #[test]
    fn unknown_field_names_file_and_line() {
        let err = parse("x.yaml", "description: d\ndefaults:\n  lease_holdr: 2\n")
            .expect_err("typo refused");
        match err {
            ScenarioError::Invalid { file, line, .. } => {
                assert_eq!(file, "x.yaml");
                assert_eq!(line, 3);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn patch_replaces_field_by_field() {
        let s = parse(
            "x.yaml",
            "description: d\nenvironments:\n  prod:\n    vpn: {tunnel_addr: 10.9.0.2}\n",
        )
        .expect("parses");
        let prod = s.env_state("prod");
        assert_eq!(prod.vpn.tunnel_addr, "10.9.0.2");
        assert_eq!(prod.vpn.server, VpnState::default().server);
        assert_eq!(s.env_state("dev"), EnvState::default());
    }

    #[test]
    fn every_server_position_past_the_environment_is_named() {
        let s = parse(
            "x.yaml",
            "description: d\nenvironments:\n  dev:\n    lease_holder: 4\n    rollout_stuck_on: 5\n    server_disks: {6: {io_pressure_avg10: 9.0}}\n",
        )
        .expect("parses");
        assert_eq!(
            s.servers_beyond("dev", 3),
            vec![
                "lease_holder: 4".to_string(),
                "rollout_stuck_on: 5".to_string(),
                "server_disks.6".to_string()
            ]
        );
        assert!(s.servers_beyond("dev", 6).is_empty());
        // Every shipped scenario fits the sample's three servers per environment.
        for name in names() {
            let sc = load(&name).expect("embedded");
            for env in ["dev", "prod"] {
                assert!(sc.servers_beyond(env, 3).is_empty(), "{name} {env}");
            }
        }
    }

    #[test]
    fn server_disks_patch_one_server_only() {
        let s = parse(
            "x.yaml",
            "description: d\ndefaults:\n  server_disks: {2: {scheduler: bfq}}\nenvironments:\n  prod:\n    disks: {io_weight: 100}\n    server_disks:\n      1: {io_pressure_avg10: 11.36}\n",
        )
        .expect("parses");
        let prod = s.env_state("prod");
        let one = prod.on_server(Some(1)).disks;
        assert_eq!(one.io_pressure_avg10, 11.36);
        assert_eq!(one.io_weight, 100);
        // The defaults' entry for server 2 stays; server 3 and non-servers get `disks`.
        assert_eq!(prod.on_server(Some(2)).disks.scheduler, "bfq");
        assert_eq!(prod.on_server(Some(2)).disks.io_pressure_avg10, 0.4);
        assert_eq!(prod.on_server(Some(3)).disks, prod.disks);
        assert_eq!(prod.on_server(None).disks, prod.disks);
        assert!(s.servers_beyond("prod", 3).is_empty());
        assert_eq!(
            s.servers_beyond("prod", 1),
            vec!["server_disks.2".to_string()]
        );
        let starving = load("etcd-io-starvation").expect("embedded");
        let prod = starving.env_state("prod");
        assert!(prod.on_server(Some(1)).disks.io_pressure_avg10 >= 10.0);
        assert!(prod.on_server(Some(2)).disks.io_pressure_avg10 < 1.0);
        let err = parse(
            "x.yaml",
            "description: d\ndefaults: {server_disks: {0: {}}}\n",
        )
        .expect_err("0 refused");
        assert!(err.to_string().contains("server_disks"), "{err}");
    }

    #[test]
    fn unknown_scenario_lists_the_known_ones() {
        let err = load("nope").expect_err("unknown").to_string();
        assert!(err.to_string().contains("healthy"), "{err}");
    }

    #[test]
    fn every_fault_parses_from_words_and_from_a_scenario_alike() {
        for (name, arg) in FAULTS {
            let words = match arg {
                Some(_) => format!("{name} 2"),
                None => (*name).to_string(),
            };
            let typed = Fault::from_words(&words).unwrap_or_else(|e| panic!("{words}: {e}"));
            assert_eq!(typed.name(), *name);
            let yaml = match arg {
                Some(field) => format!(
                    "description: d\nevents:\n  - {{at_s: 1, env: dev, fault: {name}, {field}: 2}}\n"
                ),
                None => format!("description: d\nevents:\n  - {{at_s: 1, env: dev, fault: {name}}}\n"),
            };
            let s = parse("x.yaml", &yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
            assert_eq!(s.events[0].fault, typed, "{words}");
        }
        assert_eq!(
            Fault::from_words("agent-drifts 3"),
            Ok(Fault::AgentDrifts { server: 3 })
        );
        assert_eq!(Fault::from_words("  vpn-up "), Ok(Fault::VpnUp));
    }

    #[test]
    fn bad_fault_words_say_what_was_expected() {
        let unknown = Fault::from_words("node-explodes")
            .expect_err("unknown")
            .to_string();
        assert!(
            unknown.contains("node-explodes") && unknown.contains(&Fault::usage()),
            "{unknown}"
        );
        assert!(Fault::from_words("")
            .expect_err("empty")
            .to_string()
            .contains("holder-dies"));
        let no_n = Fault::from_words("agent-drifts")
            .expect_err("no server")
            .to_string();
        assert!(no_n.contains("agent-drifts N"), "{no_n}");
        let not_n = Fault::from_words("agent-drifts two")
            .expect_err("not a number")
            .to_string();
        assert!(not_n.contains("`two`"), "{not_n}");
        assert!(Fault::from_words("agent-drifts 0")
            .expect_err("zero")
            .to_string()
            .contains("numbered from 1"));
        let extra = Fault::from_words("holder-dies now")
            .expect_err("extra word")
            .to_string();
        assert!(
            extra.contains("no argument") && extra.contains("`now`"),
            "{extra}"
        );
        let extra = Fault::from_words("agent-drifts 2 3")
            .expect_err("extra word")
            .to_string();
        assert!(
            extra.contains("one argument") && extra.contains("`3`"),
            "{extra}"
        );
    }

    #[test]
    fn semantic_errors_are_named() {
        let err = parse("x.yaml", "description: d\ndefaults: {lease_holder: 0}\n")
            .expect_err("0 refused");
        assert!(err.to_string().contains("numbered from 1"), "{err}");
        let err = parse(
            "x.yaml",
            "description: d\nevents:\n  - {at_s: 5, env: dev, fault: vpn-down}\n  - {at_s: 2, env: dev, fault: vpn-down}\n",
        )
        .expect_err("order");
        assert!(err.to_string().contains("in order"), "{err}");
        let err = parse(
            "x.yaml",
            "description: d\nevents:\n  - {at_s: 5, env: dev, fault: agent-drifts, servr: 2}\n",
        )
        .expect_err("typo in an event refused");
        assert!(err.to_string().contains("servr"), "{err}");
    }
}
