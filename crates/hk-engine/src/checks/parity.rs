//! The static parity contract (L0): per environment, the Flux overlay's `K3S_API_HOST`, the
//! Ansible `k3s_apiserver_endpoint` and the kube-vip VIP name ONE address, which is none of the
//! environment's node IPs; the endpoint is derived from the VIP and the founder's address is
//! not; the Cilium values template consumes the endpoint (and `k3s_api_port`); the Flux
//! HelmRelease takes `k8sServiceHost` from the overlay's variable; `site.yml` brings the VIP up
//! between k3s and Cilium; the API certificate carries the VIP and the founder.
//! `/dev/BLOCKED-…` device placeholders are warnings; a vault file in plaintext is a
//! violation. An absent vault file is reported only when a play needs it (a connection or
//! become password names a variable nothing defines), and then as the blocker it is; a
//! vault the servers load that no configured password opens is one too. Facts that cannot
//! be derived are reported, never guessed.
//!
//! Owns: [`ParityInput`] (the facts the rules read), the rules ([`check`], names in
//! [`rules`]), [`Finding`]s, the exit-code policy and the JSON shape.
//! [`check`] is pure: no IO, the same facts give the same findings. [`gather_view`] maps an
//! injectable view of the repo to facts (no IO of its own: files are read and overlays built
//! through the view's functions); `crate::gather::parity_input` builds that view over a
//! loaded repo (the IO lives there).
//! "Cannot tell" is a verdict of its own ([`Severity::CannotTell`], exit 2): an overlay whose
//! value nobody can state (a build kustomize refuses, a feature the builtin engine does not
//! model, a Secret it cannot read) is never called clean.
//! Must not: decrypt, render templates itself, or talk to hosts.
//!
//! The rules name no address, host or group of any particular homelab: every value they
//! compare comes from the facts.
//!
//! Why one file over 800 lines: the facts, the rules over them and the one mapping from the
//! repo view to those facts are one contract; a rule and the fact it reads are changed
//! together, and the IO is already outside (`crate::gather`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use regex::Regex;
use serde::Serialize;

// 127.0.0.1 is the k3s supervisor's load balancer on every node (port 6444), which follows
// every server: the live agent check's reading of it.
use crate::checks::live::{is_loopback_host, SUPERVISOR_LB_PORT};
use crate::repo::flux::{Engine, FluxError, HelmValue, OverlayReport, OverlayValue};

use crate::yaml::{self, Value};

/// Rule names, as they appear in findings (`[rule]`) and JSON.
pub mod rules {
    /// The overlay's K3S_API_HOST could not be resolved.
    pub const OVERLAY_RESOLVES: &str = "overlay-resolves";
    /// K3S_API_HOST equals the environment's resolved `k3s_apiserver_endpoint`.
    pub const OVERLAY_ENDPOINT: &str = "overlay-equals-endpoint";
    /// K3S_API_HOST equals the environment's VIP (`kube_vip_address`).
    pub const OVERLAY_VIP: &str = "overlay-equals-vip";
    /// K3S_API_HOST is none of the environment's node IPs.
    pub const OVERLAY_NODE_IP: &str = "overlay-not-node-ip";
    /// `k3s_apiserver_endpoint` is a template that references `kube_vip_address`.
    pub const ENDPOINT_DERIVED: &str = "endpoint-derived-from-vip";
    /// `k3s_api_host` (the founder) neither references nor equals the VIP.
    pub const API_HOST_NOT_VIP: &str = "api-host-is-founder";
    /// The Cilium values template's `k8sServiceHost` consumes `k3s_apiserver_endpoint`.
    pub const CILIUM_ENDPOINT: &str = "cilium-consumes-endpoint";
    /// The Cilium values template's `k8sServicePort` consumes `k3s_api_port`.
    pub const CILIUM_PORT: &str = "cilium-consumes-api-port";
    /// A HelmRelease's literal `k8sServicePort` equals the environment's `k3s_api_port`.
    pub const HELM_PORT: &str = "helmrelease-port-equals-api-port";
    /// `site.yml` imports k3s, then kube-vip, then cilium.
    pub const SITE_ORDER: &str = "site-order";
    /// `k3s_tls_sans` carries the VIP and the founder.
    pub const TLS_SANS: &str = "tls-sans";
    /// The environment's vault file is missing and a password variable needs it.
    pub const VAULT_MISSING: &str = "vault-missing";
    /// A vault the environment's servers load that no configured password opens.
    pub const VAULT_LOCKED: &str = "vault-locked";
    /// A vault file that is not vaulted: a plaintext secret.
    pub const VAULT_PLAINTEXT: &str = "vault-plaintext";
    /// A `/dev/BLOCKED-…` device placeholder (warning).
    pub const DEVICE_PLACEHOLDER: &str = "device-placeholder";
    /// An API address that renders to one node's own address: a violation where a
    /// steady-state client dials it (the CNI's endpoint, a kubeconfig the repo writes), a
    /// warning where only joins use it; an HA cluster with no HA endpoint at all.
    pub const HA_ENDPOINT: &str = "ha-endpoint";
    /// The environment's facts could not be derived (reported, never guessed).
    pub const ENV_FACTS: &str = "env-facts";
    /// Every HelmRelease under the Flux Kustomization's path that sets `k8sServiceHost` sets
    /// it from the overlay's variable (`${K3S_API_HOST}`); none at all is a warning.
    pub const HELM_CONSUMES_VAR: &str = "helmrelease-consumes-overlay-var";

    /// The rules about the Flux overlay and the HelmReleases it feeds: not applicable to an
    /// environment of a repo without Flux.
    pub const FLUX: &[&str] = &[
        OVERLAY_RESOLVES,
        OVERLAY_ENDPOINT,
        OVERLAY_VIP,
        OVERLAY_NODE_IP,
        HELM_CONSUMES_VAR,
        HELM_PORT,
    ];

    /// Every rule, in the order they are reported.
    pub const ALL: &[&str] = &[
        ENV_FACTS,
        HA_ENDPOINT,
        OVERLAY_RESOLVES,
        OVERLAY_ENDPOINT,
        OVERLAY_VIP,
        OVERLAY_NODE_IP,
        HELM_CONSUMES_VAR,
        HELM_PORT,
        ENDPOINT_DERIVED,
        API_HOST_NOT_VIP,
        TLS_SANS,
        VAULT_MISSING,
        VAULT_LOCKED,
        VAULT_PLAINTEXT,
        DEVICE_PLACEHOLDER,
        CILIUM_ENDPOINT,
        CILIUM_PORT,
        SITE_ORDER,
    ];
}

pub use crate::repo::config::TLS_SANS_VAR;

/// How the rules name each fact of the contract, and which variables a template consumes
/// when it consumes that fact: hk-console.yaml's `facts:` (a server variable, or a Jinja
/// expression over them) and `contract.tls_sans`, for one environment. The default is the
/// seed repo's names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactNames {
    pub vip: String,
    pub endpoint: String,
    pub founder: String,
    pub api_port: String,
    pub tls_sans: String,
}

impl Default for FactNames {
    fn default() -> Self {
        use crate::repo::config::{FactKey, FactsConfig};
        FactNames {
            vip: FactsConfig::default_source(FactKey::Vip).into(),
            endpoint: FactsConfig::default_source(FactKey::Endpoint).into(),
            founder: FactsConfig::default_source(FactKey::Founder).into(),
            api_port: FactsConfig::default_source(FactKey::ApiPort).into(),
            tls_sans: TLS_SANS_VAR.into(),
        }
    }
}

/// The variables a fact's source stands for: the variable itself, or the first variable of
/// each block of its expression (`{{ cluster_vip | default('') }}` stands for `cluster_vip`).
fn source_ids(source: &str) -> Vec<String> {
    if source.contains("{{") || source.contains("{%") {
        jinja_blocks(source)
            .iter()
            .filter_map(|b| identifiers(b).next())
            .collect()
    } else {
        vec![source.trim().to_string()]
    }
}

/// How a template consumes the fact: `{{ var }}`, or the expression as written.
fn consume_hint(source: &str) -> String {
    if source.contains("{{") || source.contains("{%") {
        source.to_string()
    } else {
        format!("{{{{ {source} }}}}")
    }
}

/// Whether `raw` consumes any of `ids` in one of its Jinja blocks.
fn references_any(raw: &str, ids: &[String]) -> bool {
    ids.iter().any(|id| references(raw, id))
}

/// The variables Ansible reads a connection or become password from: what a vault file
/// holds that a play needs without naming it.
pub const PASSWORD_VARS: [&str; 5] = [
    "ansible_become_password",
    "ansible_become_pass",
    "ansible_sudo_pass",
    "ansible_password",
    "ansible_ssh_pass",
];
/// A value starting with this is a device that has not been decided yet.
pub use crate::repo::blockers::DEVICE_PLACEHOLDER_PREFIX;
/// The playbooks `site.yml` must import, in this order (by file stem; `_` and `-` alike).
pub use crate::repo::playbook::SITE_ORDER;

/// A place in the repo; `line` 0 means "the file as a whole".
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Default)]
pub struct Loc {
    pub file: PathBuf,
    pub line: usize,
}

impl Loc {
    pub fn new(file: impl Into<PathBuf>, line: usize) -> Loc {
        Loc {
            file: file.into(),
            line,
        }
    }
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}", self.file.display(), self.line)
        } else {
            write!(f, "{}", self.file.display())
        }
    }
}

/// A value and where it was defined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located<T> {
    pub value: T,
    pub at: Loc,
}

impl<T> Located<T> {
    pub fn new(value: T, at: Loc) -> Located<T> {
        Located { value, at }
    }
}

/// A file the rules read as text; `text: None` means it does not exist.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TextFile {
    pub path: PathBuf,
    pub text: Option<String>,
}

/// What the overlay says, or why it could not be told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OverlayFact {
    Resolved(OverlayValue),
    /// Known to be wrong: the variable is unset, or two Flux Kustomizations disagree.
    Failed {
        message: String,
        at: Loc,
    },
    /// Nobody can say what Flux would substitute (see [`FluxError::is_cannot_tell`]).
    CannotTell {
        message: String,
        at: Loc,
    },
}

impl OverlayFact {
    /// From [`crate::repo::flux::overlay_api_host`]'s answer; `overlay` names the overlay
    /// when the error has no better place.
    pub fn from_result(overlay: &Path, result: Result<OverlayValue, FluxError>) -> OverlayFact {
        match result {
            Ok(v) => OverlayFact::Resolved(v),
            Err(e) => {
                let unknown = e.is_cannot_tell();
                let mut message = e.to_string();
                let at = match e.location() {
                    Some(l) => {
                        // The finding prints the place itself; do not say it twice.
                        for prefix in [format!("{l}: "), format!("{}: ", l.file.display())] {
                            if let Some(rest) = message.strip_prefix(&prefix) {
                                message = rest.to_string();
                                break;
                            }
                        }
                        Loc::new(l.file, l.line)
                    }
                    None => Loc::new(overlay, 0),
                };
                if unknown {
                    // The finding says "cannot tell" itself.
                    let message = message
                        .strip_prefix("cannot tell: ")
                        .map(str::to_string)
                        .unwrap_or(message);
                    OverlayFact::CannotTell { message, at }
                } else {
                    OverlayFact::Failed { message, at }
                }
            }
        }
    }
}

/// The environment's vault file (the become password lives there).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum VaultState {
    /// Nothing says this environment keeps one.
    #[default]
    NotExpected,
    /// Expected at this path, absent. `needed_by`: the password variables of the servers
    /// that name a variable nothing defines (what the vault would hold); empty, nothing
    /// needs it and its absence stops no play.
    Missing {
        expected: PathBuf,
        needed_by: Vec<VaultNeed>,
    },
    /// Present; `vaulted` is false for a plaintext file (a secret in the clear).
    Present { file: PathBuf, vaulted: bool },
}

/// A password variable that names a variable nothing defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VaultNeed {
    /// The password variable (`ansible_become_password`).
    pub var: String,
    pub at: Loc,
    /// Why it cannot be rendered (names the undefined variable).
    pub reason: String,
}

/// A node of the environment and its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAddr {
    pub host: String,
    pub address: String,
}

/// A raw (unrendered) string variable as written, for the placeholder scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarFact {
    pub name: String,
    pub value: String,
    pub at: Loc,
}

/// A fact that could not be derived, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The variable (or fact) concerned, e.g. `kube_vip_address`.
    pub fact: String,
    pub message: String,
    pub at: Option<Loc>,
}

/// Everything the rules know about one environment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EnvFacts {
    pub name: String,
    /// How hk-console.yaml names each fact for this environment (messages, and which
    /// variables a template must consume).
    pub names: FactNames,
    /// Where the repo's Ansible files dial an API address that renders, for one of this
    /// environment's servers, to one node's own address.
    pub single_node_uses: Vec<SingleNodeUse>,
    /// Where the repo configures an API client with an address that cannot be rendered
    /// here: what it dials is not known.
    pub unrendered_uses: Vec<UnrenderedUse>,
    /// The seed's fact variables (the mapping's defaults) this repo neither defines for
    /// these servers nor uses anywhere: no counterpart, so their absence is no finding.
    pub no_counterpart: Vec<String>,
    /// The engine that built the overlay.
    pub engine: Engine,
    /// The overlay's effective K3S_API_HOST; `None` when the environment has no overlay.
    pub overlay: Option<OverlayFact>,
    /// Resolved `k3s_apiserver_endpoint`, located at its definition.
    pub endpoint: Option<Located<String>>,
    /// Resolved `kube_vip_address`.
    pub vip: Option<Located<String>>,
    /// Resolved `k3s_api_host` (the founder).
    pub founder: Option<Located<String>>,
    /// Resolved `k3s_api_port`.
    pub api_port: Option<Located<String>>,
    /// Its servers.
    pub nodes: Vec<NodeAddr>,
    /// Its agents (hk-console.yaml `agents:`): nodes too, never an API endpoint.
    pub agents: Vec<NodeAddr>,
    /// `k3s_apiserver_endpoint` as written (e.g. `{{ kube_vip_address }}`), once per distinct
    /// definition that wins for one of the servers.
    pub endpoint_raw: Vec<Located<String>>,
    /// `k3s_api_host` as written, once per distinct winning definition.
    pub api_host_raw: Vec<Located<String>>,
    /// Resolved `k3s_tls_sans`.
    pub tls_sans: Option<Located<Vec<String>>>,
    pub vault: VaultState,
    /// Vaults the servers load that no configured password opens (`repo::blockers`).
    pub vault_locked: Vec<crate::runbook::plan::Blocker>,
    /// Raw string vars that apply to the environment's servers (deduplicated by definition).
    pub vars: Vec<VarFact>,
    /// The HelmReleases under the overlay's Flux Kustomization path that set `k8sServiceHost`;
    /// `None` when not gathered (no resolved overlay, or no `spec.path`).
    pub helm: Option<HelmFacts>,
    pub problems: Vec<Problem>,
    /// Facts nobody can state (the HelmReleases behind a Flux feature not modelled...): each
    /// becomes a "cannot tell" finding.
    pub unknown: Vec<Problem>,
}

/// How an Ansible file uses an API address it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApiUseKind {
    /// A client that dials it for as long as the cluster runs (a kubeconfig's `server:`,
    /// `kubectl config set-cluster --server`).
    SteadyState,
    /// A server joining the cluster (`k3s server --server`, a server's config `server:`):
    /// needed only while it joins.
    Join,
    /// An agent's server (`k3s agent --server`, `K3S_URL`, an agent role's `server:`): the
    /// agent dials it on every start to learn the servers, so an agent that restarts while
    /// that one node is down cannot reach the API.
    AgentJoin,
}

/// One line of a repo file that configures an API client: the address it dials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiUse {
    pub at: Loc,
    /// What the address is written as: a variable's name (`{{ var }}`), a Jinja expression
    /// (`{{ hostvars[groups['server'][0]]['ansible_host'] }}`), or a literal address.
    pub var: String,
    pub how: ApiValue,
    pub kind: ApiUseKind,
}

/// How an [`ApiUse`]'s address is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiValue {
    /// `{{ name }}`: one variable.
    Var,
    /// `{{ any other expression }}`: rendered per host as Ansible would.
    Template,
    /// An address written out.
    Literal,
}

/// An [`ApiUse`] whose address renders to one node's own address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SingleNodeUse {
    pub at: Loc,
    pub var: String,
    pub kind: ApiUseKind,
    pub address: String,
    /// The node that owns the address.
    pub node: String,
}

/// An [`ApiUse`] whose address cannot be rendered without the hosts (gathered facts, a
/// lookup): what it dials is not known here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnrenderedUse {
    pub at: Loc,
    pub var: String,
    pub kind: ApiUseKind,
    pub why: String,
    /// The expression takes the first host of a group (`groups[...][0]`): one node, whatever
    /// its address renders to.
    pub first_of_group: bool,
}

/// The API addresses `text` (a repo file at `path`) configures a client with, by kind: the
/// `server:` of a kubeconfig (a file with `clusters:`), `kubectl config set-cluster
/// --server`, and the CNI's `k8sServiceHost` / `KUBERNETES_SERVICE_HOST` are steady-state
/// clients; `--server`, `K3S_URL=` and any other `server:` key (k3s's own config file) are
/// joins. Each address as written: one variable, a Jinja expression, or a literal. Comment
/// lines are skipped.
pub fn api_uses_in(path: &Path, text: &str) -> Vec<ApiUse> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(re) = RE
        .get_or_init(|| {
            Regex::new(
                r#"(--server[= ]+|K3S_URL=|(?:^|\s)server:\s*)["']?https?://(\{\{.*?\}\}|\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)|(k8sServiceHost["']?\s*[:=]\s*|KUBERNETES_SERVICE_HOST["']?\s*[:=]\s*)["']?(\{\{.*?\}\}|[0-9A-Fa-f:.]+|[A-Za-z0-9.-]+)"#,
            )
            .ok()
        })
        .as_ref()
    else {
        return Vec::new();
    };
    static VAR: OnceLock<Option<Regex>> = OnceLock::new();
    let simple = VAR
        .get_or_init(|| Regex::new(r"^\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$").ok())
        .as_ref();
    let kubeconfig = text
        .lines()
        .any(|l| l.trim_start().starts_with("clusters:"));
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with('#') {
            continue;
        }
        for caps in re.captures_iter(line) {
            let (how, value, cni) = match (caps.get(1), caps.get(2), caps.get(3), caps.get(4)) {
                (Some(h), Some(v), _, _) => (h.as_str(), v.as_str(), false),
                (_, _, Some(h), Some(v)) => (h.as_str(), v.as_str(), true),
                _ => continue,
            };
            let value = value.trim_start_matches('[').trim_end_matches(']');
            // A port or a placeholder is not an address (`k8sServiceHost: auto`).
            if value.is_empty() || value == "auto" || value == "localhost" && !cni {
                continue;
            }
            let (var, how_written) = if let Some(c) = simple.and_then(|r| r.captures(value)) {
                (
                    c.get(1).map_or(value, |m| m.as_str()).to_string(),
                    ApiValue::Var,
                )
            } else if value.starts_with("{{") {
                (value.to_string(), ApiValue::Template)
            } else {
                (value.to_string(), ApiValue::Literal)
            };
            let steady = cni
                || line.contains("set-cluster")
                || (kubeconfig && how.trim_start().starts_with("server:"));
            let agent = how.starts_with("K3S_URL")
                || line.contains("k3s agent")
                || path.to_string_lossy().contains("agent");
            out.push(ApiUse {
                at: Loc::new(path, i + 1),
                var,
                how: how_written,
                kind: if steady {
                    ApiUseKind::SteadyState
                } else if agent {
                    ApiUseKind::AgentJoin
                } else {
                    ApiUseKind::Join
                },
            });
        }
    }
    out
}

/// Where the overlay's variable is supposed to land: Cilium's HelmRelease values.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HelmFacts {
    /// The Flux Kustomization's `spec.path` the releases were built from.
    pub path: String,
    /// `spec.values.k8sServiceHost` of each HelmRelease that sets it.
    pub service_hosts: Vec<HelmValue>,
    /// `spec.values.k8sServicePort` of each HelmRelease that sets it.
    pub service_ports: Vec<HelmValue>,
}

/// The facts of one check run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ParityInput {
    pub envs: Vec<EnvFacts>,
    /// `roles/cilium/templates/cilium-values.yaml.j2` (or wherever the repo keeps it).
    pub cilium_template: Option<TextFile>,
    /// `playbooks/site.yml`.
    pub site_yml: Option<TextFile>,
    /// One line on the engine that built the overlays (printed by `check`).
    pub engine_line: Option<String>,
    /// Rules that do not apply, one line each saying why (printed by `check`): the Flux
    /// rules of an environment in a repo without Flux, the contract rules hk-console.yaml
    /// switches off.
    pub not_applicable: Vec<String>,
    /// The contract rules hk-console.yaml's `contract:` switches off (never reported).
    pub off: Vec<&'static str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    Warning,
    Violation,
    /// The fact could not be established: neither clean nor a violation (exit 2).
    CannotTell,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Warning => "warning",
            Severity::Violation => "violation",
            Severity::CannotTell => "cannot tell",
        })
    }
}

/// One broken (or endangered) part of the contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub rule: &'static str,
    pub severity: Severity,
    pub env: Option<String>,
    pub file: PathBuf,
    /// 0 when the finding is about a file as a whole.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.file.as_os_str().is_empty() {
            write!(f, "{}: ", Loc::new(self.file.clone(), self.line))?;
        }
        write!(f, "[{}] ", self.rule)?;
        match self.severity {
            Severity::Warning => f.write_str("warning: ")?,
            Severity::CannotTell => f.write_str("cannot tell: ")?,
            Severity::Violation => {}
        }
        if let Some(env) = &self.env {
            write!(f, "{env}: ")?;
        }
        f.write_str(&self.message)
    }
}

fn finding(
    rule: &'static str,
    severity: Severity,
    env: Option<&str>,
    at: &Loc,
    message: String,
) -> Finding {
    Finding {
        rule,
        severity,
        env: env.map(str::to_string),
        file: at.file.clone(),
        line: at.line,
        message,
    }
}

impl ParityInput {
    /// Keep only the environment `name` (for `check --env`); the repo-wide rules (template,
    /// site.yml) still run. `None` when there is no such environment.
    pub fn only_env(mut self, name: &str) -> Option<ParityInput> {
        self.envs.retain(|e| e.name == name);
        (!self.envs.is_empty()).then_some(self)
    }
}

/// One line for the end of a text report: `clean`, `clean (2 warnings)`, `1 violation, ...`.
pub fn summary(findings: &[Finding]) -> String {
    let count = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let unknown = count(Severity::CannotTell);
    if unknown > 0 {
        return format!(
            "parity: cannot tell ({} not established), {}, {}",
            unknown,
            plural(count(Severity::Violation), "violation"),
            plural(count(Severity::Warning), "warning")
        );
    }
    match (count(Severity::Violation), count(Severity::Warning)) {
        (0, 0) => "parity: clean".into(),
        (0, w) => format!("parity: clean ({})", plural(w, "warning")),
        (v, w) => format!(
            "parity: {}, {}",
            plural(v, "violation"),
            plural(w, "warning")
        ),
    }
}

/// Exit code policy: 2 when something could not be told (the check is incomplete, whatever
/// else it found), else 1 when there is a violation, else 0 (warnings allowed).
pub fn exit_code(findings: &[Finding]) -> i32 {
    if findings.iter().any(|f| f.severity == Severity::CannotTell) {
        2
    } else if findings.iter().any(|f| f.severity == Severity::Violation) {
        1
    } else {
        0
    }
}

/// One environment's verdict: `cannot-tell`, `violation` or `clean` (warnings allowed).
pub fn env_verdict(findings: &[Finding], env: &str) -> &'static str {
    let mine = || findings.iter().filter(|f| f.env.as_deref() == Some(env));
    if mine().any(|f| f.severity == Severity::CannotTell) {
        "cannot-tell"
    } else if mine().any(|f| f.severity == Severity::Violation) {
        "violation"
    } else {
        "clean"
    }
}

/// The `check --json` document.
pub fn to_json(findings: &[Finding]) -> serde_json::Value {
    let count = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
    serde_json::json!({
        "clean": exit_code(findings) == 0,
        "violations": count(Severity::Violation),
        "warnings": count(Severity::Warning),
        "findings": findings,
    })
}

/// The `check --json` document with, per environment, the engine that built its overlay,
/// the effective value it found (null when none could be stated) and its verdict.
pub fn to_json_report(input: &ParityInput, findings: &[Finding]) -> serde_json::Value {
    let mut doc = to_json(findings);
    let envs: Vec<serde_json::Value> = input
        .envs
        .iter()
        .map(|e| {
            let value = match &e.overlay {
                Some(OverlayFact::Resolved(v)) => serde_json::Value::String(v.value.clone()),
                _ => serde_json::Value::Null,
            };
            serde_json::json!({
                "name": e.name,
                "engine": e.engine,
                "value": value,
                "verdict": env_verdict(findings, &e.name),
            })
        })
        .collect();
    if let Some(map) = doc.as_object_mut() {
        map.insert(
            "cannot_tell".into(),
            findings
                .iter()
                .filter(|f| f.severity == Severity::CannotTell)
                .count()
                .into(),
        );
        map.insert("environments".into(), envs.into());
        // What was not judged, and why: a rule skipped is said, in JSON as in text.
        map.insert("not_applicable".into(), input.not_applicable.clone().into());
    }
    doc
}

/// Run every rule. Pure: the same facts always give the same findings, in a stable order
/// (environments in input order, then the repo-wide rules).
pub fn check(input: &ParityInput) -> Vec<Finding> {
    let mut out = Vec::new();
    for env in &input.envs {
        check_env(env, &input.off, &mut out);
    }
    if !input.off.contains(&rules::CILIUM_ENDPOINT) {
        // The template is the repo's, shared by every environment: it consumes the endpoint
        // when it consumes what any environment's `facts:` names it.
        let default_names = [FactNames::default()];
        let names: Vec<&FactNames> = if input.envs.is_empty() {
            default_names.iter().collect()
        } else {
            input.envs.iter().map(|e| &e.names).collect()
        };
        check_cilium_template(input.cilium_template.as_ref(), &names, &mut out);
    }
    if !input.off.contains(&rules::SITE_ORDER) {
        check_site_order(input.site_yml.as_ref(), &mut out);
    }
    out
}

fn check_env(env: &EnvFacts, off: &[&str], out: &mut Vec<Finding>) {
    let name = Some(env.name.as_str());
    let v = |rule, at: &Loc, msg: String| finding(rule, Severity::Violation, name, at, msg);

    for p in &env.unknown {
        let at = p.at.clone().unwrap_or_default();
        out.push(finding(
            rules::HELM_CONSUMES_VAR,
            Severity::CannotTell,
            name,
            &at,
            format!("{}: {}", p.fact, p.message),
        ));
    }
    // Facts first: a rule whose inputs are unknown says so instead of comparing a guess.
    for p in &env.problems {
        let at = p.at.clone().unwrap_or_default();
        out.push(v(
            rules::ENV_FACTS,
            &at,
            format!("{}: {}", p.fact, p.message),
        ));
    }
    let n = &env.names;
    let explained = |fact: &str| env.problems.iter().any(|p| p.fact == fact);
    for (fact, present) in [
        (n.vip.as_str(), env.vip.is_some()),
        (n.endpoint.as_str(), env.endpoint.is_some()),
        (n.founder.as_str(), env.founder.is_some()),
    ] {
        if !present && !explained(fact) && !env.no_counterpart.iter().any(|v| v == fact) {
            out.push(v(
                rules::ENV_FACTS,
                &Loc::default(),
                format!("{fact} is not defined for this environment's servers; the contract cannot be checked without it"),
            ));
        }
    }

    check_overlay(env, out);
    check_ha(env, out);

    let vip_ids = source_ids(&n.vip);
    let local_balancer = env
        .endpoint
        .as_ref()
        .is_some_and(|e| is_loopback_host(&e.value));
    // The endpoint is derived from the VIP, never restated (unless it names the VIP's own
    // variable, or is the k3s supervisor's load balancer on every node).
    let same_source = source_ids(&n.endpoint)
        .iter()
        .any(|id| vip_ids.contains(id));
    if !same_source && !local_balancer {
        for raw in &env.endpoint_raw {
            if !references_any(&raw.value, &vip_ids) {
                out.push(v(
                    rules::ENDPOINT_DERIVED,
                    &raw.at,
                    format!(
                        "{} is `{}`, restated instead of derived: write \"{}\" so the VIP, the SAN and the CNI endpoint move together",
                        n.endpoint,
                        raw.value,
                        consume_hint(&n.vip)
                    ),
                ));
            }
        }
    }
    // The founder's address is its own, not the VIP.
    let founder_is_vip = |raw: &Located<String>| references_any(&raw.value, &vip_ids);
    for raw in env.api_host_raw.iter().filter(|r| founder_is_vip(r)) {
        out.push(v(
            rules::API_HOST_NOT_VIP,
            &raw.at,
            format!(
                "{} is `{}`, derived from {}: it must stay the founder's own IP (the cold-bootstrap join target; no VIP exists before the cluster does)",
                n.founder, raw.value, n.vip
            ),
        ));
    }
    if let (Some(founder), Some(vip)) = (&env.founder, &env.vip) {
        let raw_already_reported = env.api_host_raw.iter().any(founder_is_vip);
        if founder.value == vip.value && !raw_already_reported {
            out.push(v(
                rules::API_HOST_NOT_VIP,
                &founder.at,
                format!(
                    "{} resolves to {}, the VIP ({} at {}): it must be the founder's own IP, the cold-bootstrap join target",
                    n.founder, founder.value, n.vip, vip.at
                ),
            ));
        }
    }

    // The API certificate must answer for both addresses clients use.
    if off.contains(&rules::TLS_SANS) {
        // hk-console.yaml says the repo keeps no k3s_tls_sans.
    } else if let Some(sans) = &env.tls_sans {
        for (what, fact) in [("the VIP", &env.vip), ("the founder", &env.founder)] {
            if let Some(addr) = fact {
                if !sans.value.contains(&addr.value) {
                    out.push(v(
                        rules::TLS_SANS,
                        &sans.at,
                        format!(
                            "{} {:?} lacks {what} {}: clients dialling it fail certificate verification",
                            n.tls_sans, sans.value, addr.value
                        ),
                    ));
                }
            }
        }
    } else if !explained(&n.tls_sans) && (env.vip.is_some() || env.founder.is_some()) {
        out.push(v(
            rules::TLS_SANS,
            &Loc::default(),
            format!("{} is not defined for this environment's servers; it must carry the VIP and the founder", n.tls_sans),
        ));
    }

    match &env.vault {
        VaultState::NotExpected => {}
        // Absent and needed by nothing: no play loads what is not there, none misses it.
        VaultState::Missing { needed_by, .. } if needed_by.is_empty() => {}
        VaultState::Missing {
            expected,
            needed_by,
        } => {
            for need in needed_by {
                out.push(v(
                    rules::VAULT_MISSING,
                    &need.at,
                    format!(
                        "{} cannot be rendered ({}) and the vault file {} that would define it is missing: every play that connects or escalates with it stops there, --check included; create it with ansible-vault create",
                        need.var,
                        need.reason,
                        expected.display()
                    ),
                ));
            }
        }
        VaultState::Present { file, vaulted } => {
            if !vaulted {
                out.push(v(
                    rules::VAULT_PLAINTEXT,
                    &Loc::new(file.clone(), 1),
                    "vault file is not encrypted (no $ANSIBLE_VAULT header, no !vault values): a secret in plaintext; run ansible-vault encrypt on it".into(),
                ));
            }
        }
    }

    for b in &env.vault_locked {
        let (file, line) = match b.at.split_once(':') {
            Some((f, l)) => (
                f,
                l.split(':')
                    .next()
                    .and_then(|l| l.parse().ok())
                    .unwrap_or(0),
            ),
            None => (b.at.as_str(), 0),
        };
        out.push(v(
            rules::VAULT_LOCKED,
            &Loc::new(file, line),
            format!("{}; {}", b.message, b.fix),
        ));
    }

    for var in &env.vars {
        if var.value.starts_with(DEVICE_PLACEHOLDER_PREFIX) {
            out.push(finding(
                rules::DEVICE_PLACEHOLDER,
                Severity::Warning,
                name,
                &var.at,
                format!(
                    "{} is the placeholder `{}`: a disk decision is pending; run only the `packages` tag against these hosts until it is made",
                    var.name, var.value
                ),
            ));
        }
    }
}

/// HA by use: an API address that renders to one node's own address is that node's
/// single-point dependency, whatever the variable is called; what dials it decides how bad.
fn check_ha(env: &EnvFacts, out: &mut Vec<Finding>) {
    let name = Some(env.name.as_str());
    let n = &env.names;
    let owner = |address: &str| {
        env.nodes
            .iter()
            .chain(&env.agents)
            .find(|node| node.address == address)
            .map(|node| node.host.clone())
    };
    // The endpoint the CNI dials.
    if let Some(endpoint) = &env.endpoint {
        if let Some(node) = owner(&endpoint.value) {
            out.push(finding(
                rules::HA_ENDPOINT,
                Severity::Violation,
                name,
                &endpoint.at,
                format!(
                    "{} (the API endpoint the CNI dials) renders to {}, the own address of {node}: every client of it loses the API with that one node (the 2026-09-06 single-node dependency); use the VIP or 127.0.0.1 (k3s's load balancer on every node)",
                    n.endpoint, endpoint.value
                ),
            ));
        }
    }
    // On a one-server cluster the server's own address is the endpoint, not a dependency.
    let one_server = env.nodes.len() <= 1;
    for u in env.single_node_uses.iter().filter(|_| !one_server) {
        let (severity, what) = match u.kind {
            ApiUseKind::SteadyState => (
                Severity::Violation,
                format!("a steady-state client dials it (a kubeconfig the repo writes): it loses the API while {} is down", u.node),
            ),
            ApiUseKind::Join => (
                Severity::Warning,
                format!("only joins use it: no node can join while {} is down", u.node),
            ),
            ApiUseKind::AgentJoin => (
                Severity::Violation,
                format!("the agents dial it on every start: an agent that restarts while {} is down cannot reach the API (the 2026-09-06 single-node dependency)", u.node),
            ),
        };
        out.push(finding(
            rules::HA_ENDPOINT,
            severity,
            name,
            &u.at,
            format!(
                "{} renders to {}, the own address of {}: {what}",
                u.var, u.address, u.node
            ),
        ));
    }
    for u in &env.unrendered_uses {
        let (severity, message) = if u.first_of_group && !one_server {
            match u.kind {
                ApiUseKind::SteadyState => (
                    Severity::Violation,
                    format!("`{}` is the first host of a group, one node whatever it renders to: a steady-state client dials it and loses the API with that node", u.var),
                ),
                ApiUseKind::Join => (
                    Severity::Warning,
                    format!("`{}` is the first host of a group, one node whatever it renders to: only joins use it, and no node can join while it is down", u.var),
                ),
                ApiUseKind::AgentJoin => (
                    Severity::Violation,
                    format!("`{}` is the first host of a group, one node whatever it renders to: the agents dial it on every start and cannot reach the API while it is down", u.var),
                ),
            }
        } else if u.first_of_group {
            continue;
        } else {
            (
                Severity::CannotTell,
                format!("`{}` (an API address a client dials) cannot be rendered here: {}; whether it is one node's address cannot be told", u.var, u.why),
            )
        };
        out.push(finding(rules::HA_ENDPOINT, severity, name, &u.at, message));
    }
    // Several servers and nothing that follows them all.
    let servers = env.nodes.len();
    let ha_vip = env
        .vip
        .as_ref()
        .is_some_and(|vip| owner(&vip.value).is_none());
    let ha_endpoint = env
        .endpoint
        .as_ref()
        .is_some_and(|e| is_loopback_host(&e.value) || owner(&e.value).is_none());
    let unmapped = |var: &str| env.no_counterpart.iter().any(|v| v == var);
    if servers > 1 && !ha_vip && !ha_endpoint && unmapped(&n.vip) && unmapped(&n.endpoint) {
        // Neither fact has a counterpart here: what the clients dial is not known from the
        // seed's names, so nothing is concluded from their absence.
        out.push(finding(
            rules::HA_ENDPOINT,
            Severity::CannotTell,
            name,
            &Loc::default(),
            format!(
                "an HA cluster ({servers} servers): this repo neither defines nor uses {} or {}; map the variables its clients dial under `facts:` in hk-console.yaml (vip, endpoint) so the HA rule can be checked",
                n.vip, n.endpoint
            ),
        ));
    } else if servers > 1 && !ha_vip && !ha_endpoint {
        out.push(finding(
            rules::HA_ENDPOINT,
            Severity::Violation,
            name,
            &Loc::default(),
            format!(
                "an HA cluster ({servers} servers) with no HA endpoint: {} is {} and {} is {}; a VIP (kube-vip) or 127.0.0.1 (k3s's load balancer on every node) keeps the API when any one server goes",
                n.vip,
                env.vip.as_ref().map_or("not defined".to_string(), |v| format!("`{}`", v.value)),
                n.endpoint,
                env.endpoint.as_ref().map_or("not defined".to_string(), |v| format!("`{}`", v.value)),
            ),
        ));
    }
}

fn check_overlay(env: &EnvFacts, out: &mut Vec<Finding>) {
    let name = Some(env.name.as_str());
    let v = |rule, at: &Loc, msg: String| finding(rule, Severity::Violation, name, at, msg);
    let overlay = match &env.overlay {
        None => return,
        Some(OverlayFact::Failed { message, at }) => {
            out.push(v(rules::OVERLAY_RESOLVES, at, message.clone()));
            return;
        }
        Some(OverlayFact::CannotTell { message, at }) => {
            out.push(finding(
                rules::OVERLAY_RESOLVES,
                Severity::CannotTell,
                name,
                at,
                message.clone(),
            ));
            return;
        }
        Some(OverlayFact::Resolved(o)) => o,
    };
    let at = Loc::new(overlay.at.file.clone(), overlay.at.line);
    let var = &overlay.var;
    if let Some(endpoint) = &env.endpoint {
        if overlay.value != endpoint.value {
            out.push(v(
                rules::OVERLAY_ENDPOINT,
                &at,
                format!(
                    "{var} is {} but {} resolves to {} (defined at {}): Flux and Ansible would point Cilium at different API servers",
                    overlay.value, env.names.endpoint, endpoint.value, endpoint.at
                ),
            ));
        }
    }
    if let Some(vip) = &env.vip {
        // The k3s supervisor's balancer on every node is HA too, when the endpoint is it.
        let on_local_balancer = is_loopback_host(&overlay.value)
            && env
                .endpoint
                .as_ref()
                .is_some_and(|e| e.value == overlay.value);
        if overlay.value != vip.value && !on_local_balancer {
            out.push(v(
                rules::OVERLAY_VIP,
                &at,
                format!(
                    "{var} is {} but the control-plane VIP ({} at {}) is {}: the CNI must dial the VIP to survive losing any one server",
                    overlay.value, env.names.vip, vip.at, vip.value
                ),
            ));
        }
    }
    if let Some(helm) = &env.helm {
        check_helm(env, overlay, helm, out);
    }
    let node = env
        .nodes
        .iter()
        .find(|n| n.address == overlay.value)
        .map(|n| n.host.clone())
        .or_else(|| {
            env.founder
                .as_ref()
                .filter(|f| f.value == overlay.value)
                .map(|_| format!("the founder ({})", env.names.founder))
        });
    if let Some(host) = node {
        out.push(v(
            rules::OVERLAY_NODE_IP,
            &at,
            format!(
                "{var} is {}, the own address of {host}: every cilium-agent would depend on that one node (the 2026-09-06 single-node API dependency)",
                overlay.value
            ),
        ));
    }
}

fn check_helm(env: &EnvFacts, overlay: &OverlayValue, helm: &HelmFacts, out: &mut Vec<Finding>) {
    let name = Some(env.name.as_str());
    let var = &overlay.var;
    if helm.service_hosts.is_empty() {
        out.push(finding(
            rules::HELM_CONSUMES_VAR,
            Severity::Warning,
            name,
            &Loc::new(overlay.kustomization_at.file.clone(), overlay.kustomization_at.line),
            format!(
                "no HelmRelease under {} sets values.k8sServiceHost: cannot confirm that {var} reaches Cilium",
                helm.path
            ),
        ));
        return;
    }
    if let Some(port) = &env.api_port {
        for hv in &helm.service_ports {
            // A `${...}` port is Flux's to fill in; only a literal can be compared here.
            if !hv.value.trim().starts_with("${") && hv.value.trim() != port.value {
                out.push(finding(
                    rules::HELM_PORT,
                    Severity::Violation,
                    name,
                    &Loc::new(hv.at.file.clone(), hv.at.line),
                    format!(
                        "HelmRelease {} sets k8sServicePort to {}, but {} is {} (defined at {})",
                        hv.release, hv.value, env.names.api_port, port.value, port.at
                    ),
                ));
            }
        }
    }
    for hv in &helm.service_hosts {
        if hv.substitution_disabled {
            out.push(finding(
                rules::HELM_CONSUMES_VAR,
                Severity::Violation,
                name,
                &Loc::new(hv.at.file.clone(), hv.at.line),
                format!(
                    "HelmRelease {} is marked kustomize.toolkit.fluxcd.io/substitute: disabled: Flux hands Cilium the text `{}`, not the overlay's value ({})",
                    hv.release, hv.value, overlay.value
                ),
            ));
            continue;
        }
        if !is_substitution_of(&hv.value, var) {
            out.push(finding(
                rules::HELM_CONSUMES_VAR,
                Severity::Violation,
                name,
                &Loc::new(hv.at.file.clone(), hv.at.line),
                format!(
                    "HelmRelease {} sets k8sServiceHost to `{}`, not ${{{var}}}: the overlay's value ({}) never reaches Cilium",
                    hv.release, hv.value, overlay.value
                ),
            ));
        }
    }
}

/// `${VAR}` or Flux's `${VAR:=default}` / `${VAR:-default}`, and nothing else.
fn is_substitution_of(value: &str, var: &str) -> bool {
    let Some(inner) = value
        .trim()
        .strip_prefix("${")
        .and_then(|v| v.strip_suffix('}'))
    else {
        return false;
    };
    inner == var
        || inner
            .strip_prefix(var)
            .is_some_and(|rest| rest.starts_with(":=") || rest.starts_with(":-"))
}

/// Whether a Jinja-bearing value references `var` inside a `{{ }}` or `{% %}` block.
fn references(raw: &str, var: &str) -> bool {
    jinja_blocks(raw)
        .iter()
        .any(|expr| identifiers(expr).any(|id| id == var))
}

fn jinja_blocks(text: &str) -> Vec<String> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\{\{(.*?)\}\}|\{%(.*?)%\}").ok())
        .as_ref()
        .map(|re| {
            re.captures_iter(text)
                .filter_map(|c| {
                    c.get(1)
                        .or_else(|| c.get(2))
                        .map(|m| m.as_str().to_string())
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Identifiers in a Jinja expression, skipping string literals and attribute names.
fn identifiers(expr: &str) -> impl Iterator<Item = String> + '_ {
    let mut out = Vec::new();
    let mut chars = expr.char_indices().peekable();
    let mut prev_dot = false;
    while let Some((i, c)) = chars.next() {
        if c == '\'' || c == '"' {
            for (_, d) in chars.by_ref() {
                if d == c {
                    break;
                }
            }
            prev_dot = false;
        } else if c.is_ascii_alphabetic() || c == '_' {
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if d.is_ascii_alphanumeric() || d == '_' {
                    end = j + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            if !prev_dot {
                out.push(expr[i..end].to_string());
            }
            prev_dot = false;
        } else if c == '.' {
            prev_dot = true;
        } else if !c.is_whitespace() {
            prev_dot = false;
        }
    }
    out.into_iter()
}

fn check_cilium_template(
    template: Option<&TextFile>,
    names: &[&FactNames],
    out: &mut Vec<Finding>,
) {
    let ids = |pick: fn(&FactNames) -> &String| -> Vec<String> {
        let mut ids: Vec<String> = names.iter().flat_map(|n| source_ids(pick(n))).collect();
        ids.dedup();
        ids
    };
    let endpoint_ids = ids(|n| &n.endpoint);
    let founder_ids = ids(|n| &n.founder);
    let port_ids = ids(|n| &n.api_port);
    let first = names.first().copied().cloned().unwrap_or_default();
    let endpoint = consume_hint(&first.endpoint);
    let v =
        |at: &Loc, msg: String| finding(rules::CILIUM_ENDPOINT, Severity::Violation, None, at, msg);
    let Some(file) = template else {
        out.push(v(
            &Loc::default(),
            "no CNI values template found: cannot tell what k8sServiceHost consumes".into(),
        ));
        return;
    };
    let Some(text) = &file.text else {
        out.push(v(
            &Loc::new(file.path.clone(), 0),
            "the Cilium values template does not exist: cannot tell what k8sServiceHost consumes"
                .into(),
        ));
        return;
    };
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(re) = RE
        .get_or_init(|| Regex::new(r"^\s*-?\s*k8sServiceHost\s*:\s*(.*?)\s*(?:#.*)?$").ok())
        .as_ref()
    else {
        return;
    };
    let mut seen = false;
    // Cilium pointed at k3s's supervisor balancer on its own node (127.0.0.1:6444), which
    // follows every server: HA without a VIP, on every node alike.
    let mut local_balancer = false;
    for (i, line) in text.lines().enumerate() {
        let Some(caps) = re.captures(line) else {
            continue;
        };
        seen = true;
        let at = Loc::new(file.path.clone(), i + 1);
        let value = caps.get(1).map(|m| m.as_str()).unwrap_or_default();
        if is_loopback_host(value.trim_matches(|c| c == '"' || c == '\'')) {
            local_balancer = true;
            continue;
        }
        let blocks = jinja_blocks(value);
        let first_ids: Vec<String> = blocks
            .iter()
            .filter_map(|b| identifiers(b).next())
            .collect();
        if first_ids.iter().any(|id| endpoint_ids.contains(id)) {
            continue;
        }
        let msg = if blocks.is_empty() {
            format!("k8sServiceHost is the literal `{value}`: it must be {endpoint} so each environment's VIP lands there")
        } else if first_ids.iter().any(|id| founder_ids.contains(id)) {
            format!("k8sServiceHost consumes {} (the founder's own IP): every cilium-agent would depend on one node; it must consume {}", first.founder, first.endpoint)
        } else {
            format!(
                "k8sServiceHost is `{value}`: it must consume {}",
                first.endpoint
            )
        };
        out.push(v(&at, msg));
    }
    if !seen {
        out.push(v(
            &Loc::new(file.path.clone(), 0),
            format!("no k8sServiceHost key in the Cilium values template: kube-proxy replacement needs it, set to {endpoint}"),
        ));
    }
    check_template_port(
        &file.path,
        text,
        &port_ids,
        &first.api_port,
        local_balancer,
        out,
    );
}

fn check_template_port(
    path: &Path,
    text: &str,
    port_ids: &[String],
    port_name: &str,
    local_balancer: bool,
    out: &mut Vec<Finding>,
) {
    let port = consume_hint(port_name);
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(re) = RE
        .get_or_init(|| Regex::new(r"^\s*-?\s*k8sServicePort\s*:\s*(.*?)\s*(?:#.*)?$").ok())
        .as_ref()
    else {
        return;
    };
    let v = |at: &Loc, msg: String| finding(rules::CILIUM_PORT, Severity::Violation, None, at, msg);
    let mut seen = false;
    for (i, line) in text.lines().enumerate() {
        let Some(caps) = re.captures(line) else {
            continue;
        };
        seen = true;
        let value = caps.get(1).map(|m| m.as_str()).unwrap_or_default();
        let consumes = jinja_blocks(value)
            .iter()
            .filter_map(|b| identifiers(b).next())
            .any(|id| port_ids.contains(&id))
            || (local_balancer
                && value.trim_matches(|c| c == '"' || c == '\'') == SUPERVISOR_LB_PORT);
        if !consumes {
            out.push(v(
                &Loc::new(path, i + 1),
                format!(
                    "k8sServicePort is `{value}`: it must be {port}, the port the inventory names"
                ),
            ));
        }
    }
    if !seen {
        out.push(v(
            &Loc::new(path, 0),
            format!("no k8sServicePort key in the Cilium values template: set it to {port}"),
        ));
    }
}

fn check_site_order(site: Option<&TextFile>, out: &mut Vec<Finding>) {
    let v = |at: &Loc, msg: String| finding(rules::SITE_ORDER, Severity::Violation, None, at, msg);
    let Some(file) = site else {
        out.push(v(
            &Loc::default(),
            "no site.yml found: cannot check the k3s -> kube-vip -> cilium order".into(),
        ));
        return;
    };
    let Some(text) = &file.text else {
        out.push(v(
            &Loc::new(file.path.clone(), 0),
            "site.yml does not exist: cannot check the k3s -> kube-vip -> cilium order".into(),
        ));
        return;
    };
    let doc = match yaml::parse_one(text) {
        Ok(d) => d,
        Err(e) => {
            out.push(v(
                &Loc::new(file.path.clone(), e.mark.line),
                format!("site.yml is not valid YAML ({e}): expected a list of plays and import_playbook entries"),
            ));
            return;
        }
    };
    let Value::Seq(_) = &doc.value else {
        out.push(v(
            &Loc::new(file.path.clone(), doc.mark.line),
            "site.yml is not a list of plays: expected `- import_playbook: k3s.yml` entries".into(),
        ));
        return;
    };
    // (normalised playbook name, line) in file order.
    let imports = crate::repo::playbook::imports(text).unwrap_or_default();
    let position = |want: &str| imports.iter().position(|(n, _)| n == want);
    let mut present: Vec<(&str, usize, usize)> = Vec::new();
    for want in SITE_ORDER {
        match position(want) {
            Some(i) => present.push((want, i, imports[i].1)),
            None => {
                let why = match want {
                    "kube-vip" => ": nothing would announce the VIP before Cilium dials it (the 2026-09-01 cold-bootstrap deadlock shape)",
                    "cilium" => ": the cluster has no CNI after a cold run",
                    _ => ": there is no cluster for kube-vip and Cilium to land on",
                };
                out.push(v(
                    &Loc::new(file.path.clone(), 0),
                    format!("site.yml does not import {want}.yml{why}"),
                ));
            }
        }
    }
    for pair in present.windows(2) {
        let (a, ai, _) = pair[0];
        let (b, bi, bline) = pair[1];
        if bi < ai {
            out.push(v(
                &Loc::new(file.path.clone(), bline),
                format!(
                    "site.yml imports {b}.yml before {a}.yml: the order must be {} (kube-vip needs a cluster; Cilium needs the VIP answering)",
                    SITE_ORDER.join(" -> ")
                ),
            ));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// From the loaded repo to facts.

/// A host's raw (unrendered) variable and where its winning definition is.
#[derive(Debug, Clone, PartialEq)]
pub struct RawVar {
    pub name: String,
    pub value: serde_json::Value,
    pub file: PathBuf,
    pub line: usize,
    /// A `!vault` value: never read, never shown.
    pub secret: bool,
}

/// What gathering needs from a loaded repo. A view rather than the repo itself so the
/// mapping is testable with a hand-made inventory; all file access goes through `read`.
pub struct RepoView<'a> {
    pub root: &'a Path,
    /// The Ansible directory, absolute or relative to `root`.
    pub ansible_dir: &'a Path,
    pub environments: &'a [crate::repo::env::Environment],
    /// A host's raw variables, each with its winning definition.
    pub host_vars: &'a dyn Fn(&str) -> Vec<RawVar>,
    /// A host's variable, rendered.
    pub resolved: &'a dyn Fn(&str, &str) -> Option<crate::repo::resolve::Resolved>,
    /// A text file's content, `None` when it does not exist.
    pub read: &'a dyn Fn(&Path) -> Option<String>,
    /// An environment's overlay (relative to `root`), built for its API host variable: its
    /// value and the HelmReleases it feeds, with the engine used.
    pub flux: &'a dyn Fn(&Path, &str) -> OverlayReport,
    /// The one line saying which engine builds the overlays.
    pub engine_line: Option<String>,
    /// A path as findings name it: relative to the repo root when it lies inside it.
    pub rel: &'a dyn Fn(&Path) -> PathBuf,
    /// hk-console.yaml's `contract:` switches.
    pub contract: &'a crate::repo::config::ContractConfig,
    /// The API addresses the repo's files configure clients with ([`api_uses_in`]).
    pub api_uses: &'a [ApiUse],
    /// A Jinja expression rendered against a host's variables, as Ansible would.
    pub render: &'a dyn Fn(&str, &str) -> crate::repo::resolve::Resolved,
}

/// Where the contract's two Ansible-side files live under the Ansible directory (kept with
/// hk-console.yaml's `contract:` switches, which turn their rules off).
pub use crate::repo::config::{CILIUM_TEMPLATE, SITE_PLAYBOOK};

fn json_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Whether a vault file's text is encrypted: the whole file (`$ANSIBLE_VAULT;` header), or
/// YAML whose values are inline `!vault` values.
pub fn is_vaulted_text(text: &str) -> bool {
    text.trim_start().starts_with("$ANSIBLE_VAULT;")
        || yaml::parse_documents(text)
            .is_ok_and(|docs| docs.iter().any(yaml::Node::contains_vaulted))
}

/// The password variables of `env`'s servers that name a variable nothing defines.
fn vault_needs(view: &RepoView<'_>, env: &crate::repo::env::Environment) -> Vec<VaultNeed> {
    use crate::repo::resolve::Resolved;
    let mut out: Vec<VaultNeed> = Vec::new();
    for h in &env.servers {
        for raw in (view.host_vars)(&h.name) {
            if !PASSWORD_VARS.contains(&raw.name.as_str()) || raw.secret {
                continue;
            }
            if let Some(Resolved::Unrenderable { reason }) = (view.resolved)(&h.name, &raw.name) {
                let need = VaultNeed {
                    var: raw.name.clone(),
                    at: Loc::new((view.rel)(&raw.file), raw.line),
                    reason,
                };
                if !out.contains(&need) {
                    out.push(need);
                }
            }
        }
    }
    out
}

/// Copy the facts the rules need out of a loaded repo.
pub fn gather_view(view: &RepoView<'_>) -> ParityInput {
    let root = view.root;
    let ansible_dir = if view.ansible_dir.is_absolute() {
        view.ansible_dir.to_path_buf()
    } else {
        root.join(view.ansible_dir)
    };
    let text_file = |rel: &str| {
        let path = ansible_dir.join(rel);
        TextFile {
            text: (view.read)(&path),
            path: (view.rel)(&path),
        }
    };
    // A repo without Flux: no `clusters/` and no environment naming an overlay. Its
    // environments have no overlay to build, so the Flux rules say so instead of failing.
    let without_flux = |env: &crate::repo::env::Environment| {
        !env.flux_overlay_configured && !root.join("clusters").is_dir()
    };
    let not_applicable = view
        .environments
        .iter()
        .filter(|e| without_flux(e))
        .map(|e| {
            format!(
                "{}: not applicable: {} (no clusters/ directory and no flux_overlay in hk-console.yaml: the repo has no Flux)",
                e.name,
                rules::FLUX.join(", ")
            )
        })
        .collect();
    // hk-console.yaml's `contract:` switches: each rule it turns off is said once.
    let mut not_applicable: Vec<String> = not_applicable;
    let mut off = Vec::new();
    let sans_var = view.contract.tls_sans_var();
    for (switch, rule, key, what) in [
        (
            &view.contract.site_playbook,
            rules::SITE_ORDER,
            "site_playbook",
            "no site playbook importing k3s, kube-vip and cilium".to_string(),
        ),
        (
            &view.contract.cni_values_template,
            rules::CILIUM_ENDPOINT,
            "cni_values_template",
            "no Cilium values template".to_string(),
        ),
        (
            &view.contract.tls_sans,
            rules::TLS_SANS,
            "tls_sans",
            format!("no {sans_var} list on the servers"),
        ),
    ] {
        if crate::repo::config::ContractConfig::is_off(switch) {
            off.push(rule);
            not_applicable.push(format!(
                "not applicable: {rule} ({what}: `contract.{key}: false` in hk-console.yaml)"
            ));
        }
    }
    ParityInput {
        off,
        envs: view
            .environments
            .iter()
            .map(|env| {
                let mut facts = gather_env(view, env);
                if without_flux(env) {
                    facts.overlay = None;
                    facts.helm = None;
                }
                facts
            })
            .collect(),
        cilium_template: Some(text_file(view.contract.cni_values_template_path())),
        site_yml: Some(text_file(view.contract.site_playbook_path())),
        engine_line: view.engine_line.clone(),
        not_applicable,
    }
}

fn gather_env(view: &RepoView<'_>, env: &crate::repo::env::Environment) -> EnvFacts {
    use crate::repo::env::{EnvProblem, Fact};
    use crate::repo::resolve::Resolved;

    let root = view.root;
    let fact = |f: &Fact| -> Option<Located<String>> {
        let value = f.value.clone()?;
        let at = f
            .origin
            .as_ref()
            .map(|o| Loc::new((view.rel)(&o.file), o.line))
            .unwrap_or_default();
        Some(Located::new(value, at))
    };

    let mut problems: Vec<Problem> = env
        .problems
        .iter()
        .map(|p| {
            let fact = match p {
                EnvProblem::NoServers { .. } => "servers".to_string(),
                EnvProblem::NoGatewayGroup { .. } => "vpn_gateways".to_string(),
                EnvProblem::NoAgentGroup { .. } => "agents".to_string(),
                EnvProblem::Missing { var }
                | EnvProblem::Disagree { var, .. }
                | EnvProblem::Unrenderable { var, .. } => var.clone(),
            };
            Problem {
                fact,
                message: p.to_string(),
                at: None,
            }
        })
        // The gateway group is not part of this contract.
        .filter(|p| p.fact != "vpn_gateways")
        .collect();
    // The seed defaults the repo has no counterpart of (neither defined nor used): unknown,
    // said once by the rules that need them.
    let no_counterpart = env.no_counterpart.clone();

    let host_vars: Vec<(String, Vec<RawVar>)> = env
        .servers
        .iter()
        .map(|h| (h.name.clone(), (view.host_vars)(&h.name)))
        .collect();
    let raw_defs = |name: &str| -> Vec<Located<String>> {
        let mut out: Vec<Located<String>> = Vec::new();
        for (_, vars) in &host_vars {
            for v in vars.iter().filter(|v| v.name == name && !v.secret) {
                let Some(text) = json_text(&v.value) else {
                    continue;
                };
                let located = Located::new(text, Loc::new((view.rel)(&v.file), v.line));
                if !out.contains(&located) {
                    out.push(located);
                }
            }
        }
        out
    };

    let mut vars: Vec<VarFact> = Vec::new();
    for (_, hv) in &host_vars {
        for v in hv.iter().filter(|v| !v.secret) {
            if let serde_json::Value::String(s) = &v.value {
                let fact = VarFact {
                    name: v.name.clone(),
                    value: s.clone(),
                    at: Loc::new((view.rel)(&v.file), v.line),
                };
                if !vars.contains(&fact) {
                    vars.push(fact);
                }
            }
        }
    }

    let sans_var = view.contract.tls_sans_var();
    // The SANs list (`contract.tls_sans`, default k3s_tls_sans), rendered per server; servers must agree, as for the other facts.
    let mut sans: Option<Located<Vec<String>>> = None;
    let mut sans_failed = false;
    for (host, hv) in &host_vars {
        let Some(resolved) = (view.resolved)(host, sans_var) else {
            continue;
        };
        let list = match resolved {
            Resolved::Value(serde_json::Value::Array(items)) => {
                items.iter().filter_map(json_text).collect::<Vec<_>>()
            }
            Resolved::Value(other) => {
                problems.push(Problem {
                    fact: sans_var.into(),
                    message: format!("{host}: expected a list, found {other}"),
                    at: None,
                });
                sans_failed = true;
                continue;
            }
            Resolved::Unrenderable { reason } => {
                problems.push(Problem {
                    fact: sans_var.into(),
                    message: format!("cannot be rendered for {host}: {reason}"),
                    at: None,
                });
                sans_failed = true;
                continue;
            }
        };
        let at = hv
            .iter()
            .find(|v| v.name == sans_var)
            .map(|v| Loc::new((view.rel)(&v.file), v.line))
            .unwrap_or_default();
        match &sans {
            None => sans = Some(Located::new(list, at)),
            Some(first) if first.value != list => {
                problems.push(Problem {
                    fact: sans_var.into(),
                    message: format!(
                        "servers disagree: {:?} (from {}) vs {host}'s {:?}",
                        first.value, first.at, list
                    ),
                    at: Some(at),
                });
                sans_failed = true;
            }
            Some(_) => {}
        }
    }
    if sans_failed {
        sans = None;
    }

    let vault = match &env.vault {
        None => VaultState::NotExpected,
        Some(rel) => {
            let path = if rel.is_absolute() {
                rel.clone()
            } else {
                root.join(rel)
            };
            match (view.read)(&path) {
                None => VaultState::Missing {
                    expected: (view.rel)(&path),
                    needed_by: vault_needs(view, env),
                },
                Some(text) => VaultState::Present {
                    file: (view.rel)(&path),
                    vaulted: is_vaulted_text(&text),
                },
            }
        }
    };

    let report = (view.flux)(&env.flux_overlay, env.flux_api_host_var());
    let overlay = OverlayFact::from_result(&env.flux_overlay, report.overlay);
    let mut unknown = Vec::new();
    let helm = match report.helm {
        Some(h) => match h.values {
            Ok((service_hosts, service_ports)) => Some(HelmFacts {
                path: h.path,
                service_hosts,
                service_ports,
            }),
            Err(e) => {
                let p = Problem {
                    fact: format!("Flux path {}", h.path),
                    message: e.to_string(),
                    at: e.location().map(|l| Loc::new(l.file, l.line)),
                };
                if e.is_cannot_tell() {
                    unknown.push(p);
                } else {
                    problems.push(p);
                }
                None
            }
        },
        None => None,
    };

    let names = FactNames {
        vip: env.vip.var.clone(),
        endpoint: env.endpoint.var.clone(),
        founder: env.founder.var.clone(),
        api_port: env.api_port.var.clone(),
        tls_sans: sans_var.to_string(),
    };
    // A fact from a variable: that variable's definitions as written; from an expression
    // in hk-console.yaml: the expression itself, where it is written.
    let raw_of = |f: &Fact| -> Vec<Located<String>> {
        if f.var.contains("{{") || f.var.contains("{%") {
            let at = f
                .origin
                .as_ref()
                .map(|o| Loc::new((view.rel)(&o.file), o.line))
                .unwrap_or_default();
            vec![Located::new(f.var.clone(), at)]
        } else {
            raw_defs(&f.var)
        }
    };
    let addr = |h: &crate::repo::env::EnvHost| NodeAddr {
        host: h.name.clone(),
        address: h.address.clone(),
    };
    let nodes: Vec<NodeAddr> = env.servers.iter().map(addr).collect();
    let agents: Vec<NodeAddr> = env.agents.iter().map(addr).collect();
    // The API URLs the Ansible files write, rendered for each server: the ones that name
    // one node's own address.
    let mut single_node_uses: Vec<SingleNodeUse> = Vec::new();
    let mut unrendered_uses: Vec<UnrenderedUse> = Vec::new();
    for u in view.api_uses {
        for h in &env.servers {
            let got = match u.how {
                ApiValue::Literal => {
                    Some(Resolved::Value(serde_json::Value::String(u.var.clone())))
                }
                ApiValue::Var => (view.resolved)(&h.name, &u.var),
                ApiValue::Template => Some((view.render)(&h.name, &u.var)),
            };
            let value = match got {
                Some(Resolved::Value(value)) => value,
                Some(Resolved::Unrenderable { reason }) => {
                    let miss = UnrenderedUse {
                        at: u.at.clone(),
                        var: u.var.clone(),
                        kind: u.kind,
                        why: reason.clone(),
                        first_of_group: [u.var.as_str(), reason.as_str()]
                            .iter()
                            .any(|t| t.contains("groups[") && t.contains("][0]")),
                    };
                    if !unrendered_uses.iter().any(|m| m.at == miss.at) {
                        unrendered_uses.push(miss);
                    }
                    continue;
                }
                _ => continue,
            };
            let Some(address) = json_text(&value) else {
                continue;
            };
            // `ipwrap` writes an IPv6 address in brackets for the URL.
            let address = address
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let Some(node) = nodes.iter().chain(&agents).find(|n| n.address == address) else {
                continue;
            };
            let hit = SingleNodeUse {
                at: u.at.clone(),
                var: u.var.clone(),
                kind: u.kind,
                address,
                node: node.host.clone(),
            };
            if !single_node_uses.contains(&hit) {
                single_node_uses.push(hit);
            }
        }
    }

    EnvFacts {
        name: env.name.clone(),
        names,
        single_node_uses,
        unrendered_uses,
        no_counterpart,
        agents,
        engine: report.engine,
        overlay: Some(overlay),
        helm,
        endpoint: fact(&env.endpoint),
        vip: fact(&env.vip),
        founder: fact(&env.founder),
        api_port: fact(&env.api_port),
        nodes,
        endpoint_raw: raw_of(&env.endpoint),
        api_host_raw: raw_of(&env.founder),
        tls_sans: sans,
        vault,
        vault_locked: Vec::new(),
        vars,
        problems,
        unknown,
    }
}
