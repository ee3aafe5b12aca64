//! The API server's failures, as the real one words and shapes them (`metav1.Status`).
//!
//! Owns: [`ApiError`] (code, reason, message, details) and its JSON form; the constructors
//! for each failure the simulated server gives, with the real server's wording
//! (`pods "x" not found`, `Operation cannot be fulfilled on ...`, `too old resource version`).
//! Must not: decide when a failure happens (that is `store`/`server`).

use serde_json::{json, Map, Value};

use super::resources::ResourceType;

/// `metav1.StatusDetails`: which object the failure is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Details {
    pub name: String,
    pub group: String,
    /// The resource (plural), as the real server fills `details.kind`.
    pub kind: String,
    pub causes: Vec<Cause>,
}

/// `metav1.StatusCause`: one field's failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    pub reason: &'static str,
    pub message: String,
    pub field: String,
}

/// A failed request, as the real API server reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Box<Details>>,
}

fn details(res: &ResourceType, name: &str) -> Option<Box<Details>> {
    Some(Box::new(Details {
        name: name.to_string(),
        group: res.group.to_string(),
        kind: res.plural.to_string(),
        causes: Vec::new(),
    }))
}

impl ApiError {
    pub fn not_found(res: &ResourceType, name: &str) -> ApiError {
        ApiError {
            code: 404,
            reason: "NotFound",
            message: format!("{} \"{name}\" not found", res.qualified()),
            details: details(res, name),
        }
    }

    /// A path the server does not serve.
    pub fn no_route() -> ApiError {
        ApiError {
            code: 404,
            reason: "NotFound",
            message: "the server could not find the requested resource".into(),
            details: None,
        }
    }

    /// A request the simulation does not model (issue 17): never an empty success. `code`
    /// is 404 for a path, 405 for a method, 406 for a representation, 415 for a body
    /// format, 501 for a parameter or behaviour; the message names `what`.
    pub fn not_simulated(code: u16, what: &str) -> ApiError {
        ApiError {
            code,
            reason: match code {
                404 => "NotFound",
                405 => "MethodNotAllowed",
                406 => "NotAcceptable",
                415 => "UnsupportedMediaType",
                _ => "NotImplemented",
            },
            message: crate::shell::not_simulated(what),
            details: None,
        }
    }

    pub fn already_exists(res: &ResourceType, name: &str) -> ApiError {
        ApiError {
            code: 409,
            reason: "AlreadyExists",
            message: format!("{} \"{name}\" already exists", res.qualified()),
            details: details(res, name),
        }
    }

    /// A write against a stale `resourceVersion` (optimistic concurrency).
    pub fn conflict(res: &ResourceType, name: &str) -> ApiError {
        ApiError::conflict_because(
            res,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    pub fn conflict_because(res: &ResourceType, name: &str, why: &str) -> ApiError {
        ApiError {
            code: 409,
            reason: "Conflict",
            message: format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                res.qualified()
            ),
            details: details(res, name),
        }
    }

    /// A watch or continue token older than the kept history.
    pub fn expired(message: String) -> ApiError {
        ApiError {
            code: 410,
            reason: "Expired",
            message,
            details: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError {
            code: 400,
            reason: "BadRequest",
            message: message.into(),
            details: None,
        }
    }

    /// A field-level validation failure (422): `Pod "p" is invalid: FIELD: DETAIL` (a custom
    /// resource is named by its qualified plural, as the real server does).
    pub fn invalid(res: &ResourceType, name: &str, field: &str, detail: &str) -> ApiError {
        let what = if res.custom {
            res.qualified()
        } else if res.group.is_empty() {
            res.kind.to_string()
        } else {
            format!("{}.{}", res.kind, res.group)
        };
        ApiError {
            code: 422,
            reason: "Invalid",
            message: format!("{what} \"{name}\" is invalid: {field}: {detail}"),
            details: details(res, name).map(|d| {
                Box::new(Details {
                    causes: vec![Cause {
                        reason: if detail.starts_with("Required value") {
                            "FieldValueRequired"
                        } else {
                            "FieldValueInvalid"
                        },
                        message: detail.to_string(),
                        field: field.to_string(),
                    }],
                    ..*d
                })
            }),
        }
    }

    pub fn method_not_allowed() -> ApiError {
        ApiError {
            code: 405,
            reason: "MethodNotAllowed",
            message: "the server does not allow this method on the requested resource".into(),
            details: None,
        }
    }

    pub fn unsupported_media_type(content_type: &str, accepted: &str) -> ApiError {
        ApiError {
            code: 415,
            reason: "UnsupportedMediaType",
            message: format!(
                "the body of the request was in an unknown format - accepted media types include: {accepted} (got {content_type})"
            ),
            details: None,
        }
    }

    /// RBAC's refusal: `pods "x" is forbidden: User "u" cannot delete resource "pods" in API
    /// group "" in the namespace "kube-system"`.
    pub fn forbidden(t: &super::route::Target, user: &str, verb: &str) -> ApiError {
        let what = match &t.name {
            Some(n) => format!("{} \"{n}\"", t.res.qualified()),
            None => t.res.qualified(),
        };
        let resource = if t.status {
            format!("{}/status", t.res.plural)
        } else {
            t.res.plural.to_string()
        };
        let scope = match &t.namespace {
            Some(ns) => format!("in the namespace \"{ns}\""),
            None => "at the cluster scope".to_string(),
        };
        ApiError {
            code: 403,
            reason: "Forbidden",
            message: format!(
                "{what} is forbidden: User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"{}\" {scope}",
                t.res.group
            ),
            details: Some(Box::new(Details {
                name: t.name.clone().unwrap_or_default(),
                group: t.res.group.to_string(),
                kind: t.res.plural.to_string(),
                causes: Vec::new(),
            })),
        }
    }

    pub fn unauthorized() -> ApiError {
        ApiError {
            code: 401,
            reason: "Unauthorized",
            message: "Unauthorized".into(),
            details: None,
        }
    }

    pub fn too_large() -> ApiError {
        ApiError {
            code: 413,
            reason: "RequestEntityTooLarge",
            message: "Request entity too large: limit is 3145728".into(),
            details: None,
        }
    }

    /// A write while etcd has no quorum: the real server passes etcd's error through
    /// (500, no reason; kubectl prints `Error from server: etcdserver: request timed out`).
    pub fn etcd_timeout() -> ApiError {
        ApiError {
            code: 500,
            reason: "",
            message: "etcdserver: request timed out".to_string(),
            details: None,
        }
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError {
            code: 500,
            reason: "InternalError",
            message: message.into(),
            details: None,
        }
    }

    /// The `Status` object: `{kind: Status, apiVersion: v1, metadata: {}, status: Failure, ...}`.
    pub fn to_status(&self) -> Value {
        let mut status = Map::new();
        status.insert("kind".into(), json!("Status"));
        status.insert("apiVersion".into(), json!("v1"));
        status.insert("metadata".into(), json!({}));
        status.insert("status".into(), json!("Failure"));
        status.insert("message".into(), json!(self.message));
        // The real server omits an empty reason (an error it passes through, e.g. etcd's).
        if !self.reason.is_empty() {
            status.insert("reason".into(), json!(self.reason));
        }
        if let Some(d) = &self.details {
            let mut m = Map::new();
            m.insert("name".into(), json!(d.name));
            if !d.group.is_empty() {
                m.insert("group".into(), json!(d.group));
            }
            m.insert("kind".into(), json!(d.kind));
            if !d.causes.is_empty() {
                let causes: Vec<Value> = d
                    .causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect();
                m.insert("causes".into(), Value::Array(causes));
            }
            status.insert("details".into(), Value::Object(m));
        }
        status.insert("code".into(), json!(self.code));
        Value::Object(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::resources::by_path;

    #[test]
    fn shapes_match_the_real_server() {
        let ds = by_path("apps", "v1", "daemonsets").expect("served");
        let s = ApiError::not_found(ds, "cilium").to_status();
        assert_eq!(
            s,
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                "message":"daemonsets.apps \"cilium\" not found","reason":"NotFound",
                "details":{"name":"cilium","group":"apps","kind":"daemonsets"},"code":404})
        );
        let pods = by_path("", "v1", "pods").expect("served");
        let c = ApiError::conflict(pods, "p").to_status();
        assert_eq!(c["code"], 409);
        assert_eq!(c["reason"], "Conflict");
        assert!(c["details"].get("group").is_none());
        assert_eq!(
            c["message"],
            "Operation cannot be fulfilled on pods \"p\": the object has been modified; please apply your changes to the latest version and try again"
        );
        let inv = ApiError::invalid(pods, "p", "metadata.name", "Required value");
        assert_eq!(
            inv.message,
            "Pod \"p\" is invalid: metadata.name: Required value"
        );
        let inv = ApiError::invalid(ds, "d", "spec", "x");
        assert_eq!(inv.message, "DaemonSet.apps \"d\" is invalid: spec: x");
        let hr = by_path("helm.toolkit.fluxcd.io", "v2", "helmreleases").expect("served");
        let inv = ApiError::invalid(
            hr,
            "c",
            "metadata.resourceVersion",
            "Invalid value: 0: must be specified for an update",
        );
        assert_eq!(
            inv.to_status(),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "helmreleases.helm.toolkit.fluxcd.io \"c\" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update",
                "reason": "Invalid", "details": {"name": "c", "group": "helm.toolkit.fluxcd.io",
                "kind": "helmreleases", "causes": [{"reason": "FieldValueInvalid",
                "message": "Invalid value: 0: must be specified for an update",
                "field": "metadata.resourceVersion"}]}, "code": 422})
        );
    }
}
