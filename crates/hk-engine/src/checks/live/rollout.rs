//! The DaemonSet rollout: rolled out, rolling, or stuck on an unready updated pod.

use serde::{Deserialize, Serialize};

use super::{could_not, human_ms, Look, Pane, Rule, Severity, Timestamp, Verdict};

/// The DaemonSet's status counters (and generations, to tell a controller that has not yet
/// seen the newest spec).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonSetStatus {
    pub name: String,
    pub generation: u64,
    pub observed_generation: u64,
    pub desired: u32,
    pub updated: u32,
    pub ready: u32,
    pub available: u32,
    pub unavailable: u32,
}

/// One pod of the DaemonSet: whether it runs the current template, and readiness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutPod {
    pub name: String,
    pub node: Option<String>,
    /// Runs the current template (pod-template-generation / controller-revision-hash match).
    pub updated: bool,
    pub ready: bool,
    /// When the pod was last seen turning not ready (Ready condition's lastTransitionTime, or
    /// creation time for a pod that never was ready).
    pub not_ready_since: Option<Timestamp>,
}

/// Where a rollout stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum RolloutState {
    RolledOut,
    Rolling {
        updated: u32,
        desired: u32,
    },
    Stuck {
        pod: String,
        node: Option<String>,
        not_ready_ms: u64,
    },
    /// No rollout (the controller has seen the newest spec and every desired pod runs it),
    /// yet some pods are not available: a node down, a pod crashing. Not "rolling".
    Unavailable {
        available: u32,
        desired: u32,
    },
}

/// The rollout verdict with its state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutPane {
    pub env: String,
    pub state: Option<RolloutState>,
    /// The pods per node, as given (for the pane's per-node rows).
    pub pods: Vec<RolloutPod>,
    pub verdicts: Vec<Verdict>,
}

/// Rolled out (ok): the controller has seen the newest spec, every desired pod is updated and
/// available, none unavailable. Stuck (critical): an updated pod not ready for longer than
/// `stuck_after_ms` (the rollout will not pass it). Rolling (warn) only while a rollout
/// runs: the controller has not seen the newest generation, or fewer pods than desired run
/// the current template. Otherwise, with pods unavailable: unavailable (warn), no rollout.
pub fn rollout(
    env: &str,
    ds: &Look<Option<DaemonSetStatus>>,
    pods: &[RolloutPod],
    now: Timestamp,
    stuck_after_ms: u64,
) -> RolloutPane {
    let mut pane = RolloutPane {
        env: env.to_string(),
        state: None,
        pods: pods.to_vec(),
        verdicts: Vec::new(),
    };
    let v = |sev, subject: &str, msg: String| {
        Verdict::new(Pane::AgentEnv, Rule::Rollout, sev, env, subject, msg)
    };
    let ds = match ds {
        Look::CouldNotLook { reason } => {
            pane.verdicts
                .push(could_not(Pane::AgentEnv, env, "cilium daemonset", reason));
            return pane;
        }
        Look::Seen { value: None } => {
            pane.verdicts.push(v(
                Severity::Critical,
                "cilium daemonset",
                "no cilium DaemonSet: no CNI agents are scheduled".to_string(),
            ));
            return pane;
        }
        Look::Seen { value: Some(ds) } => ds,
    };
    let subject = format!("daemonset {}", ds.name);
    let stuck = pods
        .iter()
        .filter(|p| p.updated && !p.ready)
        .filter_map(|p| {
            let since = p.not_ready_since?;
            let age = now.0.saturating_sub(since.0);
            (age > stuck_after_ms).then_some((p, age))
        })
        .max_by_key(|(_, age)| *age);
    if let Some((p, age)) = stuck {
        let on = p.node.as_deref().unwrap_or("no node");
        pane.state = Some(RolloutState::Stuck {
            pod: p.name.clone(),
            node: p.node.clone(),
            not_ready_ms: age,
        });
        pane.verdicts.push(v(
            Severity::Critical,
            &subject,
            format!(
                "rollout stuck: updated pod {} on {on} not ready for {} ({} of {} updated, {} \
                 unavailable); the DaemonSet will not pass it",
                p.name,
                human_ms(age),
                ds.updated,
                ds.desired,
                ds.unavailable
            ),
        ));
        return pane;
    }
    let done = ds.observed_generation >= ds.generation
        && ds.updated == ds.desired
        && ds.available == ds.desired
        && ds.unavailable == 0;
    if done {
        pane.state = Some(RolloutState::RolledOut);
        pane.verdicts.push(v(
            Severity::Ok,
            &subject,
            format!(
                "rolled out: {} of {} updated and available",
                ds.updated, ds.desired
            ),
        ));
    } else {
        let waiting: Vec<String> = pods
            .iter()
            .filter(|p| !p.ready)
            .map(|p| match &p.node {
                Some(n) => format!("{} on {n}", p.name),
                None => p.name.clone(),
            })
            .collect();
        let waiting = if waiting.is_empty() {
            String::new()
        } else {
            format!("; not ready: {}", waiting.join(", "))
        };
        let rolling = ds.observed_generation < ds.generation || ds.updated < ds.desired;
        if !rolling {
            pane.state = Some(RolloutState::Unavailable {
                available: ds.available,
                desired: ds.desired,
            });
            pane.verdicts.push(v(
                Severity::Warn,
                &subject,
                format!(
                    "no rollout ({} of {} on the current template), {} of {} available, {} unavailable{waiting}",
                    ds.updated, ds.desired, ds.available, ds.desired, ds.unavailable
                ),
            ));
            return pane;
        }
        pane.state = Some(RolloutState::Rolling {
            updated: ds.updated,
            desired: ds.desired,
        });
        let seen = if ds.observed_generation < ds.generation {
            format!(
                " (controller has not yet seen generation {}, at {})",
                ds.generation, ds.observed_generation
            )
        } else {
            String::new()
        };
        pane.verdicts.push(v(
            Severity::Warn,
            &subject,
            format!(
                "rolling: {} of {} updated, {} ready, {} unavailable{seen}{waiting}",
                ds.updated, ds.desired, ds.ready, ds.unavailable
            ),
        ));
    }
    pane
}
