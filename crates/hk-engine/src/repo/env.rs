//! Environments, derived from the inventory.
//!
//! Owns: turning an environment's name and groups (from `hk-console.yaml`) into the facts
//! every other layer needs: its servers and their addresses, its VPN gateways, and the
//! values its servers' hostvars resolve to: primary group, founder (`k3s_api_host`), VIP
//! (`kube_vip_address`), API endpoint (`k3s_apiserver_endpoint`), API port
//! (`k3s_api_port`), kubeconfig name (`cluster_kubeconfig_name`).
//! Hosts of one environment that disagree on one of these, or a value that cannot be
//! rendered, is a [`EnvProblem`]: the fact stays unknown rather than picking one.
//! Must not: restate any of these values; they live in the inventory only.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::config::{EnvConfig, FactKey, FactSource, FactsConfig, NameKey, NamesConfig};
use super::resolve::Resolved;
use super::vars::Origin;

/// The variables an environment's facts come from unless hk-console.yaml's `facts:` says
/// otherwise (the seed repo's names; they are the mapping's defaults, kept in `config`).
pub use super::config::{
    VAR_API_PORT, VAR_ENDPOINT, VAR_FOUNDER, VAR_KUBECONFIG, VAR_PRIMARY_GROUP, VAR_VIP,
};

/// A host of an environment and the address it is reached at (`ansible_host`, else its name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvHost {
    pub name: String,
    pub address: String,
}

/// One derived fact: its value when every server agrees, and where it was defined.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fact {
    /// Where it comes from, as hk-console.yaml's `facts:` (or the default) names it: a
    /// variable name, or a Jinja expression.
    pub var: String,
    pub value: Option<String>,
    /// The winning definition (for a template, where the template is written).
    pub origin: Option<Origin>,
}

impl Fact {
    pub fn get(&self) -> Option<&str> {
        self.value.as_deref()
    }
}

/// Hosts that disagree on one value, as every such message says it:
/// "a, b say `x`; c say `y`", values in order.
pub fn who_says_what<V: fmt::Display, H: AsRef<str>>(values: &BTreeMap<V, Vec<H>>) -> String {
    values
        .iter()
        .map(|(value, hosts)| {
            let hosts: Vec<&str> = hosts.iter().map(AsRef::as_ref).collect();
            format!("{} say `{value}`", hosts.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Why a fact is unknown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum EnvProblem {
    /// The servers group named in hk-console.yaml is not in the inventory, or is empty.
    NoServers { group: String },
    /// The VPN gateway group named in hk-console.yaml is not in the inventory.
    NoGatewayGroup { group: String },
    /// The agents group named in hk-console.yaml is not in the inventory.
    NoAgentGroup { group: String },
    /// No server defines the variable.
    Missing { var: String },
    /// Servers resolve the variable to different values.
    Disagree {
        var: String,
        values: BTreeMap<String, Vec<String>>,
    },
    /// A server's value cannot be rendered.
    Unrenderable {
        var: String,
        host: String,
        reason: String,
    },
}

impl fmt::Display for EnvProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnvProblem::NoServers { group } => write!(
                f,
                "servers group `{group}` has no hosts in the inventory (expected the group named by `servers:` in hk-console.yaml)"
            ),
            EnvProblem::NoGatewayGroup { group } => {
                write!(f, "vpn_gateways group `{group}` is not in the inventory")
            }
            EnvProblem::NoAgentGroup { group } => {
                write!(f, "agents group `{group}` is not in the inventory")
            }
            EnvProblem::Missing { var } => write!(f, "no server defines `{var}`"),
            EnvProblem::Disagree { var, values } => {
                write!(f, "servers disagree on `{var}`: {}", who_says_what(values))
            }
            EnvProblem::Unrenderable { var, host, reason } => {
                write!(f, "`{var}` cannot be rendered for {host}: {reason}")
            }
        }
    }
}

/// An environment as the inventory defines it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Environment {
    pub name: String,
    pub servers_group: String,
    pub vpn_gateways_group: Option<String>,
    pub operator_present: bool,
    /// hk-console.yaml `protected: true`: the gate policy holds (see docs/runbooks.md).
    pub protected: bool,
    /// Relative to the repo root.
    pub flux_overlay: std::path::PathBuf,
    /// hk-console.yaml names `flux_overlay:` itself (else `flux_overlay` is the default
    /// `clusters/<name>`, which a repo without Flux does not have).
    pub flux_overlay_configured: bool,
    /// Relative to the repo root.
    pub vault: Option<std::path::PathBuf>,
    pub servers: Vec<EnvHost>,
    pub vpn_gateways: Vec<EnvHost>,
    /// hk-console.yaml `agents:`: the group of its agent (worker) nodes, if it names one.
    pub agents_group: Option<String>,
    /// Its agent nodes: nodes of the cluster, not of its control plane (no etcd member).
    pub agents: Vec<EnvHost>,
    pub primary_group: Fact,
    pub founder: Fact,
    pub vip: Fact,
    pub endpoint: Fact,
    pub api_port: Fact,
    pub kubeconfig_name: Fact,
    /// hk-console.yaml `names:` for this environment (its own keys over the top level's):
    /// what it says, no hostvar and no default applied.
    pub names: NamesConfig,
    pub problems: Vec<EnvProblem>,
    /// The seed's fact variables (the mapping's defaults) no server defines and no Ansible
    /// file of the repo uses: the repo has no counterpart of them, so they are unknown and
    /// no problem (set when the repo is loaded).
    pub no_counterpart: Vec<String>,
}

impl Environment {
    /// Every node of the cluster: its servers, then its agents.
    pub fn node_ips(&self) -> impl Iterator<Item = &EnvHost> {
        self.servers.iter().chain(self.agents.iter())
    }

    /// The Flux `postBuild` variable the parity contract reads: hk-console.yaml
    /// `names.flux_api_host_var`, else the seed repo's.
    pub fn flux_api_host_var(&self) -> &str {
        self.names.or_default(NameKey::FluxApiHostVar)
    }

    pub fn api_port_number(&self) -> Option<u16> {
        self.api_port.get().and_then(|p| p.parse().ok())
    }
}

/// What derivation needs to ask of the loaded repo, per host.
pub trait HostFacts {
    /// The hosts of a group (transitively), or None if there is no such group.
    fn hosts_in(&self, group: &str) -> Option<Vec<String>>;
    /// A host's variable, rendered.
    fn resolved(&self, host: &str, var: &str) -> Option<Resolved>;
    /// Where a host's variable is defined.
    fn origin(&self, host: &str, var: &str) -> Option<Origin>;
    /// A Jinja expression rendered against a host's variables (hk-console.yaml's `facts:`).
    fn rendered(&self, host: &str, template: &str) -> Resolved {
        let _ = (host, template);
        Resolved::Unrenderable {
            reason: "this variable source renders no templates".into(),
        }
    }
}

fn scalar_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn hosts_with_addresses(src: &dyn HostFacts, hosts: Vec<String>) -> Vec<EnvHost> {
    hosts
        .into_iter()
        .map(|name| {
            let address = src
                .resolved(&name, "ansible_host")
                .and_then(|r| r.value().and_then(scalar_text))
                .unwrap_or_else(|| name.clone());
            EnvHost { name, address }
        })
        .collect()
}

fn derive_fact(
    src: &dyn HostFacts,
    servers: &[EnvHost],
    source: &FactSource,
    problems: &mut Vec<EnvProblem>,
) -> Fact {
    let var = source.shown();
    let mut by_value: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut origin = None;
    let mut failed = false;
    for host in servers {
        let got = match source {
            FactSource::Var(v) => src.resolved(&host.name, v),
            FactSource::Template(t) => Some(src.rendered(&host.name, t)),
        };
        match got {
            None => {}
            Some(Resolved::Unrenderable { reason }) => {
                failed = true;
                problems.push(EnvProblem::Unrenderable {
                    var: var.to_string(),
                    host: host.name.clone(),
                    reason,
                });
            }
            Some(Resolved::Value(v)) => match scalar_text(&v) {
                Some(text) => {
                    if origin.is_none() {
                        // A template's value is where the template is written (hk-console.yaml).
                        origin = match source {
                            FactSource::Var(v) => src.origin(&host.name, v),
                            FactSource::Template(_) => None,
                        };
                    }
                    by_value.entry(text).or_default().push(host.name.clone());
                }
                None => {
                    failed = true;
                    problems.push(EnvProblem::Unrenderable {
                        var: var.to_string(),
                        host: host.name.clone(),
                        reason: format!("expected a single value, found {v}"),
                    });
                }
            },
        }
    }
    let defined: usize = by_value.values().map(Vec::len).sum();
    let value = if failed {
        None
    } else if by_value.len() > 1 || (defined > 0 && defined < servers.len()) {
        if defined < servers.len() {
            let missing: Vec<String> = servers
                .iter()
                .filter(|h| !by_value.values().any(|hs| hs.contains(&h.name)))
                .map(|h| h.name.clone())
                .collect();
            by_value.insert("(undefined)".to_string(), missing);
        }
        problems.push(EnvProblem::Disagree {
            var: var.to_string(),
            values: by_value,
        });
        None
    } else if by_value.is_empty() {
        if !servers.is_empty() {
            problems.push(EnvProblem::Missing {
                var: var.to_string(),
            });
        }
        None
    } else {
        by_value.into_keys().next()
    };
    Fact {
        var: var.to_string(),
        value,
        origin: if failed { None } else { origin },
    }
}

/// Derive one environment's facts from the inventory.
pub fn derive(name: &str, cfg: &EnvConfig, src: &dyn HostFacts) -> Environment {
    let mut problems = Vec::new();
    let server_names = src.hosts_in(&cfg.servers).unwrap_or_default();
    if server_names.is_empty() {
        problems.push(EnvProblem::NoServers {
            group: cfg.servers.clone(),
        });
    }
    let servers = hosts_with_addresses(src, server_names);
    let vpn_gateways = match &cfg.vpn_gateways {
        None => Vec::new(),
        Some(group) => match src.hosts_in(group) {
            Some(hosts) => hosts_with_addresses(src, hosts),
            None => {
                problems.push(EnvProblem::NoGatewayGroup {
                    group: group.clone(),
                });
                Vec::new()
            }
        },
    };
    let agents = match &cfg.agents {
        None => Vec::new(),
        // A group of every node (`all_nodes`) holds the servers too: its agents are the
        // others, nodes of the cluster and not of its control plane.
        Some(group) => match src.hosts_in(group) {
            Some(hosts) => hosts_with_addresses(
                src,
                hosts
                    .into_iter()
                    .filter(|h| !servers.iter().any(|s| &s.name == h))
                    .collect(),
            ),
            None => {
                problems.push(EnvProblem::NoAgentGroup {
                    group: group.clone(),
                });
                Vec::new()
            }
        },
    };
    let none = FactsConfig::default();
    let mut fact =
        |k: FactKey| derive_fact(src, &servers, &cfg.facts.source(&none, k), &mut problems);
    let primary_group = fact(FactKey::PrimaryGroup);
    let founder = fact(FactKey::Founder);
    let vip = fact(FactKey::Vip);
    let endpoint = fact(FactKey::Endpoint);
    let api_port = fact(FactKey::ApiPort);
    let kubeconfig_name = fact(FactKey::Kubeconfig);
    Environment {
        name: name.to_string(),
        servers_group: cfg.servers.clone(),
        vpn_gateways_group: cfg.vpn_gateways.clone(),
        operator_present: cfg.operator_present,
        protected: cfg.protected,
        flux_overlay: cfg.overlay_dir(name),
        flux_overlay_configured: cfg.flux_overlay.is_some(),
        vault: cfg.vault.clone(),
        servers,
        vpn_gateways,
        agents_group: cfg.agents.clone(),
        agents,
        primary_group,
        founder,
        vip,
        endpoint,
        api_port,
        kubeconfig_name,
        names: cfg.names.clone(),
        problems,
        no_counterpart: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Fake {
        groups: BTreeMap<String, Vec<String>>,
        vars: BTreeMap<(String, String), Resolved>,
    }

    impl HostFacts for Fake {
        fn hosts_in(&self, group: &str) -> Option<Vec<String>> {
            self.groups.get(group).cloned()
        }
        fn resolved(&self, host: &str, var: &str) -> Option<Resolved> {
            self.vars.get(&(host.to_string(), var.to_string())).cloned()
        }
        fn origin(&self, _host: &str, _var: &str) -> Option<Origin> {
            Some(Origin {
                file: "group_vars/all.yml".into(),
                line: 3,
                col: 1,
            })
        }
    }

    fn fake(vips: &[(&str, Resolved)]) -> Fake {
        let mut vars = BTreeMap::new();
        for (i, (host, vip)) in vips.iter().enumerate() {
            vars.insert((host.to_string(), VAR_VIP.to_string()), vip.clone());
            vars.insert(
                (host.to_string(), "ansible_host".to_string()),
                Resolved::Value(json!(format!("10.9.0.{}", i + 1))),
            );
        }
        Fake {
            groups: BTreeMap::from([(
                "servers".to_string(),
                vips.iter().map(|(h, _)| h.to_string()).collect(),
            )]),
            vars,
        }
    }

    fn cfg() -> EnvConfig {
        EnvConfig {
            servers: "servers".into(),
            vpn_gateways: None,
            operator_present: false,
            protected: false,
            flux_overlay: None,
            vault: None,
            agents: None,
            facts: FactsConfig::default(),
            names: NamesConfig::default(),
        }
    }

    #[test]
    fn agreeing_servers_give_the_fact_and_addresses() {
        let v = Resolved::Value(json!("10.9.0.100"));
        let env = derive("lab", &cfg(), &fake(&[("a", v.clone()), ("b", v)]));
        assert_eq!(env.vip.get(), Some("10.9.0.100"));
        assert_eq!(env.servers[1].address, "10.9.0.2");
        assert_eq!(env.flux_overlay, std::path::PathBuf::from("clusters/lab"));
        assert!(env
            .problems
            .iter()
            .all(|p| !matches!(p, EnvProblem::Disagree { .. })));
    }

    #[test]
    fn disagreement_is_a_problem_not_a_guess() {
        let env = derive(
            "lab",
            &cfg(),
            &fake(&[
                ("a", Resolved::Value(json!("10.9.0.100"))),
                ("b", Resolved::Value(json!("10.9.0.200"))),
            ]),
        );
        assert_eq!(env.vip.get(), None);
        let text = env
            .problems
            .iter()
            .find(|p| matches!(p, EnvProblem::Disagree { .. }))
            .expect("a disagreement")
            .to_string();
        assert!(
            text.contains("a say `10.9.0.100`") && text.contains("b say `10.9.0.200`"),
            "{text}"
        );
    }

    #[test]
    fn a_host_without_the_var_is_a_disagreement() {
        let mut f = fake(&[
            ("a", Resolved::Value(json!("10.9.0.100"))),
            ("b", Resolved::Value(json!("x"))),
        ]);
        f.vars.remove(&("b".to_string(), VAR_VIP.to_string()));
        let env = derive("lab", &cfg(), &f);
        assert_eq!(env.vip.get(), None);
        assert!(env
            .problems
            .iter()
            .any(|p| p.to_string().contains("b say `(undefined)`")));
    }

    #[test]
    fn unrenderable_is_reported() {
        let env = derive(
            "lab",
            &cfg(),
            &fake(&[(
                "a",
                Resolved::Unrenderable {
                    reason: "`x` is not defined".into(),
                },
            )]),
        );
        assert_eq!(env.vip.get(), None);
        assert!(env
            .problems
            .iter()
            .any(|p| p.to_string().contains("cannot be rendered for a")));
    }

    #[test]
    fn an_empty_servers_group_is_a_problem() {
        let mut f = fake(&[]);
        f.groups.clear();
        let env = derive("lab", &cfg(), &f);
        assert!(matches!(env.problems[0], EnvProblem::NoServers { .. }));
    }
}
