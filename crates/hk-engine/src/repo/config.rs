//! `hk-console.yaml`: which inventory groups make each environment, and where things live.
//!
//! Owns: the file's schema (strict: an unknown key is an error with file:line:col), its
//! defaults, and turning its relative paths into paths under the repo root.
//! Must not: derive anything the inventory already says (founder, VIP, endpoint, port,
//! primary group, kubeconfig name come from hostvars; see `env.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The name of the file at the top of an infra repo.
pub const CONFIG_FILE: &str = "hk-console.yaml";

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where ansible-playbook runs from, relative to the repo root.
    #[serde(default = "default_ansible_dir")]
    pub ansible_dir: PathBuf,
    /// The inventory source (an INI/YAML/JSON file or a directory), relative to the repo root.
    /// Unset: what ansible-playbook in `ansible_dir` uses with no `-i` (`ANSIBLE_INVENTORY`,
    /// else `inventory =` of its ansible.cfg), else [`DEFAULT_INVENTORY`] (`Repo::load_with`).
    #[serde(default)]
    pub inventory: Option<PathBuf>,
    /// An extra known_hosts file the SSH executor trusts besides `~/.ssh/known_hosts`.
    #[serde(default)]
    pub known_hosts: Option<PathBuf>,
    /// Environments by name (dev, prod, ...).
    pub environments: BTreeMap<String, EnvConfig>,
    /// The kustomize `check` builds Flux overlays with: a `kustomize` or `kubectl` binary (a
    /// name looked up on PATH, or a path relative to the repo root). Unset: `kustomize`, else
    /// `kubectl`, on PATH; neither: the builtin engine.
    #[serde(default)]
    pub kustomize_bin: Option<PathBuf>,
    /// The cluster-held lock of mutating runs (`hk-console-run-lock` in kube-system).
    #[serde(default)]
    pub run_lock: RunLockConfig,
    /// Where every environment's facts come from (an environment's own `facts:` wins, key by
    /// key). Unset keys: the seed repo's variable names ([`FactsConfig::default_source`]).
    #[serde(default)]
    pub facts: FactsConfig,
    /// What the live panes look for in the cluster: the CNI's agents (Cilium's names by
    /// default).
    #[serde(default)]
    pub cni: CniConfig,
    /// Which of the seed's Ansible-side contract rules apply to this repo (all by default).
    #[serde(default)]
    pub contract: ContractConfig,
    /// The names the live panes and checks look for (an environment's own `names:` wins,
    /// key by key). Unset keys: the servers' hostvar where there is one, else the seed
    /// repo's name ([`NameKey::default_value`]).
    #[serde(default)]
    pub names: NamesConfig,
    /// Tasks that run for real under `--check` (`check_mode: false` on a module that can
    /// write) which a person has read and vouches only look: each pinned to its file, line
    /// and the sha256 of the task as written, so an edit voids the review
    /// (`repo::check_mode`; docs/config.md).
    #[serde(default)]
    pub reviewed_read_only: Vec<ReviewedReadOnly>,
}

/// One entry of `reviewed_read_only:`: a `check_mode: false` task someone reviewed as
/// read-only.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewedReadOnly {
    /// The task file, relative to the repo root (as `hk-console plan` names it).
    pub file: String,
    /// The line the task starts on (its `- name:` line, as `hk-console plan` names it).
    pub line: usize,
    /// The sha256 (hex) of the task as written (`hk-console plan` prints it for an
    /// unreviewed task): a changed task no longer matches, and is not reviewed.
    pub sha256: String,
    /// Who reviewed it.
    pub by: String,
    /// When (YYYY-MM-DD).
    pub at: String,
    /// The line of this entry in hk-console.yaml (set when the file is read).
    #[serde(skip)]
    pub config_line: usize,
}

impl ReviewedReadOnly {
    /// Why this entry cannot be a review, if it cannot.
    fn invalid(&self) -> Option<String> {
        let f = self.file.trim();
        if f.is_empty() {
            return Some("`file` is empty (the task file, relative to the repo root)".into());
        }
        if Path::new(f).is_absolute() || f.split('/').any(|c| c == "..") {
            return Some(format!(
                "`file: {f}` must be relative to the repo root, inside it"
            ));
        }
        if self.line == 0 {
            return Some("`line: 0`: lines count from 1 (the task's `- name:` line)".into());
        }
        if self.sha256.len() != 64 || !self.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Some(format!(
                "`sha256: {}` is not a sha256 (64 hex digits; `hk-console plan` prints the task's)",
                self.sha256
            ));
        }
        if self.by.trim().is_empty() {
            return Some("`by` is empty: name who reviewed the task".into());
        }
        let date = self.at.as_bytes();
        let is_date = date.len() == 10
            && date.iter().enumerate().all(|(i, b)| {
                if i == 4 || i == 7 {
                    *b == b'-'
                } else {
                    b.is_ascii_digit()
                }
            });
        if !is_date {
            return Some(format!(
                "`at: {}` is not a date (YYYY-MM-DD, when the task was reviewed)",
                self.at
            ));
        }
        None
    }
}

/// Where the seed's contract rules look, under the Ansible directory (the layout the infra
/// repo documents; `contract:` switches a rule off where a repo has no counterpart).
pub const CILIUM_TEMPLATE: &str = "roles/cilium/templates/cilium-values.yaml.j2";
pub const SITE_PLAYBOOK: &str = "playbooks/site.yml";
/// The server variable listing the API certificate's SANs (the `tls-sans` rule).
pub const TLS_SANS_VAR: &str = "k3s_tls_sans";

/// `contract:` in hk-console.yaml: where the repo keeps the things the Ansible-side parity
/// rules read (its site playbook, its CNI values template, the server variable listing the
/// API certificate's SANs). Each key takes a path (or, for `tls_sans`, a variable name) when
/// the repo keeps it elsewhere than the seed repo, or `false` when it has no counterpart:
/// `check` then names the rule not applicable, with this file as the reason, instead of
/// failing it. Unset (or `true`): the seed repo's place, and the rule applies.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContractConfig {
    /// The site playbook importing k3s, kube-vip and cilium in order, under the Ansible
    /// directory (default [`SITE_PLAYBOOK`]).
    #[serde(default)]
    pub site_playbook: Option<ContractPart>,
    /// The CNI values template whose `k8sServiceHost` must consume the endpoint, under the
    /// Ansible directory (default [`CILIUM_TEMPLATE`]).
    #[serde(default)]
    pub cni_values_template: Option<ContractPart>,
    /// The server variable listing the API certificate's SANs (default [`TLS_SANS_VAR`]).
    #[serde(default)]
    pub tls_sans: Option<ContractPart>,
}

/// One `contract:` key: `false` (no counterpart), `true` (the default place) or where.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum ContractPart {
    Applies(bool),
    At(String),
}

impl ContractConfig {
    /// Whether `part` is switched off (`false`).
    pub fn is_off(part: &Option<ContractPart>) -> bool {
        matches!(part, Some(ContractPart::Applies(false)))
    }

    /// Where `part` is: the configured path or name, else `default`.
    pub fn place<'a>(part: &'a Option<ContractPart>, default: &'a str) -> &'a str {
        match part {
            Some(ContractPart::At(p)) if !p.trim().is_empty() => p.trim(),
            _ => default,
        }
    }

    pub fn site_playbook_path(&self) -> &str {
        Self::place(&self.site_playbook, SITE_PLAYBOOK)
    }

    pub fn cni_values_template_path(&self) -> &str {
        Self::place(&self.cni_values_template, CILIUM_TEMPLATE)
    }

    pub fn tls_sans_var(&self) -> &str {
        Self::place(&self.tls_sans, TLS_SANS_VAR)
    }

    /// The first key whose value cannot be used: its key and why.
    fn invalid(&self) -> Option<(&'static str, String)> {
        for (key, part) in [
            ("site_playbook", &self.site_playbook),
            ("cni_values_template", &self.cni_values_template),
        ] {
            if let Some(ContractPart::At(p)) = part {
                if p.trim().is_empty() || Path::new(p.trim()).is_absolute() {
                    return Some((
                        key,
                        format!("`{p}` is not a path under the Ansible directory (write it relative to it, or `false`)"),
                    ));
                }
            }
        }
        if let Some(ContractPart::At(v)) = &self.tls_sans {
            if !is_identifier(v.trim()) {
                return Some((
                    "tls_sans",
                    format!("`{v}` is not a variable name (write the server variable that lists the SANs, or `false`)"),
                ));
            }
        }
        None
    }
}

/// `cni:` in hk-console.yaml: where the CNI's agents run and what they are called, for the
/// agent pane, the rollout watch and the waits that read them. Unset keys are Cilium's
/// names as its Helm chart installs it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CniConfig {
    /// The namespace of the agents, their DaemonSet and ConfigMaps (also kube-vip's Lease).
    #[serde(default)]
    pub namespace: Option<String>,
    /// The label selector of the agent pods.
    #[serde(default)]
    pub selector: Option<String>,
    /// The container whose API endpoint environment is judged.
    #[serde(default)]
    pub container: Option<String>,
    /// The agents' DaemonSet.
    #[serde(default)]
    pub daemonset: Option<String>,
}

/// The seed repo's variables for each environment fact: the defaults of `facts:`.
pub const VAR_PRIMARY_GROUP: &str = "k3s_primary_group";
pub const VAR_FOUNDER: &str = "k3s_api_host";
pub const VAR_VIP: &str = "kube_vip_address";
pub const VAR_ENDPOINT: &str = "k3s_apiserver_endpoint";
pub const VAR_API_PORT: &str = "k3s_api_port";
pub const VAR_KUBECONFIG: &str = "cluster_kubeconfig_name";

/// Which environment fact a [`FactsConfig`] key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FactKey {
    PrimaryGroup,
    Founder,
    Vip,
    Endpoint,
    ApiPort,
    Kubeconfig,
}

impl FactKey {
    pub const ALL: [FactKey; 6] = [
        FactKey::PrimaryGroup,
        FactKey::Founder,
        FactKey::Vip,
        FactKey::Endpoint,
        FactKey::ApiPort,
        FactKey::Kubeconfig,
    ];

    /// The key as hk-console.yaml writes it under `facts:`.
    pub fn key(self) -> &'static str {
        match self {
            FactKey::PrimaryGroup => "primary_group",
            FactKey::Founder => "founder",
            FactKey::Vip => "vip",
            FactKey::Endpoint => "endpoint",
            FactKey::ApiPort => "api_port",
            FactKey::Kubeconfig => "kubeconfig",
        }
    }
}

/// `facts:` in hk-console.yaml: for each environment fact, the server variable that holds
/// it (`vip: cluster_vip`) or a Jinja expression over a server's variables, rendered as the
/// repo's own templates would (`endpoint: "{{ cluster_vip }}"`,
/// `api_port: "{{ apiserver_port | default(6443) }}"`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactsConfig {
    /// The inventory group of the primary (first) server.
    #[serde(default)]
    pub primary_group: Option<String>,
    /// The address the other servers join (the founder's).
    #[serde(default)]
    pub founder: Option<String>,
    /// The control-plane VIP.
    #[serde(default)]
    pub vip: Option<String>,
    /// The API endpoint the CNI and the kubeconfigs dial.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// The API server port.
    #[serde(default)]
    pub api_port: Option<String>,
    /// The kubeconfig file name under the repo's `.cache/`.
    #[serde(default)]
    pub kubeconfig: Option<String>,
}

/// Where one fact comes from, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FactSource {
    /// A server variable, by name.
    Var(String),
    /// A Jinja expression over a server's variables.
    Template(String),
}

impl FactSource {
    /// `text` as hk-console.yaml writes it: a template when it holds `{{` or `{%`, else a
    /// variable name.
    pub fn parse(text: &str) -> FactSource {
        if text.contains("{{") || text.contains("{%") {
            FactSource::Template(text.to_string())
        } else {
            FactSource::Var(text.trim().to_string())
        }
    }

    /// How messages name it: the variable, or the expression.
    pub fn shown(&self) -> &str {
        match self {
            FactSource::Var(v) | FactSource::Template(v) => v,
        }
    }
}

impl FactsConfig {
    /// What this mapping itself says for `k` (no default).
    pub fn source_of(&self, k: FactKey) -> Option<&String> {
        self.get(k)
    }

    fn get(&self, k: FactKey) -> Option<&String> {
        match k {
            FactKey::PrimaryGroup => self.primary_group.as_ref(),
            FactKey::Founder => self.founder.as_ref(),
            FactKey::Vip => self.vip.as_ref(),
            FactKey::Endpoint => self.endpoint.as_ref(),
            FactKey::ApiPort => self.api_port.as_ref(),
            FactKey::Kubeconfig => self.kubeconfig.as_ref(),
        }
    }

    /// The seed repo's variable for `k`: what a repo that writes no `facts:` uses.
    pub fn default_source(k: FactKey) -> &'static str {
        match k {
            FactKey::PrimaryGroup => VAR_PRIMARY_GROUP,
            FactKey::Founder => VAR_FOUNDER,
            FactKey::Vip => VAR_VIP,
            FactKey::Endpoint => VAR_ENDPOINT,
            FactKey::ApiPort => VAR_API_PORT,
            FactKey::Kubeconfig => VAR_KUBECONFIG,
        }
    }

    /// This mapping's keys over `outer`'s, key by key.
    pub fn merged_over(&self, outer: &FactsConfig) -> FactsConfig {
        let pick = |k: FactKey| self.get(k).or_else(|| outer.get(k)).cloned();
        FactsConfig {
            primary_group: pick(FactKey::PrimaryGroup),
            founder: pick(FactKey::Founder),
            vip: pick(FactKey::Vip),
            endpoint: pick(FactKey::Endpoint),
            api_port: pick(FactKey::ApiPort),
            kubeconfig: pick(FactKey::Kubeconfig),
        }
    }

    /// Where fact `k` comes from: this mapping's key, else `outer`'s, else the default.
    pub fn source(&self, outer: &FactsConfig, k: FactKey) -> FactSource {
        FactSource::parse(
            self.get(k)
                .or_else(|| outer.get(k))
                .map(String::as_str)
                .unwrap_or(Self::default_source(k)),
        )
    }

    /// The first key whose value is neither a variable name nor a template: its key and
    /// why.
    fn invalid(&self) -> Option<(FactKey, String)> {
        FactKey::ALL.into_iter().find_map(|k| {
            let v = self.get(k)?;
            match FactSource::parse(v) {
                FactSource::Var(name) if !is_identifier(&name) => Some((
                    k,
                    format!(
                        "`{v}` is neither a variable name nor a Jinja expression (write the server variable that holds it, e.g. `cluster_vip`, or an expression such as \"{{{{ cluster_vip }}}}\")"
                    ),
                )),
                FactSource::Template(t) => minijinja::Environment::new()
                    .template_from_str(&t)
                    .err()
                    .map(|e| (k, format!("`{t}` does not parse as Jinja: {e}"))),
                FactSource::Var(_) => None,
            }
        })
    }
}

fn is_identifier(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// The seed repo's name, the default of hk-console.yaml `names.kube_vip_lease`: the Lease
/// kube-vip's leader election holds (kube-vip's own default `vip_leasename`).
pub const DEFAULT_KUBE_VIP_LEASE: &str = "plndr-cp-lock";
/// The seed repo's name, the default of hk-console.yaml `names.vpn_unit`: the VPN
/// gateway's tunnel systemd unit.
pub const DEFAULT_VPN_UNIT: &str = "vpn-egress-tunnel.service";
/// The seed repo's name, the default of hk-console.yaml `names.vpn_interface`: the tunnel's
/// network interface.
pub const DEFAULT_VPN_INTERFACE: &str = "tun0";
/// The seed repo's name, the default of hk-console.yaml `names.vpn_exit_ip_url`: the URL
/// that answers with the caller's public address.
pub const DEFAULT_VPN_EXIT_IP_URL: &str = "https://ipinfo.io/ip";
/// The seed repo's name, the default of hk-console.yaml `names.flux_api_host_var`: the
/// Flux `postBuild` substitution variable carrying the API address Cilium dials.
pub const DEFAULT_FLUX_API_HOST_VAR: &str = "K3S_API_HOST";

/// Which name a [`NamesConfig`] key sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameKey {
    KubeVipLease,
    VpnUnit,
    VpnInterface,
    VpnExitIpUrl,
    FluxApiHostVar,
}

impl NameKey {
    pub const ALL: [NameKey; 5] = [
        NameKey::KubeVipLease,
        NameKey::VpnUnit,
        NameKey::VpnInterface,
        NameKey::VpnExitIpUrl,
        NameKey::FluxApiHostVar,
    ];

    /// The key as hk-console.yaml writes it under `names:`.
    pub fn key(self) -> &'static str {
        match self {
            NameKey::KubeVipLease => "kube_vip_lease",
            NameKey::VpnUnit => "vpn_unit",
            NameKey::VpnInterface => "vpn_interface",
            NameKey::VpnExitIpUrl => "vpn_exit_ip_url",
            NameKey::FluxApiHostVar => "flux_api_host_var",
        }
    }

    /// The seed repo's name: what is looked for when neither hk-console.yaml nor a hostvar
    /// says otherwise.
    pub fn default_value(self) -> &'static str {
        match self {
            NameKey::KubeVipLease => DEFAULT_KUBE_VIP_LEASE,
            NameKey::VpnUnit => DEFAULT_VPN_UNIT,
            NameKey::VpnInterface => DEFAULT_VPN_INTERFACE,
            NameKey::VpnExitIpUrl => DEFAULT_VPN_EXIT_IP_URL,
            NameKey::FluxApiHostVar => DEFAULT_FLUX_API_HOST_VAR,
        }
    }

    /// Why `value` cannot be this name, if it cannot. Each is checked as what it becomes: a
    /// Lease name in a field selector, a unit and an interface as one word of a remote
    /// command, a URL curl fetches, a variable Flux substitutes.
    fn refuse(self, value: &str) -> Option<String> {
        if value.is_empty() {
            return Some("is empty".into());
        }
        if value.trim() != value || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Some(format!(
                "`{}` holds whitespace or a control character (expected one word)",
                value.escape_debug()
            ));
        }
        match self {
            NameKey::KubeVipLease => (!is_dns_subdomain(value)).then(|| {
                format!("`{value}` is not a Lease name (lowercase letters, digits, `-` and `.`, starting and ending with a letter or digit, at most 253 characters)")
            }),
            NameKey::VpnUnit => {
                let ok = !value.starts_with('-')
                    && value
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || ":-_.@\\".contains(c));
                (!ok).then(|| {
                    format!("`{value}` is not a systemd unit name (ASCII letters, digits and `:-_.@\\`, not starting with `-`, e.g. `openvpn-client@pia.service`)")
                })
            }
            NameKey::VpnInterface => {
                let ok = value.len() <= 15
                    && !value.starts_with('-')
                    && value != "."
                    && value != ".."
                    && value
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
                (!ok).then(|| {
                    format!("`{value}` is not a network interface name (at most 15 ASCII letters, digits and `-_.`, not starting with `-`, e.g. `wg0`)")
                })
            }
            NameKey::VpnExitIpUrl => {
                let ok = value
                    .strip_prefix("https://")
                    .or_else(|| value.strip_prefix("http://"))
                    .is_some_and(|rest| !rest.is_empty());
                (!ok).then(|| format!("`{value}` is not an http(s):// URL"))
            }
            NameKey::FluxApiHostVar => (!is_identifier(value)).then(|| {
                format!("`{value}` is not a Flux variable name (^[_a-zA-Z][_a-zA-Z0-9]*$, e.g. `API_VIP`)")
            }),
        }
    }
}

/// A Kubernetes object name (RFC 1123 subdomain), as the API server accepts it.
fn is_dns_subdomain(s: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    s.len() <= 253
        && edge(s.chars().next())
        && edge(s.chars().last())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
}

/// `names:` in hk-console.yaml: the names the live panes and checks look for, where the
/// repo's differ from the seed's. Each key set here wins over the servers' or gateways'
/// hostvar of the same meaning (`kube_vip_lease_name`, `vpn_egress_gateway_service` /
/// `_interface` / `_exit_ip_url`); unset, the hostvar, else [`NameKey::default_value`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct NamesConfig {
    /// kube-vip's leader-election Lease (in the `cni.namespace`, kube-system by default).
    #[serde(default)]
    pub kube_vip_lease: Option<String>,
    /// The VPN gateway's tunnel systemd unit.
    #[serde(default)]
    pub vpn_unit: Option<String>,
    /// The VPN tunnel's network interface.
    #[serde(default)]
    pub vpn_interface: Option<String>,
    /// The URL that answers with the caller's public address, fetched through the tunnel
    /// and without it.
    #[serde(default)]
    pub vpn_exit_ip_url: Option<String>,
    /// The Flux `postBuild` variable the parity contract compares with the VIP.
    #[serde(default)]
    pub flux_api_host_var: Option<String>,
}

impl NamesConfig {
    /// What this mapping itself says for `k` (no hostvar, no default).
    pub fn get(&self, k: NameKey) -> Option<&str> {
        match k {
            NameKey::KubeVipLease => self.kube_vip_lease.as_deref(),
            NameKey::VpnUnit => self.vpn_unit.as_deref(),
            NameKey::VpnInterface => self.vpn_interface.as_deref(),
            NameKey::VpnExitIpUrl => self.vpn_exit_ip_url.as_deref(),
            NameKey::FluxApiHostVar => self.flux_api_host_var.as_deref(),
        }
    }

    /// This mapping's value for `k`, else the seed repo's name (for names no hostvar sets).
    pub fn or_default(&self, k: NameKey) -> &str {
        self.get(k).unwrap_or(k.default_value())
    }

    /// This mapping's keys over `outer`'s, key by key.
    pub fn merged_over(&self, outer: &NamesConfig) -> NamesConfig {
        let pick = |k: NameKey| self.get(k).or_else(|| outer.get(k)).map(str::to_string);
        NamesConfig {
            kube_vip_lease: pick(NameKey::KubeVipLease),
            vpn_unit: pick(NameKey::VpnUnit),
            vpn_interface: pick(NameKey::VpnInterface),
            vpn_exit_ip_url: pick(NameKey::VpnExitIpUrl),
            flux_api_host_var: pick(NameKey::FluxApiHostVar),
        }
    }

    /// The first key whose value cannot be the name it sets: its key and why.
    fn invalid(&self) -> Option<(NameKey, String)> {
        NameKey::ALL
            .into_iter()
            .find_map(|k| k.refuse(self.get(k)?).map(|why| (k, why)))
    }
}

/// `run_lock:` in hk-console.yaml.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunLockConfig {
    /// Seconds a holder's lock lasts without a renewal; the console renews it three times
    /// per duration while its run lives. A lock not renewed for longer is stale.
    #[serde(default = "default_lock_duration_s")]
    pub duration_s: u64,
}

impl Default for RunLockConfig {
    fn default() -> Self {
        RunLockConfig {
            duration_s: default_lock_duration_s(),
        }
    }
}

fn default_lock_duration_s() -> u64 {
    60
}

/// The shortest lock duration accepted: renewals go out every third of it.
pub const MIN_LOCK_DURATION_S: u64 = 6;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvConfig {
    /// The inventory group holding this environment's k3s servers.
    pub servers: String,
    /// The inventory group holding its VPN egress gateways, if it has any.
    #[serde(default)]
    pub vpn_gateways: Option<String>,
    /// Nothing mutates here unless the operator first confirms they are present.
    #[serde(default)]
    pub operator_present: bool,
    /// The gate policy holds here: every mutating step is previewed where its kind can be
    /// and approved with its blast radius stated, or confirmed by typing the environment's
    /// name and the host count. No runbook can opt out.
    #[serde(default)]
    pub protected: bool,
    /// The Flux overlay directory, relative to the repo root (default `clusters/<name>`).
    #[serde(default)]
    pub flux_overlay: Option<PathBuf>,
    /// The vaulted file holding this environment's become password, relative to the repo
    /// root. Named so `check` can say when it is missing or not actually vaulted.
    #[serde(default)]
    pub vault: Option<PathBuf>,
    /// The inventory group holding its agent (worker) nodes, if it has any: nodes of the
    /// cluster, not of its control plane.
    #[serde(default)]
    pub agents: Option<String>,
    /// This environment's own `facts:` (key by key over the top-level `facts:`).
    #[serde(default)]
    pub facts: FactsConfig,
    /// This environment's own `names:` (key by key over the top-level `names:`).
    #[serde(default)]
    pub names: NamesConfig,
}

/// The seed repo's Ansible directory: the default of `ansible_dir:`.
pub const DEFAULT_ANSIBLE_DIR: &str = "infra/ansible";

fn default_ansible_dir() -> PathBuf {
    PathBuf::from(DEFAULT_ANSIBLE_DIR)
}

/// The inventory when neither hk-console.yaml nor any ansible.cfg names one (Ansible's own
/// default, /etc/ansible/hosts, is no infra repo's inventory).
pub const DEFAULT_INVENTORY: &str = "infra/ansible/inventory/hosts.ini";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: cannot read: {source}\n  hint: the repo root must hold {CONFIG_FILE}, which names the environments; `hk-console init --repo DIR` proposes one from the inventory and the Flux tree (`--write` writes it and runs check)")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Not a regular file, or over the size cap (see `repo::read`).
    #[error("{0}")]
    Refused(super::read::ReadError),
    #[error("{path}:{line}:{col}: {message}")]
    Invalid {
        path: PathBuf,
        line: usize,
        col: usize,
        message: String,
    },
}

impl Config {
    /// Read `root/hk-console.yaml`.
    pub fn load(root: &Path) -> Result<Config, ConfigError> {
        use super::read::{read_text, ReadError};
        let path = root.join(CONFIG_FILE);
        let text = read_text(&path).map_err(|e| match e {
            ReadError::Io { path, source } => ConfigError::Read { path, source },
            ReadError::NotUtf8 { path, line, col } => ConfigError::Invalid {
                path,
                line,
                col,
                message: "bytes that are not UTF-8 (expected UTF-8 text)".into(),
            },
            other => ConfigError::Refused(other),
        })?;
        let config = Self::parse(&path, &text)?;
        config.refuse_special_vault_files(root, &path, &text)?;
        Ok(config)
    }

    /// Parse the text of a config file; `path` is only used in messages.
    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        // The bounded loader first: serde_yaml's scanner is quadratic in flow nesting and
        // copies aliases without limit; ours refuses both, linearly, naming the line.
        if let Err(e) = crate::yaml::parse_documents(text) {
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                line: e.mark.line,
                col: e.mark.col,
                message: e.message,
            });
        }
        let config: Config = serde_yaml::from_str(text).map_err(|e| {
            let (line, col) = e
                .location()
                .map(|l| (l.line(), l.column()))
                .unwrap_or((1, 1));
            ConfigError::Invalid {
                path: path.to_path_buf(),
                line,
                col,
                message: e
                    .to_string()
                    .split(" at line ")
                    .next()
                    .unwrap_or_default()
                    .to_string(),
            }
        })?;
        if config.run_lock.duration_s < MIN_LOCK_DURATION_S {
            let (line, col) = text
                .lines()
                .enumerate()
                .find_map(|(i, l)| l.find("duration_s").map(|c| (i + 1, c + 1)))
                .unwrap_or((1, 1));
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                line,
                col,
                message: format!(
                    "`run_lock.duration_s: {}` is too short: at least {MIN_LOCK_DURATION_S} seconds (the lock is renewed every third of it)",
                    config.run_lock.duration_s
                ),
            });
        }
        // A fact mapping that names no variable and is no template would leave the fact
        // silently unknown: refused here, at its line.
        let scopes = std::iter::once((vec!["facts".to_string()], &config.facts)).chain(
            config.environments.iter().map(|(n, e)| {
                (
                    vec!["environments".to_string(), n.clone(), "facts".to_string()],
                    &e.facts,
                )
            }),
        );
        for (at, facts) in scopes {
            if let Some((k, why)) = facts.invalid() {
                let doc = crate::yaml::parse_one(text).ok();
                let mut keys: Vec<&str> = at.iter().map(String::as_str).collect();
                keys.push(k.key());
                let mark = doc
                    .as_ref()
                    .and_then(|d| d.path(&keys))
                    .map(|n| n.mark)
                    .unwrap_or_default();
                return Err(ConfigError::Invalid {
                    path: path.to_path_buf(),
                    line: mark.line.max(1),
                    col: mark.col.max(1),
                    message: format!("{}: {why}", keys.join(".")),
                });
            }
        }
        // A contract path or variable that cannot be one would make its rule read nothing.
        if let Some((k, why)) = config.contract.invalid() {
            let mark = crate::yaml::parse_one(text)
                .ok()
                .and_then(|d| d.path(&["contract", k]).map(|n| n.mark))
                .unwrap_or_default();
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                line: mark.line.max(1),
                col: mark.col.max(1),
                message: format!("contract.{k}: {why}"),
            });
        }
        // A name the panes would look for in vain (or could not send) is refused here, at
        // its line, naming the environment it is for.
        let scopes = std::iter::once((None, &config.names)).chain(
            config
                .environments
                .iter()
                .map(|(n, e)| (Some(n.as_str()), &e.names)),
        );
        let doc = crate::yaml::parse_one(text).ok();
        for (env, names) in scopes {
            let at = |k: NameKey| -> Vec<&str> {
                match env {
                    None => vec!["names", k.key()],
                    Some(n) => vec!["environments", n, "names", k.key()],
                }
            };
            // A key written with no value (or null) reads as unset: it would silently
            // fall back to the default, so it is refused like a bad value.
            let written_empty = NameKey::ALL.into_iter().find(|&k| {
                names.get(k).is_none() && doc.as_ref().and_then(|d| d.path(&at(k))).is_some()
            });
            let bad = written_empty
                .map(|k| {
                    (
                        k,
                        "has no value (write the name, or leave the key out for the default)"
                            .to_string(),
                    )
                })
                .or_else(|| names.invalid());
            if let Some((k, why)) = bad {
                let keys = at(k);
                let mark = doc
                    .as_ref()
                    .and_then(|d| d.path(&keys))
                    .map(|n| n.mark)
                    .unwrap_or_default();
                let scope = match env {
                    None => "every environment".to_string(),
                    Some(n) => format!("environment `{n}`"),
                };
                return Err(ConfigError::Invalid {
                    path: path.to_path_buf(),
                    line: mark.line.max(1),
                    col: mark.col.max(1),
                    message: format!("{} ({scope}): {why}", keys.join(".")),
                });
            }
        }
        // A review that cannot pin a task would vouch for nothing (or for anything):
        // refused at its line.
        let mut config = config;
        let entries = doc
            .as_ref()
            .and_then(|d| d.get("reviewed_read_only"))
            .and_then(crate::yaml::Node::as_seq)
            .unwrap_or_default();
        for (i, r) in config.reviewed_read_only.iter_mut().enumerate() {
            let mark = entries.get(i).map(|n| n.mark).unwrap_or_default();
            r.config_line = mark.line.max(1);
            if let Some(why) = r.invalid() {
                return Err(ConfigError::Invalid {
                    path: path.to_path_buf(),
                    line: mark.line.max(1),
                    col: mark.col.max(1),
                    message: format!("reviewed_read_only[{i}]: {why}"),
                });
            }
        }
        if config.environments.is_empty() {
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                line: 1,
                col: 1,
                message:
                    "`environments` is empty: name at least one, e.g. `prod: { servers: control_plane }`"
                        .into(),
            });
        }
        Ok(config)
    }
}

impl Config {
    /// A `vault:` that names a FIFO or device (`/dev/zero`) would hang or never end when
    /// `check` reads it: refused here, by type, at the line that names it.
    fn refuse_special_vault_files(
        &self,
        root: &Path,
        path: &Path,
        text: &str,
    ) -> Result<(), ConfigError> {
        let doc = crate::yaml::parse_one(text).ok();
        for (name, env) in &self.environments {
            let Some(vault) = &env.vault else { continue };
            let Ok(meta) = std::fs::metadata(root.join(vault)) else {
                continue;
            };
            if meta.is_file() {
                continue;
            }
            let mark = doc
                .as_ref()
                .and_then(|d| d.path(&["environments", name.as_str(), "vault"]))
                .map(|n| n.mark)
                .unwrap_or_default();
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                line: mark.line.max(1),
                col: mark.col.max(1),
                message: format!(
                    "environments.{name}.vault: {} is not a regular file (expected the vaulted file itself; a FIFO or device is refused before reading)",
                    vault.display()
                ),
            });
        }
        Ok(())
    }
}

impl EnvConfig {
    /// The overlay directory relative to the repo root.
    pub fn overlay_dir(&self, env_name: &str) -> PathBuf {
        self.flux_overlay
            .clone()
            .unwrap_or_else(|| Path::new("clusters").join(env_name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_every_path() {
        let c = Config::parse(
            Path::new("x.yaml"),
            "environments:\n  prod: { servers: k3s_prod }\n",
        )
        .expect("valid");
        assert_eq!(c.ansible_dir, PathBuf::from("infra/ansible"));
        // Unset: Repo::load_with asks ansible.cfg, then takes DEFAULT_INVENTORY.
        assert_eq!(c.inventory, None);
        let prod = &c.environments["prod"];
        assert_eq!(prod.overlay_dir("prod"), PathBuf::from("clusters/prod"));
        assert!(!prod.operator_present);
        assert!(!prod.protected, "protection is asked for, never assumed");
    }

    #[test]
    fn the_run_lock_has_a_default_duration_and_a_strict_schema() {
        let env = "environments:\n  prod: { servers: k3s_prod }\n";
        let c = Config::parse(Path::new("x.yaml"), env).expect("valid");
        assert_eq!(c.run_lock.duration_s, 60);
        let c = Config::parse(
            Path::new("x.yaml"),
            &format!("run_lock:\n  duration_s: 30\n{env}"),
        )
        .expect("valid");
        assert_eq!(c.run_lock.duration_s, 30);
        let err = Config::parse(
            Path::new("x.yaml"),
            &format!("run_lock:\n  duration: 30\n{env}"),
        )
        .expect_err("typo");
        assert!(err.to_string().starts_with("x.yaml:2:"), "{err}");
        assert!(
            err.to_string().contains("unknown field `duration`"),
            "{err}"
        );
        let err = Config::parse(
            Path::new("x.yaml"),
            &format!("run_lock:\n  duration_s: 3\n{env}"),
        )
        .expect_err("too short");
        assert_eq!(
            err.to_string(),
            "x.yaml:2:3: `run_lock.duration_s: 3` is too short: at least 6 seconds (the lock is renewed every third of it)"
        );
    }

    #[test]
    fn a_review_is_read_with_its_line_and_a_bad_one_is_refused_at_it() {
        let sha = "a".repeat(64);
        let entry = |file: &str, line: &str, sha: &str, by: &str, at: &str| {
            format!(
                "environments:\n  dev: {{ servers: s }}\nreviewed_read_only:\n  - file: {file}\n    line: {line}\n    sha256: {sha}\n    by: {by}\n    at: {at}\n"
            )
        };
        let text = entry("a/b.yml", "3", &sha, "alice", "2026-12-01");
        let c = Config::parse(Path::new("hk-console.yaml"), &text).expect("valid");
        assert_eq!(c.reviewed_read_only.len(), 1);
        assert_eq!(c.reviewed_read_only[0].config_line, 4);
        assert_eq!(c.reviewed_read_only[0].by, "alice");
        for (bad, says) in [
            (
                entry("a/b.yml", "3", "abc", "alice", "2026-12-01"),
                "is not a sha256",
            ),
            (
                entry("a/b.yml", "0", &sha, "alice", "2026-12-01"),
                "`line: 0`",
            ),
            (
                entry("a/b.yml", "3", &sha, "alice", "yesterday"),
                "is not a date",
            ),
            (
                entry("a/b.yml", "3", &sha, "\"\"", "2026-12-01"),
                "`by` is empty",
            ),
            (
                entry("/etc/x.yml", "3", &sha, "alice", "2026-12-01"),
                "must be relative",
            ),
            (
                entry("../x.yml", "3", &sha, "alice", "2026-12-01"),
                "must be relative",
            ),
        ] {
            let e = Config::parse(Path::new("hk-console.yaml"), &bad)
                .expect_err(says)
                .to_string();
            assert!(
                e.starts_with("hk-console.yaml:4:")
                    && e.contains("reviewed_read_only[0]")
                    && e.contains(says),
                "{says}: {e}"
            );
        }
        let unknown = text.replace("    by: alice", "    by: alice\n    why: trust me");
        let e = Config::parse(Path::new("hk-console.yaml"), &unknown).expect_err("unknown key");
        assert!(e.to_string().contains("unknown field `why`"), "{e}");
    }

    #[test]
    fn unknown_keys_name_file_line_and_column() {
        let err = Config::parse(
            Path::new("hk-console.yaml"),
            "environments:\n  prod:\n    servers: k3s_prod\n    severs: typo\n",
        )
        .expect_err("must fail");
        let text = err.to_string();
        assert!(text.starts_with("hk-console.yaml:4:"), "{text}");
        assert!(text.contains("unknown field `severs`"), "{text}");
    }

    #[test]
    fn kustomize_bin_is_read_and_misspelling_it_is_an_error() {
        let c = Config::parse(
            Path::new("c.yaml"),
            "kustomize_bin: tools/kustomize\nenvironments:\n  prod: { servers: k3s_prod }\n",
        )
        .expect("valid");
        assert_eq!(c.kustomize_bin, Some(PathBuf::from("tools/kustomize")));
        let err = Config::parse(
            Path::new("c.yaml"),
            "kustomize_binary: kubectl\nenvironments:\n  prod: { servers: k3s_prod }\n",
        )
        .expect_err("must fail");
        assert!(
            err.to_string().contains("unknown field `kustomize_binary`"),
            "{err}"
        );
    }

    #[test]
    fn missing_servers_is_an_error() {
        let err = Config::parse(
            Path::new("c.yaml"),
            "environments:\n  dev: { operator_present: true }\n",
        )
        .expect_err("must fail");
        assert!(err.to_string().contains("missing field `servers`"), "{err}");
    }

    #[test]
    fn empty_environments_is_an_error() {
        let err = Config::parse(Path::new("c.yaml"), "environments: {}\n").expect_err("must fail");
        assert!(err.to_string().contains("`environments` is empty"), "{err}");
    }

    const NAMES_ENVS: &str =
        "environments:\n  dev: { servers: k3s_dev }\n  prod:\n    servers: k3s_prod\n";

    #[test]
    fn names_default_to_the_seeds_and_an_environments_own_win_key_by_key() {
        let c = Config::parse(Path::new("hk-console.yaml"), NAMES_ENVS).expect("valid");
        assert_eq!(c.names, NamesConfig::default());
        assert_eq!(
            c.names.or_default(NameKey::FluxApiHostVar),
            DEFAULT_FLUX_API_HOST_VAR
        );
        assert_eq!(DEFAULT_FLUX_API_HOST_VAR, "K3S_API_HOST");
        assert_eq!(DEFAULT_KUBE_VIP_LEASE, "plndr-cp-lock");
        let text = format!(
            "names:\n  kube_vip_lease: my-cp-lock\n  flux_api_host_var: API_VIP\n  vpn_unit: openvpn-client@pia.service\n{NAMES_ENVS}    names:\n      kube_vip_lease: prod-cp-lock\n      vpn_interface: wg0\n      vpn_exit_ip_url: http://10.0.0.1/ip\n"
        );
        let c = Config::parse(Path::new("hk-console.yaml"), &text).expect("valid");
        let dev = c.environments["dev"].names.merged_over(&c.names);
        let prod = c.environments["prod"].names.merged_over(&c.names);
        assert_eq!(dev.get(NameKey::KubeVipLease), Some("my-cp-lock"));
        assert_eq!(prod.get(NameKey::KubeVipLease), Some("prod-cp-lock"));
        assert_eq!(prod.get(NameKey::FluxApiHostVar), Some("API_VIP"));
        assert_eq!(
            prod.get(NameKey::VpnUnit),
            Some("openvpn-client@pia.service")
        );
        assert_eq!(prod.get(NameKey::VpnInterface), Some("wg0"));
        assert_eq!(
            dev.get(NameKey::VpnInterface),
            None,
            "unset: hostvar, else default"
        );
        assert_eq!(dev.or_default(NameKey::VpnInterface), "tun0");
        assert_eq!(prod.get(NameKey::VpnExitIpUrl), Some("http://10.0.0.1/ip"));
    }

    #[test]
    fn a_bad_name_is_refused_naming_the_file_the_key_and_the_environment() {
        let refused = |names_at_top: &str, names_in_prod: &str| {
            let text = format!("{names_at_top}{NAMES_ENVS}{names_in_prod}");
            Config::parse(Path::new("hk-console.yaml"), &text)
                .expect_err("must be refused")
                .to_string()
        };
        let in_prod = |kv: &str| refused("", &format!("    names:\n      {kv}\n"));
        assert_eq!(
            in_prod("flux_api_host_var: 1API"),
            "hk-console.yaml:6:26: environments.prod.names.flux_api_host_var (environment `prod`): `1API` is not a Flux variable name (^[_a-zA-Z][_a-zA-Z0-9]*$, e.g. `API_VIP`)"
        );
        assert!(
            in_prod("flux_api_host_var: API-VIP").contains("`API-VIP` is not a Flux variable name"),
            "a dash is no variable character"
        );
        assert_eq!(
            in_prod("kube_vip_lease: \"\""),
            "hk-console.yaml:6:23: environments.prod.names.kube_vip_lease (environment `prod`): is empty"
        );
        let e = in_prod("kube_vip_lease: \"cp lock\"");
        assert!(e.contains("holds whitespace"), "{e}");
        let e = in_prod("kube_vip_lease: My_Lock");
        assert!(e.contains("`My_Lock` is not a Lease name"), "{e}");
        let e = in_prod("kube_vip_lease: a,b");
        assert!(
            e.contains("`a,b` is not a Lease name"),
            "a comma would split the field selector: {e}"
        );
        let e = in_prod("vpn_unit: -tunnel.service");
        assert!(e.contains("is not a systemd unit name"), "{e}");
        let e = in_prod("vpn_unit: \"tun;reboot\"");
        assert!(e.contains("is not a systemd unit name"), "{e}");
        let e = in_prod("vpn_interface: a-very-long-interface");
        assert!(e.contains("is not a network interface name"), "{e}");
        let e = in_prod("vpn_exit_ip_url: ftp://x/ip");
        assert!(e.contains("`ftp://x/ip` is not an http(s):// URL"), "{e}");
        // At the top level it is every environment's.
        assert_eq!(
            refused("names:\n  vpn_interface: \"\"\n", ""),
            "hk-console.yaml:2:18: names.vpn_interface (every environment): is empty"
        );
        // Written without a value, or as null: refused, not read as unset.
        for v in ["", " ~", " null"] {
            let e = refused(&format!("names:\n  kube_vip_lease:{v}\n"), "");
            assert!(e.starts_with("hk-console.yaml:"), "{v}: {e}");
            assert!(
                e.ends_with("names.kube_vip_lease (every environment): has no value (write the name, or leave the key out for the default)"),
                "{v}: {e}"
            );
        }
        let e = refused("names:\n  flux_api_host_var: 7\n", "");
        assert!(
            e.contains("`7` is not a Flux variable name") || e.contains("expected a string"),
            "{e}"
        );
        // Unknown keys are refused like everywhere else in the file.
        let e = in_prod("lease: my-lock");
        assert!(e.starts_with("hk-console.yaml:6:"), "{e}");
        assert!(e.contains("unknown field `lease`"), "{e}");
        let e = refused("names:\n  flux_var: X\n", "");
        assert!(e.contains("unknown field `flux_var`"), "{e}");
    }
}
