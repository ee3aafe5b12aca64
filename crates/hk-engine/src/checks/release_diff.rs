//! What a Flux reconcile of a HelmRelease changes (issue 29): the values the cluster runs
//! now against what the environment's overlay renders after Flux's postBuild substitution,
//! as the keys that change, with the chart version now and next.
//!
//! "Now" is two things that can disagree, and the preview shows both: the release's
//! `spec.values` as the cluster stores it, and what the workload actually runs (a chart
//! value the chart turns into a container environment variable, read from the pods). The
//! 2026-09-06 incident is the case where they disagree: the release already said the VIP,
//! the agents still dialled a node.
//!
//! Owns: flattening values to dotted keys, the comparison and its words. Must not: read the
//! cluster or the repo (the caller hands in what it read, or why it could not).

use std::collections::BTreeMap;

use serde_json::Value;

/// Chart values the workload shows as a container environment variable, so what runs can be
/// compared with what the overlay renders. Cilium's chart sets `KUBERNETES_SERVICE_HOST` and
/// `_PORT` of every agent from `k8sServiceHost` and `k8sServicePort`.
pub const VALUE_ENV: &[(&str, &str)] = &[
    ("k8sServiceHost", "KUBERNETES_SERVICE_HOST"),
    ("k8sServicePort", "KUBERNETES_SERVICE_PORT"),
];

/// What was read of a HelmRelease, or why it could not be.
pub type Read<T> = Result<T, String>;

/// The inputs of the comparison, each as read (or why not).
#[derive(Debug, Clone)]
pub struct ReleaseNowNext<'a> {
    /// `spec.values` of the release in the cluster (`Value::Null` when it sets none).
    pub values_now: Read<&'a Value>,
    /// `spec.values` of the release the overlay renders, substituted.
    pub values_next: Read<&'a Value>,
    /// The chart version the release runs now (`status.history[0].chartVersion`).
    pub chart_now: Option<String>,
    /// The chart version the overlay asks for (`spec.chart.spec.version`; `None`: any).
    pub chart_next: Option<String>,
    /// Environment variable -> the distinct values the workload's pods run with, and how
    /// many pods run each; `Err`: the pods could not be read.
    pub running: Read<BTreeMap<String, BTreeMap<String, usize>>>,
    /// Where `values_next` comes from, for the operator (`clusters/prod`).
    pub overlay: &'a str,
}

/// `values` as dotted keys to scalar text (`hubble.relay.enabled` -> `true`); a list is one
/// key whose text is its JSON.
pub fn flatten(values: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    walk(values, String::new(), &mut out);
    out
}

fn walk(v: &Value, key: String, out: &mut BTreeMap<String, String>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                let key = if key.is_empty() {
                    k.clone()
                } else {
                    format!("{key}.{k}")
                };
                walk(x, key, out);
            }
        }
        Value::Null if key.is_empty() => {}
        Value::String(s) => {
            out.insert(key, s.clone());
        }
        other if !key.is_empty() => {
            out.insert(key, other.to_string());
        }
        _ => {}
    }
}

fn shown(v: Option<&String>) -> &str {
    v.map_or("(unset)", String::as_str)
}

/// What the pods run for `var`, in words (`192.168.2.10 on 3 pods`), or `None` when no pod
/// sets it.
fn running_text(running: &BTreeMap<String, BTreeMap<String, usize>>, var: &str) -> Option<String> {
    let seen = running.get(var).filter(|m| !m.is_empty())?;
    Some(
        seen.iter()
            .map(|(v, n)| format!("{v} on {n} pod{}", if *n == 1 { "" } else { "s" }))
            .collect::<Vec<_>>()
            .join(", "),
    )
}

/// The preview's lines: each value that changes (`k8sServiceHost: 192.168.2.10 ->
/// 192.168.2.9`), the chart version now and next, and every fact that could not be read said
/// so by name. A key the workload runs is compared from what the pods run; where the release
/// already says the next value, the line says the pods still run the old one.
pub fn lines(x: &ReleaseNowNext<'_>) -> Vec<String> {
    let mut out = Vec::new();
    let chart_next = x.chart_next.as_deref().unwrap_or("any version");
    // Said last: the values are what the operator reads the preview for.
    let chart = match x.chart_now.as_deref() {
        Some(now) if Some(now) == x.chart_next.as_deref() => {
            format!("chart: {now} now, {chart_next} next (unchanged)")
        }
        Some(now) if x.chart_next.is_none() => format!(
            "chart: {now} now; the overlay pins no version, so the newest its source offers is next"
        ),
        Some(now) => format!("chart: {now} now -> {chart_next} next"),
        None => format!(
            "chart: the version running now is not recorded in the release's status; {chart_next} next"
        ),
    };
    let next = match &x.values_next {
        Ok(v) => flatten(v),
        Err(why) => {
            out.push(format!(
                "values next: unknown: the overlay {} could not be rendered: {why}",
                x.overlay
            ));
            out.push(chart);
            return out;
        }
    };
    let now = match &x.values_now {
        Ok(v) => Some(flatten(v)),
        Err(why) => {
            out.push(format!(
                "values now: unknown: the release's values could not be read: {why}"
            ));
            None
        }
    };
    let mut changes = Vec::new();
    if let Some(now) = &now {
        let keys: std::collections::BTreeSet<&String> = now.keys().chain(next.keys()).collect();
        for k in keys {
            let (a, b) = (now.get(k), next.get(k));
            let runs = VALUE_ENV
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, var)| *var);
            // What the pods run for the key's variable: the values and the words for them.
            let pods = match (&x.running, runs) {
                (Ok(r), Some(var)) => r
                    .get(var)
                    .zip(running_text(r, var))
                    .map(|(seen, text)| (var, seen, text)),
                _ => None,
            };
            match pods {
                // What runs is what matters: the pods' value against the overlay's.
                Some((var, seen, text)) => {
                    if seen.len() == 1 && seen.contains_key(shown(b)) {
                        // What runs is already next; only the release's record moves.
                        if a != b {
                            changes.push(format!(
                                "{k}: {} -> {} in the release (the pods' {var} already: {text})",
                                shown(a),
                                shown(b)
                            ));
                        }
                        continue;
                    }
                    let from = seen
                        .keys()
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                        .join(" / ");
                    let release = if a == b {
                        format!("the release in the cluster already says {}", shown(b))
                    } else {
                        format!("the release in the cluster says {}", shown(a))
                    };
                    changes.push(format!(
                        "{k}: {from} -> {} (the pods' {var} now: {text}; {release})",
                        shown(b)
                    ));
                }
                None if a != b => changes.push(format!("{k}: {} -> {}", shown(a), shown(b))),
                None => {}
            }
        }
    }
    if let Err(why) = &x.running {
        out.push(format!(
            "what the pods run now: unknown ({why}); the comparison is with the release's values only"
        ));
    }
    if now.is_some() {
        if changes.is_empty() {
            out.push(format!(
                "values: the overlay {} renders what runs now: this reconcile changes no value",
                x.overlay
            ));
        } else {
            out.push(format!(
                "values that change (now -> what the overlay {} renders):",
                x.overlay
            ));
            out.extend(changes.into_iter().map(|c| format!("  {c}")));
        }
    }
    out.push(chart);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pods(var: &str, v: &[(&str, usize)]) -> BTreeMap<String, BTreeMap<String, usize>> {
        let mut m = BTreeMap::new();
        m.insert(
            var.to_string(),
            v.iter().map(|(a, n)| (a.to_string(), *n)).collect(),
        );
        m
    }

    #[test]
    fn the_incident_shows_the_host_the_agents_dial_and_the_vip_next() {
        // The release already carries the VIP (Flux applied the fixed overlay); the agents
        // still run the founder's address: that is the change the reconcile makes.
        let values = json!({"k8sServiceHost": "192.168.2.9", "k8sServicePort": "6443",
            "kubeProxyReplacement": true});
        let running = pods("KUBERNETES_SERVICE_HOST", &[("192.168.2.10", 3)]);
        let out = lines(&ReleaseNowNext {
            values_now: Ok(&values),
            values_next: Ok(&values),
            chart_now: Some("1.16.3".into()),
            chart_next: Some("1.16.3".into()),
            running: Ok(running),
            overlay: "clusters/prod",
        });
        assert_eq!(out[2], "chart: 1.16.3 now, 1.16.3 next (unchanged)");
        assert_eq!(
            out[0],
            "values that change (now -> what the overlay clusters/prod renders):"
        );
        assert_eq!(
            out[1],
            "  k8sServiceHost: 192.168.2.10 -> 192.168.2.9 (the pods' KUBERNETES_SERVICE_HOST now: \
             192.168.2.10 on 3 pods; the release in the cluster already says 192.168.2.9)"
        );
        assert_eq!(out.len(), 3, "{out:#?}");
    }

    #[test]
    fn a_value_the_release_changes_is_a_line_and_nothing_else_is() {
        let now = json!({"a": {"b": 1, "c": "x"}, "gone": true});
        let next = json!({"a": {"b": 2, "c": "x"}, "new": [1, 2]});
        let out = lines(&ReleaseNowNext {
            values_now: Ok(&now),
            values_next: Ok(&next),
            chart_now: Some("1.0.0".into()),
            chart_next: Some("1.1.0".into()),
            running: Ok(BTreeMap::new()),
            overlay: "clusters/dev",
        });
        assert_eq!(out[4], "chart: 1.0.0 now -> 1.1.0 next");
        assert_eq!(
            &out[1..4],
            [
                "  a.b: 1 -> 2",
                "  gone: true -> (unset)",
                "  new: (unset) -> [1,2]"
            ]
        );
    }

    #[test]
    fn nothing_changes_says_so_and_unread_facts_are_named() {
        let v = json!({"k8sServiceHost": "10.0.0.9"});
        let running = pods("KUBERNETES_SERVICE_HOST", &[("10.0.0.9", 2)]);
        let out = lines(&ReleaseNowNext {
            values_now: Ok(&v),
            values_next: Ok(&v),
            chart_now: None,
            chart_next: None,
            running: Ok(running),
            overlay: "clusters/dev",
        });
        assert!(out[1].contains("not recorded"), "{out:?}");
        assert!(out[0].contains("changes no value"), "{out:?}");
        let out = lines(&ReleaseNowNext {
            values_now: Err("forbidden".into()),
            values_next: Err("no such file clusters/dev".into()),
            chart_now: None,
            chart_next: None,
            running: Err("pods: forbidden".into()),
            overlay: "clusters/dev",
        });
        assert!(
            out.iter().any(|l| l.starts_with("values next: unknown")),
            "{out:?}"
        );
        assert!(
            !out.iter().any(|l| l.contains("changes no value")),
            "{out:?}"
        );
    }

    #[test]
    fn a_release_value_the_pods_already_run_is_a_change_of_the_release_only() {
        let now = json!({});
        let next = json!({"k8sServicePort": "6443"});
        let running = pods("KUBERNETES_SERVICE_PORT", &[("6443", 3)]);
        let out = lines(&ReleaseNowNext {
            values_now: Ok(&now),
            values_next: Ok(&next),
            chart_now: None,
            chart_next: None,
            running: Ok(running),
            overlay: "clusters/dev",
        });
        assert_eq!(
            out.get(1).map(String::as_str),
            Some("  k8sServicePort: (unset) -> 6443 in the release (the pods' KUBERNETES_SERVICE_PORT already: 6443 on 3 pods)"),
            "{out:?}"
        );
    }

    #[test]
    fn agents_split_between_two_hosts_mid_rollout_are_both_named() {
        let v = json!({"k8sServiceHost": "10.0.0.9"});
        let running = pods(
            "KUBERNETES_SERVICE_HOST",
            &[("10.0.0.2", 1), ("10.0.0.9", 2)],
        );
        let out = lines(&ReleaseNowNext {
            values_now: Ok(&v),
            values_next: Ok(&v),
            chart_now: None,
            chart_next: None,
            running: Ok(running),
            overlay: "clusters/dev",
        });
        assert!(
            out.iter().any(|l| l.contains(
                "k8sServiceHost: 10.0.0.2 / 10.0.0.9 -> 10.0.0.9 (the pods' KUBERNETES_SERVICE_HOST now: 10.0.0.2 on 1 pod, 10.0.0.9 on 2 pods"
            )),
            "{out:?}"
        );
    }
}
