//! What Flux would apply to a cluster from an overlay: the overlay's Flux Kustomizations, and
//! the objects under each one's `spec.path` with its `postBuild.substitute` applied, as JSON
//! objects a Kubernetes API server takes.
//!
//! Owns: turning a located tree into typed JSON, and substitution over a whole object.
//! Must not: guess. A Kustomization whose variables come from a `substituteFrom` source, a spec
//! field that changes the objects, or a substituted plain scalar whose YAML type would change
//! (the tree does not keep whether it was quoted) is an error naming file:line.

use std::path::Path;

use serde_json::{Map, Value};

use super::postbuild::{self, check_flux_spec, envsubst, SUBSTITUTE_MARKER};
use super::tree::{display_name, is_flux_kustomization, res_id, LNode, LVal};
use super::{build, EngineChoice, FluxError};

/// What Flux applies from an overlay: the overlay's own resources (the Flux Kustomizations
/// among them), and for each Flux Kustomization the objects under its `spec.path`,
/// substituted, or why they cannot be told.
#[derive(Debug)]
pub struct Applied {
    pub top: Vec<Value>,
    /// `namespace/name` of each Flux Kustomization, and what it applies.
    pub by_kustomization: Vec<(String, Result<Vec<Value>, FluxError>)>,
}

/// What Flux would apply from `overlay` (relative to `root`, or absolute), by the builtin
/// engine. `Err` only when the overlay itself cannot be built.
pub fn applied_objects(root: &Path, overlay: &Path) -> Result<Applied, FluxError> {
    let (_, top) = build(root, overlay, &EngineChoice::Builtin)?;
    let mut applied = Applied {
        top: top
            .iter()
            .map(|r| to_json(r, None))
            .collect::<Result<_, _>>()?,
        by_kustomization: Vec::new(),
    };
    for ks in top.iter().filter(|r| is_flux_kustomization(r)) {
        let name = display_name(&res_id(ks));
        let objects = under_path(root, ks);
        applied.by_kustomization.push((name, objects));
    }
    Ok(applied)
}

/// The objects under Flux Kustomization `ks`'s `spec.path`, substituted (none without a path).
fn under_path(root: &Path, ks: &LNode) -> Result<Vec<Value>, FluxError> {
    let Some(path) = ks.str_at(&["spec", "path"]) else {
        return Ok(Vec::new());
    };
    if let Some(spec) = ks.get("spec") {
        check_flux_spec(spec)?;
    }
    let vars = substitutions(ks)?;
    let (_, built) = build(root, Path::new(path), &EngineChoice::Builtin)?;
    built
        .iter()
        .map(|r| {
            let disabled = ["labels", "annotations"].iter().any(|f| {
                r.path(&["metadata", f, SUBSTITUTE_MARKER])
                    .and_then(LNode::text)
                    == Some("disabled")
            });
            to_json(r, (!disabled).then_some(&vars))
        })
        .collect()
}

/// The variables a Flux Kustomization substitutes: its inline `postBuild.substitute` only.
/// A `substituteFrom` source is not read here, so its values are unknown: an error.
fn substitutions(ks: &LNode) -> Result<Vec<(String, String)>, FluxError> {
    let Some(pb) = ks.path(&["spec", "postBuild"]) else {
        return Ok(Vec::new());
    };
    if let Some(from) = pb.get("substituteFrom") {
        if !matches!(from.v, LVal::Null) {
            return Err(postbuild::cannot_tell(
                &from.at,
                format!("postBuild.substituteFrom of {}", display_name(&res_id(ks))),
                "its sources are not read when building what Flux applies",
            ));
        }
    }
    let mut vars = Vec::new();
    if let Some(LVal::Map(entries)) = pb.get("substitute").map(|s| &s.v) {
        for (k, v) in entries {
            let Some(text) = v.text() else {
                return Err(FluxError::Unexpected {
                    at: v.at.clone(),
                    expected: format!("postBuild.substitute.{k} to be a scalar"),
                });
            };
            vars.push((k.clone(), text.to_string()));
        }
    }
    Ok(vars)
}

/// `node` as JSON, its scalars typed as YAML typed them; with `vars`, every string that
/// names a variable substituted as Flux does.
fn to_json(node: &LNode, vars: Option<&Vec<(String, String)>>) -> Result<Value, FluxError> {
    Ok(match &node.v {
        LVal::Null => Value::Null,
        LVal::Other(text) => typed(text).unwrap_or_else(|| Value::String(text.clone())),
        LVal::Str(s) => match vars {
            Some(vars) if s.contains('$') => {
                let lookup =
                    |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
                let out = envsubst(s, &lookup).map_err(|e| {
                    postbuild::cannot_tell(&node.at, format!("`{s}`"), e.to_string())
                })?;
                if out != *s && typed(&out).is_some() {
                    return Err(postbuild::cannot_tell(
                        &node.at,
                        format!("`{s}` substituted to `{out}`"),
                        "a plain YAML scalar would now be a number, bool or null, a quoted one a string; which one it was is not kept",
                    ));
                }
                Value::String(out)
            }
            _ => Value::String(s.clone()),
        },
        LVal::Seq(items) => Value::Array(
            items
                .iter()
                .map(|i| to_json(i, vars))
                .collect::<Result<_, _>>()?,
        ),
        LVal::Map(entries) => {
            let mut m = Map::new();
            for (k, v) in entries {
                m.insert(k.clone(), to_json(v, vars)?);
            }
            Value::Object(m)
        }
    })
}

/// A scalar's text as the YAML 1.2 core schema types it (what the API server's YAML reader
/// does), `None` for a string.
fn typed(text: &str) -> Option<Value> {
    match text {
        "true" | "True" | "TRUE" => return Some(Value::Bool(true)),
        "false" | "False" | "FALSE" => return Some(Value::Bool(false)),
        "null" | "Null" | "NULL" | "~" | "" => return Some(Value::Null),
        _ => {}
    }
    if let Ok(i) = text.parse::<i64>() {
        return Some(Value::from(i));
    }
    let numeric = text
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
    if numeric && text.chars().any(|c| c.is_ascii_digit()) {
        if let Ok(f) = text.parse::<f64>() {
            return serde_json::Number::from_f64(f).map(Value::Number);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    fn repo(platform_ks: &str, release: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tempdir");
        write(
            d.path(),
            "clusters/prod/kustomization.yaml",
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [platform.yaml]\n",
        );
        write(d.path(), "clusters/prod/platform.yaml", platform_ks);
        write(
            d.path(),
            "platform/cilium/kustomization.yaml",
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [helmrelease.yaml]\n",
        );
        write(d.path(), "platform/cilium/helmrelease.yaml", release);
        d
    }

    /// The overlay builds; what its Kustomization applies cannot be told: why.
    fn first_error(d: &tempfile::TempDir) -> String {
        let a = applied_objects(d.path(), Path::new("clusters/prod")).expect("overlay builds");
        assert_eq!(a.top.len(), 1, "the Kustomization itself is still served");
        match &a.by_kustomization[0].1 {
            Err(e) => e.to_string(),
            Ok(objs) => panic!("expected an error, got {objs:?}"),
        }
    }

    const KS: &str = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: platform, namespace: flux-system}\nspec:\n  interval: 10m\n  path: ./platform/cilium\n  prune: true\n  postBuild:\n    substitute: {K3S_API_HOST: 10.0.0.100}\n";
    const HR: &str = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: cilium, namespace: kube-system}\nspec:\n  interval: 30m\n  values:\n    k8sServiceHost: ${K3S_API_HOST}\n    k8sServicePort: 6443\n    kubeProxyReplacement: true\n";

    #[test]
    fn the_release_comes_out_substituted_and_typed() {
        let d = repo(KS, HR);
        let a = applied_objects(d.path(), Path::new("clusters/prod")).expect("applied");
        assert_eq!(a.top.len(), 1);
        assert_eq!(a.top[0]["kind"], "Kustomization");
        assert_eq!(a.top[0]["spec"]["prune"], true);
        let (name, objs) = &a.by_kustomization[0];
        assert_eq!(name, "flux-system/platform");
        let objs = objs.as_ref().expect("built");
        let hr = &objs[0];
        assert_eq!(hr["kind"], "HelmRelease");
        assert_eq!(hr["spec"]["values"]["k8sServiceHost"], "10.0.0.100");
        assert_eq!(hr["spec"]["values"]["k8sServicePort"], 6443);
        assert_eq!(hr["spec"]["values"]["kubeProxyReplacement"], true);
    }

    #[test]
    fn an_unset_variable_is_empty_as_flux_makes_it() {
        let hr = HR.replace("${K3S_API_HOST}", "https://${K3S_API_HOST}:6443");
        let d = repo(&KS.replace("K3S_API_HOST: 10.0.0.100", "OTHER: x"), &hr);
        let a = applied_objects(d.path(), Path::new("clusters/prod")).expect("applied");
        let objs = a.by_kustomization[0].1.as_ref().expect("built");
        assert_eq!(objs[0]["spec"]["values"]["k8sServiceHost"], "https://:6443");
        // Alone, the empty result is a null or "" by how it was quoted: not guessed.
        let d = repo(&KS.replace("K3S_API_HOST: 10.0.0.100", "OTHER: x"), HR);
        let e = first_error(&d);
        assert!(e.contains("helmrelease.yaml:7"), "{e}");
    }

    #[test]
    fn a_substitute_from_source_is_named_not_guessed() {
        let ks = KS.replace(
            "    substitute: {K3S_API_HOST: 10.0.0.100}\n",
            "    substituteFrom: [{kind: Secret, name: vars}]\n",
        );
        let d = repo(&ks, HR);
        let e = first_error(&d);
        assert!(e.contains("substituteFrom"), "{e}");
        assert!(e.contains("platform.yaml"), "{e}");
    }

    #[test]
    fn a_substitution_that_would_retype_a_scalar_is_refused() {
        let ks = KS.replace("K3S_API_HOST: 10.0.0.100", "K3S_API_HOST: \"8443\"");
        let d = repo(&ks, HR);
        let e = first_error(&d);
        assert!(e.contains("8443"), "{e}");
        assert!(e.contains("helmrelease.yaml"), "{e}");
    }
}
