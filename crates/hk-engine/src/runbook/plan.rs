//! The expanded, ordered plan of a runbook for one environment.
//!
//! Owns: the [`Plan`] type (what `hk-console plan --json` prints, what the state machine
//! walks, what the executors carry out) and the planner that expands a validated runbook
//! against the inventory's topology.
//! Must not: do IO. The topology comes in through the [`Topology`] trait.
//!
//! Why one file over 800 lines: the Plan types and the planner that fills them change together
//! (a new step field is a type and its expansion); the planner is one `Planner` walking a
//! runbook, and its helpers read the same private state.

use serde::{Deserialize, Serialize};

/// A runbook expanded for one environment: every step, host by host, in the order it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub runbook: String,
    pub env: String,
    /// Whether any step mutates.
    pub mutates: bool,
    pub steps: Vec<PlannedStep>,
}

/// The kinds of step a runbook can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepKind {
    ListHosts,
    Ansible,
    Ssh,
    KubeWait,
    /// Re-read the infra repo until a named condition over it holds (never edits it).
    RepoWait,
    /// Look at the live VPN gateways until a named condition over them holds.
    VpnWait,
    Probe,
    Gate,
    Manual,
    FluxReconcile,
    /// Move etcd's leadership off a server before it is changed (or, read-only, say whether
    /// and where it would move). Only the planner writes it (see [`LeaderAway`]).
    EtcdLeader,
    /// Save a snapshot of etcd (its own snapshot API, from one caught-up member) beside the
    /// run's journal before the first server is changed. Only the planner writes it (see
    /// [`SnapshotFirst`]).
    EtcdSnapshot,
}

impl StepKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::ListHosts => "list-hosts",
            StepKind::Ansible => "ansible",
            StepKind::Ssh => "ssh",
            StepKind::KubeWait => "kube-wait",
            StepKind::RepoWait => "repo-wait",
            StepKind::VpnWait => "vpn-wait",
            StepKind::Probe => "probe",
            StepKind::Gate => "gate",
            StepKind::Manual => "manual",
            StepKind::FluxReconcile => "flux-reconcile",
            StepKind::EtcdLeader => "etcd-leader",
            StepKind::EtcdSnapshot => "etcd-snapshot",
        }
    }
}

/// The kube-wait condition of the gate policy's read-only preview of a Flux reconcile:
/// `flux-preview <kind>/<name> <namespace>`. Only the planner writes it.
pub const FLUX_PREVIEW: &str = "flux-preview";

/// The kube-wait condition of the health gate between hosts:
/// `health-between-hosts AFTER BEFORE stable_for=S soak=S` (see [`HealthGate`]). Only the
/// planner writes it.
pub const HEALTH_GATE: &str = "health-between-hosts";

/// The kube-wait condition of the look before a `disrupts: node` step:
/// `node-disruption NODE` (see [`NodeDisruption`]). Only the planner writes it.
pub const NODE_DISRUPTION: &str = "node-disruption";

/// The condition of the read-only look before a leader move: `etcd-leader-preview HOST`.
pub const ETCD_LEADER_PREVIEW: &str = "etcd-leader-preview";

/// The condition of the leader move itself: `etcd-leader-away HOST`.
pub const ETCD_LEADER_AWAY: &str = "etcd-leader-away";

/// The condition of the snapshot before the first server: `etcd-snapshot changed=H1,H2`.
pub const ETCD_SNAPSHOT: &str = "etcd-snapshot";

/// The etcd-snapshot step's condition: save a snapshot of etcd before the run changes
/// `changed` (the servers, in the order the run changes them), from a member the run does
/// not change where one fits, else from the one it changes last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotFirst {
    pub changed: Vec<String>,
}

impl SnapshotFirst {
    pub fn condition(&self) -> String {
        format!("{ETCD_SNAPSHOT} changed={}", self.changed.join(","))
    }

    /// `None`: not an etcd-snapshot condition. `Some(Err)`: one, but malformed.
    pub fn parse(text: &str) -> Option<Result<SnapshotFirst, MalformedCondition>> {
        let words: Vec<&str> = text.split_whitespace().collect();
        if words.first() != Some(&ETCD_SNAPSHOT) {
            return None;
        }
        Some(match words.as_slice() {
            [_, changed] => match changed.strip_prefix("changed=") {
                Some(list) if !list.is_empty() && !list.split(',').any(str::is_empty) => {
                    Ok(SnapshotFirst {
                        changed: list.split(',').map(str::to_string).collect(),
                    })
                }
                _ => Err(MalformedCondition::EtcdSnapshot {
                    text: text.to_string(),
                }),
            },
            _ => Err(MalformedCondition::EtcdSnapshot {
                text: text.to_string(),
            }),
        })
    }
}

/// An etcd-leader step's condition: move (or, `preview`, only say whether and where it
/// would move) etcd's leadership off `host` before the steps after it change that server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderAway {
    pub host: String,
    pub preview: bool,
    /// The servers this plan changes after `host`, in order: leadership goes to one of
    /// them only where no other member can take it (one move per run, not one per host).
    pub later: Vec<String>,
}

impl LeaderAway {
    pub fn condition(&self) -> String {
        let word = if self.preview {
            ETCD_LEADER_PREVIEW
        } else {
            ETCD_LEADER_AWAY
        };
        if self.later.is_empty() {
            format!("{word} {}", self.host)
        } else {
            format!("{word} {} later={}", self.host, self.later.join(","))
        }
    }

    /// `None`: not an etcd-leader condition. `Some(Err)`: one, but malformed.
    pub fn parse(text: &str) -> Option<Result<LeaderAway, MalformedCondition>> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let preview = match words.first() {
            Some(&ETCD_LEADER_PREVIEW) => true,
            Some(&ETCD_LEADER_AWAY) => false,
            _ => return None,
        };
        let bad = || MalformedCondition::LeaderAway {
            text: text.to_string(),
        };
        Some(match words.as_slice() {
            [_, host] => Ok(LeaderAway {
                host: host.to_string(),
                preview,
                later: Vec::new(),
            }),
            [_, host, later] => match later.strip_prefix("later=") {
                Some(list) if !list.is_empty() => Ok(LeaderAway {
                    host: host.to_string(),
                    preview,
                    later: list.split(',').map(str::to_string).collect(),
                }),
                _ => Err(bad()),
            },
            _ => Err(MalformedCondition::LeaderAway {
                text: text.to_string(),
            }),
        })
    }
}

/// The health gate between one host and the next, as the plan carries it in a kube-wait
/// step's condition (so the journal and `plan --json` hold it as text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthGate {
    /// The host just finished.
    pub after: String,
    /// The host about to be touched.
    pub before: String,
    /// Seconds the VIP lease's holder must have been unchanged.
    pub stable_for_s: u64,
    /// Seconds the cluster must stay healthy without a break.
    pub soak_s: u64,
}

impl HealthGate {
    pub fn condition(&self) -> String {
        format!(
            "{HEALTH_GATE} {} {} stable_for={} soak={}",
            self.after, self.before, self.stable_for_s, self.soak_s
        )
    }

    /// `None`: not a health-gate condition. `Some(Err)`: one, but malformed (named).
    pub fn parse(text: &str) -> Option<Result<HealthGate, MalformedCondition>> {
        let words: Vec<&str> = text.split_whitespace().collect();
        if words.first() != Some(&HEALTH_GATE) {
            return None;
        }
        let bad = || MalformedCondition::HealthGate {
            text: text.to_string(),
        };
        let secs = |word: &str, key: &str| -> Result<u64, MalformedCondition> {
            word.strip_prefix(key)
                .and_then(|v| v.strip_prefix('='))
                .and_then(|v| v.parse().ok())
                .ok_or_else(bad)
        };
        let parsed = || match words.as_slice() {
            [_, after, before, stable, soak] => Ok(HealthGate {
                after: after.to_string(),
                before: before.to_string(),
                stable_for_s: secs(stable, "stable_for")?,
                soak_s: secs(soak, "soak")?,
            }),
            _ => Err(bad()),
        };
        Some(parsed())
    }
}

/// The look at what a node carries before a step that takes it away (`disrupts: node`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDisruption {
    pub node: String,
}

impl NodeDisruption {
    pub fn condition(&self) -> String {
        format!("{NODE_DISRUPTION} {}", self.node)
    }

    /// `None`: not a node-disruption condition. `Some(Err)`: one, but malformed.
    pub fn parse(text: &str) -> Option<Result<NodeDisruption, MalformedCondition>> {
        let words: Vec<&str> = text.split_whitespace().collect();
        if words.first() != Some(&NODE_DISRUPTION) {
            return None;
        }
        Some(match words.as_slice() {
            [_, node] => Ok(NodeDisruption {
                node: node.to_string(),
            }),
            _ => Err(MalformedCondition::NodeDisruption {
                text: text.to_string(),
            }),
        })
    }
}

/// A condition only the planner writes ([`HEALTH_GATE`], [`NODE_DISRUPTION`]) that does
/// not read back: its text was edited or damaged between the plan and the wait.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MalformedCondition {
    #[error("`{text}`: expected `{gate} AFTER BEFORE stable_for=SECONDS soak=SECONDS`", gate = HEALTH_GATE)]
    HealthGate { text: String },
    #[error("`{text}`: expected `{look} NODE`", look = NODE_DISRUPTION)]
    NodeDisruption { text: String },
    #[error("`{text}`: expected `{away} HOST [later=HOST,...]` or `{preview} HOST [later=HOST,...]`", away = ETCD_LEADER_AWAY, preview = ETCD_LEADER_PREVIEW)]
    LeaderAway { text: String },
    #[error("`{text}`: expected `{snap} changed=HOST[,HOST...]`", snap = ETCD_SNAPSHOT)]
    EtcdSnapshot { text: String },
}

/// An operator gate: the run stops here until the operator answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Gate {
    /// The operator confirms they are present; who and when is journaled.
    OperatorPresent,
    /// The operator types `phrase` (the environment's name) exactly.
    TypedConfirm { phrase: String },
    /// The operator authorises `flag`; the steps after it pass `-e flag=true`.
    Authorise { flag: String },
    /// The operator confirms the exact host set a list-hosts step showed (count typed).
    ConfirmHosts { expected: Vec<String> },
    /// The operator reviews a check-mode diff and approves or rejects it.
    ApproveDiff,
    /// The operator did a manual step and confirms it is done.
    ConfirmDone,
}

/// What a step must show to count as done. Only the fields that apply to the step's kind
/// are set; the validator refuses the others.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Exit status of the command (0 unless said otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Trimmed stdout equals this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout_equals: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout_contains: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout_not_contains: Option<String>,
    /// list-hosts: the exact host set, in any order. Any difference blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<String>>,
    /// kube-wait: the named condition, e.g. `daemonset-rolled-out kube-system/cilium`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// probe: `host:port` that must accept a TCP connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<String>,
    /// How long the step may take before it fails, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u64>,
    /// The named cause to report when this expectation fails (e.g. a probe of the VIP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_fail: Option<String>,
}

/// One step of a plan, bound to at most one host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedStep {
    /// 1-based position in the plan; the journal names steps by it.
    pub n: usize,
    /// The runbook step's id (the same id repeats once per host).
    pub id: String,
    pub kind: StepKind,
    pub host: Option<String>,
    pub mutates: bool,
    pub gate: Option<Gate>,
    /// The argv that runs (ansible-playbook ..., or `ssh HOST 'command'`), if a process runs.
    pub command: Option<Vec<String>>,
    pub expect: Option<Expect>,
    /// Human title, shown in the run view.
    #[serde(default)]
    pub title: String,
    /// Working directory for `command` (the repo's ansible dir for ansible steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Who put this gate or preview in the plan: the runbook's author, or the planner's gate
    /// policy (which a runbook cannot remove). Set on gates and previews only; absent in
    /// plans journaled before the policy existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<GateSource>,
    /// On a gate that guards a mutating step: what that step can touch, in numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blast_radius: Option<BlastRadius>,
    /// `FILE:LINE` of the `mutates: false` a user runbook (`--runbooks`) wrote on this ssh
    /// step: read-only only by the user's word, not verified. Observe mode refuses to run
    /// it; a shipped runbook's steps never carry it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_read_only: Option<String>,
}

/// Where a gate (or a preview) comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GateSource {
    /// Written in the runbook (a gate step, `check_first`).
    Runbook,
    /// Required by the gate policy: the environment is `protected` (or asks for the
    /// operator to be present), whatever the runbook says.
    Policy,
}

/// What one mutating step can touch, as the planner knows it: the hosts it runs on, the
/// nodes whose pods it can restart, and one line saying so for the operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlastRadius {
    /// The plan step the gate guards.
    pub step: usize,
    /// The hosts a play or command runs on (empty when the step runs on none).
    #[serde(default)]
    pub hosts: Vec<String>,
    /// The nodes whose workloads the step can roll (a Flux reconcile: every server of the
    /// environment, the most a DaemonSet can cover).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<usize>,
    /// The same, in one line with the numbers.
    pub summary: String,
    /// On a `--check --diff` preview (and the gate before it): the tasks that run for real
    /// under `--check` (`check_mode: false` on a module that can write, not reviewed), or
    /// the parts of the playbook that could not be read. Derived from the playbook
    /// ([`Topology::check_runs`]), never from the runbook's word. Absent in plans journaled
    /// before it existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs_for_real: Vec<RealTask>,
}

/// A task that runs for real under `ansible-playbook --check`, as the plan carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RealTask {
    /// `FILE:LINE` of the task (or of the include that could not be read).
    pub at: String,
    /// Its module (`ansible.builtin.shell`), or what could not be read.
    pub module: String,
    /// Why it runs for real (its `check_mode` and where it was set, the operator's
    /// machine), or why the part could not be read.
    pub why: String,
}

impl RealTask {
    /// `FILE:LINE (module): why`, one line.
    pub fn line(&self) -> String {
        format!("{} ({}): {}", self.at, self.module, self.why)
    }
}

/// What a playbook does under `--check`, as the planner asks it ([`Topology::check_runs`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckRuns {
    /// Tasks that run for real: the preview mutates.
    pub real: Vec<RealTask>,
    /// `check_mode: false` tasks that are probes by a person's review, one line each
    /// (`FILE:LINE (module) reviewed read-only by X at Y`): said in the plan, never silently.
    pub reviewed: Vec<String>,
}

// ---------------------------------------------------------------------------------------
// The planner.

use std::collections::{BTreeMap, HashSet};

use super::schema::{
    BetweenHosts, Disrupts, GateSpec, Order, Play, Runbook, Scope, Step, StepSpec, Target,
    ENV_ROLES,
};
use super::validate::template_vars;

/// The names of the environment's live objects a runbook may name (`env.kube_vip_lease`,
/// `env.vpn_unit`, `env.vpn_interface`, `env.vpn_exit_ip_url`): hk-console.yaml `names:`, else
/// the hostvar, else the seed repo's default, as the panes resolve them (the integrator fills
/// them). `None` where the environment's hosts disagree or a value does not pass: a runbook
/// that needs it then fails to plan, naming it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PlanNames {
    pub kube_vip_lease: Option<String>,
    pub vpn_unit: Option<String>,
    pub vpn_interface: Option<String>,
    pub vpn_exit_ip_url: Option<String>,
    /// Why a name is `None` (`vpn_unit` -> "k3s-dev-3: ..."): a runbook that needs it fails
    /// with this reason, not only "undefined".
    pub unresolved: BTreeMap<String, String>,
}

/// What the planner needs to know about the environment a plan is for. The integrator
/// builds it from hk-console.yaml and the hostvars of the environment's servers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PlanEnv {
    /// The environment's name (`dev`, `prod`), as in hk-console.yaml.
    pub name: String,
    /// The servers group (`env.servers`, target role `servers`).
    pub servers: String,
    /// The VPN egress gateways group (`env.vpn_gateways`, target role `vpn_gateways`).
    pub vpn_gateways: Option<String>,
    /// The agent (worker) nodes' group (`env.agents`, target role `agents`).
    pub agents: Option<String>,
    /// The primary (founder) group, from the `k3s_primary_group` host var.
    pub primary_group: String,
    /// The secondary group (servers minus the primary), when the inventory has one.
    pub secondary_group: Option<String>,
    /// The control-plane VIP (`kube_vip_address`).
    pub vip: String,
    /// The API port (`k3s_api_port`).
    pub api_port: u16,
    /// hk-console.yaml `operator_present: true`: a gate before the first mutating step.
    pub operator_present: bool,
    /// hk-console.yaml `protected: true`: every mutating step gets the gate policy's preview
    /// and approval (or a typed confirmation where the kind has no preview).
    pub protected: bool,
    /// The inventory sources, each passed as one `-i` to ansible-playbook and `ansible`
    /// (the same list hk-console read: `Repo::inventory_sources`).
    pub inventories: Vec<String>,
    /// The working directory of ansible commands (playbook paths are relative to it).
    pub ansible_dir: String,
    /// The kubeconfig for `flux` commands, if not the default one.
    pub kubeconfig: Option<String>,
    /// For runbooks with `target.single: true`: the one host to run on.
    pub host: Option<String>,
    /// The names of its live objects runbooks may name.
    pub names: PlanNames,
}

/// What stops a run before its first step, named with where it is and what to do: what
/// ansible-playbook itself would stop on (`repo::blockers` finds them over a repo).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocker {
    /// `missing-playbook`, `role-not-found`, `playbook-unreadable`, `vault-locked`,
    /// `device-placeholder`.
    pub kind: String,
    /// `file[:line[:col]]`, relative to the repo root.
    pub at: String,
    pub message: String,
    /// What to do about it.
    pub fix: String,
}

impl std::fmt::Display for Blocker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: [{}] {}\n    fix: {}",
            self.at, self.kind, self.message, self.fix
        )
    }
}

/// A playbook a runbook runs, and whether every step running it limits it with `--tags`
/// (then which tasks run is the tags' to say, and a variable's use is not judged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaybookUse {
    /// Relative to the Ansible directory, as the runbook names it.
    pub playbook: String,
    pub tagged: bool,
}

/// `-i SOURCE` for each inventory source, in order (Ansible merges them as hk-console did).
fn inventory_args(inventories: &[String]) -> impl Iterator<Item = String> + '_ {
    inventories
        .iter()
        .flat_map(|i| ["-i".to_string(), i.clone()])
}

/// The inventory as the planner sees it. Implemented by the integrator over the real
/// inventory; tests use a small fake.
pub trait Topology {
    /// The hosts of a group, in inventory order; `None` if there is no such group.
    fn hosts_in(&self, group: &str) -> Option<Vec<String>>;
    /// Whether `host` is a member of `group` (directly or through children).
    fn is_member(&self, host: &str, group: &str) -> bool;
    /// A host var of `host`, as resolved for that host.
    fn host_var(&self, host: &str, var: &str) -> Option<serde_json::Value>;
    /// `var` of `host` as the plays of `playbooks` see it: the inventory plus the defaults
    /// and vars of the roles they use, at Ansible's precedence. Err: the roles could not
    /// be read (named). Default: the inventory only.
    fn play_var(
        &self,
        host: &str,
        var: &str,
        playbooks: &[String],
    ) -> Result<Option<serde_json::Value>, String> {
        let _ = playbooks;
        Ok(self.host_var(host, var))
    }
    /// What would stop `uses` on `hosts` before the first step (see [`Blocker`]).
    /// Default: nothing known.
    fn blockers(&self, uses: &[PlaybookUse], hosts: &[String]) -> Vec<Blocker> {
        let _ = (uses, hosts);
        Vec::new()
    }
    /// What `playbook` runs for real under `ansible-playbook --check`: derived from the
    /// playbook as ansible-playbook resolves it (`repo::check_mode`). Default: nothing
    /// known to run (a topology with no playbooks to read).
    fn check_runs(&self, playbook: &str) -> CheckRuns {
        let _ = playbook;
        CheckRuns::default()
    }
    /// Where [`Topology::play_var`] looks, for a message naming the places searched.
    fn searched(&self, host: &str, playbooks: &[String]) -> Vec<String> {
        let _ = (host, playbooks);
        vec!["the inventory (group_vars, host_vars)".into()]
    }
}

/// A `vars.X` that a runbook template needs and no layer defines: where the runbook uses
/// it, for which host, and every place searched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{col}: runbook `{runbook}`, step `{step}`: {} not defined for {host}\n  searched: {searched}\n  hint: set {} in group_vars or host_vars, in the defaults of a role the runbook's playbooks use, or in the runbook's own `defaults:`", named(.vars, "vars.", if .vars.len() > 1 { " are" } else { " is" }), named(.vars, "", ""))]
pub struct UndefinedVar {
    /// Where the runbook uses the first of [`UndefinedVar::vars`].
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub runbook: String,
    pub step: String,
    /// The first (by name) of the variables not defined.
    pub var: String,
    /// Every variable the template needs that no layer defines, sorted: the same message
    /// on every run, and none left for the next attempt to find.
    pub vars: Vec<String>,
    pub host: String,
    pub searched: String,
}

/// `a`, `b` and `c`, each as `` `{prefix}name` ``, then `suffix`.
fn named(vars: &[String], prefix: &str, suffix: &str) -> String {
    let words: Vec<String> = vars.iter().map(|v| format!("`{prefix}{v}`")).collect();
    let list = match words.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    };
    format!("{list}{suffix}")
}

/// Why a runbook cannot be planned for an environment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("runbook `{runbook}` is not meant for environment `{env}` (it is for: {allowed})")]
    NotForEnv {
        runbook: String,
        env: String,
        allowed: String,
    },
    #[error("runbook `{runbook}`: group `{group}` is not in the inventory")]
    UnknownGroup { runbook: String, group: String },
    #[error("runbook `{runbook}`: environment `{env}` has no `{role}` group")]
    NoRoleGroup {
        runbook: String,
        env: String,
        role: String,
    },
    #[error("runbook `{runbook}`: target group `{group}` has no hosts")]
    EmptyTarget { runbook: String, group: String },
    #[error("runbook `{runbook}` runs on one host of `{group}`: name it (one of: {hosts})")]
    NoHostChosen {
        runbook: String,
        group: String,
        hosts: String,
    },
    #[error(
        "runbook `{runbook}` is not a one-host runbook (no `target.single: true`): it plans every \
         host of its target, so a host (`{host}`) cannot be chosen for it; plan it without one"
    )]
    HostNotApplicable { runbook: String, host: String },
    #[error("runbook `{runbook}`: host `{host}` is not in target group `{group}`")]
    HostNotInTarget {
        runbook: String,
        host: String,
        group: String,
    },
    #[error("runbook `{runbook}`: order names `{host}`, which is not in target group `{group}`")]
    OrderNamesOutsider {
        runbook: String,
        host: String,
        group: String,
    },
    #[error(
        "runbook `{runbook}`: order for `{env}` is missing `{host}` of target group `{group}`"
    )]
    OrderMissingHost {
        runbook: String,
        env: String,
        host: String,
        group: String,
    },
    #[error(
        "runbook `{runbook}`: host `{host}` is not a member of `{group}` (required by {required})"
    )]
    NotAMember {
        runbook: String,
        host: String,
        group: String,
        required: String,
    },
    #[error("runbook `{runbook}`: require_member_of `{name}` is neither a group nor a host var of `{host}`")]
    RequiredGroupUnknown {
        runbook: String,
        name: String,
        host: String,
    },
    #[error("{0}")]
    UndefinedVar(Box<UndefinedVar>),
    #[error("runbook `{runbook}`, step `{step}`: {message}")]
    Template {
        runbook: String,
        step: String,
        message: String,
    },
    #[error("runbook `{runbook}`, step `{step}`: cannot say which hosts to expect; give the runbook a target, the step a limit, or expect_hosts")]
    NoExpectedHosts { runbook: String, step: String },
    /// Every blocker found, in a stable order: the run cannot start past any of them.
    #[error("runbook `{runbook}` cannot start on `{env}`: {} before step 1\n  {}", if .blockers.len() == 1 { "1 blocker".to_string() } else { format!("{} blockers", .blockers.len()) }, .blockers.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  "))]
    Blocked {
        runbook: String,
        env: String,
        blockers: Vec<Blocker>,
    },
}

/// Expand a validated runbook for one environment. Pure: everything it knows comes in
/// through `env` and `topo`.
///
/// What would stop the run before its first step (a missing playbook, a role
/// ansible-playbook will not find, a vault no configured password opens, a device
/// placeholder a play uses) is [`PlanError::Blocked`], naming every one; it is looked for
/// also when the expansion fails for want of a variable, which a role not found explains.
pub fn plan(runbook: &Runbook, env: &PlanEnv, topo: &dyn Topology) -> Result<Plan, PlanError> {
    let planned = expand_plan(runbook, env, topo);
    let hosts: Vec<String> = match &planned {
        Ok(p) => {
            let mut hs: Vec<String> = Vec::new();
            for h in p.steps.iter().filter_map(|s| s.host.as_ref()) {
                if !hs.contains(h) {
                    hs.push(h.clone());
                }
            }
            hs
        }
        Err(PlanError::UndefinedVar(_) | PlanError::Template { .. }) => {
            let p = Planner { runbook, env, topo };
            match &runbook.target {
                Some(t) => p.resolve_target(t).unwrap_or_default(),
                None => Vec::new(),
            }
        }
        Err(_) => return planned,
    };
    let blockers = topo.blockers(&playbook_uses(runbook), &hosts);
    if blockers.is_empty() {
        return planned;
    }
    Err(PlanError::Blocked {
        runbook: runbook.id.clone(),
        env: env.name.clone(),
        blockers,
    })
}

/// The runbook's literal playbooks, each tagged when every step running it has `tags`.
fn playbook_uses(runbook: &Runbook) -> Vec<PlaybookUse> {
    let mut out: Vec<PlaybookUse> = Vec::new();
    for s in &runbook.steps {
        let play = match &s.spec {
            StepSpec::ListHosts { play, .. } | StepSpec::Ansible { play, .. } => play,
            _ => continue,
        };
        if play.playbook.contains("{{") {
            continue;
        }
        let tagged = !play.tags.is_empty();
        match out.iter_mut().find(|u| u.playbook == play.playbook) {
            Some(u) => u.tagged &= tagged,
            None => out.push(PlaybookUse {
                playbook: play.playbook.clone(),
                tagged,
            }),
        }
    }
    out
}

fn expand_plan(runbook: &Runbook, env: &PlanEnv, topo: &dyn Topology) -> Result<Plan, PlanError> {
    if !runbook.environments.contains(&env.name) {
        return Err(PlanError::NotForEnv {
            runbook: runbook.id.clone(),
            env: env.name.clone(),
            allowed: runbook.environments.join(", "),
        });
    }
    // A host named for a runbook that runs on every host of its target (or on none) would be
    // ignored: the operator would read a plan for more hosts than they named.
    if let Some(host) = &env.host {
        if !runbook.target.as_ref().is_some_and(|t| t.single) {
            return Err(PlanError::HostNotApplicable {
                runbook: runbook.id.clone(),
                host: host.clone(),
            });
        }
    }
    let p = Planner { runbook, env, topo };
    let hosts = match &runbook.target {
        Some(target) => p.resolve_target(target)?,
        None => Vec::new(),
    };

    // Consecutive per-host steps form a block that runs host by host; once-steps run in place.
    let mut raw: Vec<Draft> = Vec::new();
    let mut i = 0;
    while i < runbook.steps.len() {
        if runbook.steps[i].scope == Scope::Once {
            p.expand(&runbook.steps[i], None, &hosts, &mut raw)?;
            i += 1;
            continue;
        }
        let start = i;
        while i < runbook.steps.len() && runbook.steps[i].scope == Scope::Host {
            i += 1;
        }
        let between = p.between_hosts();
        let mut prev: Option<&String> = None;
        for host in &hosts {
            let mark = raw.len();
            for step in &runbook.steps[start..i] {
                if let Some(only_on) = &step.only_on {
                    let group = p.group_of(only_on)?;
                    // A mistyped group would silently skip the step on every host.
                    if topo.hosts_in(&group).is_none() {
                        return Err(PlanError::UnknownGroup {
                            runbook: runbook.id.clone(),
                            group,
                        });
                    }
                    if !topo.is_member(host, &group) {
                        continue;
                    }
                }
                p.expand(step, Some(host), &hosts, &mut raw)?;
            }
            // A host whose steps all skipped (only_on) is not touched: nothing to gate.
            if raw.len() > mark {
                if let (Some(after), Some((bh, source))) = (prev, between) {
                    raw.insert(mark, p.health_gate(after, host, bh, source));
                }
                prev = Some(host);
            }
        }
    }

    let raw = p.insert_leader_moves(raw);
    let steps = p.insert_safety_steps(raw, &hosts)?;
    let mut steps: Vec<PlannedStep> = steps
        .into_iter()
        .enumerate()
        .map(|(i, d)| PlannedStep { n: i + 1, ..d.step })
        .collect();
    // A policy gate names the step it guards: the next mutating step after it; a preview
    // that runs tasks for real names itself.
    for i in 0..steps.len() {
        if steps[i].gate.is_none() {
            let n = steps[i].n;
            if let Some(b) = steps[i].blast_radius.as_mut() {
                b.step = n;
            }
            continue;
        }
        if steps[i].blast_radius.is_some() {
            let guarded = steps[i + 1..].iter().find(|s| s.mutates).map(|s| s.n);
            if let (Some(b), Some(n)) = (steps[i].blast_radius.as_mut(), guarded) {
                b.step = n;
            }
        }
    }
    Ok(Plan {
        runbook: runbook.id.clone(),
        env: env.name.clone(),
        mutates: steps.iter().any(|s| s.mutates),
        steps,
    })
}

/// A planned step before numbering, with the play it runs (so a list-hosts step can be
/// derived from it).
struct Draft {
    step: PlannedStep,
    play: Option<RenderedPlay>,
}

#[derive(Debug, Clone)]
struct RenderedPlay {
    playbook: String,
    extra_vars: Vec<(String, String)>,
    tags: Vec<String>,
    limit: Option<String>,
}

struct Planner<'a> {
    runbook: &'a Runbook,
    env: &'a PlanEnv,
    topo: &'a dyn Topology,
}

impl Planner<'_> {
    /// The health gate between hosts, if this plan gets one: where the runbook declares
    /// `between_hosts:`, and on every `serial: 1` target in a protected environment (the
    /// defaults, if the runbook says nothing). A single-host target has no next host.
    fn between_hosts(&self) -> Option<(BetweenHosts, GateSource)> {
        let t = self.runbook.target.as_ref().filter(|t| !t.single)?;
        let source = if self.env.protected {
            GateSource::Policy
        } else {
            GateSource::Runbook
        };
        match (t.between_hosts, self.env.protected && t.serial) {
            (Some(bh), _) => Some((bh, source)),
            (None, true) => Some((BetweenHosts::default(), GateSource::Policy)),
            (None, false) => None,
        }
    }

    fn health_gate(
        &self,
        after: &str,
        before: &str,
        bh: BetweenHosts,
        source: GateSource,
    ) -> Draft {
        let gate = HealthGate {
            after: after.to_string(),
            before: before.to_string(),
            stable_for_s: bh.stable_for_s,
            soak_s: bh.soak_s,
        };
        Draft {
            step: PlannedStep {
                n: 0,
                id: "health-gate".into(),
                kind: StepKind::KubeWait,
                host: Some(before.to_string()),
                mutates: false,
                gate: None,
                command: None,
                expect: Some(Expect {
                    condition: Some(gate.condition()),
                    timeout_s: Some(bh.timeout_s),
                    ..Expect::default()
                }),
                title: format!(
                    "Health gate before {before} (after {after}): every node Ready, every cilium-agent Ready and dialling the VIP {}, /readyz/etcd through the API endpoint, the VIP lease held with its holder unchanged for {} s, then {} s of soak",
                    self.env.vip, bh.stable_for_s, bh.soak_s
                ),
                cwd: None,
                source: Some(source),
                blast_radius: None,
                declared_read_only: None,
            },
            play: None,
        }
    }

    /// The look at what `host` carries, before a step that takes it away.
    fn disruption_look(&self, step: &Step, host: &str, title: &str) -> Draft {
        let look = NodeDisruption {
            node: host.to_string(),
        };
        Draft {
            step: PlannedStep {
                n: 0,
                id: format!("{}.disrupts", step.id),
                kind: StepKind::KubeWait,
                host: Some(host.to_string()),
                mutates: false,
                gate: None,
                command: None,
                expect: Some(Expect {
                    condition: Some(look.condition()),
                    timeout_s: Some(60),
                    ..Expect::default()
                }),
                title: format!(
                    "What {host} carries before \"{title}\" takes it away: the VIP lease, agents that dial it alone, its etcd member"
                ),
                cwd: None,
                source: Some(GateSource::Runbook),
                blast_radius: None,
                declared_read_only: None,
            },
            play: None,
        }
    }

    /// An environment role or a literal group name, as a group name.
    fn group_of(&self, name: &str) -> Result<String, PlanError> {
        let role = |r: &str| PlanError::NoRoleGroup {
            runbook: self.runbook.id.clone(),
            env: self.env.name.clone(),
            role: r.to_string(),
        };
        match name {
            "servers" => Ok(self.env.servers.clone()),
            "primary" => Ok(self.env.primary_group.clone()),
            "vpn_gateways" => self.env.vpn_gateways.clone().ok_or_else(|| role(name)),
            "agents" => self.env.agents.clone().ok_or_else(|| role(name)),
            _ => {
                debug_assert!(!ENV_ROLES.contains(&name));
                Ok(name.to_string())
            }
        }
    }

    fn resolve_target(&self, target: &Target) -> Result<Vec<String>, PlanError> {
        let rb = || self.runbook.id.clone();
        let group = self.group_of(&target.group)?;
        let members = self
            .topo
            .hosts_in(&group)
            .ok_or_else(|| PlanError::UnknownGroup {
                runbook: rb(),
                group: group.clone(),
            })?;
        if members.is_empty() {
            return Err(PlanError::EmptyTarget {
                runbook: rb(),
                group,
            });
        }
        let hosts = if target.single {
            // Where exactly one host qualifies there is nothing to choose: the plan takes
            // it (its host-set confirmation, typed, still comes first in the run).
            let only = match members.as_slice() {
                [one] => Some(one),
                _ => None,
            };
            let Some(host) = self.env.host.as_ref().or(only) else {
                return Err(PlanError::NoHostChosen {
                    runbook: rb(),
                    group,
                    hosts: members.join(", "),
                });
            };
            if !members.contains(host) {
                return Err(PlanError::HostNotInTarget {
                    runbook: rb(),
                    host: host.clone(),
                    group,
                });
            }
            vec![host.clone()]
        } else if let Some(order) = target
            .order
            .as_ref()
            .and_then(|o| o.for_env(&self.env.name))
        {
            // The order must name exactly the target's hosts: nothing silently added or dropped.
            for host in order {
                if !members.contains(host) {
                    return Err(PlanError::OrderNamesOutsider {
                        runbook: rb(),
                        host: host.clone(),
                        group,
                    });
                }
            }
            for host in &members {
                if !order.contains(host) {
                    return Err(PlanError::OrderMissingHost {
                        runbook: rb(),
                        env: self.env.name.clone(),
                        host: host.clone(),
                        group,
                    });
                }
            }
            order.to_vec()
        } else if target.order == Some(Order::ServersFirst) {
            // The environment's servers group as the inventory resolves it: a target that
            // holds none of them is ordered as it is, and says nothing wrong by that.
            let servers = self.topo.hosts_in(&self.env.servers).unwrap_or_default();
            let (first, rest): (Vec<String>, Vec<String>) =
                members.into_iter().partition(|h| servers.contains(h));
            first.into_iter().chain(rest).collect()
        } else {
            members
        };
        if let Some(required) = &target.require_member_of {
            for host in &hosts {
                let group = if self.topo.hosts_in(required).is_some() {
                    required.clone()
                } else {
                    match self.topo.host_var(host, required) {
                        Some(serde_json::Value::String(g)) => g,
                        _ => {
                            return Err(PlanError::RequiredGroupUnknown {
                                runbook: rb(),
                                name: required.clone(),
                                host: host.clone(),
                            })
                        }
                    }
                };
                if !self.topo.is_member(host, &group) {
                    return Err(PlanError::NotAMember {
                        runbook: rb(),
                        host: host.clone(),
                        group,
                        required: format!("require_member_of: {required}"),
                    });
                }
            }
        }
        Ok(hosts)
    }

    /// `vars.NAME` for `host`: the inventory with the roles of the runbook's playbooks, then
    /// the runbook's `defaults:`. Undefined: an error naming the variable, where the
    /// runbook uses it and every place searched.
    fn play_var(
        &self,
        step: &Step,
        host: &str,
        name: &str,
    ) -> Result<Option<serde_json::Value>, PlanError> {
        let playbooks = self.runbook.playbooks();
        let found = self
            .topo
            .play_var(host, name, &playbooks)
            .map_err(|message| PlanError::Template {
                runbook: self.runbook.id.clone(),
                step: step.id.clone(),
                message,
            })?;
        Ok(found.or_else(|| self.runbook.defaults.get(name).cloned()))
    }

    /// The error for `vars.NAME` that no layer defines and a template needs.
    fn undefined(&self, step: &Step, host: &str, names: &[String]) -> PlanError {
        let playbooks = self.runbook.playbooks();
        let name = names.first().map(String::as_str).unwrap_or_default();
        let (line, col) = self.runbook.var_marks.get(name).copied().unwrap_or((1, 1));
        let mut searched = self.topo.searched(host, &playbooks);
        searched.push(format!("the runbook's defaults: ({})", self.runbook.source));
        PlanError::UndefinedVar(Box::new(UndefinedVar {
            file: self.runbook.source.clone(),
            line,
            col,
            runbook: self.runbook.id.clone(),
            step: step.id.clone(),
            var: name.to_string(),
            vars: names.to_vec(),
            host: host.to_string(),
            searched: searched.join("; "),
        }))
    }

    /// Render a template string in strict mode: an undefined variable is an error.
    fn render(&self, step: &Step, text: &str, host: Option<&str>) -> Result<String, PlanError> {
        self.render_as(step, text, host, Splice::Text)
    }

    /// Render a template whose result a shell parses: every value is one shell word.
    fn render_shell(
        &self,
        step: &Step,
        text: &str,
        host: Option<&str>,
    ) -> Result<String, PlanError> {
        self.render_as(step, text, host, Splice::Shell)
    }

    fn render_as(
        &self,
        step: &Step,
        text: &str,
        host: Option<&str>,
        splice: Splice,
    ) -> Result<String, PlanError> {
        let err = |message: String| PlanError::Template {
            runbook: self.runbook.id.clone(),
            step: step.id.clone(),
            message,
        };
        if !text.contains("{{") && !text.contains("{%") && !text.contains("{#") {
            return Ok(text.to_string());
        }
        // Sorted: the variables are looked up, and named when missing, in one order on
        // every run (the template parser hands them over in a hash set's).
        let used: std::collections::BTreeSet<String> =
            template_vars(text).map_err(err)?.into_iter().collect();
        let e = self.env;
        // A live object's name the integrator could not resolve: said with its reason.
        for (key, why) in &e.names.unresolved {
            if used.contains(&format!("env.{key}")) {
                return Err(err(format!(
                    "`env.{key}` is not known for environment `{}`: {why}",
                    e.name
                )));
            }
        }
        let mut env_map = serde_json::Map::new();
        env_map.insert("name".into(), e.name.clone().into());
        env_map.insert("servers".into(), e.servers.clone().into());
        if let Some(g) = &e.vpn_gateways {
            env_map.insert("vpn_gateways".into(), g.clone().into());
        }
        if let Some(g) = &e.agents {
            env_map.insert("agents".into(), g.clone().into());
        }
        for (key, value) in [
            ("kube_vip_lease", &e.names.kube_vip_lease),
            ("vpn_unit", &e.names.vpn_unit),
            ("vpn_interface", &e.names.vpn_interface),
            ("vpn_exit_ip_url", &e.names.vpn_exit_ip_url),
        ] {
            if let Some(v) = value {
                env_map.insert(key.into(), v.clone().into());
            }
        }
        env_map.insert("primary_group".into(), e.primary_group.clone().into());
        if let Some(g) = &e.secondary_group {
            env_map.insert("secondary_group".into(), g.clone().into());
        }
        env_map.insert("vip".into(), e.vip.clone().into());
        env_map.insert("api_port".into(), e.api_port.into());
        let mut ctx = serde_json::Map::new();
        // `vars.X` no layer defines: named if the template really needs it.
        let mut missing: Vec<String> = Vec::new();
        ctx.insert("env".into(), env_map.into());
        if let Some(h) = host {
            ctx.insert("host".into(), h.into());
            let mut vars = serde_json::Map::new();
            for name in used.iter().filter_map(|v| v.strip_prefix("vars.")) {
                let name = name.split('.').next().unwrap_or(name);
                match self.play_var(step, h, name)? {
                    Some(v) => {
                        vars.insert(name.to_string(), v);
                    }
                    None if !missing.iter().any(|m| m == name) => missing.push(name.to_string()),
                    None => {}
                }
            }
            ctx.insert("vars".into(), vars.into());
        }
        let mut jenv = minijinja::Environment::new();
        jenv.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        // A runbook's template is repo data too: bounded like the inventory's values.
        jenv.set_fuel(Some(crate::text::MAX_FUEL));
        jenv.add_filter(SHELL_RAW, |v: minijinja::Value| {
            minijinja::Value::from_object(RawShell(v.to_string()))
        });
        if splice == Splice::Shell {
            jenv.set_formatter(shell_formatter);
        }
        let value = minijinja::Value::from_serialize(serde_json::Value::Object(ctx));
        jenv.render_str(text, value).map_err(|e| {
            if e.kind() == minijinja::ErrorKind::UndefinedError {
                if let (Some(h), false) = (host, missing.is_empty()) {
                    missing.sort();
                    return self.undefined(step, h, &missing);
                }
            }
            if e.kind() == minijinja::ErrorKind::OutOfFuel {
                return err(format!(
                    "cannot render `{text}`: {}",
                    crate::text::out_of_fuel_reason()
                ));
            }
            let detail = e
                .detail()
                .map(str::to_string)
                .unwrap_or_else(|| e.kind().to_string());
            err(format!("cannot render `{text}`: {detail}"))
        })
    }

    fn render_play(
        &self,
        step: &Step,
        play: &Play,
        host: Option<&str>,
    ) -> Result<RenderedPlay, PlanError> {
        let extra_vars = play
            .extra_vars
            .iter()
            .map(|(k, v)| Ok((k.clone(), self.render(step, v, host)?)))
            .collect::<Result<Vec<_>, PlanError>>()?;
        let tags = play
            .tags
            .iter()
            .map(|t| self.render(step, t, host))
            .collect::<Result<Vec<_>, _>>()?;
        let limit = match (&play.limit, host) {
            (Some(l), _) => Some(self.render(step, l, host)?),
            (None, Some(h)) => Some(h.to_string()),
            (None, None) => None,
        };
        Ok(RenderedPlay {
            playbook: self.render(step, &play.playbook, host)?,
            extra_vars,
            tags,
            limit,
        })
    }

    fn ansible_argv(&self, play: &RenderedPlay, flags: &[&str]) -> Vec<String> {
        let mut argv = vec!["ansible-playbook".to_string()];
        argv.extend(inventory_args(&self.env.inventories));
        argv.push(play.playbook.clone());
        for (k, v) in &play.extra_vars {
            argv.push("-e".into());
            argv.push(extra_var_arg(k, v));
        }
        if let Some(limit) = &play.limit {
            argv.push("--limit".into());
            argv.push(limit.clone());
        }
        if !play.tags.is_empty() {
            argv.push("--tags".into());
            argv.push(play.tags.join(","));
        }
        argv.extend(flags.iter().map(|f| f.to_string()));
        argv
    }

    /// The hosts a list-hosts run must show: its limit's hosts, else the target's.
    fn expected_hosts(
        &self,
        step_id: &str,
        limit: Option<&str>,
        target_hosts: &[String],
    ) -> Result<Vec<String>, PlanError> {
        let mut out: Vec<String> = Vec::new();
        match limit {
            Some(limit) => {
                for item in limit
                    .split([',', ':'])
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                {
                    let hosts = self
                        .topo
                        .hosts_in(item)
                        .unwrap_or_else(|| vec![item.to_string()]);
                    for h in hosts {
                        if !out.contains(&h) {
                            out.push(h);
                        }
                    }
                }
            }
            None if !target_hosts.is_empty() => out = target_hosts.to_vec(),
            None => {
                return Err(PlanError::NoExpectedHosts {
                    runbook: self.runbook.id.clone(),
                    step: step_id.to_string(),
                })
            }
        }
        Ok(out)
    }

    fn list_hosts_step(
        &self,
        id: String,
        play: &RenderedPlay,
        host: Option<&str>,
        expected: Vec<String>,
    ) -> Draft {
        let title = match &play.limit {
            Some(limit) => format!("Confirm the hosts of {} --limit {limit}", play.playbook),
            None => format!("Confirm the hosts of {}", play.playbook),
        };
        Draft {
            step: PlannedStep {
                n: 0,
                id,
                kind: StepKind::ListHosts,
                host: host.map(str::to_string),
                mutates: false,
                gate: Some(Gate::ConfirmHosts {
                    expected: expected.clone(),
                }),
                command: Some(self.ansible_argv(play, &["--list-hosts"])),
                expect: Some(Expect {
                    hosts: Some(expected),
                    ..Expect::default()
                }),
                title,
                cwd: Some(self.env.ansible_dir.clone()),
                source: Some(GateSource::Runbook),
                blast_radius: None,
                declared_read_only: None,
            },
            play: Some(play.clone()),
        }
    }

    fn expand(
        &self,
        step: &Step,
        host: Option<&String>,
        target_hosts: &[String],
        out: &mut Vec<Draft>,
    ) -> Result<(), PlanError> {
        let h = host.map(String::as_str);
        let title = match &step.title {
            Some(t) => Some(self.render(step, t, h)?),
            None => None,
        };
        if let (Some(Disrupts::Node), Some(h)) = (step.disrupts, h) {
            let shown = title.clone().unwrap_or_else(|| step.id.clone());
            out.push(self.disruption_look(step, h, &shown));
        }
        let base = |kind: StepKind, mutates: bool, default_title: String| PlannedStep {
            n: 0,
            id: step.id.clone(),
            kind,
            host: host.cloned(),
            mutates,
            gate: None,
            command: None,
            expect: None,
            title: title.clone().unwrap_or(default_title),
            cwd: None,
            source: None,
            blast_radius: None,
            declared_read_only: None,
        };
        match &step.spec {
            StepSpec::ListHosts {
                play,
                expect_hosts,
                timeout_s,
            } => {
                let play = self.render_play(step, play, h)?;
                let expected = match expect_hosts {
                    Some(list) => list
                        .iter()
                        .map(|x| self.render(step, x, h))
                        .collect::<Result<Vec<_>, _>>()?,
                    None => self.expected_hosts(&step.id, play.limit.as_deref(), target_hosts)?,
                };
                let mut draft = self.list_hosts_step(step.id.clone(), &play, h, expected);
                if let Some(t) = title {
                    draft.step.title = t;
                }
                if let Some(e) = draft.step.expect.as_mut() {
                    e.timeout_s = *timeout_s;
                }
                out.push(draft);
            }
            StepSpec::Ansible {
                play,
                check_first,
                check_only,
                timeout_s,
            } => {
                // Only the runbook's own limit is planned; the default is the executor's.
                let limit = timeout_s.map(|t| Expect {
                    timeout_s: Some(t),
                    ..Expect::default()
                });
                let play = self.render_play(step, play, h)?;
                let on = play.limit.clone().unwrap_or_else(|| "its hosts".into());
                // The policy: in a protected environment every mutating play is previewed
                // and approved, whether or not the runbook asks for it.
                let by_policy = self.env.protected && !*check_only;
                let check_first = &(*check_first || by_policy);
                let source = Some(if by_policy {
                    GateSource::Policy
                } else {
                    GateSource::Runbook
                });
                if *check_first || *check_only {
                    let id = if *check_first {
                        format!("{}.check", step.id)
                    } else {
                        step.id.clone()
                    };
                    // What the preview runs for real is derived from the playbook; the
                    // runbook's `check:`/`read_only:` never overrides it.
                    let runs = self.topo.check_runs(&play.playbook);
                    let mutates = !runs.real.is_empty();
                    let mut s = base(StepKind::Ansible, mutates, String::new());
                    s.id = id;
                    s.title = preview_title(&title, &play.playbook, &on);
                    if !runs.reviewed.is_empty() {
                        s.title = format!(
                            "{} [check_mode: false probes {}]",
                            s.title,
                            runs.reviewed.join("; ")
                        );
                    }
                    s.command = Some(self.ansible_argv(&play, &["--check", "--diff"]));
                    s.cwd = Some(self.env.ansible_dir.clone());
                    s.expect = limit.clone();
                    if *check_first {
                        s.source = source;
                    }
                    if mutates {
                        let first = &runs.real[0];
                        s.title = format!(
                            "{} [RUNS FOR REAL under --check: {}{}]",
                            s.title,
                            first.line(),
                            match runs.real.len() {
                                1 => String::new(),
                                k => format!(" and {} more", k - 1),
                            }
                        );
                        let mut radius = self.play_radius(&s.id, &play, h, target_hosts);
                        radius.summary = format!(
                            "the preview of {} runs {} task(s) for real under --check: {}",
                            play.playbook,
                            runs.real.len(),
                            radius.summary
                        );
                        radius.runs_for_real = runs.real.clone();
                        // The preview mutates: it gets the approval a mutation gets,
                        // before it runs.
                        let mut g = base(StepKind::Gate, false, String::new());
                        g.id = format!("{}.approve-preview", s.id);
                        g.title = format!(
                            "Approve running {} under --check on {on}: {} task(s) in it run for real",
                            play.playbook,
                            runs.real.len()
                        );
                        g.gate = Some(Gate::ApproveDiff);
                        g.source = Some(if self.env.protected {
                            GateSource::Policy
                        } else {
                            GateSource::Runbook
                        });
                        g.blast_radius = Some(radius.clone());
                        // Its play, so the host set is confirmed before this approval
                        // (insert_safety_steps puts the list-hosts ahead of it).
                        out.push(Draft {
                            step: g,
                            play: Some(play.clone()),
                        });
                        radius.step = 0;
                        s.blast_radius = Some(radius);
                    }
                    out.push(Draft {
                        step: s,
                        play: Some(play.clone()),
                    });
                }
                if *check_first {
                    let mut s = base(StepKind::Gate, false, String::new());
                    s.id = format!("{}.approve", step.id);
                    s.title = approve_title(&title, &play.playbook, &on);
                    s.gate = Some(Gate::ApproveDiff);
                    s.source = source;
                    s.blast_radius = Some(self.play_radius(&step.id, &play, h, target_hosts));
                    out.push(Draft {
                        step: s,
                        play: None,
                    });
                }
                if !*check_only {
                    let mut s = base(
                        StepKind::Ansible,
                        true,
                        format!("Run {} on {on}", play.playbook),
                    );
                    s.command = Some(self.ansible_argv(&play, &[]));
                    s.cwd = Some(self.env.ansible_dir.clone());
                    s.expect = limit;
                    out.push(Draft {
                        step: s,
                        play: Some(play),
                    });
                }
            }
            StepSpec::Ssh {
                command,
                expect,
                timeout_s,
            } => {
                let raw_splice = command.contains(SHELL_RAW);
                let command = self.render_shell(step, command, h)?;
                let host = h.unwrap_or_default().to_string();
                let mut s = base(
                    StepKind::Ssh,
                    step.mutates,
                    format!("ssh {host}: {command}"),
                );
                if raw_splice {
                    // The operator sees that this command splices repo text as shell.
                    s.title = format!("{} [splices raw shell: {SHELL_RAW}]", s.title);
                }
                let opt =
                    |v: &Option<String>| v.as_ref().map(|t| self.render(step, t, h)).transpose();
                s.expect = Some(Expect {
                    exit_code: expect.exit_code,
                    stdout_equals: opt(&expect.stdout_equals)?,
                    stdout_contains: opt(&expect.stdout_contains)?,
                    stdout_not_contains: opt(&expect.stdout_not_contains)?,
                    timeout_s: *timeout_s,
                    ..Expect::default()
                });
                s.command = Some(vec!["ssh".into(), host.clone(), command]);
                // A shipped runbook's word is reviewed with the binary; a user's is not.
                if !self.runbook.shipped {
                    s.declared_read_only = step
                        .declared_read_only_line
                        .map(|line| format!("{}:{line}", self.runbook.source));
                }
                if step.mutates {
                    self.policy_typed_confirm(&s, vec![host], out);
                }
                out.push(Draft {
                    step: s,
                    play: None,
                });
            }
            // The three waiting kinds plan alike: a read-only step with its named condition.
            StepSpec::KubeWait {
                condition,
                timeout_s,
            }
            | StepSpec::RepoWait {
                condition,
                timeout_s,
            }
            | StepSpec::VpnWait {
                condition,
                timeout_s,
            } => {
                let condition = self.render(step, condition, h)?;
                let (kind, title) = match &step.spec {
                    StepSpec::RepoWait { .. } => (
                        StepKind::RepoWait,
                        format!("Wait until the repo says {condition} (re-read; never edited)"),
                    ),
                    StepSpec::VpnWait { .. } => (
                        StepKind::VpnWait,
                        format!("Wait until the live VPN gateways show {condition}"),
                    ),
                    _ => (StepKind::KubeWait, format!("Wait until {condition}")),
                };
                let mut s = base(kind, false, title);
                s.expect = Some(Expect {
                    condition: Some(condition),
                    timeout_s: Some(*timeout_s),
                    ..Expect::default()
                });
                out.push(Draft {
                    step: s,
                    play: None,
                });
            }
            StepSpec::Probe {
                tcp,
                timeout_s,
                on_fail,
            } => {
                let tcp = self.render(step, tcp, h)?;
                let on_fail = on_fail
                    .as_ref()
                    .map(|t| self.render(step, t, h))
                    .transpose()?;
                let mut s = base(StepKind::Probe, false, format!("Probe tcp {tcp}"));
                s.expect = Some(Expect {
                    tcp: Some(tcp),
                    timeout_s: *timeout_s,
                    on_fail,
                    ..Expect::default()
                });
                out.push(Draft {
                    step: s,
                    play: None,
                });
            }
            StepSpec::Gate(gate) => {
                let (gate, default_title) = match gate {
                    GateSpec::OperatorPresent => {
                        (Gate::OperatorPresent, "Confirm you are present".to_string())
                    }
                    GateSpec::TypedConfirm(phrase) => {
                        let phrase = match phrase {
                            Some(p) => self.render(step, p, h)?,
                            None => self.env.name.clone(),
                        };
                        let t = format!("Type `{phrase}` to go on");
                        (Gate::TypedConfirm { phrase }, t)
                    }
                    GateSpec::Authorise(flag) => (
                        Gate::Authorise { flag: flag.clone() },
                        format!("Authorise {flag}=true"),
                    ),
                };
                let mut s = base(StepKind::Gate, false, default_title);
                s.gate = Some(gate);
                s.source = Some(GateSource::Runbook);
                out.push(Draft {
                    step: s,
                    play: None,
                });
            }
            StepSpec::Manual => {
                let mut s = base(
                    StepKind::Manual,
                    step.mutates,
                    format!("Manual step {}", step.id),
                );
                s.gate = Some(Gate::ConfirmDone);
                s.source = Some(GateSource::Runbook);
                if step.mutates {
                    let hosts = match host {
                        Some(h) => vec![h.clone()],
                        None => target_hosts.to_vec(),
                    };
                    self.policy_typed_confirm(&s, hosts, out);
                }
                out.push(Draft {
                    step: s,
                    play: None,
                });
            }
            StepSpec::FluxReconcile { object, namespace } => {
                let object = self.render(step, object, h)?;
                let (kind, name) = object
                    .split_once('/')
                    .unwrap_or(("kustomization", object.as_str()));
                let mut argv = vec![
                    "flux".to_string(),
                    "reconcile".into(),
                    kind.into(),
                    name.into(),
                ];
                if let Some(ns) = namespace {
                    argv.push("-n".into());
                    argv.push(self.render(step, ns, h)?);
                }
                argv.push("--with-source".into());
                if let Some(k) = &self.env.kubeconfig {
                    argv.push("--kubeconfig".into());
                    argv.push(k.clone());
                }
                let mut s = base(
                    StepKind::FluxReconcile,
                    true,
                    format!("Flux reconciles {object}"),
                );
                s.command = Some(argv);
                if self.env.protected {
                    let ns = match namespace {
                        Some(ns) => Some(self.render(step, ns, h)?),
                        None => None,
                    };
                    self.policy_flux_preview(&step.id, &object, ns.as_deref(), host, out);
                }
                out.push(Draft {
                    step: s,
                    play: None,
                });
            }
        }
        Ok(())
    }

    /// What an ansible step can touch: the hosts its play runs on (the step's own host,
    /// else its limit's or the target's hosts).
    fn play_radius(
        &self,
        step_id: &str,
        play: &RenderedPlay,
        host: Option<&str>,
        target_hosts: &[String],
    ) -> BlastRadius {
        let hosts = match host {
            Some(h) => vec![h.to_string()],
            None => self
                .expected_hosts(step_id, play.limit.as_deref(), target_hosts)
                .unwrap_or_default(),
        };
        let summary = match hosts.len() {
            0 => format!(
                "{} changes the hosts its plays target in {} (the list-hosts step confirmed them)",
                play.playbook, self.env.name
            ),
            1 => format!(
                "{} changes 1 host in {}: {}",
                play.playbook, self.env.name, hosts[0]
            ),
            k => format!(
                "{} changes {k} hosts in {} in one run: {}",
                play.playbook,
                self.env.name,
                hosts.join(", ")
            ),
        };
        BlastRadius {
            step: 0,
            hosts,
            nodes: None,
            summary,
            runs_for_real: Vec::new(),
        }
    }

    /// The policy for a mutating step with no preview in a protected environment: the
    /// operator types the environment's name and how many hosts the step touches.
    fn policy_typed_confirm(
        &self,
        guarded: &PlannedStep,
        hosts: Vec<String>,
        out: &mut Vec<Draft>,
    ) {
        if !self.env.protected {
            return;
        }
        let env = &self.env.name;
        let (phrase, summary) = if hosts.is_empty() {
            (
                env.clone(),
                format!(
                    "{} has no preview; it changes {env} on no host hk-console can count",
                    guarded.title
                ),
            )
        } else {
            (
                format!("{env} {}", hosts.len()),
                format!(
                    "{} has no preview; it changes {} host(s) in {env}: {}",
                    guarded.title,
                    hosts.len(),
                    hosts.join(", ")
                ),
            )
        };
        out.push(Draft {
            step: PlannedStep {
                n: 0,
                id: format!("{}.confirm", guarded.id),
                kind: StepKind::Gate,
                host: guarded.host.clone(),
                mutates: false,
                title: format!("Type `{phrase}` (the environment and the host count): {summary}"),
                gate: Some(Gate::TypedConfirm { phrase }),
                command: None,
                expect: None,
                cwd: None,
                source: Some(GateSource::Policy),
                blast_radius: Some(BlastRadius {
                    step: 0,
                    hosts,
                    nodes: None,
                    summary,
                    runs_for_real: Vec::new(),
                }),
                declared_read_only: None,
            },
            play: None,
        });
    }

    /// The policy for a Flux reconcile in a protected environment: a read-only look at the
    /// object (its revision now and the one it will reconcile to, the DaemonSets it rolls
    /// and their maxUnavailable), then an approval that states how many nodes it can roll.
    fn policy_flux_preview(
        &self,
        step_id: &str,
        object: &str,
        namespace: Option<&str>,
        host: Option<&String>,
        out: &mut Vec<Draft>,
    ) {
        let env = &self.env.name;
        let servers = self.topo.hosts_in(&self.env.servers).unwrap_or_default();
        let ns = namespace.unwrap_or("flux-system");
        let condition = format!("{FLUX_PREVIEW} {object} {ns}");
        out.push(Draft {
            step: PlannedStep {
                n: 0,
                id: format!("{step_id}.preview"),
                kind: StepKind::KubeWait,
                host: host.cloned(),
                mutates: false,
                gate: None,
                command: None,
                expect: Some(Expect {
                    condition: Some(condition),
                    timeout_s: Some(60),
                    ..Expect::default()
                }),
                title: format!(
                    "Preview the reconcile of {object} in {ns}: its revision now and next, the DaemonSets it rolls and their maxUnavailable"
                ),
                cwd: None,
                source: Some(GateSource::Policy),
                blast_radius: None,
                declared_read_only: None,
            },
            play: None,
        });
        let summary = format!(
            "Flux reconciles {object} in {env}: the DaemonSets it rolls restart their pods on up to {} nodes ({}); the preview says which and how many at a time",
            servers.len(),
            servers.join(", ")
        );
        out.push(Draft {
            step: PlannedStep {
                n: 0,
                id: format!("{step_id}.approve"),
                kind: StepKind::Gate,
                host: host.cloned(),
                mutates: false,
                gate: Some(Gate::ApproveDiff),
                command: None,
                expect: None,
                title: format!("Approve the reconcile of {object} in {env}"),
                cwd: None,
                source: Some(GateSource::Policy),
                blast_radius: Some(BlastRadius {
                    step: 0,
                    hosts: Vec::new(),
                    nodes: Some(servers.len()),
                    summary,
                    runs_for_real: Vec::new(),
                }),
                declared_read_only: None,
            },
            play: None,
        });
    }

    /// The planner's own safety steps: the operator-present gate where the environment asks
    /// for one, and a list-hosts limited to each host before anything runs on it.
    /// Before the first step that touches a server (its preview, its approval or its
    /// change), in a runbook that rolls over the servers or takes a server away
    /// (`disrupts: node`), on an environment with more than one server: a read-only look at
    /// who leads etcd and where leadership would go, the gate policy's approval in a
    /// protected environment, then the move itself, which does nothing where the server
    /// does not lead when it runs (issue 39: the leader moved first).
    fn insert_leader_moves(&self, steps: Vec<Draft>) -> Vec<Draft> {
        let servers = self.topo.hosts_in(&self.env.servers).unwrap_or_default();
        if servers.len() < 2 {
            return steps;
        }
        let rolls_servers = self
            .runbook
            .target
            .as_ref()
            .and_then(|t| self.group_of(&t.group).ok())
            .is_some_and(|g| g == self.env.servers);
        let disrupted: HashSet<String> = steps
            .iter()
            .filter_map(|d| {
                let c = d.step.expect.as_ref()?.condition.as_deref()?;
                match NodeDisruption::parse(c) {
                    Some(Ok(look)) => Some(look.node),
                    _ => None,
                }
            })
            .collect();
        let changed: HashSet<String> = steps
            .iter()
            .filter(|d| d.step.mutates)
            .filter_map(|d| d.step.host.clone())
            .collect();
        let wanted = |h: &str| {
            servers.iter().any(|s| s == h)
                && changed.contains(h)
                && (rolls_servers || disrupted.contains(h))
        };
        let touches = |s: &PlannedStep| {
            s.mutates
                || (s.kind == StepKind::Gate && s.blast_radius.is_some())
                || (s.kind == StepKind::Ansible
                    && s.command
                        .as_ref()
                        .is_some_and(|c| c.iter().any(|a| a == "--check")))
        };
        // The servers in the order this plan first touches them.
        let mut order: Vec<String> = Vec::new();
        for d in &steps {
            if let Some(h) = &d.step.host {
                if touches(&d.step) && wanted(h) && !order.contains(h) {
                    order.push(h.clone());
                }
            }
        }
        let mut done: HashSet<String> = HashSet::new();
        let mut out: Vec<Draft> = Vec::with_capacity(steps.len() + 3 * servers.len() + 1);
        for d in steps {
            if let Some(h) = d.step.host.clone() {
                if touches(&d.step) && wanted(&h) && done.insert(h.clone()) {
                    if done.len() == 1 {
                        out.push(self.snapshot_first(&order));
                    }
                    let later = order
                        .iter()
                        .skip_while(|x| **x != h)
                        .skip(1)
                        .cloned()
                        .collect::<Vec<_>>();
                    out.extend(self.leader_move(&h, &servers, &later));
                }
            }
            out.push(d);
        }
        out
    }

    /// The snapshot of etcd before the first of `changed` (the servers this plan changes,
    /// in order): read-only for every system (etcd's snapshot API is a read; the file is
    /// written beside the run's journal, on the operator's machine, off the cluster the run
    /// changes). Going past it is a typed skip (a guard rail).
    fn snapshot_first(&self, changed: &[String]) -> Draft {
        Draft {
            step: PlannedStep {
                n: 0,
                id: "etcd-snapshot.save".into(),
                kind: StepKind::EtcdSnapshot,
                host: None,
                mutates: false,
                gate: None,
                command: None,
                expect: Some(Expect {
                    condition: Some(
                        SnapshotFirst {
                            changed: changed.to_vec(),
                        }
                        .condition(),
                    ),
                    timeout_s: Some(600),
                    ..Expect::default()
                }),
                title: format!(
                    "Save a snapshot of {}'s etcd beside this run's journal before {} is changed (etcd's snapshot API, from a caught-up member; its integrity checked)",
                    self.env.name,
                    changed.first().map(String::as_str).unwrap_or("the first server")
                ),
                cwd: None,
                source: Some(if self.env.protected {
                    GateSource::Policy
                } else {
                    GateSource::Runbook
                }),
                blast_radius: None,
                declared_read_only: None,
            },
            play: None,
        }
    }

    /// The look, (in a protected environment) the approval, and the move of etcd's
    /// leadership off `host`.
    fn leader_move(&self, host: &str, servers: &[String], later: &[String]) -> Vec<Draft> {
        let source = Some(if self.env.protected {
            GateSource::Policy
        } else {
            GateSource::Runbook
        });
        let step = |id: &str, kind: StepKind, mutates: bool, title: String| PlannedStep {
            n: 0,
            id: id.to_string(),
            kind,
            host: Some(host.to_string()),
            mutates,
            gate: None,
            command: None,
            expect: None,
            title,
            cwd: None,
            source,
            blast_radius: None,
            declared_read_only: None,
        };
        let condition = |preview: bool| {
            Some(Expect {
                condition: Some(
                    LeaderAway {
                        host: host.to_string(),
                        preview,
                        later: later.to_vec(),
                    }
                    .condition(),
                ),
                timeout_s: Some(if preview { 60 } else { 120 }),
                ..Expect::default()
            })
        };
        let mut out = Vec::new();
        let mut look = step(
            "etcd-leader.look",
            StepKind::EtcdLeader,
            false,
            format!("Who leads etcd before {host} is changed, and where leadership would move if it is {host}"),
        );
        look.expect = condition(true);
        out.push(Draft {
            step: look,
            play: None,
        });
        if self.env.protected {
            let mut g = step(
                "etcd-leader.approve",
                StepKind::Gate,
                false,
                format!(
                    "Approve moving etcd's leadership off {host} if it leads when the move runs"
                ),
            );
            g.gate = Some(Gate::ApproveDiff);
            g.blast_radius = Some(BlastRadius {
                step: 0,
                hosts: vec![host.to_string()],
                nodes: None,
                summary: format!(
                    "etcd's leadership moves off {host} (if it leads) to a caught-up member among {} (one this run is done with first, then the fastest disk): one leadership transfer, no election timeout, no member restarted",
                    servers
                        .iter()
                        .filter(|s| *s != host)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                runs_for_real: Vec::new(),
            });
            out.push(Draft {
                step: g,
                play: None,
            });
        }
        let mut mv = step(
            "etcd-leader.move",
            StepKind::EtcdLeader,
            true,
            format!("Move etcd's leadership off {host} if it leads, then verify who leads"),
        );
        mv.expect = condition(false);
        out.push(Draft {
            step: mv,
            play: None,
        });
        out
    }

    fn insert_safety_steps(
        &self,
        raw: Vec<Draft>,
        target_hosts: &[String],
    ) -> Result<Vec<Draft>, PlanError> {
        let mut out: Vec<Draft> = Vec::with_capacity(raw.len() + target_hosts.len() + 1);
        let mut listed: HashSet<Option<String>> = HashSet::new();
        let mut guarded: HashSet<Option<String>> = HashSet::new();
        let mut operator_confirmed = false;
        // Any ansible run (a --check too) or mutating step on a host first confirms the host.
        // A step bound to no host and running no play (a flux reconcile) has no host set.
        // The approval of a preview that runs tasks for real counts as that preview: its
        // hosts are confirmed before the operator is asked to let it run.
        let eligible_step = |d: &Draft| {
            let s = &d.step;
            let approves_preview = s.kind == StepKind::Gate && d.play.is_some();
            s.kind == StepKind::Ansible || approves_preview || (s.mutates && s.host.is_some())
        };
        for (i, draft) in raw.iter().enumerate() {
            let draft = Draft {
                step: draft.step.clone(),
                play: draft.play.clone(),
            };
            let s = &draft.step;
            if s.gate == Some(Gate::OperatorPresent) {
                operator_confirmed = true;
            }
            if s.mutates && self.env.operator_present && !operator_confirmed {
                out.push(Draft {
                    step: PlannedStep {
                        n: 0,
                        id: "operator-present".into(),
                        kind: StepKind::Gate,
                        host: None,
                        mutates: false,
                        gate: Some(Gate::OperatorPresent),
                        command: None,
                        expect: None,
                        title: format!(
                            "Environment {} needs the operator present before anything mutates",
                            self.env.name
                        ),
                        cwd: None,
                        source: Some(GateSource::Policy),
                        blast_radius: None,
                        declared_read_only: None,
                    },
                    play: None,
                });
                operator_confirmed = true;
            }
            let eligible = eligible_step(&draft);
            // An etcd-leader step runs before the host's first change: the host is
            // confirmed before it, with the listing that change would have had.
            let lists_for = if s.kind == StepKind::EtcdLeader {
                raw[i + 1..]
                    .iter()
                    .find(|d| {
                        d.step.host == s.host
                            && d.step.kind != StepKind::EtcdLeader
                            && eligible_step(d)
                    })
                    .or(Some(&draft))
            } else if eligible {
                Some(&draft)
            } else {
                None
            };
            let needs_list =
                lists_for.is_some() && !guarded.contains(&s.host) && !listed.contains(&s.host);
            if lists_for.is_some() {
                guarded.insert(s.host.clone());
            }
            if needs_list {
                let listing = match lists_for {
                    Some(d) => self.listing_for(d, target_hosts)?,
                    None => None,
                };
                if let Some(listing) = listing {
                    listed.insert(listing.step.host.clone());
                    out.push(listing);
                }
            }
            if draft.step.kind == StepKind::ListHosts {
                listed.insert(draft.step.host.clone());
            }
            out.push(draft);
        }
        Ok(out)
    }
    /// The host-set confirmation that goes before `draft`, the first step that runs a play
    /// or changes its host: `--list-hosts` of its play limited to its host, or `ansible
    /// HOST --list-hosts` where it runs no play.
    fn listing_for(
        &self,
        draft: &Draft,
        target_hosts: &[String],
    ) -> Result<Option<Draft>, PlanError> {
        let s = &draft.step;
        let id = format!("{}.list-hosts", s.id);
        Ok(match (&draft.play, &s.host) {
            (Some(play), host) => {
                let expected = match host {
                    Some(h) => vec![h.clone()],
                    None => self.expected_hosts(&s.id, play.limit.as_deref(), target_hosts)?,
                };
                let mut play = play.clone();
                if let Some(h) = host {
                    play.limit = Some(h.clone());
                }
                let mut d = self.list_hosts_step(id, &play, host.as_deref(), expected);
                d.step.source = Some(GateSource::Policy);
                Some(d)
            }
            (None, Some(host)) => Some(Draft {
                step: PlannedStep {
                    n: 0,
                    id,
                    kind: StepKind::ListHosts,
                    host: Some(host.clone()),
                    mutates: false,
                    gate: Some(Gate::ConfirmHosts {
                        expected: vec![host.clone()],
                    }),
                    command: Some(
                        std::iter::once("ansible".to_string())
                            .chain(inventory_args(&self.env.inventories))
                            .chain([host.clone(), "--list-hosts".into()])
                            .collect(),
                    ),
                    expect: Some(Expect {
                        hosts: Some(vec![host.clone()]),
                        ..Expect::default()
                    }),
                    title: format!("Confirm the host {host}"),
                    cwd: Some(self.env.ansible_dir.clone()),
                    source: Some(GateSource::Policy),
                    blast_radius: None,
                    declared_read_only: None,
                },
                play: None,
            }),
            (None, None) => None,
        })
    }
}

pub use super::validate::SHELL_RAW;

/// Where a rendered template ends up: plain text, or a command line a shell parses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Splice {
    Text,
    Shell,
}

/// A value the runbook asked to splice as shell text ([`SHELL_RAW`]). Only this type
/// passes the shell formatter unquoted: minijinja's own `safe` and `escape` mark HTML
/// safety, which says nothing about a shell.
#[derive(Debug)]
struct RawShell(String);

impl minijinja::value::Object for RawShell {
    fn repr(self: &std::sync::Arc<Self>) -> minijinja::value::ObjectRepr {
        minijinja::value::ObjectRepr::Plain
    }

    fn render(self: &std::sync::Arc<Self>, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Writes every value as exactly one shell word (see [`shell_word`]), except a
/// [`RawShell`] one.
fn shell_formatter(
    out: &mut minijinja::Output<'_>,
    _state: &minijinja::State<'_, '_>,
    value: &minijinja::Value,
) -> Result<(), minijinja::Error> {
    let text = match value.downcast_object_ref::<RawShell>() {
        Some(raw) => raw.0.clone(),
        None => {
            let plain = value.to_string();
            if plain.contains('\0') {
                // A shell reads its command as a C string: a NUL would cut the command short.
                return Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    "the value holds a NUL byte, which no shell command can carry",
                ));
            }
            shell_word(&plain)
        }
    };
    out.write_str(&text)
        .map_err(|e| minijinja::Error::new(minijinja::ErrorKind::WriteFailure, e.to_string()))
}

/// `value` as one POSIX shell word: unchanged when it holds only characters no shell
/// treats specially (so plain values render exactly as before), else single-quoted, each
/// `'` written as `'"'"'`. Inside single quotes nothing is special, newlines included.
pub fn shell_word(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c));
    if plain {
        value.to_string()
    } else {
        format!("'{}'", value.replace('\'', "'\"'\"'"))
    }
}

fn preview_title(title: &Option<String>, playbook: &str, on: &str) -> String {
    match title {
        Some(t) => format!("Preview (--check --diff): {t}"),
        None => format!("Preview {playbook} on {on} (--check --diff)"),
    }
}

fn approve_title(title: &Option<String>, playbook: &str, on: &str) -> String {
    match title {
        Some(t) => format!("Approve the diff before: {t}"),
        None => format!("Approve the diff of {playbook} on {on}"),
    }
}

/// `key=value` when Ansible's key=value parser reads it back unchanged, else a JSON object.
fn extra_var_arg(key: &str, value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| !c.is_whitespace() && !matches!(c, '"' | '\'' | '\\' | '{' | '}'));
    if plain {
        format!("{key}={value}")
    } else {
        let mut map = serde_json::Map::new();
        map.insert(key.to_string(), value.into());
        serde_json::Value::Object(map).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_vars_are_key_value_unless_ansible_would_split_them() {
        assert_eq!(extra_var_arg("k3s_hosts", "k3s_prod"), "k3s_hosts=k3s_prod");
        assert_eq!(extra_var_arg("flag", "true"), "flag=true");
        assert_eq!(extra_var_arg("r", "a b"), r#"{"r":"a b"}"#);
        assert_eq!(extra_var_arg("r", ""), r#"{"r":""}"#);
        assert_eq!(extra_var_arg("r", "it's"), r#"{"r":"it's"}"#);
    }
}
