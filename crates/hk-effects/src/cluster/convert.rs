//! From Kubernetes objects to the inputs of the live rules, and from those to the panes.
//!
//! Owns: the pure conversion of k8s-openapi objects (Lease, Pod, DaemonSet, Node, ConfigMap)
//! into `checks::live`'s input structs ([`lease`], [`agent_pod`], [`daemonset_status`],
//! [`rollout_pod`], [`node`], [`config_maps`]), and the assembly of the four kube panes from
//! the objects a source saw (or why it saw nothing): [`vip_pane`], [`agents_pane`],
//! [`rollout_pane`], [`nodes_pane`]. The watchers (`watch.rs`) and the one-shot look
//! (`once.rs`) share these, so both judge the same way.
//! Must not: do IO, read the clock (`now` is an argument), or judge anything itself: every
//! verdict comes from `checks::live`. What a Kubernetes object cannot tell (a missing
//! field) is passed on as missing, never guessed.
//!
//! Why one file over 800 lines: the code is about 420 lines; the rest is unit tests built from
//! real API objects.

use std::net::IpAddr;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Node, Pod};
use k8s_openapi::jiff;

use hk_engine::checks::live::{
    self, AgentEnvPane, AgentPod, ConditionStatus, ConfigMaps, DaemonSetStatus, EnvFromConfigMap,
    EnvSource, EnvTopology, EnvVar, LeaseObs, Look, NodeObs, NodesPane, RolloutPane, RolloutPod,
    TcpProbe, Timestamp, VipLeaseInput, VipLeasePane,
};

/// The label the DaemonSet controller puts on each pod: the template generation it was
/// created from.
pub const POD_TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";
/// The annotation the API server keeps on an apps/v1 DaemonSet: its template generation
/// (bumped only when the pod template changes, unlike `metadata.generation`).
pub const DS_TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

/// Milliseconds since the Unix epoch (times before it become 0).
pub fn timestamp(t: &jiff::Timestamp) -> Timestamp {
    Timestamp(u64::try_from(t.as_millisecond()).unwrap_or(0))
}

fn non_negative(n: i32) -> u32 {
    u32::try_from(n).unwrap_or(0)
}

fn non_negative64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Objects -> rule inputs
// ---------------------------------------------------------------------------------------------

/// A Lease's spec as the VIP rule reads it.
pub fn lease(l: &Lease) -> LeaseObs {
    let spec = l.spec.as_ref();
    LeaseObs {
        name: name_of(&l.metadata),
        // client-go releases a Lease by writing an empty holder: nobody holds it.
        holder_identity: spec
            .and_then(|s| s.holder_identity.clone())
            .filter(|h| !h.is_empty()),
        renew_time: spec
            .and_then(|s| s.renew_time.as_ref())
            .map(|t| timestamp(&t.0)),
        lease_duration_seconds: spec
            .and_then(|s| s.lease_duration_seconds)
            .map(|d| u64::from(non_negative(d))),
        lease_transitions: spec
            .and_then(|s| s.lease_transitions)
            .map(|d| u64::from(non_negative(d))),
    }
}

/// ConfigMaps (of one namespace) by name: their `data` (`binaryData` never reaches an env
/// var, so it is left out).
pub fn config_maps<'a>(cms: impl IntoIterator<Item = &'a ConfigMap>) -> ConfigMaps {
    cms.into_iter()
        .map(|cm| (name_of(&cm.metadata), cm.data.clone().unwrap_or_default()))
        .collect()
}

/// The pod's Ready condition, if it has one.
fn pod_ready_condition(p: &Pod) -> Option<&k8s_openapi::api::core::v1::PodCondition> {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
}

/// Ready = the pod's Ready condition is `True`.
pub fn pod_ready(p: &Pod) -> bool {
    pod_ready_condition(p).is_some_and(|c| c.status == "True")
}

fn container<'a>(p: &'a Pod, name: &str) -> Option<&'a Container> {
    p.spec
        .as_ref()
        .and_then(|s| s.containers.iter().find(|c| c.name == name))
}

/// One `env[]` entry. No value and no valueFrom is the empty string, as the kubelet sets it.
fn env_var(e: &k8s_openapi::api::core::v1::EnvVar) -> EnvVar {
    let source = match &e.value_from {
        None => EnvSource::Literal {
            value: e.value.clone().unwrap_or_default(),
        },
        Some(from) => {
            if let Some(r) = &from.config_map_key_ref {
                EnvSource::ConfigMapKey {
                    config_map: r.name.clone(),
                    key: r.key.clone(),
                    optional: r.optional.unwrap_or(false),
                }
            } else if let Some(r) = &from.field_ref {
                EnvSource::Other {
                    description: format!("fieldRef {}", r.field_path),
                }
            } else if let Some(r) = &from.secret_key_ref {
                EnvSource::Other {
                    description: format!("Secret {} key {}", r.name, r.key),
                }
            } else if let Some(r) = &from.resource_field_ref {
                EnvSource::Other {
                    description: format!("resourceFieldRef {}", r.resource),
                }
            } else if let Some(r) = &from.file_key_ref {
                EnvSource::Other {
                    description: format!(
                        "fileKeyRef {} in volume {} key {}",
                        r.path, r.volume_name, r.key
                    ),
                }
            } else {
                EnvSource::Other {
                    description: "an empty valueFrom".to_string(),
                }
            }
        }
    };
    EnvVar {
        name: e.name.clone(),
        source,
    }
}

/// A cilium-agent pod: its node, phase, readiness and the env of `container_name`.
///
/// `envFrom` ConfigMap references are kept, except an `optional` one whose ConfigMap is not
/// in `known` (the kubelet skips those). `envFrom` Secret references are not read (observe
/// mode has no access to Secrets); the rule then resolves from what remains.
/// A pod without that container gets both service variables as "not resolvable", naming
/// the containers it has, so the rule reports it instead of judging an empty env.
pub fn agent_pod(p: &Pod, container_name: &str, known: &ConfigMaps) -> AgentPod {
    let (env, env_from) = match container(p, container_name) {
        Some(c) => {
            let env = c
                .env
                .as_deref()
                .unwrap_or_default()
                .iter()
                .map(env_var)
                .collect();
            let env_from = c
                .env_from
                .as_deref()
                .unwrap_or_default()
                .iter()
                .filter_map(|f| {
                    let r = f.config_map_ref.as_ref()?;
                    if r.optional.unwrap_or(false) && !known.contains_key(&r.name) {
                        return None;
                    }
                    Some(EnvFromConfigMap {
                        config_map: r.name.clone(),
                        prefix: f.prefix.clone().unwrap_or_default(),
                    })
                })
                .collect();
            (env, env_from)
        }
        None => {
            let have: Vec<&str> = p
                .spec
                .as_ref()
                .map(|s| s.containers.iter().map(|c| c.name.as_str()).collect())
                .unwrap_or_default();
            let description = format!(
                "no container `{container_name}` in this pod (it has: {})",
                if have.is_empty() {
                    "none".to_string()
                } else {
                    have.join(", ")
                }
            );
            let missing = |name: &str| EnvVar {
                name: name.to_string(),
                source: EnvSource::Other {
                    description: description.clone(),
                },
            };
            (
                vec![
                    missing(live::SERVICE_HOST_VAR),
                    missing(live::SERVICE_PORT_VAR),
                ],
                Vec::new(),
            )
        }
    };
    AgentPod {
        name: name_of(&p.metadata),
        node: p.spec.as_ref().and_then(|s| s.node_name.clone()),
        phase: p
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Unknown".to_string()),
        ready: pod_ready(p),
        env,
        env_from,
    }
}

/// Whether any pod takes an env var from a ConfigMap (then the ConfigMaps must be known
/// before the agent env can be judged).
pub fn uses_config_maps(pods: &[AgentPod]) -> bool {
    pods.iter().any(|p| {
        !p.env_from.is_empty()
            || p.env
                .iter()
                .any(|e| matches!(e.source, EnvSource::ConfigMapKey { .. }))
    })
}

/// The DaemonSet's status counters. An absent counter is 0 (the controller has not
/// counted it yet); an absent observedGeneration is 0 (not yet observed).
pub fn daemonset_status(ds: &DaemonSet) -> DaemonSetStatus {
    let st = ds.status.clone().unwrap_or_default();
    DaemonSetStatus {
        name: name_of(&ds.metadata),
        generation: non_negative64(ds.metadata.generation.unwrap_or(0)),
        observed_generation: non_negative64(st.observed_generation.unwrap_or(0)),
        desired: non_negative(st.desired_number_scheduled),
        updated: non_negative(st.updated_number_scheduled.unwrap_or(0)),
        ready: non_negative(st.number_ready),
        available: non_negative(st.number_available.unwrap_or(0)),
        unavailable: non_negative(st.number_unavailable.unwrap_or(0)),
    }
}

/// The DaemonSet's template generation: its `deprecated.daemonset.template.generation`
/// annotation, else `metadata.generation`.
pub fn template_generation(ds: &DaemonSet) -> Option<String> {
    ds.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DS_TEMPLATE_GENERATION_ANNOTATION))
        .cloned()
        .or_else(|| ds.metadata.generation.map(|g| g.to_string()))
}

/// One DaemonSet pod for the rollout rule. Updated = its `pod-template-generation` label is
/// the DaemonSet's template generation. Not ready since: the Ready condition's last
/// transition when it is not `True`, else (no Ready condition) the pod's creation time.
pub fn rollout_pod(p: &Pod, template_generation: Option<&str>) -> RolloutPod {
    let label = p
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(POD_TEMPLATE_GENERATION_LABEL));
    let updated = matches!((label, template_generation), (Some(l), Some(g)) if l == g);
    let cond = pod_ready_condition(p);
    let ready = cond.is_some_and(|c| c.status == "True");
    let not_ready_since = if ready {
        None
    } else {
        match cond {
            Some(c) => c.last_transition_time.as_ref().map(|t| timestamp(&t.0)),
            None => p
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| timestamp(&t.0)),
        }
    };
    RolloutPod {
        name: name_of(&p.metadata),
        node: p.spec.as_ref().and_then(|s| s.node_name.clone()),
        updated,
        ready,
        not_ready_since,
    }
}

/// A Node: its Ready condition (a status other than True/False is Unknown), labels, and
/// its InternalIP/ExternalIP addresses (others, and unparsable ones, are left out).
pub fn node(n: &Node) -> NodeObs {
    let status = n.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .map(|c| match c.status.as_str() {
            "True" => ConditionStatus::True,
            "False" => ConditionStatus::False,
            _ => ConditionStatus::Unknown,
        });
    let addresses = status
        .and_then(|s| s.addresses.as_ref())
        .map(|a| {
            a.iter()
                .filter(|a| a.type_ == "InternalIP" || a.type_ == "ExternalIP")
                .filter_map(|a| a.address.trim().parse::<IpAddr>().ok())
                .collect()
        })
        .unwrap_or_default();
    NodeObs {
        name: name_of(&n.metadata),
        ready,
        labels: n.metadata.labels.clone().unwrap_or_default(),
        addresses,
    }
}

// ---------------------------------------------------------------------------------------------
// Objects -> panes (the rules of checks::live do the judging)
// ---------------------------------------------------------------------------------------------

/// Map a Look over a value.
fn map_look<T, U>(look: &Look<T>, f: impl FnOnce(&T) -> U) -> Look<U> {
    match look {
        Look::Seen { value } => Look::seen(f(value)),
        Look::CouldNotLook { reason } => Look::could_not(reason.clone()),
    }
}

/// The VIP lease pane: the Lease (`Seen(None)`: there is none) and the VIP probe.
pub fn vip_pane(
    topo: &EnvTopology,
    lease_obj: &Look<Option<&Lease>>,
    probe: &Look<TcpProbe>,
    now: Timestamp,
) -> VipLeasePane {
    let input = VipLeaseInput {
        lease: map_look(lease_obj, |l| l.map(lease)),
        probe: probe.clone(),
        now,
    };
    live::vip_lease(topo, &input)
}

/// The agent env pane. The ConfigMaps are needed only when some pod takes its env from
/// one: if they could not be read then, the pane could not look (naming why).
pub fn agents_pane(
    topo: &EnvTopology,
    pods: &Look<Vec<&Pod>>,
    cms: &Look<Vec<&ConfigMap>>,
    container_name: &str,
) -> AgentEnvPane {
    let known = match cms {
        Look::Seen { value } => config_maps(value.iter().copied()),
        Look::CouldNotLook { .. } => ConfigMaps::new(),
    };
    let agents = map_look(pods, |ps| {
        let mut a: Vec<AgentPod> = ps
            .iter()
            .map(|p| agent_pod(p, container_name, &known))
            .collect();
        a.sort_by(|x, y| x.name.cmp(&y.name));
        a
    });
    let agents = match (&agents, cms) {
        (Look::Seen { value }, Look::CouldNotLook { reason }) if uses_config_maps(value) => {
            Look::could_not(format!(
                "the agents take their env from ConfigMaps, which could not be read: {reason}"
            ))
        }
        _ => agents,
    };
    live::agent_env(topo, &agents, &known)
}

/// The DaemonSet rollout pane, over the DaemonSet (`Seen(None)`: there is none) and the
/// pods the agent selector finds. Pods that could not be read make the rollout unknown.
pub fn rollout_pane(
    env: &str,
    ds: &Look<Option<&DaemonSet>>,
    pods: &Look<Vec<&Pod>>,
    now: Timestamp,
    stuck_after_ms: u64,
) -> RolloutPane {
    let (status, rpods) = match (ds, pods) {
        (Look::CouldNotLook { reason }, _) => (Look::could_not(reason.clone()), Vec::new()),
        (Look::Seen { .. }, Look::CouldNotLook { reason }) => (
            Look::could_not(format!("the DaemonSet's pods could not be read: {reason}")),
            Vec::new(),
        ),
        (Look::Seen { value: None }, Look::Seen { .. }) => (Look::seen(None), Vec::new()),
        (Look::Seen { value: Some(d) }, Look::Seen { value: ps }) => {
            let generation = template_generation(d);
            let mut rp: Vec<RolloutPod> = ps
                .iter()
                .map(|p| rollout_pod(p, generation.as_deref()))
                .collect();
            rp.sort_by(|a, b| (&a.node, &a.name).cmp(&(&b.node, &b.name)));
            (Look::seen(Some(daemonset_status(d))), rp)
        }
    };
    live::rollout(env, &status, &rpods, now, stuck_after_ms)
}

/// The nodes pane.
pub fn nodes_pane(topo: &EnvTopology, nodes: &Look<Vec<&Node>>) -> NodesPane {
    let mut obs = map_look(nodes, |ns| ns.iter().map(|n| node(n)).collect::<Vec<_>>());
    if let Look::Seen { value } = &mut obs {
        value.sort_by(|a, b| a.name.cmp(&b.name));
    }
    live::nodes(topo, &obs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hk_engine::checks::live::{Endpoint, Resolved, RolloutState, Rule, Server, Severity};
    use serde_json::json;
    use std::collections::BTreeMap;

    fn obj<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).expect("fixture fits its type")
    }

    fn topo() -> EnvTopology {
        EnvTopology {
            env: "lab".into(),
            vip: "10.9.0.100".parse().expect("ip"),
            api_port: 6443,
            agents: Vec::new(),
            servers: vec![
                Server {
                    name: "s1".into(),
                    address: "10.9.0.1".parse().expect("ip"),
                },
                Server {
                    name: "s2".into(),
                    address: "10.9.0.2".parse().expect("ip"),
                },
            ],
        }
    }

    fn agent(name: &str, node: &str, env: serde_json::Value, ready: &str) -> Pod {
        obj(json!({
            "metadata": {"name": name, "namespace": "kube-system",
                         "labels": {"k8s-app": "cilium", "pod-template-generation": "2"},
                         "creationTimestamp": "2026-09-06T10:00:00Z"},
            "spec": {"nodeName": node, "containers": [
                {"name": "cilium-agent", "env": env},
                {"name": "sidecar", "env": [{"name": "KUBERNETES_SERVICE_HOST", "value": "10.9.0.1"}]},
            ]},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": ready,
                 "lastTransitionTime": "2026-09-06T10:01:00Z"}]},
        }))
    }

    #[test]
    fn lease_fields_and_times() {
        let l: Lease = obj(json!({
            "metadata": {"name": "plndr-cp-lock", "namespace": "kube-system"},
            "spec": {"holderIdentity": "s1", "leaseDurationSeconds": 5, "leaseTransitions": 3,
                     "renewTime": "2026-09-06T10:00:00.250000Z"},
        }));
        let o = lease(&l);
        assert_eq!(o.name, "plndr-cp-lock");
        assert_eq!(o.holder_identity.as_deref(), Some("s1"));
        assert_eq!(o.lease_duration_seconds, Some(5));
        assert_eq!(o.lease_transitions, Some(3));
        assert_eq!(
            o.renew_time.map(|t| t.to_string()).as_deref(),
            Some("2026-09-06T10:00:00.250Z")
        );
        // A Lease with no spec gives no facts, not zeros.
        let bare = lease(&obj(json!({"metadata": {"name": "x"}})));
        assert_eq!(bare.holder_identity, None);
        assert_eq!(bare.renew_time, None);
        assert_eq!(bare.lease_duration_seconds, None);
        // A released Lease (client-go's release writes an empty holder) is held by nobody.
        let released = lease(&obj(json!({"metadata": {"name": "plndr-cp-lock"},
            "spec": {"holderIdentity": "", "leaseDurationSeconds": 1}})));
        assert_eq!(released.holder_identity, None);
    }

    #[test]
    fn agent_env_literal_configmap_and_others() {
        let p = agent(
            "cilium-a",
            "s1",
            json!([
                {"name": "K8S_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "KUBERNETES_SERVICE_HOST",
                 "valueFrom": {"configMapKeyRef": {"name": "ep", "key": "host"}}},
                {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"},
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k", "optional": true}}},
                {"name": "EMPTY"},
            ]),
            "True",
        );
        let a = agent_pod(&p, "cilium-agent", &ConfigMaps::new());
        assert_eq!(a.name, "cilium-a");
        assert_eq!(a.node.as_deref(), Some("s1"));
        assert_eq!(a.phase, "Running");
        assert!(a.ready);
        let src = |n: &str| {
            a.env
                .iter()
                .find(|e| e.name == n)
                .map(|e| e.source.clone())
                .expect(n)
        };
        assert_eq!(
            src("KUBERNETES_SERVICE_HOST"),
            EnvSource::ConfigMapKey {
                config_map: "ep".into(),
                key: "host".into(),
                optional: false
            }
        );
        assert_eq!(
            src("KUBERNETES_SERVICE_PORT"),
            EnvSource::Literal {
                value: "6443".into()
            }
        );
        assert_eq!(
            src("K8S_NODE_NAME"),
            EnvSource::Other {
                description: "fieldRef spec.nodeName".into()
            }
        );
        assert_eq!(
            src("TOKEN"),
            EnvSource::Other {
                description: "Secret s key k".into()
            }
        );
        assert_eq!(src("EMPTY"), EnvSource::Literal { value: "".into() });
        // Only the named container's env: the sidecar's node address is not the agent's.
        assert!(!a.env.iter().any(|e| e.source
            == EnvSource::Literal {
                value: "10.9.0.1".into()
            }));
        assert!(uses_config_maps(std::slice::from_ref(&a)));
    }

    #[test]
    fn env_from_keeps_prefix_and_drops_absent_optional() {
        let p: Pod = obj(json!({
            "metadata": {"name": "c"},
            "spec": {"containers": [{"name": "cilium-agent", "envFrom": [
                {"configMapRef": {"name": "present"}, "prefix": "KUBERNETES_"},
                {"configMapRef": {"name": "absent-optional", "optional": true}},
                {"configMapRef": {"name": "absent-required"}},
                {"secretRef": {"name": "s"}},
            ]}]},
        }));
        let known = ConfigMaps::from([("present".to_string(), BTreeMap::new())]);
        let a = agent_pod(&p, "cilium-agent", &known);
        assert_eq!(
            a.env_from,
            vec![
                EnvFromConfigMap {
                    config_map: "present".into(),
                    prefix: "KUBERNETES_".into()
                },
                EnvFromConfigMap {
                    config_map: "absent-required".into(),
                    prefix: "".into()
                },
            ]
        );
        // No status: phase unknown, not ready.
        assert_eq!(a.phase, "Unknown");
        assert!(!a.ready);
        assert_eq!(a.node, None);
    }

    #[test]
    fn pod_without_the_container_is_named_not_judged_empty() {
        let p: Pod = obj(json!({
            "metadata": {"name": "c"},
            "spec": {"containers": [{"name": "agent"}]},
        }));
        let pane = agents_pane(
            &topo(),
            &Look::seen(vec![&p]),
            &Look::seen(vec![]),
            "cilium-agent",
        );
        let host = &pane.agents[0].host;
        match host {
            Resolved::Unresolvable { reason } => {
                assert!(reason.contains("no container `cilium-agent`"), "{reason}");
                assert!(reason.contains("it has: agent"), "{reason}");
            }
            other => panic!("expected unresolvable, got {other:?}"),
        }
    }

    #[test]
    fn configmaps_data_only() {
        let cm: ConfigMap = obj(json!({
            "metadata": {"name": "ep"},
            "data": {"host": "10.9.0.100"},
            "binaryData": {"blob": "AAAA"},
        }));
        let empty: ConfigMap = obj(json!({"metadata": {"name": "none"}}));
        let m = config_maps([&cm, &empty]);
        assert_eq!(m["ep"].get("host").map(String::as_str), Some("10.9.0.100"));
        assert!(!m["ep"].contains_key("blob"));
        assert!(m["none"].is_empty());
    }

    #[test]
    fn agents_pane_resolves_configmap_and_flags_node_address() {
        let via_cm = agent(
            "cilium-a",
            "s1",
            json!([
                {"name": "KUBERNETES_SERVICE_HOST",
                 "valueFrom": {"configMapKeyRef": {"name": "ep", "key": "host"}}},
                {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"},
            ]),
            "True",
        );
        let on_node = agent(
            "cilium-b",
            "s2",
            json!([
                {"name": "KUBERNETES_SERVICE_HOST", "value": "10.9.0.1"},
                {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"},
            ]),
            "True",
        );
        let cm: ConfigMap =
            obj(json!({"metadata": {"name": "ep"}, "data": {"host": "10.9.0.100"}}));
        let pane = agents_pane(
            &topo(),
            &Look::seen(vec![&via_cm, &on_node]),
            &Look::seen(vec![&cm]),
            "cilium-agent",
        );
        assert_eq!(pane.agents[0].endpoint, Endpoint::Vip);
        assert_eq!(
            pane.agents[1].endpoint,
            Endpoint::NodeAddress {
                node: "s1".into(),
                address: "10.9.0.1".into()
            }
        );
        let crit = pane
            .verdicts
            .iter()
            .find(|v| v.rule == Rule::AgentHost && v.severity == Severity::Critical)
            .expect("critical verdict");
        assert!(crit.message.contains("cilium-b on s2"), "{}", crit.message);

        // ConfigMaps unreadable while an agent needs one: could not look, with the reason.
        let pane = agents_pane(
            &topo(),
            &Look::seen(vec![&via_cm, &on_node]),
            &Look::could_not("403 forbidden"),
            "cilium-agent",
        );
        assert_eq!(pane.verdicts.len(), 1);
        assert_eq!(pane.verdicts[0].rule, Rule::CouldNotLook);
        assert!(pane.verdicts[0].message.contains("403 forbidden"));
        // ...but literal-only agents are judged without them.
        let pane = agents_pane(
            &topo(),
            &Look::seen(vec![&on_node]),
            &Look::could_not("403 forbidden"),
            "cilium-agent",
        );
        assert!(pane.verdicts.iter().all(|v| v.rule != Rule::CouldNotLook));
    }

    fn ds(generation: i64, annotation: Option<&str>, status: serde_json::Value) -> DaemonSet {
        let mut meta =
            json!({"name": "cilium", "namespace": "kube-system", "generation": generation});
        if let Some(a) = annotation {
            meta["annotations"] = json!({DS_TEMPLATE_GENERATION_ANNOTATION: a});
        }
        obj(json!({
            "metadata": meta,
            "spec": {"selector": {"matchLabels": {"k8s-app": "cilium"}},
                     "template": {"spec": {"containers": [{"name": "cilium-agent"}]}}},
            "status": status,
        }))
    }

    #[test]
    fn daemonset_counters_and_missing_ones() {
        let d = ds(
            3,
            Some("2"),
            json!({"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberMisscheduled": 0,
                   "numberReady": 2, "updatedNumberScheduled": 3, "numberAvailable": 2,
                   "numberUnavailable": 1, "observedGeneration": 3}),
        );
        let s = daemonset_status(&d);
        assert_eq!(
            (
                s.generation,
                s.observed_generation,
                s.desired,
                s.updated,
                s.ready,
                s.available,
                s.unavailable
            ),
            (3, 3, 3, 3, 2, 2, 1)
        );
        assert_eq!(template_generation(&d).as_deref(), Some("2"));
        let fresh: DaemonSet = obj(json!({"metadata": {"name": "cilium", "generation": 1}}));
        let s = daemonset_status(&fresh);
        assert_eq!((s.observed_generation, s.desired, s.updated), (0, 0, 0));
        assert_eq!(template_generation(&fresh).as_deref(), Some("1"));
    }

    #[test]
    fn rollout_pods_updated_by_template_generation() {
        let ready = agent("cilium-a", "s1", json!([]), "True");
        let unready = agent("cilium-b", "s2", json!([]), "False");
        let r = rollout_pod(&ready, Some("2"));
        assert!(r.updated && r.ready && r.not_ready_since.is_none());
        let u = rollout_pod(&unready, Some("2"));
        assert!(u.updated && !u.ready);
        assert_eq!(
            u.not_ready_since.map(|t| t.to_string()).as_deref(),
            Some("2026-09-06T10:01:00.000Z")
        );
        assert!(!rollout_pod(&ready, Some("3")).updated);
        assert!(!rollout_pod(&ready, None).updated);
        // Never ready (no condition): since creation.
        let new: Pod =
            obj(json!({"metadata": {"name": "n", "creationTimestamp": "2026-09-06T10:00:00Z"}}));
        assert_eq!(
            rollout_pod(&new, Some("1"))
                .not_ready_since
                .map(|t| t.to_string())
                .as_deref(),
            Some("2026-09-06T10:00:00.000Z")
        );
    }

    #[test]
    fn rollout_pane_stuck_and_unreadable_pods() {
        let d = ds(
            2,
            Some("2"),
            json!({"desiredNumberScheduled": 2, "currentNumberScheduled": 2, "numberMisscheduled": 0,
                   "numberReady": 1, "updatedNumberScheduled": 2, "numberAvailable": 1,
                   "numberUnavailable": 1, "observedGeneration": 2}),
        );
        let a = agent("cilium-a", "s1", json!([]), "True");
        let b = agent("cilium-b", "s2", json!([]), "False");
        let since = rollout_pod(&b, Some("2")).not_ready_since.expect("since").0;
        let pods = Look::seen(vec![&b, &a]);
        let pane = rollout_pane(
            "lab",
            &Look::seen(Some(&d)),
            &pods,
            Timestamp(since + 600_000),
            300_000,
        );
        assert_eq!(
            pane.state,
            Some(RolloutState::Stuck {
                pod: "cilium-b".into(),
                node: Some("s2".into()),
                not_ready_ms: 600_000
            })
        );
        // Sorted by node.
        assert_eq!(pane.pods[0].name, "cilium-a");
        let early = rollout_pane(
            "lab",
            &Look::seen(Some(&d)),
            &pods,
            Timestamp(since + 1000),
            300_000,
        );
        // Every pod on the current template and the controller caught up: by the
        // DaemonSet's counters no rollout runs (issue 26), one pod is just unavailable.
        assert_eq!(
            early.state,
            Some(RolloutState::Unavailable {
                available: 1,
                desired: 2
            })
        );

        let pane = rollout_pane(
            "lab",
            &Look::seen(Some(&d)),
            &Look::could_not("connection refused"),
            Timestamp(since),
            300_000,
        );
        assert_eq!(pane.verdicts[0].rule, Rule::CouldNotLook);
        assert!(pane.verdicts[0].message.contains("connection refused"));
        let none = rollout_pane("lab", &Look::seen(None), &pods, Timestamp(since), 300_000);
        assert_eq!(none.verdicts[0].severity, Severity::Critical);
    }

    #[test]
    fn nodes_ready_roles_addresses() {
        let n: Node = obj(json!({
            "metadata": {"name": "s1", "labels": {"node-role.kubernetes.io/control-plane": "true"}},
            "status": {
                "addresses": [{"type": "InternalIP", "address": "10.9.0.1"},
                              {"type": "Hostname", "address": "s1"},
                              {"type": "ExternalIP", "address": "not-an-ip"}],
                "conditions": [{"type": "MemoryPressure", "status": "False"},
                               {"type": "Ready", "status": "Unknown"}],
            },
        }));
        let o = node(&n);
        assert_eq!(o.ready, Some(ConditionStatus::Unknown));
        assert_eq!(o.addresses, vec!["10.9.0.1".parse::<IpAddr>().expect("ip")]);
        assert_eq!(o.labels.len(), 1);
        let bare = node(&obj(json!({"metadata": {"name": "x"}})));
        assert_eq!(bare.ready, None);

        // s2 is no node (by name or address): the rule warns.
        let pane = nodes_pane(&topo(), &Look::seen(vec![&n]));
        assert_eq!(pane.nodes[0].roles, vec!["control-plane".to_string()]);
        assert!(pane
            .verdicts
            .iter()
            .any(|v| v.rule == Rule::NodeMissing && v.subject == "server s2"));
        assert!(pane
            .verdicts
            .iter()
            .any(|v| v.rule == Rule::NodeReady && v.severity == Severity::Critical));
    }

    #[test]
    fn vip_pane_from_lease_and_probe() {
        let l: Lease = obj(json!({
            "metadata": {"name": "plndr-cp-lock"},
            "spec": {"holderIdentity": "s2", "leaseDurationSeconds": 5,
                     "renewTime": "2026-09-06T10:00:00.000000Z"},
        }));
        let renew = lease(&l).renew_time.expect("renew").0;
        let pane = vip_pane(
            &topo(),
            &Look::seen(Some(&l)),
            &Look::seen(TcpProbe::Connected { latency_ms: 1 }),
            Timestamp(renew + 1000),
        );
        assert_eq!(pane.holder.as_deref(), Some("s2"));
        assert_eq!(pane.holder_node.as_deref(), Some("s2"));
        assert_eq!(pane.renew_age_ms, Some(1000));
        assert_eq!(live::worst(&pane.verdicts), Severity::Ok);
        let none = vip_pane(
            &topo(),
            &Look::seen(None),
            &Look::seen(TcpProbe::Connected { latency_ms: 1 }),
            Timestamp(renew),
        );
        assert_eq!(live::worst(&none.verdicts), Severity::Critical);
    }

    #[test]
    fn timestamps_before_the_epoch_are_zero() {
        let t: jiff::Timestamp = "1969-12-31T23:59:59Z".parse().expect("ts");
        assert_eq!(timestamp(&t), Timestamp(0));
    }
}
