//! The PATCH bodies the simulated server understands, applied to an object's JSON.
//!
//! Owns: choosing the patch type from the Content-Type ([`PatchType`]) and applying it:
//! JSON merge patch (RFC 7386), JSON patch (RFC 6902), a strategic merge patch (maps merge,
//! `null` deletes, the list fields Kubernetes merges by key are merged by that key, `$patch:
//! delete|replace` directives; other lists are replaced). An apply body merges here only
//! to be validated (Strict field validation of the object it would make); the apply itself,
//! with field ownership, is `fields::track_apply`.
//! Must not: decide conflicts or resource versions (that is the store's update path).

use serde_json::{Map, Value};

use super::resources::{merge_key, merges_as_set};
use super::status::ApiError;

/// What a PATCH body is, from its Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    Strategic,
    Apply,
}

pub const ACCEPTED: &str = "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json";

impl PatchType {
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/json-patch+json" => Some(PatchType::Json),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }
}

/// Parse a patch body (JSON; an apply body may be YAML).
pub fn parse_body(kind: PatchType, body: &[u8]) -> Result<Value, ApiError> {
    match kind {
        PatchType::Apply => match serde_json::from_slice(body) {
            Ok(v) => Ok(v),
            Err(_) => serde_yaml::from_slice(body).map_err(|e| {
                ApiError::bad_request(format!("error decoding YAML apply patch: {e}"))
            }),
        },
        _ => serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}"))),
    }
}

/// Apply `patch` of `kind` to `doc`.
pub fn apply(kind: PatchType, doc: &mut Value, patch: &Value) -> Result<(), ApiError> {
    match kind {
        PatchType::Merge => {
            if !patch.is_object() {
                return Err(ApiError::bad_request(
                    "error decoding patch: a merge patch must be a JSON object",
                ));
            }
            json_patch::merge(doc, patch);
            Ok(())
        }
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            json_patch::patch(doc, &ops).map_err(|e| ApiError {
                code: 422,
                reason: "Invalid",
                message: format!(
                    "the server rejected our request due to an error in our request: {e}"
                ),
                details: None,
            })
        }
        PatchType::Strategic | PatchType::Apply => {
            let Value::Object(p) = patch else {
                return Err(ApiError::bad_request(
                    "error decoding patch: a strategic merge patch must be a JSON object",
                ));
            };
            if !doc.is_object() {
                *doc = Value::Object(Map::new());
            }
            if let Value::Object(d) = doc {
                strategic_map(d, p);
            }
            Ok(())
        }
    }
}

fn strategic_map(doc: &mut Map<String, Value>, patch: &Map<String, Value>) {
    if patch.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut replaced = patch.clone();
        replaced.remove("$patch");
        *doc = replaced;
        return;
    }
    for (k, pv) in patch {
        if k.starts_with('$') {
            continue;
        }
        if pv.is_null() {
            doc.remove(k);
            continue;
        }
        match (doc.get_mut(k), pv) {
            (Some(Value::Object(dm)), Value::Object(pm)) => strategic_map(dm, pm),
            (Some(Value::Array(da)), Value::Array(pa)) => {
                if let Some(key) = merge_key(k) {
                    merge_list_by_key(da, pa, key);
                } else if merges_as_set(k) {
                    for item in pa {
                        if !da.contains(item) {
                            da.push(item.clone());
                        }
                    }
                } else {
                    *da = pa.iter().map(strip_directives).collect();
                }
            }
            _ => {
                doc.insert(k.clone(), strip_directives(pv));
            }
        }
    }
}

/// A patch value as stored: without `$patch`/`$setElementOrder` directives or nulls in maps.
fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, v)| !k.starts_with('$') && !v.is_null())
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

fn merge_list_by_key(doc: &mut Vec<Value>, patch: &[Value], key: &str) {
    for item in patch {
        let Some(want) = item.get(key) else {
            doc.push(strip_directives(item));
            continue;
        };
        let pos = doc.iter().position(|d| d.get(key) == Some(want));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, item) {
            (Some(i), _) if delete => {
                doc.remove(i);
            }
            (None, _) if delete => {}
            (Some(i), Value::Object(pm)) => {
                if let Value::Object(dm) = &mut doc[i] {
                    strategic_map(dm, pm);
                }
            }
            _ => doc.push(strip_directives(item)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_types() {
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json"),
            Some(PatchType::Merge)
        );
        assert_eq!(
            PatchType::from_content_type("application/strategic-merge-patch+json; charset=utf-8"),
            Some(PatchType::Strategic)
        );
        assert_eq!(PatchType::from_content_type("application/json"), None);
    }

    #[test]
    fn merge_patch_sets_and_removes_annotations() {
        let mut doc = json!({"metadata": {"name": "cilium", "annotations": {"a": "1", "b": "2"}}});
        let patch = json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "now", "a": null}}});
        apply(PatchType::Merge, &mut doc, &patch).expect("merge");
        assert_eq!(
            doc["metadata"]["annotations"],
            json!({"b": "2", "reconcile.fluxcd.io/requestedAt": "now"})
        );
        assert!(apply(PatchType::Merge, &mut doc, &json!([1])).is_err());
    }

    #[test]
    fn json_patch_ops_and_failures() {
        let mut doc = json!({"spec": {"replicas": 1}});
        let ops = json!([{"op": "replace", "path": "/spec/replicas", "value": 3},
                         {"op": "add", "path": "/spec/paused", "value": true}]);
        apply(PatchType::Json, &mut doc, &ops).expect("json patch");
        assert_eq!(doc, json!({"spec": {"replicas": 3, "paused": true}}));
        let bad = json!([{"op": "test", "path": "/spec/replicas", "value": 9}]);
        let e = apply(PatchType::Json, &mut doc, &bad).expect_err("test op fails");
        assert_eq!(e.code, 422);
    }

    #[test]
    fn strategic_merges_containers_and_env_by_name() {
        let mut doc = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "agent", "image": "cilium:1", "env": [
                {"name": "KUBERNETES_SERVICE_HOST", "value": "192.0.2.10"},
                {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"}]},
            {"name": "sidecar", "image": "s:1"}]}}}});
        let patch = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "agent", "env": [{"name": "KUBERNETES_SERVICE_HOST", "value": "192.0.2.9"}]},
            {"name": "sidecar", "$patch": "delete"}]}}}});
        apply(PatchType::Strategic, &mut doc, &patch).expect("strategic");
        let containers = &doc["spec"]["template"]["spec"]["containers"];
        assert_eq!(containers.as_array().map(Vec::len), Some(1));
        assert_eq!(containers[0]["image"], "cilium:1");
        assert_eq!(
            containers[0]["env"],
            json!([{"name": "KUBERNETES_SERVICE_HOST", "value": "192.0.2.9"},
                   {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"}])
        );
    }

    #[test]
    fn strategic_replaces_plain_lists_and_sets_finalizers() {
        let mut doc = json!({"metadata": {"finalizers": ["a"]}, "spec": {"args": ["x", "y"]}});
        let patch = json!({"metadata": {"finalizers": ["b", "a"]}, "spec": {"args": ["z"]}});
        apply(PatchType::Strategic, &mut doc, &patch).expect("strategic");
        assert_eq!(doc["metadata"]["finalizers"], json!(["a", "b"]));
        assert_eq!(doc["spec"]["args"], json!(["z"]));
    }

    #[test]
    fn apply_body_may_be_yaml() {
        let v = parse_body(PatchType::Apply, b"metadata:\n  name: x\n").expect("yaml");
        assert_eq!(v, json!({"metadata": {"name": "x"}}));
        assert!(parse_body(PatchType::Merge, b"metadata: {").is_err());
    }
}
