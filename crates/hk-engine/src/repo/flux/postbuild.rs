//! Flux's side of an overlay: which value each Flux Kustomization substitutes for a variable
//! after `kustomize build`, with kustomize-controller's rules: `substituteFrom` sources are
//! read in order and a later one overrides an earlier one; `substitute` overrides them all;
//! newlines are dropped from values; a source is looked up in the Kustomization's own
//! namespace by its exact name (a generated ConfigMap with a hash suffix is NOT the name
//! `substituteFrom` gives); `optional: true` sources that are absent count as empty; Secrets
//! and objects not in the overlay are never read, so a value only they could decide is
//! unknown. And the substitution itself ([`envsubst`]): `${VAR}`, `${VAR:=default}`,
//! `${VAR:-default}`, `$${VAR}` as an escape; every other form is reported as not modelled.
//!
//! Owns: [`evaluate`], [`envsubst`], [`check_flux_spec`].
//! Must not: read files (it works on built resources).

use std::collections::BTreeMap;
use std::path::Path;

use super::kustomize::HASH_PLACEHOLDER;
use super::patch::effective_ns;
use super::tree::{display_name, is_flux_kustomization, res_id, LNode, LVal};
use super::{Conflict, FluxError, OverlayValue, SetBy, SourceLoc};

/// The label or annotation that turns Flux's substitution off for one object.
pub const SUBSTITUTE_MARKER: &str = "kustomize.toolkit.fluxcd.io/substitute";

struct Candidate {
    value: String,
    at: SourceLoc,
    set_by: SetBy,
    kustomization: String,
    kustomization_at: SourceLoc,
    kustomization_path: Option<String>,
    unread: Vec<String>,
}

pub(super) fn cannot_tell(
    at: &SourceLoc,
    what: impl Into<String>,
    why: impl Into<String>,
) -> FluxError {
    FluxError::CannotTell {
        at: at.clone(),
        what: what.into(),
        why: why.into(),
    }
}

/// Flux reads substitution values as strings and drops their newlines.
fn string_value(node: &LNode, var: &str) -> Result<String, FluxError> {
    match &node.v {
        LVal::Str(s) => Ok(s.replace('\n', "")),
        _ => Err(FluxError::Unexpected {
            at: node.at.clone(),
            expected: format!(
                "{var} to be a string (Flux substitutes strings only; quote it), found {}",
                node.kind_name()
            ),
        }),
    }
}

/// Flux validates every variable name it is handed; one bad name fails the substitution.
fn valid_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
}

fn check_names(map: &LNode, what: &str) -> Result<(), FluxError> {
    if let LVal::Map(entries) = &map.v {
        for (k, v) in entries {
            if !valid_var_name(k) {
                return Err(cannot_tell(
                    &v.at,
                    format!("{what} key `{k}`"),
                    "Flux refuses variable names outside ^[_[:alpha:]][_[:alpha:][:digit:]]*$, so the whole substitution fails",
                ));
            }
        }
    }
    Ok(())
}

/// A `postBuild` whose shape the builtin rules model: `substitute` and `substituteFrom`
/// (kind, name, optional) only.
fn check_post_build(pb: &LNode) -> Result<(), FluxError> {
    for key in pb.keys() {
        if !matches!(key, "substitute" | "substituteFrom") {
            let at = pb.get(key).map(|n| n.at.clone()).unwrap_or(pb.at.clone());
            return Err(cannot_tell(
                &at,
                format!("postBuild `{key}`"),
                "not modelled",
            ));
        }
    }
    if let Some(s) = pb.get("substitute") {
        if !matches!(s.v, LVal::Map(_) | LVal::Null) {
            return Err(FluxError::Unexpected {
                at: s.at.clone(),
                expected: "postBuild.substitute to be a mapping".into(),
            });
        }
        check_names(s, "postBuild.substitute")?;
    }
    match pb.get("substituteFrom").map(|n| &n.v) {
        None | Some(LVal::Null) => {}
        Some(LVal::Seq(items)) => {
            for src in items {
                for key in src.keys() {
                    if !matches!(key, "kind" | "name" | "optional") {
                        let at = src.get(key).map(|n| n.at.clone()).unwrap_or(src.at.clone());
                        return Err(cannot_tell(
                            &at,
                            format!("substituteFrom `{key}`"),
                            "not modelled",
                        ));
                    }
                }
                match src.str_at(&["kind"]) {
                    Some("ConfigMap" | "Secret") => {}
                    other => {
                        return Err(cannot_tell(
                            &src.at,
                            format!("substituteFrom kind `{}`", other.unwrap_or("")),
                            "Flux reads ConfigMaps and Secrets only",
                        ))
                    }
                }
            }
        }
        Some(_) => {
            let at = pb
                .get("substituteFrom")
                .map(|n| n.at.clone())
                .unwrap_or(pb.at.clone());
            return Err(FluxError::Unexpected {
                at,
                expected: "postBuild.substituteFrom to be a list".into(),
            });
        }
    }
    Ok(())
}

/// The Flux Kustomization spec fields that leave the objects built from its `spec.path` as
/// kustomize built them. Anything else (patches, images, components, name prefixes...) changes
/// them in ways the builtin rules do not model.
const SPEC_NEUTRAL: &[&str] = &[
    "interval",
    "retryInterval",
    "timeout",
    "path",
    "prune",
    "sourceRef",
    "dependsOn",
    "wait",
    "healthChecks",
    "healthCheckExprs",
    "force",
    "suspend",
    "serviceAccountName",
    "kubeConfig",
    "decryption",
    "deletionPolicy",
    "postBuild",
    "targetNamespace",
];

/// Whether the objects under a Flux Kustomization's `spec.path` reach the cluster as built
/// (plus substitution); `Err` names the spec field that would change them.
pub(super) fn check_flux_spec(ks_spec: &LNode) -> Result<(), FluxError> {
    for key in ks_spec.keys() {
        if key == "commonMetadata" {
            let marker = ks_spec
                .get(key)
                .map(|m| {
                    ["labels", "annotations"].iter().any(|f| {
                        m.path(&[f, SUBSTITUTE_MARKER]).and_then(LNode::text) == Some("disabled")
                    })
                })
                .unwrap_or(false);
            if marker {
                let at = ks_spec
                    .get(key)
                    .map(|n| n.at.clone())
                    .unwrap_or(ks_spec.at.clone());
                return Err(cannot_tell(
                    &at,
                    "commonMetadata with substitute: disabled",
                    "not modelled",
                ));
            }
            continue;
        }
        if !SPEC_NEUTRAL.contains(&key) {
            let at = ks_spec
                .get(key)
                .map(|n| n.at.clone())
                .unwrap_or(ks_spec.at.clone());
            return Err(cannot_tell(
                &at,
                format!("Flux Kustomization spec.{key}"),
                "it changes the objects Flux applies from spec.path; not modelled",
            ));
        }
    }
    Ok(())
}

/// The effective value of `var` for every Flux Kustomization in `resources`; they must agree.
pub(super) fn evaluate(
    resources: &[LNode],
    var: &str,
    overlay: &Path,
) -> Result<OverlayValue, FluxError> {
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut undeterminable: Option<FluxError> = None;
    for ks in resources.iter().filter(|r| is_flux_kustomization(r)) {
        let id = res_id(ks);
        let ks_name = display_name(&id);
        let post_build = ks.path(&["spec", "postBuild"]);
        if let Some(pb) = post_build {
            check_post_build(pb)?;
        }
        let mut unread: Vec<(String, SourceLoc)> = Vec::new();
        // The value the sources leave, and an unread source read after it that may override it.
        let mut from_source: Option<(String, SourceLoc, String)> = None;
        let mut shadowed: Option<(String, SourceLoc)> = None;
        if let Some(LNode {
            v: LVal::Seq(sources),
            ..
        }) = post_build.and_then(|p| p.get("substituteFrom"))
        {
            for src in sources {
                let kind = src.str_at(&["kind"]).unwrap_or_default();
                let name = src.str_at(&["name"]).unwrap_or_default();
                let optional = src.get("optional").and_then(LNode::text) == Some("true");
                let found = resources.iter().find(|r| {
                    let rid = res_id(r);
                    rid.kind == kind
                        && rid.group.is_empty()
                        && rid.name == name
                        && effective_ns(&rid.namespace) == effective_ns(&id.namespace)
                });
                let hashed_twin = resources.iter().any(|r| {
                    let rid = res_id(r);
                    rid.kind == kind
                        && rid.name.strip_suffix(HASH_PLACEHOLDER).is_some_and(|base| {
                            name.len() == base.len() + 10 && name.starts_with(base)
                        })
                });
                if hashed_twin {
                    return Err(cannot_tell(
                        &src.at,
                        format!("substituteFrom {kind} `{name}`"),
                        "it may be a generated name with a hash suffix, which the builtin engine does not compute",
                    ));
                }
                match (kind, found) {
                    ("ConfigMap", Some(cm)) => {
                        if let Some(data) = cm.get("data") {
                            check_names(data, &format!("ConfigMap {name} data"))?;
                        }
                        if let Some(v) = cm.path(&["data", var]) {
                            from_source =
                                Some((string_value(v, var)?, v.at.clone(), name.to_string()));
                            shadowed = None;
                        }
                    }
                    // Absent and optional: Flux treats it as present and empty.
                    (_, None) if optional => {}
                    // A Secret, or an object not in the overlay (it may exist in the cluster):
                    // not read, so whatever it holds is unknown.
                    _ => {
                        let what = format!("{kind} {name}");
                        unread.push((what.clone(), src.at.clone()));
                        shadowed = Some((what, src.at.clone()));
                    }
                }
            }
        }
        let direct = post_build.and_then(|p| p.path(&["substitute", var]));
        let candidate = match (direct, from_source, shadowed) {
            (Some(node), _, _) => Some(Candidate {
                value: string_value(node, var)?,
                at: node.at.clone(),
                set_by: SetBy::Substitute,
                kustomization: ks_name.clone(),
                kustomization_at: ks.at.clone(),
                kustomization_path: ks.str_at(&["spec", "path"]).map(str::to_string),
                unread: unread.iter().map(|(u, _)| u.clone()).collect(),
            }),
            (None, _, Some((source_ref, at))) => {
                if undeterminable.is_none() {
                    undeterminable = Some(FluxError::Undeterminable {
                        at,
                        var: var.to_string(),
                        kustomization: ks_name.clone(),
                        source_ref,
                    });
                }
                None
            }
            (None, Some((value, at, cm)), None) => Some(Candidate {
                value,
                at,
                set_by: SetBy::SubstituteFrom { config_map: cm },
                kustomization: ks_name.clone(),
                kustomization_at: ks.at.clone(),
                kustomization_path: ks.str_at(&["spec", "path"]).map(str::to_string),
                unread: unread.iter().map(|(u, _)| u.clone()).collect(),
            }),
            (None, None, None) => None,
        };
        if let Some(c) = candidate {
            candidates.push(c);
        }
    }
    if let Some(e) = undeterminable {
        return Err(e);
    }
    let Some(first) = candidates.first() else {
        let flux_count = resources
            .iter()
            .filter(|r| is_flux_kustomization(r))
            .count();
        let hint = if flux_count == 0 {
            " (the overlay builds no Flux Kustomization at all)".to_string()
        } else {
            format!(" ({flux_count} Flux Kustomization(s) built, none sets it)")
        };
        return Err(FluxError::NotSet {
            overlay: overlay.to_path_buf(),
            var: var.to_string(),
            hint,
        });
    };
    if let Some(other) = candidates.iter().find(|c| c.value != first.value) {
        return Err(FluxError::Conflict(Box::new(Conflict {
            var: var.to_string(),
            first_value: first.value.clone(),
            first_at: first.at.clone(),
            first_kustomization: first.kustomization.clone(),
            second_value: other.value.clone(),
            second_at: other.at.clone(),
            second_kustomization: other.kustomization.clone(),
        })));
    }
    let mut unread: BTreeMap<String, ()> = BTreeMap::new();
    for c in &candidates {
        for u in &c.unread {
            unread.insert(u.clone(), ());
        }
    }
    Ok(OverlayValue {
        var: var.to_string(),
        value: first.value.clone(),
        at: first.at.clone(),
        set_by: first.set_by.clone(),
        kustomization: first.kustomization.clone(),
        kustomization_at: first.kustomization_at.clone(),
        kustomization_path: first.kustomization_path.clone(),
        unread_sources: unread.into_keys().collect(),
    })
}

/// A substitution form [`envsubst`] does not model (so the value cannot be told).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubstError {
    #[error("an unclosed `${{` in `{text}`")]
    Unclosed { text: String },
    #[error("`${{{body}}}` is not a variable reference")]
    NotAReference { body: String },
    #[error("a nested reference in `${{{body}}}` is not modelled")]
    NestedDefault { body: String },
    #[error("the form `${{{body}}}` is not modelled")]
    Unmodelled { body: String },
}

/// Flux's substitution of one string: `${VAR}` (empty when unset), `${VAR:=default}` and
/// `${VAR:-default}` (the default when unset or empty), `$${...}` (a literal `${...}`), and a
/// `$` not followed by `{` left as it is. `Err` names a form that is not modelled.
pub fn envsubst(text: &str, vars: &dyn Fn(&str) -> Option<String>) -> Result<String, SubstError> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(escaped) = after.strip_prefix('$') {
            // `$$` is one literal `$`.
            out.push('$');
            rest = escaped;
            continue;
        }
        let Some(body_start) = after.strip_prefix('{') else {
            out.push('$');
            rest = after;
            continue;
        };
        let Some(end) = body_start.find('}') else {
            return Err(SubstError::Unclosed {
                text: text.to_string(),
            });
        };
        let body = &body_start[..end];
        let name_len = body
            .find(|c: char| !(c == '_' || c.is_alphanumeric()))
            .unwrap_or(body.len());
        let (name, op) = body.split_at(name_len);
        if name.is_empty() {
            return Err(SubstError::NotAReference { body: body.into() });
        }
        let value = vars(name).unwrap_or_default();
        let substituted = if op.is_empty() {
            value
        } else if let Some(default) = op.strip_prefix(":=").or_else(|| op.strip_prefix(":-")) {
            if default.contains('$') {
                return Err(SubstError::NestedDefault { body: body.into() });
            }
            if value.is_empty() {
                default.to_string()
            } else {
                value
            }
        } else {
            return Err(SubstError::Unmodelled { body: body.into() });
        };
        out.push_str(&substituted);
        rest = &body_start[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(name: &str) -> Option<String> {
        (name == "K3S_API_HOST").then(|| "192.168.2.9".to_string())
    }

    #[test]
    fn forms_flux_documents() {
        let s = |t: &str| envsubst(t, &vars);
        assert_eq!(s("${K3S_API_HOST}").as_deref(), Ok("192.168.2.9"));
        assert_eq!(s("${K3S_API_HOST:=10.0.0.1}").as_deref(), Ok("192.168.2.9"));
        assert_eq!(s("${UNSET:=10.0.0.1}").as_deref(), Ok("10.0.0.1"));
        assert_eq!(s("${UNSET:-10.0.0.2}").as_deref(), Ok("10.0.0.2"));
        assert_eq!(s("${UNSET}").as_deref(), Ok(""));
        assert_eq!(s("$${K3S_API_HOST}").as_deref(), Ok("${K3S_API_HOST}"));
        assert_eq!(s("$K3S_API_HOST").as_deref(), Ok("$K3S_API_HOST"));
        assert!(s("${K3S_API_HOST/192/10}").is_err());
        assert!(s("${K3S_API_HOST:0:3}").is_err());
    }

    #[test]
    fn unmodelled_forms_are_named_in_the_words_check_prints() {
        let why = |t: &str| envsubst(t, &vars).expect_err(t).to_string();
        assert_eq!(why("a ${B"), "an unclosed `${` in `a ${B`");
        assert_eq!(why("${-x}"), "`${-x}` is not a variable reference");
        assert_eq!(
            why("${A:=${B}}x}"),
            "a nested reference in `${A:=${B}` is not modelled"
        );
        assert_eq!(why("${A/1/2}"), "the form `${A/1/2}` is not modelled");
    }

    #[test]
    fn variable_names_as_flux_validates_them() {
        assert!(valid_var_name("K3S_API_HOST"));
        assert!(valid_var_name("_x"));
        assert!(!valid_var_name("3x"));
        assert!(!valid_var_name("a-b"));
        assert!(!valid_var_name(""));
    }
}
