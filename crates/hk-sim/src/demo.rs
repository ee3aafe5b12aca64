//! The whole simulated homelab, started in-process: what `hk-console demo` runs.
//!
//! Owns: putting the pieces together for one scenario: the demo repo on loopback
//! ([`super::demo_repo`]), one simulated API server per environment on its VIP with the
//! kubeconfig where the inventory says it lives, one simulated SSH node per inventory host
//! with its host key in the repo's known_hosts, a client key the nodes accept, the per-host
//! connection variables in `host_vars/`, an `ansible.cfg` that keeps ansible-playbook on
//! those keys (pipelining on: a simulated node never runs Python), and the scenario's
//! state and timeline on both sides ([`super::cluster`], the nodes' tunnels and disks);
//! [`FaultInjector`], the way live faults (the console's `:fault`) reach both sides.
//! Must not: listen or dial anywhere but loopback (every address is checked), touch the
//! operator's ~/.ssh or ~/.kube, or keep running after [`Demo`] is dropped.
//!
//! One file (over 800 lines): the start order of the pieces (repo, API servers, nodes, keys) is
//! one sequence whose every step checks loopback; it is read top to bottom.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::apiserver::{EtcdMembers, MemberSpec, RealApiServer, RealCluster};
use super::cluster::{self, ClusterInput, SimEnv};
use super::demo_repo::{self, AddressPlan};
use super::kube::{SimKube, SimKubeConfig};
use super::node::{Clock, NodeState, Psi, SimEtcd, UnitState, VpnTunnel};
use super::scenario::{self, EnvState, Fault, Scenario};
use super::ssh::{SimNode, SimNodeSpec};
use super::userland::{self, Sandbox, Userland};
use hk_effects::observe::etcd as etcd_vars;
use hk_engine::repo::Repo;

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error(transparent)]
    Repo(#[from] demo_repo::DemoRepoError),
    #[error(transparent)]
    Scenario(#[from] scenario::ScenarioError),
    #[error("demo: {0}")]
    Start(String),
    #[error(transparent)]
    ApiServer(#[from] super::apiserver::ApiServerError),
    #[error("demo: cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A running simulation. Dropping it stops every server and controller.
pub struct Demo {
    pub dir: PathBuf,
    pub repo: Repo,
    pub scenario_name: String,
    pub scenario: Scenario,
    pub plan: AddressPlan,
    /// Environment -> its simulated API server (empty with `--apiserver`).
    pub kubes: BTreeMap<String, SimKube>,
    /// With `--apiserver DIR`: the real kube-apiservers (and their etcd) in their place.
    pub real: Option<RealApis>,
    /// Inventory host -> its simulated SSH node.
    pub nodes: BTreeMap<String, SimNode>,
    /// Whether the nodes run a real userland (`demo --userland`).
    pub userland: bool,
    /// With a real userland: each server's etcd endpoints, served while the demo lives.
    _etcd_endpoints: Vec<super::etcd_endpoint::EtcdEndpoint>,
    cancel: CancellationToken,
    injector: FaultInjector,
}

/// `demo --apiserver`'s real API servers: one per environment, each over its environment's
/// etcd (a member per server). The servers are dropped (stopped) before the etcd.
#[derive(Debug)]
pub struct RealApis {
    pub servers: BTreeMap<String, RealApiServer>,
    pub cluster: RealCluster,
}

impl std::fmt::Debug for Demo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Demo")
            .field("dir", &self.dir)
            .field("scenario", &self.scenario_name)
            .finish()
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        self.cancel.cancel();
        for n in self.nodes.values() {
            n.stop();
        }
    }
}

impl Demo {
    /// The line the console's banner shows.
    pub fn banner(&self) -> String {
        format!(
            "SIMULATED homelab, scenario `{}`: {} (nothing leaves this machine; repo {}{})",
            self.scenario_name,
            self.scenario.description.trim(),
            self.dir.display(),
            if self.userland {
                "; each node runs this machine's own programs in a sandbox of its own, \
                 without a VPN tunnel or block devices yet"
            } else {
                ""
            }
        )
    }

    /// The simulated state of one host (tests and `:fault` read and change it).
    pub fn node_state(&self, host: &str) -> Option<Arc<Mutex<NodeState>>> {
        self.nodes.get(host).map(SimNode::state)
    }

    /// The way in for faults while the simulation runs (the console's `:fault`). It stops
    /// working (every fault is an error) once this demo is dropped.
    pub fn fault_injector(&self) -> FaultInjector {
        self.injector.clone()
    }
}

/// What a live fault needs of one environment.
struct EnvFaults {
    sim: SimEnv,
    /// What the environment's controllers last made of its cluster.
    view: cluster::View,
    lease_duration_s: u64,
    /// Into the environment's controllers ([`cluster::run`]).
    cluster: UnboundedSender<ClusterInput>,
    /// The VPN gateways' (host, state).
    gateways: Vec<(String, Arc<Mutex<NodeState>>)>,
    /// The servers' (host, state): their etcd members.
    members: Vec<(String, Arc<Mutex<NodeState>>)>,
    /// `--apiserver`: the environment's real etcd members (learners are added there).
    etcd: Option<EtcdMembers>,
}

/// Injects faults into a running simulation, one typed line at a time (`:fault prod
/// holder-dies`). Cheap to clone.
#[derive(Clone)]
pub struct FaultInjector {
    envs: Arc<BTreeMap<String, EnvFaults>>,
}

impl std::fmt::Debug for FaultInjector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultInjector")
            .field("environments", &self.environments())
            .finish()
    }
}

impl FaultInjector {
    /// The environments faults can go to, sorted.
    pub fn environments(&self) -> Vec<String> {
        self.envs.keys().cloned().collect()
    }

    /// `:fault ENV FAULT [N]` with the environments and faults this simulation has.
    pub fn usage(&self) -> String {
        format!(
            "usage: :fault ENV FAULT (ENV: {}; FAULT: {})",
            self.environments().join(", "),
            Fault::usage()
        )
    }

    /// Parse `words` (`agent-drifts 2`) and apply it to `env` now. Returns one line saying
    /// what happened; an error (nothing changed) names what was expected.
    pub fn inject(&self, env: &str, words: &str) -> Result<String, FaultRefused> {
        let e = self.envs.get(env).ok_or_else(|| FaultRefused::UnknownEnv {
            env: env.to_string(),
            known: self.environments().join(", "),
        })?;
        // The port's refusal is the UI's type, which names nothing of the simulation: the
        // words' error reaches it as its text.
        let fault = Fault::from_words(words).map_err(|e| FaultRefused::NotAFault(e.to_string()))?;
        let said = match &fault {
            Fault::HolderDies => {
                let Some(holder) = e.view.lease_holder() else {
                    return Err(FaultRefused::NoHolder {
                        env: env.to_string(),
                        lease: e.sim.lease_name.clone(),
                    });
                };
                let others_alive = e
                    .sim
                    .servers
                    .iter()
                    .any(|(n, _)| *n != holder && e.view.node_ready(n) == Some(true));
                let moves = if others_alive {
                    format!("the lease moves once it expires ({} s)", e.lease_duration_s)
                } else {
                    "no live server is left to take the lease".to_string()
                };
                if e.view.node_ready(&holder) == Some(false) {
                    return Ok(format!(
                        "{env}: {holder} (lease holder) is already dead; nothing changed ({moves})"
                    ));
                }
                format!("{holder} (lease holder) died: NotReady, no more renewals; {moves}")
            }
            Fault::AgentDrifts { server } => {
                let Some((node, _)) = e.sim.servers.get(server.saturating_sub(1)) else {
                    let have: Vec<String> = e
                        .sim
                        .servers
                        .iter()
                        .enumerate()
                        .map(|(i, (n, _))| format!("{} {n}", i + 1))
                        .collect();
                    return Err(FaultRefused::NoSuchServer {
                        env: env.to_string(),
                        server: *server,
                        count: e.sim.servers.len(),
                        have: have.join(", "),
                    });
                };
                format!(
                    "the cilium agent on {node} (server {server}) is recreated dialling its own node address {}, not the VIP {}",
                    e.sim.dial(scenario::AgentsDial::OwnNode, server - 1),
                    e.sim.vip
                )
            }
            Fault::EtcdLearnerAdded | Fault::EtcdLearnerRemoved => {
                let added = matches!(fault, Fault::EtcdLearnerAdded);
                let said = match &e.etcd {
                    Some(real) => set_real_learner_within(real, added, LEARNER_WAIT),
                    None => set_learner(&e.members, added),
                };
                tracing::info!(env, fault = fault.name(), said = %said, "fault injected");
                return Ok(format!("{env}: {said}"));
            }
            Fault::VpnDown | Fault::VpnUp => {
                if e.gateways.is_empty() {
                    return Err(FaultRefused::NoGateway {
                        env: env.to_string(),
                        fault: fault.name().to_string(),
                    });
                }
                let said = set_tunnels(&e.gateways, matches!(fault, Fault::VpnUp));
                tracing::info!(env, fault = fault.name(), said = %said.join("; "), "fault injected");
                return Ok(format!("{env}: {}", said.join("; ")));
            }
        };
        e.cluster
            .send(ClusterInput::Fault(fault.clone()))
            .map_err(|_| FaultRefused::Stopped {
                env: env.to_string(),
            })?;
        tracing::info!(env, fault = fault.name(), said = %said, "fault injected");
        Ok(format!("{env}: {said}"))
    }
}

impl FaultInjector {
    /// The fault names (for the console's tab completion).
    pub fn fault_names(&self) -> Vec<String> {
        scenario::FAULTS
            .iter()
            .map(|(n, _)| (*n).to_string())
            .collect()
    }
}

/// Why a fault changed nothing: the line the console shows for it (through the binary's
/// adapter to the session's plain fault port).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultRefused {
    #[error("no environment `{env}` in the simulation (known: {known})")]
    UnknownEnv { env: String, known: String },
    /// The words are not a fault (unknown name, missing or extra argument): what was
    /// expected.
    #[error("{0}")]
    NotAFault(String),
    #[error("{env}: the kube-vip Lease `{lease}` has no holder; no holder can die")]
    NoHolder { env: String, lease: String },
    #[error("agent-drifts {server}: {env} has servers 1 to {count} ({have})")]
    NoSuchServer {
        env: String,
        server: usize,
        count: usize,
        have: String,
    },
    #[error("{env} has no VPN gateway in the inventory; {fault} has nothing to act on")]
    NoGateway { env: String, fault: String },
    #[error("{env}: the simulation has stopped; nothing changed")]
    Stopped { env: String },
}

/// Some nodes' (host, state), as the faults that act over SSH take them.
type NodeStates = [(String, Arc<Mutex<NodeState>>)];

/// The unstarted learner's id and peer URL in `members`' etcd (the next address after the
/// last member's, as a server being joined would have).
const LEARNER_PEER: &str = "https://192.0.2.250:2380";

/// How long a live learner fault waits for the real etcd's answer: the console's `:fault`
/// waits on it, and an etcd without quorum answers a membership change only when it
/// gives up.
const LEARNER_WAIT: Duration = Duration::from_secs(3);

/// How long a learner change is retried while etcd calls its cluster unhealthy.
const LEARNER_RETRY: Duration = Duration::from_secs(15);

/// [`set_real_learner`] on a thread of its own, its answer waited for at most `wait`; then
/// a line saying etcd has not answered yet (the change goes on, and is made if etcd does).
fn set_real_learner_within(etcd: &EtcdMembers, added: bool, wait: Duration) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    let etcd = etcd.clone();
    std::thread::spawn(move || {
        let _ = tx.send(set_real_learner(&etcd, added));
    });
    rx.recv_timeout(wait).unwrap_or_else(|_| {
        format!(
            "etcd has not answered within {} s (has it quorum?); the learner is {} if and when it does",
            wait.as_secs(),
            if added { "added" } else { "removed" }
        )
    })
}

/// `--apiserver`: add (`added`) or remove the unstarted learner in the real etcd, through
/// its own API. One line saying what happened, or that it already was so.
fn set_real_learner(etcd: &EtcdMembers, added: bool) -> String {
    // etcd refuses a membership change while its members have not been connected a while
    // (`unhealthy cluster`: just started, or a leader just moved); a join retries.
    let t0 = std::time::Instant::now();
    let said = loop {
        let said = if added {
            etcd.add_learner(LEARNER_PEER)
        } else {
            etcd.remove_learner(LEARNER_PEER)
        };
        match &said {
            Err(why) if why.contains("unhealthy cluster") && t0.elapsed() < LEARNER_RETRY => {
                std::thread::sleep(Duration::from_millis(300));
            }
            _ => break said,
        }
    };
    match (said, added) {
        (Ok(Some(id)), true) => format!(
            "etcd member {id} added as a learner at {LEARNER_PEER}, never started (a join that stopped half way; etcd's own membership)"
        ),
        (Ok(None), true) => {
            format!("a learner at {LEARNER_PEER} is already a member; nothing changed")
        }
        (Ok(Some(id)), false) => format!("learner {id} removed from etcd's membership"),
        (Ok(None), false) => format!("no learner at {LEARNER_PEER} to remove; nothing changed"),
        (Err(why), _) => format!("etcd refused: {why}; nothing changed"),
    }
}

/// Add (`added`) or remove an unstarted learner in every member's view of the membership.
/// One line saying what happened, or that it already was so.
fn set_learner(members: &[(String, Arc<Mutex<NodeState>>)], added: bool) -> String {
    let mut changed = 0;
    let mut learner_id = None;
    for (_, state) in members {
        let Ok(mut n) = state.lock() else { continue };
        let Some(e) = n.etcd.as_mut() else { continue };
        let id = stable_id(&format!("{}/learner", e.cluster_id));
        learner_id = Some(id);
        let has = e.learners.iter().any(|(l, _)| *l == id);
        if added && !has {
            e.learners.push((id, LEARNER_PEER.to_string()));
            changed += 1;
        } else if !added && has {
            e.learners.retain(|(l, _)| *l != id);
            changed += 1;
        }
    }
    match (learner_id, added, changed) {
        (None, _, _) => "no server has an etcd member; nothing changed".into(),
        (Some(id), true, 0) => format!("learner {id:x} is already a member; nothing changed"),
        (Some(id), true, _) => format!(
            "etcd member {id:x} added as a learner at {LEARNER_PEER}, never started (a join that stopped half way)"
        ),
        (Some(id), false, 0) => format!("no learner {id:x} to remove; nothing changed"),
        (Some(id), false, _) => format!("learner {id:x} removed from etcd's membership"),
    }
}

/// The tunnel unit on each gateway fails (`up` false) or starts (`up` true), now. One line
/// per gateway saying what happened, or that it already was so (nothing changed there).
fn set_tunnels(gateways: &[(String, Arc<Mutex<NodeState>>)], up: bool) -> Vec<String> {
    gateways
        .iter()
        .map(|(host, state)| {
            let Ok(mut n) = state.lock() else {
                return format!("{host}: its simulated state is unavailable; nothing changed");
            };
            let Some(unit) = n.vpn.as_ref().map(|v| v.unit.clone()) else {
                return format!("{host} has no tunnel unit; nothing changed");
            };
            let before = n.units.get(&unit).map(|u| u.state);
            let now = n.now_ms();
            match (up, before) {
                (true, Some(UnitState::Active)) => format!("{unit} on {host} is already active"),
                (false, Some(s)) if s != UnitState::Active => {
                    format!("{unit} on {host} is already {}", s.as_str())
                }
                (true, _) => match n.start_unit_at(&unit, now) {
                    Ok(()) => format!("{unit} on {host} is active again (the tunnel reconnects)"),
                    Err(e) => format!("{unit} on {host}: {e}"),
                },
                (false, _) => match n.fail_unit_at(&unit, now) {
                    Ok(()) => format!("{unit} on {host} failed (the tunnel is down)"),
                    Err(e) => format!("{unit} on {host}: {e}"),
                },
            }
        })
        .collect()
}

/// `text` (a YAML mapping file) with every top-level `key:` of `keys` removed (its indented
/// continuation lines too) and the demo's values appended under a comment saying so. The
/// values are plain scalars the demo made (ports, paths it wrote, addresses).
fn set_top_level_keys(text: &str, what: &str, keys: &[(String, String)]) -> String {
    let mut out = String::with_capacity(text.len() + 128);
    let mut dropping = false;
    for line in text.lines() {
        let top_level = !line.starts_with([' ', '\t']) && !line.is_empty();
        if top_level {
            dropping = keys.iter().any(|(k, _)| {
                line.strip_prefix(k.as_str())
                    .is_some_and(|r| r.trim_start().starts_with(':'))
            });
        }
        if !dropping {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !out.is_empty() && !out.ends_with("\n\n") {
        out.push('\n');
    }
    out.push_str(&format!("# Written by hk-console demo: {what}.\n"));
    for (k, v) in keys {
        out.push_str(&format!("{k}: {v}\n"));
    }
    out
}

fn write(path: &Path, text: &str) -> Result<(), DemoError> {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).map_err(|source| DemoError::Write {
            path: p.to_path_buf(),
            source,
        })?;
    }
    std::fs::write(path, text).map_err(|source| DemoError::Write {
        path: path.to_path_buf(),
        source,
    })
}

fn now_ms() -> u64 {
    u64::try_from(jiff::Timestamp::now().as_millisecond()).unwrap_or(0)
}

/// How many ports [`start_api_servers`] tries before giving up.
const API_PORT_TRIES: usize = 20;

/// Every environment's API server on its own VIP and one common port: the repo names one
/// `k8sServicePort` for all environments (a shared HelmRelease), as real VIPs all serve
/// the same port; per-environment random ports would make the demo's own copy fail its
/// parity check. The port is the one the first VIP gets free; a concurrent demo (tests run
/// many) can hold it on another VIP, and then every server is stopped and another tried.
async fn start_api_servers(
    repo: &Repo,
    plan: &AddressPlan,
    fixed: Option<u16>,
) -> Result<BTreeMap<String, SimKube>, DemoError> {
    let mut last = None;
    for _ in 0..API_PORT_TRIES {
        let mut started: BTreeMap<String, SimKube> = BTreeMap::new();
        let mut port = fixed.unwrap_or(0);
        let mut taken = None;
        for env in &repo.environments {
            let vip = plan.vips[&env.name];
            let config = SimKubeConfig {
                name: format!("hk-sim-{}", env.name),
                ..SimKubeConfig::default()
            };
            match SimKube::start_with(SocketAddr::new(IpAddr::V4(vip), port), config).await {
                Ok(kube) => {
                    port = kube.addr().port();
                    started.insert(env.name.clone(), kube);
                }
                Err(super::kube::SimError::Bind { addr, source })
                    if source.kind() == std::io::ErrorKind::AddrInUse =>
                {
                    if fixed.is_some() {
                        return Err(DemoError::Start(format!(
                            "the repo's API port is {port} (no variable holds it, so the demo \
                             serves on it as the repo's clients will dial it), and {addr} is \
                             taken: {source} (another demo on this repo?)"
                        )));
                    }
                    taken = Some(format!("{addr}: {source}"));
                    break;
                }
                Err(e) => return Err(DemoError::Start(e.to_string())),
            }
        }
        match taken {
            None => return Ok(started),
            Some(why) => {
                for kube in started.into_values() {
                    kube.shutdown().await;
                }
                last = Some(why);
            }
        }
    }
    Err(DemoError::Start(format!(
        "no port free on every environment's VIP after {API_PORT_TRIES} tries (last: {})",
        last.unwrap_or_default()
    )))
}

fn string_var(repo: &Repo, host: &str, var: &str) -> Option<String> {
    repo.resolve_var(host, var)?
        .value()?
        .as_str()
        .map(str::to_string)
}

/// Start the scenario `name` with its repo under `dir` (which should be empty). Must run
/// inside a tokio runtime that outlives the returned [`Demo`].
pub async fn start(name: &str, dir: &Path) -> Result<Demo, DemoError> {
    start_from(name, dir, None).await
}

/// [`start_from`], with `apiserver` (`demo --apiserver DIR`): DIR's real etcd and
/// kube-apiserver in place of the built-in API servers, the same controllers writing to
/// them through a kube client.
pub async fn start_with(
    name: &str,
    dir: &Path,
    source: Option<&Path>,
    apiserver: Option<&Path>,
) -> Result<Demo, DemoError> {
    start_demo(name, dir, source, apiserver, Options::default()).await
}

/// [`start`] on a copy of the operator's repo `source` (`demo --repo DIR`) instead of the
/// bundled sample: its environments, hosts, groups and variables, moved onto loopback. A
/// scenario naming an environment that repo does not define is refused, naming it.
pub async fn start_from(name: &str, dir: &Path, source: Option<&Path>) -> Result<Demo, DemoError> {
    start_demo(name, dir, source, None, Options::default()).await
}

/// How the demo's parts are made, beyond the scenario and the repo.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// `demo --userland`: every node's commands run in a real userland (the machine's own
    /// programs in a bubblewrap sandbox per node, [`super::userland`]); each server's etcd
    /// endpoints are real listeners on its address ([`super::etcd_endpoint`]).
    pub userland: bool,
}

/// [`start_with`] and [`Options`].
pub async fn start_opts(
    name: &str,
    dir: &Path,
    source: Option<&Path>,
    apiserver: Option<&Path>,
    options: Options,
) -> Result<Demo, DemoError> {
    start_demo(name, dir, source, apiserver, options).await
}

async fn start_demo(
    name: &str,
    dir: &Path,
    source: Option<&Path>,
    apiserver: Option<&Path>,
    options: Options,
) -> Result<Demo, DemoError> {
    let scenario = scenario::load(name)?;
    // Whether the nodes can have a real userland is known before anything starts.
    let sandbox = match options.userland {
        true => Some(
            userland::find_sandbox()
                .await
                .map_err(|e| DemoError::Start(format!("demo --userland: {e}")))?,
        ),
        false => None,
    };
    let (repo, plan) = demo_repo::prepare_from(dir, source)?;
    let repo = pin_vpn_remotes(repo, &scenario)?;
    let unknown = scenario.unknown_environments(&repo.environment_names());
    if !unknown.is_empty() {
        return Err(DemoError::Start(format!(
            "scenario `{name}` names environment(s) {} that this repo does not define (its environments: {}); `healthy` runs on any repo",
            unknown.join(", "),
            repo.environment_names().join(", ")
        )));
    }
    for env in &repo.environments {
        let beyond = scenario.servers_beyond(&env.name, env.servers.len());
        if !beyond.is_empty() {
            return Err(DemoError::Start(format!(
                "scenario `{name}`: environment `{}` has {} server(s), but the scenario names {}",
                env.name,
                env.servers.len(),
                beyond.join(", ")
            )));
        }
    }
    let env_index: BTreeMap<String, usize> = repo
        .environments
        .iter()
        .enumerate()
        .map(|(i, e)| (e.name.clone(), i))
        .collect();
    let state_of = |env: &str| scenario.env_state_at(env, env_index.get(env).copied().unwrap_or(0));
    let cancel = CancellationToken::new();
    let start_ms = now_ms();
    // The nodes' clocks run at real speed: the console judges journal times against its own
    // clock. `time_scale` compresses the timeline (faults, reconnect periods) instead.
    let clock = Clock::running(start_ms, 1.0);

    // The operator's key for the simulated nodes (never their ~/.ssh).
    let key = super::ssh::generate_host_key().map_err(|e| DemoError::Start(e.to_string()))?;
    let key_path = dir.join(".ssh").join("demo_ed25519");
    let pem = key
        .to_openssh(russh::keys::ssh_key::LineEnding::LF)
        .map_err(|e| DemoError::Start(format!("cannot encode the demo key: {e}")))?;
    write(&key_path, &pem)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o600)).map_err(
            |source| DemoError::Write {
                path: key_path.clone(),
                source,
            },
        )?;
    }
    let public = key.public_key().clone();

    // With --apiserver: real API servers in place of the built-in ones (all started before
    // any is waited for). Either way: one per environment, on its VIP, all on one port.
    let mut real = match apiserver {
        Some(bin) => Some(start_real(bin, dir, &repo, &plan).await?),
        None => None,
    };
    let (mut started, api_port) = match &real {
        Some(r) => (
            BTreeMap::new(),
            r.servers.values().next().map(|s| s.addr.port()),
        ),
        None => {
            let started = start_api_servers(&repo, &plan, fixed_api_port(&repo)?).await?;
            let port = started.values().next().map(|k| k.addr().port());
            (started, port)
        }
    };
    if let Some(port) = api_port {
        let from: Vec<String> = plan.api_ports.values().cloned().collect();
        demo_repo::move_service_port(dir, &plan.files, &from, port)?;
    }
    let mut kubes = BTreeMap::new();
    let mut api_ports: BTreeMap<String, u16> = BTreeMap::new();
    // Environment -> its admin kubeconfig (what a server's own kubectl is given).
    let mut admin_kubeconfigs: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut sim_envs = Vec::new();
    for env in &repo.environments {
        let kc_path = |env: &hk_engine::repo::env::Environment| {
            let name = env.kubeconfig_name.get().ok_or_else(|| {
                DemoError::Start(format!(
                    "environment `{}`: no `{}` agreed by its servers; the demo cannot place its kubeconfig",
                    env.name, env.kubeconfig_name.var
                ))
            })?;
            demo_kubeconfig(dir, &env.name, &env.kubeconfig_name.var, name)
        };
        if let Some(real) = real.as_mut() {
            let server = real.servers.get(&env.name).ok_or_else(|| {
                DemoError::Start(format!("environment `{}`: no API server started", env.name))
            })?;
            let kc = kc_path(env)?;
            admin_kubeconfigs.insert(env.name.clone(), kc.clone());
            let ro = readonly_path(&kc);
            server
                .write_kubeconfig(&kc)
                .and_then(|()| server.write_readonly_kubeconfig(&ro))
                .map_err(|e| DemoError::Start(e.to_string()))?;
            let sim_env = sim_env_of(&repo, &plan, env, server.addr.port(), scenario.time_scale)?;
            let state = state_of(&env.name);
            let view = cluster::View::default();
            cluster::seed(
                &cluster::Target::real(server.client()),
                &sim_env,
                &state,
                &view,
            )
            .await
            .map_err(|e| {
                DemoError::Start(format!("seeding {} (real kube-apiserver): {e}", env.name))
            })?;
            api_ports.insert(env.name.clone(), server.addr.port());
            sim_envs.push((sim_env, state, view));
            continue;
        }
        let kube = started.remove(&env.name).ok_or_else(|| {
            DemoError::Start(format!("environment `{}`: no API server started", env.name))
        })?;
        let kc = kc_path(env)?;
        admin_kubeconfigs.insert(env.name.clone(), kc.clone());
        let ro = readonly_path(&kc);
        kube.write_kubeconfig(&kc)
            .and_then(|()| kube.write_readonly_kubeconfig(&ro))
            .map_err(|e| DemoError::Start(e.to_string()))?;
        api_ports.insert(env.name.clone(), kube.addr().port());
        let sim_env = sim_env_of(&repo, &plan, env, kube.addr().port(), scenario.time_scale)?;
        let state = state_of(&env.name);
        let view = cluster::View::default();
        cluster::seed(
            &cluster::Target::builtin(kube.store().clone()),
            &sim_env,
            &state,
            &view,
        )
        .await
        .map_err(|e| DemoError::Start(format!("seeding {}: {e}", env.name)))?;
        sim_envs.push((sim_env, state, view));
        kubes.insert(env.name.clone(), kube);
    }

    // One SSH node per host, each with the state its environment's scenario gives it.
    let mut nodes = BTreeMap::new();
    // With a real userland: each server's etcd endpoints, and the host_vars that point the
    // console's probes at them.
    let mut etcd_endpoints = Vec::new();
    let mut endpoint_vars: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let kubectl = sandbox.as_ref().and_then(|_| host_kubectl(apiserver));
    let mut known_hosts = String::new();
    let gateways: BTreeMap<String, String> = repo
        .environments
        .iter()
        .flat_map(|e| {
            e.vpn_gateways
                .iter()
                .map(|g| (g.name.clone(), e.name.clone()))
        })
        .collect();
    let env_of: BTreeMap<String, String> = repo
        .environments
        .iter()
        .flat_map(|e| e.servers.iter().map(|s| (s.name.clone(), e.name.clone())))
        .collect();
    for (host, addr) in &plan.hosts {
        let env_name = env_of.get(host).or_else(|| gateways.get(host));
        let position = env_name
            .and_then(|e| repo.environment(e))
            .and_then(|e| e.servers.iter().position(|s| &s.name == host))
            .map(|i| i + 1);
        let state = env_name
            .map(|e| state_of(e).on_server(position))
            .unwrap_or_default();
        let gateway_of = gateways.get(host).map(String::as_str);
        let mut node = build_node(&repo, host, &state, gateway_of, &clock)?;
        // The node's own idea of its address is where the demo placed it: what kubectl's
        // INTERNAL-IP and the inventory's ansible_host say.
        node.set_lan(
            *addr,
            demo_repo::PLAN_PREFIX,
            demo_repo::planned_gateway(*addr),
        );
        // Each environment's first server leads its etcd (what the etcd pane reads).
        node.etcd_leader = repo
            .environments
            .iter()
            .any(|e| e.servers.first().is_some_and(|s| &s.name == host));
        if let Some(env) = env_of.get(host).and_then(|e| repo.environment(e)) {
            node.etcd = Some(sim_etcd(env, host, &plan.hosts));
            // --apiserver: etcd's client API on the server is its real member's.
            node.etcd_real = real
                .as_ref()
                .and_then(|r| r.cluster.etcd(&env.name))
                .and_then(|m| m.client_url(host));
            write_k3s_etcd_tls(&mut node);
        }
        let state = Arc::new(Mutex::new(node));
        let userland = match &sandbox {
            Some(sb) => {
                let env = env_of.get(host).cloned();
                let (u, endpoint, urls) = node_userland(
                    sb,
                    dir,
                    host,
                    *addr,
                    &state,
                    env.as_ref().and_then(|e| admin_kubeconfigs.get(e)),
                    kubectl.as_deref(),
                )
                .await?;
                if let Some((client, metrics)) = urls {
                    endpoint_vars.insert(
                        host.clone(),
                        vec![
                            (etcd_vars::VAR_CLIENT_URL.into(), client),
                            (etcd_vars::VAR_METRICS_URL.into(), metrics),
                        ],
                    );
                }
                etcd_endpoints.extend(endpoint);
                Some(u)
            }
            None => None,
        };
        let sim = SimNode::start(SimNodeSpec {
            name: host.clone(),
            address: IpAddr::V4(*addr),
            port: 0,
            authorized_keys: vec![public.clone()],
            state,
            host_key: None,
            userland,
        })
        .await
        .map_err(|e| DemoError::Start(e.to_string()))?;
        known_hosts.push_str(
            &sim.known_hosts_line()
                .map_err(|e| DemoError::Start(e.to_string()))?,
        );
        known_hosts.push('\n');
        nodes.insert(host.clone(), sim);
    }
    let kh_path = dir.join("known_hosts");
    write(&kh_path, &known_hosts)?;

    // Connection variables per host: host_vars beat the inventory and group_vars.
    let inv_dir = inventory_vars_base(&repo).unwrap_or_else(|| dir.to_path_buf());
    for (host, node) in &nodes {
        let mut keys: Vec<(String, String)> = vec![
            ("ansible_port".into(), node.addr().port().to_string()),
            (
                "ansible_ssh_private_key_file".into(),
                key_path.display().to_string(),
            ),
        ];
        if let Some((e, port)) = env_of
            .get(host)
            .and_then(|e| api_ports.get(e).map(|p| (e, p)))
        {
            // The variable hk-console.yaml's `facts.api_port` names (the seed's by default):
            // an expression cannot be pointed at the simulated port, so it is refused.
            let var = repo
                .environment(e)
                .map(|env| env.api_port.var.clone())
                .unwrap_or_else(|| hk_engine::repo::env::VAR_API_PORT.to_string());
            let served = repo
                .environment(e)
                .and_then(|env| env.api_port.get())
                .is_some_and(|p| p == port.to_string());
            let expression = !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if expression && !served {
                return Err(DemoError::Start(format!(
                    "environment `{e}`: facts.api_port is the expression `{var}`; the demo \
                     points the API port at its simulated server by rewriting a variable, so \
                     name the variable that holds the port"
                )));
            }
            // An expression the demo serves as it renders stays as the repo wrote it.
            if !expression {
                keys.push((var, port.to_string()));
            }
        }
        keys.extend(endpoint_vars.get(host).cloned().unwrap_or_default());
        // A host the repo reaches by name (no address to rewrite) is pointed at its node.
        if string_var(&repo, host, "ansible_host").as_deref()
            != Some(node.addr().ip().to_string().as_str())
        {
            keys.push(("ansible_host".into(), node.addr().ip().to_string()));
        }
        let header = format!("how to reach the simulated {host}");
        // The operator's own host_vars stay: a directory gets a file of its own, loaded
        // last; a file keeps its other keys and loses only the ones the demo sets.
        let vars_dir = inv_dir.join("host_vars");
        let as_dir = vars_dir.join(host);
        let path = if as_dir.is_dir() {
            as_dir.join("zz-hk-console-demo.yml")
        } else {
            ["yml", "yaml"]
                .iter()
                .map(|ext| vars_dir.join(format!("{host}.{ext}")))
                .find(|p| p.is_file())
                .unwrap_or_else(|| vars_dir.join(format!("{host}.yml")))
        };
        let theirs = std::fs::read_to_string(&path).unwrap_or_default();
        write(&path, &set_top_level_keys(&theirs, &header, &keys))?;
    }
    // hk-console reads the known_hosts file hk-console.yaml names.
    let cfg_path = dir.join("hk-console.yaml");
    let cfg = std::fs::read_to_string(&cfg_path).map_err(|source| DemoError::Write {
        path: cfg_path.clone(),
        source,
    })?;
    let cfg = set_top_level_keys(
        &cfg,
        "the simulated nodes' host keys",
        &[("known_hosts".into(), "known_hosts".into())],
    );
    write(&cfg_path, &cfg)?;
    // ansible-playbook, run from the ansible dir, finds this ansible.cfg: the repo's own
    // settings (its vault password file, say) with the demo's connection settings on top.
    let cfg_file = repo.ansible_dir.join("ansible.cfg");
    let theirs = std::fs::read_to_string(&cfg_file).unwrap_or_default();
    let ssh_args = format!(
        "-o UserKnownHostsFile={} -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes",
        kh_path.display()
    );
    write(
        &cfg_file,
        &merge_ansible_cfg(
            &theirs,
            &[
                ("defaults", "interpreter_python", "/usr/bin/python3"),
                // A simulated node never runs Python: pipelining sends module payloads on
                // stdin, where the node refuses them; raw tasks run in its shell.
                ("ssh_connection", "pipelining", "True"),
                ("ssh_connection", "ssh_args", &ssh_args),
            ],
        ),
    )?;

    let repo = Repo::load(dir).map_err(|e| DemoError::Start(e.to_string()))?;
    demo_repo::verify_loopback(&repo)?;
    for env in &repo.environments {
        let want = api_ports[&env.name].to_string();
        if env.api_port.get() != Some(want.as_str()) {
            return Err(DemoError::Start(format!(
                "environment `{}`: {} is {:?} after the rewrite, expected {want}",
                env.name,
                env.api_port.var,
                env.api_port.get()
            )));
        }
    }

    // The controllers, the timeline, and the way in for live faults.
    let mut injected = BTreeMap::new();
    for (sim_env, state, view) in sim_envs {
        let faults: Vec<(Duration, Fault)> = scenario
            .events
            .iter()
            .filter(|e| e.env == sim_env.name)
            .map(|e| {
                (
                    Duration::from_millis(e.at_s * 1000 / u64::from(scenario.time_scale)),
                    e.fault.clone(),
                )
            })
            .collect();
        let gateways: Vec<(String, Arc<Mutex<NodeState>>)> = repo
            .environment(&sim_env.name)
            .map(|e| {
                e.vpn_gateways
                    .iter()
                    .filter_map(|g| nodes.get(&g.name).map(|n| (g.name.clone(), n.state())))
                    .collect()
            })
            .unwrap_or_default();
        let members: Vec<(String, Arc<Mutex<NodeState>>)> = sim_env
            .servers
            .iter()
            .filter_map(|(h, _)| nodes.get(h).map(|n| (h.clone(), n.state())))
            .collect();
        // --apiserver: the environment's real etcd members, which its servers' faults stop
        // and where its learners are added.
        let etcd_members = real
            .as_ref()
            .and_then(|r| r.cluster.etcd(&sim_env.name))
            .cloned();
        // The SSH side of the faults: the gateways' tunnels, the servers' etcd membership.
        for (at, fault) in &faults {
            if let (Some(etcd), Fault::EtcdLearnerAdded | Fault::EtcdLearnerRemoved) =
                (&etcd_members, fault)
            {
                let (etcd, at, c) = (etcd.clone(), *at, cancel.clone());
                let added = matches!(fault, Fault::EtcdLearnerAdded);
                tokio::spawn(async move {
                    tokio::select! {
                        _ = c.cancelled() => {}
                        _ = tokio::time::sleep(at) => {
                            let said = tokio::task::spawn_blocking(move || {
                                set_real_learner(&etcd, added)
                            })
                            .await;
                            tracing::info!("scenario: {said:?}");
                        }
                    }
                });
                continue;
            }
            let (nodes_of, act): (_, fn(&NodeStates)) = match fault {
                Fault::VpnDown => (gateways.clone(), |g| {
                    set_tunnels(g, false);
                }),
                Fault::VpnUp => (gateways.clone(), |g| {
                    set_tunnels(g, true);
                }),
                Fault::EtcdLearnerAdded => (members.clone(), |m| {
                    set_learner(m, true);
                }),
                Fault::EtcdLearnerRemoved => (members.clone(), |m| {
                    set_learner(m, false);
                }),
                Fault::HolderDies | Fault::AgentDrifts { .. } => continue,
            };
            let at = *at;
            let c = cancel.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = c.cancelled() => {}
                    _ = tokio::time::sleep(at) => act(&nodes_of),
                }
            });
        }
        tokio::spawn(follow_etcd(members.clone(), view.clone(), cancel.clone()));
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        for (i, (host, _)) in sim_env.servers.iter().enumerate() {
            if let Some(node) = nodes.get(host) {
                let member = etcd_members.clone().map(|m| RealMember {
                    members: m,
                    host: host.clone(),
                    view: view.clone(),
                });
                tokio::spawn(watch_k3s(
                    node.state(),
                    i,
                    member,
                    tx.clone(),
                    cancel.clone(),
                ));
                tokio::spawn(follow_vip(
                    node.state(),
                    host.clone(),
                    sim_env.vip,
                    view.clone(),
                    cancel.clone(),
                ));
            }
        }
        injected.insert(
            sim_env.name.clone(),
            EnvFaults {
                sim: sim_env.clone(),
                view: view.clone(),
                lease_duration_s: state.lease_duration_s,
                cluster: tx,
                gateways,
                members,
                etcd: etcd_members.clone(),
            },
        );
        let real_client = real
            .as_ref()
            .and_then(|r| r.servers.get(&sim_env.name))
            .map(RealApiServer::client);
        match (real_client, kubes.get(&sim_env.name)) {
            (Some(client), _) => {
                let changes = cluster::Changes::watch(&client, &cancel);
                let mut target = cluster::Target::real(client);
                target.members = etcd_members;
                tokio::spawn(cluster::run(
                    target,
                    changes,
                    view,
                    sim_env,
                    state,
                    faults,
                    rx,
                    cancel.clone(),
                ));
            }
            (None, Some(kube)) => {
                let store = kube.store().clone();
                tokio::spawn(cluster::run(
                    cluster::Target::builtin(store.clone()),
                    cluster::Changes::of_store(&store),
                    view,
                    sim_env,
                    state,
                    faults,
                    rx,
                    cancel.clone(),
                ));
            }
            (None, None) => {
                return Err(DemoError::Start(format!(
                    "environment `{}`: no API server for its controllers",
                    sim_env.name
                )))
            }
        }
    }
    // Tunnels that reconnect on a period (the eviction loop) keep doing so while another
    // gateway is on the same server with the same tunnel address: the reconnects are the
    // two evicting each other, so once one is pointed elsewhere (its config's `remote`
    // changed and the unit restarted) both stop.
    let gateway_states: Vec<(String, Arc<Mutex<NodeState>>)> = nodes
        .iter()
        .filter(|(h, _)| gateways.contains_key(*h))
        .map(|(h, n)| (h.clone(), n.state()))
        .collect();
    for (host, node) in &nodes {
        let Some(env) = gateways.get(host) else {
            continue;
        };
        let period = state_of(env).vpn.restart_every_s;
        if period == 0 {
            continue;
        }
        let state = node.state();
        let others: Vec<Arc<Mutex<NodeState>>> = gateway_states
            .iter()
            .filter(|(h, _)| h != host)
            .map(|(_, s)| Arc::clone(s))
            .collect();
        let real = Duration::from_millis(period * 1000 / u64::from(scenario.time_scale))
            .max(Duration::from_millis(200));
        let c = cancel.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(real);
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = c.cancelled() => return,
                    _ = tick.tick() => {
                        // One lock at a time: this node's tunnel, then each other's.
                        let mine = state
                            .lock()
                            .ok()
                            .and_then(|n| n.vpn.as_ref().map(|v| (v.server, v.tunnel_addr)));
                        let evicted = mine.is_some_and(|m| {
                            others.iter().any(|o| {
                                o.lock().ok().is_some_and(|n| {
                                    n.vpn.as_ref().map(|v| (v.server, v.tunnel_addr)) == Some(m)
                                })
                            })
                        });
                        if !evicted {
                            continue;
                        }
                        if let Ok(mut n) = state.lock() {
                            let now = n.now_ms();
                            if let Some(unit) = n.vpn.as_ref().map(|v| v.unit.clone()) {
                                let _ = n.restart_unit_at(&unit, now);
                            }
                        }
                    }
                }
            }
        });
    }

    Ok(Demo {
        dir: dir.to_path_buf(),
        repo,
        scenario_name: name.to_string(),
        scenario,
        plan,
        kubes,
        real,
        nodes,
        userland: options.userland,
        _etcd_endpoints: etcd_endpoints,
        cancel,
        injector: FaultInjector {
            envs: Arc::new(injected),
        },
    })
}

/// `demo --apiserver DIR`: each environment's etcd (a member per server), then every
/// environment's kube-apiserver on its VIP over its own etcd, all on one port (the repo
/// names one API port for every environment), started together.
async fn start_real(
    bin: &Path,
    dir: &Path,
    repo: &Repo,
    plan: &AddressPlan,
) -> Result<RealApis, DemoError> {
    let vips: Vec<IpAddr> = repo
        .environments
        .iter()
        .map(|e| IpAddr::V4(plan.vips[&e.name]))
        .collect();
    // One etcd member per server of each environment, named after it, on its address.
    let etcds: Vec<(String, Vec<MemberSpec>)> = repo
        .environments
        .iter()
        .map(|e| {
            let members = e
                .servers
                .iter()
                .map(|s| MemberSpec {
                    name: s.name.clone(),
                    ip: IpAddr::V4(
                        plan.hosts
                            .get(&s.name)
                            .copied()
                            .unwrap_or(Ipv4Addr::LOCALHOST),
                    ),
                })
                .collect();
            (e.name.clone(), members)
        })
        .collect();
    let t0 = std::time::Instant::now();
    let mut tries = 0;
    loop {
        tries += 1;
        let mut cluster = RealCluster::spawn(bin, &dir.join(".apiserver"), &vips, &etcds)?;
        let port = super::apiserver::common_free_port(&vips).ok_or_else(|| {
            DemoError::Start("demo --apiserver: no port free on every environment's VIP".into())
        })?;
        // The API servers start while etcd elects its leaders (each waits for its etcd).
        let apis = futures::future::try_join_all(repo.environments.iter().map(|e| {
            cluster.start_apiserver(
                &e.name,
                SocketAddr::new(IpAddr::V4(plan.vips[&e.name]), port),
            )
        }));
        match futures::future::try_join(cluster.wait_etcds(), apis).await {
            Ok((etcd_took, started)) => {
                cluster.etcd_startup = etcd_took;
                let servers: BTreeMap<String, RealApiServer> =
                    started.into_iter().map(|s| (s.env.clone(), s)).collect();
                tracing::info!(
                    "demo --apiserver: etcd and {} kube-apiserver(s) serving after {:?} (etcd after {etcd_took:?})",
                    servers.len(),
                    t0.elapsed(),
                );
                return Ok(RealApis { servers, cluster });
            }
            // A member's port taken by another process before etcd bound it: everything
            // again, on new ports.
            Err(e) if super::apiserver::port_taken(&e) && tries < REAL_START_TRIES => {
                tracing::info!("demo --apiserver: {e}; starting again on new ports");
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// How many times `demo --apiserver` starts its servers again when a port was taken.
const REAL_START_TRIES: usize = 4;

/// Where the demo writes `env`'s kubeconfig: `.cache/NAME` inside the demo's copy of the
/// repo, as the console reads it. The directory is made if the repo has none (a fresh clone
/// of an infra repo has no `.cache/`). A name that is absolute or climbs out (`..`) is
/// refused: the demo writes nothing outside its own directory, least of all over an
/// operator's real kubeconfig.
fn demo_kubeconfig(dir: &Path, env: &str, var: &str, name: &str) -> Result<PathBuf, DemoError> {
    let rel = Path::new(name);
    let inside = !name.is_empty()
        && rel
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    if !inside {
        return Err(DemoError::Start(format!(
            "environment `{env}`: `{var}` is `{name}`, not a file name under .cache/; the demo writes its kubeconfig only inside its own directory"
        )));
    }
    let cache = dir.join(".cache");
    let path = cache.join(rel);
    let parent = path.parent().unwrap_or(&cache);
    std::fs::create_dir_all(parent).map_err(|e| {
        DemoError::Start(format!(
            "environment `{env}`: cannot make {} for its kubeconfig: {e}",
            parent.display()
        ))
    })?;
    Ok(path)
}

/// Where the read-only user's kubeconfig goes beside the admin's `kc`: `readonly/` there.
fn readonly_path(kc: &Path) -> PathBuf {
    kc.parent()
        .map(|p| p.join("readonly"))
        .unwrap_or_default()
        .join(kc.file_name().unwrap_or_default())
}

/// What the controllers know of `env`, its API server on `api_port`.
fn sim_env_of(
    repo: &Repo,
    plan: &AddressPlan,
    env: &hk_engine::repo::env::Environment,
    api_port: u16,
    time_scale: u32,
) -> Result<SimEnv, DemoError> {
    let planned = |what: &str, name: &str, addr: Option<&Ipv4Addr>| {
        addr.copied().ok_or_else(|| {
            DemoError::Start(format!(
                "environment `{}`: {what} {name} has no address in the demo's plan",
                env.name
            ))
        })
    };
    let vip = planned("the VIP of", &env.name, plan.vips.get(&env.name))?;
    let servers: Vec<(String, Ipv4Addr)> = env
        .servers
        .iter()
        .map(|h| {
            Ok((
                h.name.clone(),
                planned("server", &h.name, plan.hosts.get(&h.name))?,
            ))
        })
        .collect::<Result<_, DemoError>>()?;
    let founder = env
        .founder
        .get()
        .and_then(|f| f.parse::<Ipv4Addr>().ok())
        .or_else(|| servers.first().map(|s| s.1))
        .unwrap_or(vip);
    // The Lease the console's watchers will look for, by the same rule.
    let lease_name = hk_effects::cluster::watch_settings(repo, &env.name)
        .map_err(|e| DemoError::Start(e.to_string()))?
        .lease_name;
    let (flux, unbuilt) = super::flux_applied::from_repo(&repo.root, &env.flux_overlay);
    if let Some(why) = unbuilt {
        // `check` names it in full; the demo serves no Flux objects for it rather than guess.
        tracing::warn!("demo: {}: the Flux overlay does not build: {why}", env.name);
    }
    Ok(SimEnv {
        name: env.name.clone(),
        servers,
        vip,
        api_port,
        founder,
        lease_name,
        time_scale: time_scale.max(1),
        flux,
    })
}

/// How often the demo looks at a server's k3s.service for a (re)start or a stop.
const K3S_LOOK: Duration = Duration::from_millis(200);

/// A server's real etcd member (`demo --apiserver`): k3s embeds it, so it stops and starts
/// with the server's k3s.service, and never starts on a server that died.
struct RealMember {
    members: EtcdMembers,
    host: String,
    view: cluster::View,
}

impl RealMember {
    /// The member follows its k3s: `Some(true)` started, `Some(false)` stopped, `None`
    /// restarted (stopped, then started).
    fn follow(&self, started: Option<bool>) {
        let said = match started {
            Some(false) => self.members.stop(&self.host).map(|_| ()),
            _ if self.view.dead(&self.host) => Ok(()),
            Some(true) => self.members.start(&self.host).map(|_| ()),
            None => self
                .members
                .stop(&self.host)
                .and_then(|_| self.members.start(&self.host))
                .map(|_| ()),
        };
        if let Err(why) = said {
            tracing::warn!(
                "demo --apiserver: {}'s etcd member with its k3s: {why}",
                self.host
            );
        }
    }
}

/// Tell the cluster of server `server` (0-based) what commands on the node did to its
/// k3s.service: each (re)start (a new ActiveEnterTimestamp) and each stop. The node is
/// the SSH side's and the controllers the cluster's; this look is the one wire between
/// them, so a playbook's `systemctl restart k3s` has the effect a real one has on the VIP.
/// With `--apiserver`, the server's real etcd `member` stops and starts with it, here and
/// not in the controllers: a write they wait on without quorum must not hold a member's
/// start back.
///
/// The unit is looked at first when this is called, not when the task first runs: a
/// change made right after the demo started (before its tasks ran) is not missed.
fn watch_k3s(
    state: Arc<Mutex<NodeState>>,
    server: usize,
    member: Option<RealMember>,
    tx: UnboundedSender<ClusterInput>,
    cancel: CancellationToken,
) -> impl std::future::Future<Output = ()> {
    let look = |s: &Arc<Mutex<NodeState>>| {
        s.lock().ok().and_then(|n| {
            n.units
                .get("k3s.service")
                .map(|u| (u.state == UnitState::Active, u.active_since_ms))
        })
    };
    let mut was = look(&state);
    async move {
        let mut tick = tokio::time::interval(K3S_LOOK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            let now = look(&state);
            let (said, started) = match (was, now) {
                (Some((true, before)), Some((true, since))) if since != before => {
                    (Some(ClusterInput::K3sStarted { server }), None)
                }
                (Some((false, _)) | None, Some((true, _))) => {
                    (Some(ClusterInput::K3sStarted { server }), Some(true))
                }
                (Some((true, _)), Some((false, _)) | None) => {
                    (Some(ClusterInput::K3sStopped { server }), Some(false))
                }
                _ => (None, None),
            };
            was = now;
            if let (Some(m), Some(_)) = (&member, &said) {
                m.follow(started);
            }
            if let Some(input) = said {
                if tx.send(input).is_err() {
                    return;
                }
            }
        }
    }
}

/// Keep server `host`'s interface in step with the kube-vip Lease: the VIP is on it while the
/// Lease names it (what `ip addr` and `hostname -I` on the holder show), gone when it moves.
async fn follow_vip(
    state: Arc<Mutex<NodeState>>,
    host: String,
    vip: Ipv4Addr,
    view: cluster::View,
    cancel: CancellationToken,
) {
    let mut tick = tokio::time::interval(K3S_LOOK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        let held = (view.lease_holder().as_deref() == Some(host.as_str())).then_some(vip);
        if let Ok(mut n) = state.lock() {
            n.vip_held = held;
        }
    }
}

/// A stable 64-bit id from text (FNV-1a): etcd's member and cluster ids are random; the
/// demo's are the same on every start.
fn stable_id(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `host`'s etcd member in `env`: every server of the environment a member, named as k3s
/// names them (`<hostname>-<8 hex>`), on its planned address; the first server leads.
fn sim_etcd(
    env: &hk_engine::repo::env::Environment,
    host: &str,
    addrs: &BTreeMap<String, Ipv4Addr>,
) -> SimEtcd {
    let members: Vec<(u64, String, String, String)> = env
        .servers
        .iter()
        .map(|s| {
            let id = stable_id(&format!("{}/{}", env.name, s.name));
            let addr = addrs
                .get(&s.name)
                .map(|a| a.to_string())
                .unwrap_or_else(|| s.address.clone());
            (
                id,
                format!("{}-{:08x}", s.name, id as u32),
                format!("https://{addr}:2380"),
                format!("https://{addr}:2379"),
            )
        })
        .collect();
    SimEtcd {
        cluster_id: stable_id(&env.name),
        member_id: stable_id(&format!("{}/{host}", env.name)),
        leader: members.first().map(|m| m.0),
        members,
        term: 2,
        applied: 1_000,
        alarms: Vec::new(),
        learners: Vec::new(),
        transfer_to: None,
    }
}

/// k3s's etcd CA and client certificate on a server, root's only (0600), as k3s writes
/// them: the etcd look reads them through `sudo -n`.
fn write_k3s_etcd_tls(node: &mut NodeState) {
    let now = node.now_ms();
    let dir = crate::node::K3S_ETCD_TLS_DIR;
    for d in [
        "/var/lib/rancher/k3s/server",
        "/var/lib/rancher/k3s/server/tls",
        dir,
    ] {
        let _ = node.fs.mkdir(d, 0o700, 0, now);
    }
    for (file, what) in [
        ("server-ca.crt", "CERTIFICATE"),
        ("client.crt", "CERTIFICATE"),
        ("client.key", "EC PRIVATE KEY"),
    ] {
        let path = format!("{dir}/{file}");
        let text = format!(
            "-----BEGIN {what}-----\n(the demo's stand-in: no TLS is spoken here)\n-----END {what}-----\n"
        );
        let _ = node.fs.write(&path, text.as_bytes(), false, 0, now);
        let _ = node.fs.chmod(&path, 0o600, 0);
    }
}

/// A node's real userland under `dir/nodes/HOST`, seeded with what the simulation gave the
/// node; on a server also its etcd endpoints (their certificates in its k3s data dir, where
/// the console's probe reads them) and, when the machine has one, `kubectl` with the
/// environment's admin kubeconfig where k3s puts it (`/etc/rancher/k3s/k3s.yaml`, and
/// root's `~/.kube/config`).
async fn node_userland(
    sandbox: &Sandbox,
    dir: &Path,
    host: &str,
    addr: Ipv4Addr,
    state: &Arc<Mutex<NodeState>>,
    kubeconfig: Option<&PathBuf>,
    kubectl: Option<&Path>,
) -> Result<NodeUserland, DemoError> {
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        DemoError::Start(format!("demo --userland: node {host}: {what}: {e}"))
    };
    let root = dir.join("nodes").join(host);
    let u = Userland::create(
        sandbox.clone(),
        &root,
        host,
        IpAddr::V4(addr),
        state.clone(),
    )
    .await
    .map_err(|e| fail("making its root", &e))?;
    let (server, real) = {
        let s = state.lock().map_err(|_| fail("its state", &"poisoned"))?;
        u.seed_from(&s).map_err(|e| fail("seeding its root", &e))?;
        (s.etcd.is_some(), s.etcd_real.clone())
    };
    if !server {
        return Ok((u, None, None));
    }
    if let Some(k) = kubectl {
        u.add_program(k)
            .map_err(|e| fail("giving it kubectl", &e))?;
    }
    if let Some(kc) = kubeconfig {
        let text = std::fs::read(kc).map_err(|e| fail("reading the kubeconfig", &e))?;
        for at in ["/etc/rancher/k3s/k3s.yaml", "/root/.kube/config"] {
            u.write_file(at, &text, 0o600)
                .map_err(|e| fail("writing its kubeconfig", &e))?;
        }
    }
    // With --apiserver the server has a real etcd member of its own: its real curl asks
    // that member itself (plain HTTP on the server's address), metrics included.
    if let Some(url) = real {
        let metrics = format!("{url}/metrics");
        return Ok((u, None, Some((url, metrics))));
    }
    let endpoint = super::etcd_endpoint::start(IpAddr::V4(addr), state.clone())
        .await
        .map_err(|e| fail("its etcd endpoints", &e))?;
    let tls = crate::node::K3S_ETCD_TLS_DIR;
    for (file, pem) in [
        ("server-ca.crt", &endpoint.ca_pem),
        ("client.crt", &endpoint.client_cert_pem),
        ("client.key", &endpoint.client_key_pem),
    ] {
        u.write_file(&format!("{tls}/{file}"), pem.as_bytes(), 0o600)
            .map_err(|e| fail("writing its etcd certificates", &e))?;
    }
    let urls = (endpoint.client_url.clone(), endpoint.metrics_url.clone());
    Ok((u, Some(endpoint), Some(urls)))
}

/// A node's userland, its etcd endpoints when the demo serves them, and the client and
/// metrics URLs its etcd is read at (servers only).
type NodeUserland = (
    Arc<Userland>,
    Option<super::etcd_endpoint::EtcdEndpoint>,
    Option<(String, String)>,
);

/// The machine's `kubectl` (`--apiserver`'s directory first, then PATH), which a userland
/// server gets as k3s gives one; None: the servers have none, and say so when asked.
fn host_kubectl(apiserver: Option<&Path>) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    apiserver
        .map(Path::to_path_buf)
        .into_iter()
        .chain(std::env::split_paths(&path))
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
}

/// The one port every environment's API server must listen on when the repo's API port is
/// no variable the demo can point elsewhere (`facts.api_port` an expression, k3s's default
/// `{{ 6443 }}` say): that port, served as the repo's clients will dial it. None: every
/// environment names a variable (the demo picks a free port and rewrites it). Environments
/// that disagree, or a port that does not render, are refused.
fn fixed_api_port(repo: &Repo) -> Result<Option<u16>, DemoError> {
    let mut fixed = BTreeMap::new();
    for env in &repo.environments {
        let var = &env.api_port.var;
        if var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let port = env
            .api_port
            .get()
            .and_then(|p| p.parse::<u16>().ok())
            .ok_or_else(|| {
                DemoError::Start(format!(
                    "environment `{}`: facts.api_port is the expression `{var}`, which renders \
                     to no port ({:?})",
                    env.name,
                    env.api_port.get()
                ))
            })?;
        fixed.insert(port, env.name.clone());
    }
    match fixed.len() {
        0 => Ok(None),
        1 if fixed.len() == repo.environments.len() || repo.environments.len() == 1 => {
            Ok(fixed.into_keys().next())
        }
        _ => Err(DemoError::Start(format!(
            "the environments' API ports cannot share one simulated port: {}",
            repo.environments
                .iter()
                .map(|e| format!("{}: {}", e.name, e.api_port.var))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Raft entries a simulated member behind its leader applies per look (etcd replays a
/// restarted member's missed log in well under a second for a homelab's write rate).
const ETCD_CATCH_UP_PER_LOOK: u64 = 50;

/// Keep the servers' etcd members in step with their deaths and their k3s.service's stops
/// (k3s embeds the member): a dead or stopped server's member stops
/// (its metrics listener refuses); while a majority lives, a leader that died is replaced
/// by the first live member (an election); without a majority no member leads and none
/// sees a leader, as etcd's own members report it.
async fn follow_etcd(
    members: Vec<(String, Arc<Mutex<NodeState>>)>,
    view: cluster::View,
    cancel: CancellationToken,
) {
    let mut tick = tokio::time::interval(K3S_LOOK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        let alive: Vec<bool> = members.iter().map(|(h, _)| !view.member_down(h)).collect();
        let quorum = alive.iter().filter(|a| **a).count() > members.len() / 2;
        // A transfer the leader accepted (MoveLeader): the target leads from this look on,
        // if it lives and a quorum does.
        let ids: Vec<Option<u64>> = members
            .iter()
            .map(|(_, s)| {
                s.lock()
                    .ok()
                    .and_then(|n| n.etcd.as_ref().map(|e| e.member_id))
            })
            .collect();
        for (i, (_, s)) in members.iter().enumerate() {
            let target = s
                .lock()
                .ok()
                .and_then(|mut n| n.etcd.as_mut().and_then(|e| e.transfer_to.take()));
            let Some(t) = target else { continue };
            let Some(j) = ids.iter().position(|id| *id == Some(t)) else {
                continue;
            };
            if quorum && alive[i] && alive[j] {
                if let Ok(mut n) = s.lock() {
                    n.etcd_leader = false;
                }
                if let Ok(mut n) = members[j].1.lock() {
                    n.etcd_leader = true;
                }
            }
        }
        let leads = |s: &Arc<Mutex<NodeState>>| s.lock().is_ok_and(|n| n.etcd_leader);
        let leader = if !quorum {
            None
        } else {
            members
                .iter()
                .zip(&alive)
                .position(|((_, s), a)| *a && leads(s))
                .or_else(|| alive.iter().position(|a| *a))
        };
        let leader_id = leader.and_then(|i| {
            members[i]
                .1
                .lock()
                .ok()
                .and_then(|n| n.etcd.as_ref().map(|e| e.member_id))
        });
        // The leader appends one entry a look; its followers apply what it has, a member
        // back from a stop replaying what it missed at ETCD_CATCH_UP_PER_LOOK a look (it
        // trailed forever, and a health gate waiting for it to catch up never passed).
        let leader_applied = leader.and_then(|i| {
            members[i]
                .1
                .lock()
                .ok()
                .and_then(|n| n.etcd.as_ref().map(|e| e.applied + 1))
        });
        for (i, ((_, s), a)) in members.iter().zip(&alive).enumerate() {
            if let Ok(mut n) = s.lock() {
                n.etcd_up = *a;
                n.etcd_leader = *a && leader == Some(i);
                n.etcd_has_leader = *a && quorum;
                if let Some(e) = n.etcd.as_mut() {
                    let follows = leader_id.filter(|_| *a);
                    if follows.is_some() && follows != e.leader {
                        // An election: a new term.
                        e.term += 1;
                    }
                    e.leader = follows;
                    if let (Some(_), Some(top)) = (follows, leader_applied) {
                        e.applied = (e.applied + ETCD_CATCH_UP_PER_LOOK).min(top).max(e.applied);
                    }
                }
            }
        }
    }
}

/// Where Ansible loads the inventory's `host_vars/` from: beside an inventory file, inside
/// an inventory directory.
fn inventory_vars_base(repo: &Repo) -> Option<PathBuf> {
    if repo.inventory_path.is_dir() {
        Some(repo.inventory_path.clone())
    } else {
        repo.inventory_path.parent().map(Path::to_path_buf)
    }
}

/// For each environment whose scenario state pins its VPN server (`vpn.pinned`), write that
/// server into each of its gateways' `host_vars` as `vpn_egress_gateway_pia_remote` (the
/// demo's copy: a value the repo had there is replaced, other keys kept), then read the repo
/// again: the demo's repo says what its gateways run.
fn pin_vpn_remotes(repo: Repo, scenario: &Scenario) -> Result<Repo, DemoError> {
    const VAR: &str = hk_engine::checks::vpn_remotes::REMOTE_VAR;
    let vars_dir = inventory_vars_base(&repo)
        .unwrap_or_else(|| repo.root.clone())
        .join("host_vars");
    let mut wrote = false;
    for (i, env) in repo.environments.iter().enumerate() {
        let state = scenario.env_state_at(&env.name, i);
        if !state.vpn.pinned {
            continue;
        }
        let server: std::net::SocketAddr = state.vpn.server.parse().map_err(|_| {
            DemoError::Start(format!(
                "scenario: vpn.server `{}` is not an address",
                state.vpn.server
            ))
        })?;
        for gw in &env.vpn_gateways {
            // The same file the connection variables go to (written after this).
            let as_dir = vars_dir.join(&gw.name);
            let path = if as_dir.is_dir() {
                as_dir.join("zz-hk-console-demo.yml")
            } else {
                ["yml", "yaml"]
                    .iter()
                    .map(|ext| vars_dir.join(format!("{}.{ext}", gw.name)))
                    .find(|p| p.is_file())
                    .unwrap_or_else(|| vars_dir.join(format!("{}.yml", gw.name)))
            };
            let theirs = std::fs::read_to_string(&path).unwrap_or_default();
            let value = format!("\"{} {}\"", server.ip(), server.port());
            write(
                &path,
                &set_top_level_keys(
                    &theirs,
                    "the scenario pins this gateway's VPN server",
                    &[(VAR.to_string(), value)],
                ),
            )?;
            wrote = true;
        }
    }
    if !wrote {
        return Ok(repo);
    }
    Repo::load(&repo.root)
        .map_err(|e| DemoError::Start(format!("the demo repo after pinning the VPN servers: {e}")))
}

/// One host's simulated state from its environment's scenario state.
fn build_node(
    repo: &Repo,
    host: &str,
    state: &EnvState,
    // The environment `host` is a VPN gateway of, if it is one.
    gateway: Option<&str>,
    clock: &Clock,
) -> Result<NodeState, DemoError> {
    let mut n = NodeState::new(host, *clock);
    let now = n.now_ms();
    let bad =
        |what: &str, v: &str| DemoError::Start(format!("scenario: {what} `{v}` is not an address"));
    n.direct_exit_ip = state
        .vpn
        .direct_exit
        .parse()
        .map_err(|_| bad("vpn.direct_exit", &state.vpn.direct_exit))?;
    let disks = &state.disks;
    if let Some(d) = n.disks.get_mut(&disks.device) {
        d.scheduler = disks.scheduler.clone();
        d.nr_requests = disks.nr_requests;
    }
    for unit in ["system.slice", "k3s.service"] {
        if let Some(u) = n.units.get_mut(unit) {
            u.io_weight = Some(u64::from(disks.io_weight));
        }
    }
    if disks.io_pressure_avg10 > 1.0 {
        n.io_pressure = Psi::stalled(disks.io_pressure_avg10, disks.io_pressure_avg10 / 2.0);
    }
    if let Some(env) = gateway {
        // The unit, interface and exit-IP URL the console's VPN pane will look for, by the
        // same rule (hk-console.yaml `names:`, else the gateway's hostvars, else the seed's).
        let spec = hk_effects::observe::vpn::gateway_spec(repo, env, host)
            .map_err(|e| DemoError::Start(format!("VPN gateway {host}: {e}")))?;
        if !n.exit_ip_urls.contains(&spec.exit_ip_url) {
            n.exit_ip_urls.push(spec.exit_ip_url.clone());
        }
        let unit = spec.service;
        let tunnel = VpnTunnel {
            unit: unit.clone(),
            interface: spec.interface,
            exit_ip: state
                .vpn
                .tunnel_exit
                .parse()
                .map_err(|_| bad("vpn.tunnel_exit", &state.vpn.tunnel_exit))?,
            server: state
                .vpn
                .server
                .parse()
                .map_err(|_| bad("vpn.server", &state.vpn.server))?,
            tunnel_addr: state
                .vpn
                .tunnel_addr
                .parse()
                .map_err(|_| bad("vpn.tunnel_addr", &state.vpn.tunnel_addr))?,
            netmask: Ipv4Addr::new(255, 255, 255, 0),
        };
        let period_ms = state.vpn.restart_every_s * 1000;
        // With a reconnect period, the journal already holds the last half hour of it.
        let first = if period_ms > 0 {
            now.saturating_sub(30 * 60 * 1000)
        } else {
            now.saturating_sub(3_600_000)
        };
        n = n.with_vpn(tunnel, first);
        if period_ms > 0 {
            let mut t = first + period_ms;
            while t < now {
                let _ = n.restart_unit_at(&unit, t);
                t += period_ms;
            }
        }
        if state.vpn.active != "active" {
            let _ = n.fail_unit_at(&unit, now);
        }
    }
    Ok(n)
}

/// `theirs` (an ansible.cfg) with `ours` set: each (section, key, value) replaces the key
/// where the section has it, else joins the section, created at the end if missing. One
/// section each (Ansible's parser refuses a section twice); comments and order kept.
fn merge_ansible_cfg(theirs: &str, ours: &[(&str, &str, &str)]) -> String {
    // (section name, its lines); the lines before any section go under "".
    let mut sections: Vec<(String, Vec<String>)> = vec![(String::new(), Vec::new())];
    for line in theirs.lines() {
        let t = line.trim();
        if t.starts_with('[') && t.ends_with(']') {
            sections.push((t[1..t.len() - 1].trim().to_string(), vec![line.to_string()]));
        } else if let Some(last) = sections.last_mut() {
            last.1.push(line.to_string());
        }
    }
    for (section, key, value) in ours {
        let line = format!("{key} = {value}");
        let i = match sections.iter().position(|(name, _)| name == section) {
            Some(i) => i,
            None => {
                sections.push((section.to_string(), vec![format!("[{section}]")]));
                sections.len() - 1
            }
        };
        let lines = &mut sections[i].1;
        let same_key = |l: &String| {
            l.split_once(['=', ':'])
                .is_some_and(|(k, _)| k.trim() == *key && !l.trim_start().starts_with(['#', ';']))
        };
        match lines.iter().position(same_key) {
            Some(j) => lines[j] = line,
            None => {
                // After the section's last setting, before trailing blank lines.
                let at = lines
                    .iter()
                    .rposition(|l| !l.trim().is_empty())
                    .map_or(lines.len(), |j| j + 1);
                lines.insert(at, line);
            }
        }
    }
    let mut out = String::from(
        "# hk-console demo: the repo's ansible.cfg with the simulation's connection settings.\n",
    );
    for (_, lines) in sections {
        for l in lines {
            out.push_str(&l);
            out.push('\n');
        }
    }
    out
}

impl Demo {
    /// What the console's executors (console and headless runs alike) change for the demo:
    /// trust only the demo's host keys, ignore `~/.ssh/config`, judge a rollout stuck
    /// after [`Demo::stuck_after`], and soak the health gate in the scenario's time scale.
    pub fn exec_setup(&self) -> hk_effects::exec::ExecSetup {
        hk_effects::exec::ExecSetup {
            ssh: Some(self.ssh_options()),
            ignore_ssh_config: true,
            stuck_after: Some(self.stuck_after()),
            time_scale: Some(self.scenario.time_scale.max(1)),
        }
    }

    /// The stuck-rollout threshold in the demo: the watchers' real one (5 min) divided by
    /// the scenario's time scale.
    pub fn stuck_after(&self) -> Duration {
        hk_effects::cluster::WatchSettings::default().stuck_after / self.scenario.time_scale.max(1)
    }

    /// The SSH options the console should use against the simulation: the repo's, but
    /// trusting ONLY the demo's known_hosts (an old demo's keys for the same loopback
    /// address in ~/.ssh/known_hosts must not read as a changed host key).
    pub fn ssh_options(&self) -> hk_effects::exec::SshOptions {
        let mut o = hk_effects::context::ssh_options(&self.repo);
        o.known_hosts = vec![self.dir.join("known_hosts")];
        o
    }
}

#[cfg(test)]
mod tests {
    use super::merge_ansible_cfg;

    #[test]
    fn the_repos_ansible_cfg_keeps_its_settings_and_takes_the_demos() {
        let theirs = "# ours\n[defaults]\nvault_password_file = ../../pass\npipelining = False\n\n[ssh_connection]\n# pipelining = False (a comment, not a key)\npipelining = False\n";
        let out = merge_ansible_cfg(
            theirs,
            &[
                ("defaults", "interpreter_python", "/usr/bin/python3"),
                ("ssh_connection", "pipelining", "True"),
                ("privilege_escalation", "become_method", "sudo"),
            ],
        );
        assert!(out.contains("vault_password_file = ../../pass\n"), "{out}");
        assert!(
            out.contains("interpreter_python = /usr/bin/python3\n"),
            "{out}"
        );
        // The [defaults] `pipelining` is another section's key: left alone.
        assert!(out.contains("[defaults]\nvault_password_file = ../../pass\npipelining = False\ninterpreter_python"), "{out}");
        assert!(
            out.contains("# pipelining = False (a comment, not a key)\npipelining = True\n"),
            "{out}"
        );
        assert_eq!(out.matches("[ssh_connection]").count(), 1, "{out}");
        assert!(
            out.ends_with("[privilege_escalation]\nbecome_method = sudo\n"),
            "{out}"
        );
        // No repo file: the demo's sections alone.
        let fresh = merge_ansible_cfg("", &[("defaults", "a", "1")]);
        assert!(fresh.ends_with("[defaults]\na = 1\n"), "{fresh}");
    }
}
