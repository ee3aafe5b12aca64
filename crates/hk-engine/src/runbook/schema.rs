//! The runbook file format (documented in docs/runbooks.md) and the validated runbook.
//!
//! Owns: [`RawRunbook`]/[`RawStep`], the serde shape of a `runbooks/*.yaml` file (flat and
//! `deny_unknown_fields`, so serde names the line:col of an unknown or mistyped field), and
//! [`Runbook`]/[`Step`], the typed form the validator produces and the planner consumes.
//! Must not: read files, render templates or look at an inventory (that is plan time).

use serde::Deserialize;

/// A runbook file as written. Every field the format knows is here; nothing else is accepted.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRunbook {
    pub id: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// The environments (names from hk-console.yaml) this runbook may be planned for.
    pub environments: Vec<String>,
    /// A read-only runbook may not hold a mutating step.
    #[serde(default)]
    pub read_only: bool,
    #[serde(default)]
    pub target: Option<RawTarget>,
    /// Values for variables no repo states, the lowest precedence of all (below role
    /// defaults): what `vars.X` is when neither the inventory nor a role says.
    #[serde(default)]
    pub defaults: Option<serde_yaml::Mapping>,
    pub steps: Vec<RawStep>,
}

/// Which hosts the per-host steps run on, and in which order.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTarget {
    /// An environment role (`servers`, `vpn_gateways`, `primary`) or an inventory group.
    pub group: String,
    /// Hosts at a time. hk-console only runs one node at a time, so only 1 is accepted.
    #[serde(default)]
    pub serial: Option<u64>,
    /// The exact order: a list of hosts, a map environment -> list of hosts, or
    /// `servers_first` (the environment's servers, then the target's other hosts).
    #[serde(default)]
    pub order: Option<RawOrder>,
    /// A group, or the name of a host var that names the group, every target must be in.
    #[serde(default)]
    pub require_member_of: Option<String>,
    /// The runbook runs on exactly one host of the group, named at plan time.
    #[serde(default)]
    pub single: bool,
    /// The health gate between one host and the next (see [`BetweenHosts`]). A `serial: 1`
    /// target in a protected environment gets it with the defaults when this is absent.
    #[serde(default)]
    pub between_hosts: Option<RawBetweenHosts>,
}

/// `target.between_hosts:` as written. Every field is optional; the defaults are in
/// [`BetweenHosts::default`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBetweenHosts {
    /// Seconds the VIP lease's holder must have been unchanged.
    #[serde(default)]
    pub stable_for_s: Option<u64>,
    /// Seconds the cluster must stay healthy, without a break, before the next host.
    #[serde(default)]
    pub soak_s: Option<u64>,
    /// Seconds the gate waits for health before it fails with the named cause.
    #[serde(default)]
    pub timeout_s: Option<u64>,
}

/// The health gate between hosts: what the cluster must show before the next host is
/// touched (docs/runbooks.md, "The health gate between hosts"). Durations are the real
/// ones; the demo divides them by its time scale when the gate runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BetweenHosts {
    pub stable_for_s: u64,
    pub soak_s: u64,
    pub timeout_s: u64,
}

impl Default for BetweenHosts {
    fn default() -> Self {
        BetweenHosts {
            stable_for_s: 30,
            soak_s: 60,
            timeout_s: 900,
        }
    }
}

impl BetweenHosts {
    /// The written fields over the defaults.
    pub fn from_raw(raw: &RawBetweenHosts) -> Self {
        let d = BetweenHosts::default();
        BetweenHosts {
            stable_for_s: raw.stable_for_s.unwrap_or(d.stable_for_s),
            soak_s: raw.soak_s.unwrap_or(d.soak_s),
            timeout_s: raw.timeout_s.unwrap_or(d.timeout_s),
        }
    }
}

/// What a step takes away from the cluster while it runs (`disrupts:` on a step).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disrupts {
    /// The step restarts, reboots or reprovisions the server it runs on: its kube-vip,
    /// its API server and its etcd member go away for a while.
    Node,
}

/// The values `disrupts:` accepts.
pub const DISRUPTS_VALUES: &[&str] = &["node"];

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RawOrder {
    List(Vec<String>),
    PerEnv(std::collections::BTreeMap<String, Vec<String>>),
    /// A named order: only [`ORDER_KEYWORDS`] are accepted.
    Keyword(String),
}

/// The named orders `target.order:` accepts.
pub const ORDER_KEYWORDS: &[&str] = &["servers_first"];

/// One step as written: a kind plus the optional fields; which fields a kind allows and
/// requires is checked by the validator (see [`KindRules`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStep {
    pub id: String,
    pub kind: String,
    #[serde(default)]
    pub title: Option<String>,
    /// `host` (once per target host) or `once`.
    #[serde(default)]
    pub scope: Option<String>,
    /// Run this step only on hosts that are members of this group or environment role.
    #[serde(default)]
    pub only_on: Option<String>,
    /// `node`: the step takes its host out of the cluster for a while (restart, reboot,
    /// reprovision); the planner puts a look at what the node carries before it.
    #[serde(default)]
    pub disrupts: Option<String>,
    // ansible / list-hosts
    #[serde(default)]
    pub playbook: Option<String>,
    #[serde(default)]
    pub extra_vars: Option<serde_yaml::Mapping>,
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    #[serde(default)]
    pub limit: Option<String>,
    #[serde(default)]
    pub check_first: Option<bool>,
    /// ansible: run only `--check --diff` (never mutates).
    #[serde(default)]
    pub check: Option<bool>,
    /// list-hosts: the exact host set expected, when it is not derived from the target.
    #[serde(default)]
    pub expect_hosts: Option<Vec<String>>,
    // ssh
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub expect: Option<RawExpect>,
    #[serde(default)]
    pub mutates: Option<bool>,
    // kube-wait
    #[serde(default)]
    pub condition: Option<String>,
    #[serde(default)]
    pub timeout_s: Option<u64>,
    // probe
    #[serde(default)]
    pub tcp: Option<String>,
    /// probe: the named cause shown when the probe fails.
    #[serde(default)]
    pub on_fail: Option<String>,
    // gate
    #[serde(default)]
    pub gate: Option<String>,
    // flux-reconcile
    #[serde(default)]
    pub object: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
}

/// What an ssh step's output must show.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExpect {
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub stdout_equals: Option<String>,
    #[serde(default)]
    pub stdout_contains: Option<String>,
    #[serde(default)]
    pub stdout_not_contains: Option<String>,
}

/// The fields of [`RawStep`] that are not common to every kind.
pub const KIND_FIELDS: &[&str] = &[
    "playbook",
    "extra_vars",
    "tags",
    "limit",
    "check_first",
    "check",
    "expect_hosts",
    "command",
    "expect",
    "mutates",
    "condition",
    "timeout_s",
    "tcp",
    "on_fail",
    "gate",
    "object",
    "namespace",
];

/// Which kind-specific fields a step kind allows and which it requires.
pub struct KindRules {
    pub kind: &'static str,
    pub allowed: &'static [&'static str],
    pub required: &'static [&'static str],
}

pub const KINDS: &[KindRules] = &[
    KindRules {
        kind: "list-hosts",
        allowed: &[
            "playbook",
            "extra_vars",
            "limit",
            "tags",
            "expect_hosts",
            "timeout_s",
        ],
        required: &["playbook"],
    },
    KindRules {
        kind: "ansible",
        allowed: &[
            "playbook",
            "extra_vars",
            "tags",
            "limit",
            "check_first",
            "check",
            "timeout_s",
        ],
        required: &["playbook"],
    },
    KindRules {
        kind: "ssh",
        allowed: &["command", "expect", "mutates", "timeout_s"],
        required: &["command", "mutates"],
    },
    KindRules {
        kind: "kube-wait",
        allowed: &["condition", "timeout_s"],
        required: &["condition", "timeout_s"],
    },
    KindRules {
        kind: "repo-wait",
        allowed: &["condition", "timeout_s"],
        required: &["condition", "timeout_s"],
    },
    KindRules {
        kind: "vpn-wait",
        allowed: &["condition", "timeout_s"],
        required: &["condition", "timeout_s"],
    },
    KindRules {
        kind: "probe",
        allowed: &["tcp", "timeout_s", "on_fail"],
        required: &["tcp"],
    },
    KindRules {
        kind: "gate",
        allowed: &["gate"],
        required: &["gate"],
    },
    KindRules {
        kind: "manual",
        allowed: &["mutates"],
        required: &[],
    },
    KindRules {
        kind: "flux-reconcile",
        allowed: &["object", "namespace"],
        required: &["object"],
    },
];

/// The named conditions a `kube-wait` step can wait for (the first word of `condition`).
/// The second column says whether the condition needs an argument (`ns/name` or a node).
pub const KUBE_CONDITIONS: &[(&str, bool)] = &[
    ("daemonset-rolled-out", true),
    ("node-ready", true),
    ("agents-dial-vip", false),
    ("lease-held", true),
];

/// The named conditions a `repo-wait` step waits for the infra repo to meet (re-read from
/// disk until it does; hk-console never edits the repo). Each takes one argument, the host.
/// `vpn-remotes-differ HOST`: HOST's `vpn_egress_gateway_pia_remote` is set, and no other
/// VPN gateway of any environment has the same one (`checks::vpn_remotes`).
pub const REPO_CONDITIONS: &[(&str, bool)] = &[("vpn-remotes-differ", true)];

/// The named conditions a `vpn-wait` step waits for on the live VPN gateways (every
/// gateway of every environment, looked at as the VPN pane does). Each takes the host.
/// `vpn-loop-gone HOST`: HOST and every other gateway are up and exit through the tunnel,
/// none shares a server and tunnel address, and none reconnected for the quiet period
/// (`checks::live::vpn::loop_gone`).
pub const VPN_CONDITIONS: &[(&str, bool)] = &[("vpn-loop-gone", true)];

/// The environment roles a target group can name instead of a literal group.
pub const ENV_ROLES: &[&str] = &["servers", "vpn_gateways", "primary", "agents"];

/// A validated runbook.
#[derive(Debug, Clone, PartialEq)]
pub struct Runbook {
    pub id: String,
    pub title: String,
    pub description: String,
    pub environments: Vec<String>,
    pub read_only: bool,
    pub target: Option<Target>,
    pub steps: Vec<Step>,
    /// `defaults:`: values for `vars.X` that no repo states (lowest precedence).
    pub defaults: std::collections::BTreeMap<String, serde_json::Value>,
    /// Where each `vars.X` is first used in the file (line, col), for messages.
    pub var_marks: std::collections::BTreeMap<String, (usize, usize)>,
    /// Where each `defaults:` key is written (line, col), for provenance.
    pub default_marks: std::collections::BTreeMap<String, (usize, usize)>,
    /// The file it came from (for messages).
    pub source: String,
    /// Shipped in the binary (reviewed with it), not read from `--runbooks`: only a shipped
    /// runbook's `mutates: false` is taken as true; a user's is the user's word, unverified.
    pub shipped: bool,
}

impl Runbook {
    /// Every playbook the runbook's steps run, as written (templated ones left out: they
    /// are named at plan time), in step order without repeats.
    pub fn playbooks(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for s in &self.steps {
            let pb = match &s.spec {
                StepSpec::ListHosts { play, .. } | StepSpec::Ansible { play, .. } => {
                    Some(&play.playbook)
                }
                _ => None,
            };
            if let Some(pb) = pb.filter(|p| !p.contains("{{") && !out.contains(p)) {
                out.push(pb.clone());
            }
        }
        out
    }
}

impl Runbook {
    /// Whether any step mutates (as written, before the planner expands anything).
    pub fn mutates(&self) -> bool {
        self.steps.iter().any(|s| s.mutates)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub group: String,
    pub order: Option<Order>,
    pub require_member_of: Option<String>,
    pub single: bool,
    /// `serial: 1` was written: the runbook is a node-by-node procedure.
    pub serial: bool,
    /// `between_hosts:` as written (defaults filled in), if it was.
    pub between_hosts: Option<BetweenHosts>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Order {
    List(Vec<String>),
    PerEnv(Vec<(String, Vec<String>)>),
    /// The target's hosts that are the environment's servers, in inventory order, then
    /// the others, in inventory order: resolved at plan time, so a host added to the
    /// inventory is in the plan, never silently left out.
    ServersFirst,
}

impl Order {
    /// The explicit order for one environment, if the runbook gives one.
    pub fn for_env(&self, env: &str) -> Option<&[String]> {
        match self {
            Order::List(hosts) => Some(hosts),
            Order::PerEnv(map) => map
                .iter()
                .find(|(e, _)| e == env)
                .map(|(_, h)| h.as_slice()),
            Order::ServersFirst => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Once per target host, host by host.
    Host,
    /// Once for the whole run, bound to no host.
    Once,
}

/// A validated step. Strings may hold template expressions rendered at plan time.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub id: String,
    pub title: Option<String>,
    pub scope: Scope,
    pub only_on: Option<String>,
    /// Derived where it can be, declared where it cannot (ssh, manual).
    pub mutates: bool,
    /// `disrupts: node`: what the step takes away from the cluster.
    pub disrupts: Option<Disrupts>,
    pub spec: StepSpec,
    /// The line of an ssh step's `mutates: false`: what the command does is the author's
    /// word there, which nothing checks (observe mode refuses it in a user runbook).
    pub declared_read_only_line: Option<usize>,
}

/// A playbook invocation: shared by `ansible` and `list-hosts`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Play {
    pub playbook: String,
    /// In source order; values are the text passed after `=` (templates allowed).
    pub extra_vars: Vec<(String, String)>,
    pub tags: Vec<String>,
    pub limit: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum StepSpec {
    ListHosts {
        play: Play,
        expect_hosts: Option<Vec<String>>,
        /// Seconds the listing may take (default `exec::LIST_HOSTS_TIMEOUT`).
        timeout_s: Option<u64>,
    },
    Ansible {
        play: Play,
        /// `--check --diff`, an approve-diff gate, then the real run.
        check_first: bool,
        /// Only `--check --diff`.
        check_only: bool,
        /// Seconds each run of the play may take (default `exec::ANSIBLE_TIMEOUT`).
        timeout_s: Option<u64>,
    },
    Ssh {
        command: String,
        expect: RawExpect,
        timeout_s: Option<u64>,
    },
    KubeWait {
        condition: String,
        timeout_s: u64,
    },
    /// Re-read the repo until `condition` (one of [`REPO_CONDITIONS`]) holds.
    RepoWait {
        condition: String,
        timeout_s: u64,
    },
    /// Look at the live VPN gateways until `condition` (one of [`VPN_CONDITIONS`]) holds.
    VpnWait {
        condition: String,
        timeout_s: u64,
    },
    Probe {
        tcp: String,
        timeout_s: Option<u64>,
        on_fail: Option<String>,
    },
    Gate(GateSpec),
    Manual,
    FluxReconcile {
        /// `<flux kind>/<name>`, e.g. `helmrelease/cilium`.
        object: String,
        namespace: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateSpec {
    OperatorPresent,
    /// No phrase: the environment's name.
    TypedConfirm(Option<String>),
    Authorise(String),
}
