//! The expanded, ordered plan of a runbook for one environment.
//!
//! Owns: the [`Plan`] type (what `hk-console plan --json` prints, what the state machine
//! walks, what the executors carry out) and the planner that expands a validated runbook
//! against the inventory's topology.
//! Must not: do IO. The topology comes in through the [`Topology`] trait.

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
    Probe,
    Gate,
    Manual,
    FluxReconcile,
}

impl StepKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::ListHosts => "list-hosts",
            StepKind::Ansible => "ansible",
            StepKind::Ssh => "ssh",
            StepKind::KubeWait => "kube-wait",
            StepKind::Probe => "probe",
            StepKind::Gate => "gate",
            StepKind::Manual => "manual",
            StepKind::FluxReconcile => "flux-reconcile",
        }
    }
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
}
