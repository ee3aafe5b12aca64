//! The discovery documents (`/version`, `/api`, `/apis`, `/apis/GROUP`, `/api/v1`,
//! `/apis/GROUP/VERSION`) for the served resources, in the real server's JSON shapes.
//!
//! Owns: building those documents from the resource table.
//! Must not: serve requests or list objects.

use std::net::SocketAddr;

use serde_json::{json, Value};

use super::resources::{group_versions, RESOURCES};

/// The Kubernetes release the simulation answers as (the tests' real API server's).
pub const KUBE_VERSION: (&str, &str, &str) = ("1", "34", "v1.34.4-hk-sim");

const VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

pub fn version() -> Value {
    let (major, minor, git) = KUBE_VERSION;
    json!({
        "major": major, "minor": minor, "gitVersion": git,
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24", "compiler": "gc",
        "platform": "linux/amd64"
    })
}

pub fn core_versions(addr: SocketAddr) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr.to_string()}]
    })
}

fn group_doc(group: &str) -> Value {
    let versions: Vec<Value> = group_versions()
        .into_iter()
        .filter(|(g, _)| *g == group)
        .map(|(g, v)| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
        .collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": versions, "preferredVersion": preferred})
}

pub fn groups() -> Value {
    let mut names: Vec<&str> = Vec::new();
    for (g, _) in group_versions() {
        if !g.is_empty() && !names.contains(&g) {
            names.push(g);
        }
    }
    json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": names.into_iter().map(group_doc).collect::<Vec<_>>()
    })
}

pub fn group(name: &str) -> Value {
    let mut doc = group_doc(name);
    if let Value::Object(m) = &mut doc {
        m.insert("kind".into(), json!("APIGroup"));
        m.insert("apiVersion".into(), json!("v1"));
    }
    doc
}

pub fn resource_list(group: &str, version: &str) -> Value {
    let mut resources = Vec::new();
    for r in RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        resources.push(json!({
            "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
            "kind": r.kind, "verbs": VERBS, "shortNames": r.short_names
        }));
        if r.status {
            resources.push(json!({
                "name": format!("{}/status", r.plural), "singularName": "",
                "namespaced": r.namespaced, "kind": r.kind, "verbs": ["get", "patch", "update"]
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_decode_as_k8s_openapi_types() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
            APIGroupList, APIResourceList, APIVersions,
        };
        let g: APIGroupList = serde_json::from_value(groups()).expect("APIGroupList");
        assert!(g.groups.iter().any(|x| x.name == "helm.toolkit.fluxcd.io"));
        let l: APIResourceList =
            serde_json::from_value(resource_list("apps", "v1")).expect("APIResourceList");
        assert_eq!(l.resources.len(), 2);
        assert_eq!(l.resources[1].name, "daemonsets/status");
        let v: APIVersions =
            serde_json::from_value(core_versions("127.0.0.1:6443".parse().expect("addr")))
                .expect("APIVersions");
        assert_eq!(v.versions, ["v1"]);
        let _: k8s_openapi::apimachinery::pkg::version::Info =
            serde_json::from_value(version()).expect("version Info");
    }
}
