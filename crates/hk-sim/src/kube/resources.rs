//! The resource types the simulated API server serves, and how the real server treats each.
//!
//! Owns: the table of served resources ([`RESOURCES`]): group, version, plural, kind, scope,
//! whether it has a status subresource, how its `metadata.generation` moves, what a create
//! does to its status, which field selectors it supports, and which list-typed fields a
//! strategic merge patch merges by key. Lookups by URL path and by apiVersion/kind.
//! Must not: hold objects or do IO (that is `store` and `server`).

/// How the real API server moves `metadata.generation` for a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// No generation (ConfigMap, Lease, Node, Namespace).
    None,
    /// Set to 1 on create; +1 when `spec` changes (Pod, DaemonSet).
    Spec,
    /// Custom resources: +1 on any change outside `metadata` and `status`.
    AllButMetaStatus,
}

/// What an API create does to the `status` the client sent (the resource's strategy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateStatus {
    /// Kept as sent (Node, and resources without a status).
    Keep,
    /// Dropped (custom resources with a status subresource).
    Clear,
    /// Reset to these integer fields at 0 (DaemonSet: the Go struct's non-omitempty counts).
    Zeroed(&'static [&'static str]),
    /// Reset to `{phase: Pending}` (Pod).
    PodPending,
    /// Reset to `{phase: Active}`, `spec.finalizers: [kubernetes]` (Namespace).
    NamespaceActive,
}

/// A field a field selector may name, where it lives in the object, and its value when the
/// object does not have it (the Go structs' zero values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SelectableField {
    pub label: &'static str,
    pub path: &'static [&'static str],
    pub default: &'static str,
}

/// One served resource type.
#[derive(Debug, PartialEq, Eq)]
pub struct ResourceType {
    /// `""` for the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub short_names: &'static [&'static str],
    pub namespaced: bool,
    /// Has a `/status` subresource: the main resource's writes keep the old status, and
    /// status writes keep everything but the status.
    pub status: bool,
    pub generation: Generation,
    pub create_status: CreateStatus,
    /// A custom resource (served from a CRD): lists keep each item's apiVersion/kind, and a
    /// strategic merge patch is refused (415), as the real server does.
    pub custom: bool,
    /// Field selectors beyond `metadata.name` and `metadata.namespace`.
    pub fields: &'static [SelectableField],
    /// A client's delete of a scheduled object is graceful (Pod: marked with
    /// deletionTimestamp for its grace period; the kubelet, here the simulation, removes it).
    pub graceful_delete: bool,
    /// The CRD's `additionalPrinterColumns` (custom resources only): the columns of its
    /// server-side Table, after `Name`, as the real server derives them from the CRD.
    pub printer_columns: &'static [PrinterColumn],
    /// Served for reading only: a client's write is refused as not simulated (a view the
    /// simulation derives, such as events.k8s.io/v1 Events from core/v1 ones).
    pub read_only: bool,
}

/// One `additionalPrinterColumns` entry of a CRD version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrinterColumn {
    pub name: &'static str,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub type_: &'static str,
    pub json_path: &'static str,
    pub priority: i32,
}

/// Flux's columns for HelmRelease (v2) and Kustomization (v1): the age, and the Ready
/// condition's status and message.
const FLUX_COLUMNS: &[PrinterColumn] = &[
    PrinterColumn {
        name: "Age",
        type_: "date",
        json_path: ".metadata.creationTimestamp",
        priority: 0,
    },
    PrinterColumn {
        name: "Ready",
        type_: "string",
        json_path: ".status.conditions[?(@.type==\"Ready\")].status",
        priority: 0,
    },
    PrinterColumn {
        name: "Status",
        type_: "string",
        json_path: ".status.conditions[?(@.type==\"Ready\")].message",
        priority: 0,
    },
];

impl ResourceType {
    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The group-qualified plural the real server names in messages: `pods`, `daemonsets.apps`.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The list's kind: `PodList`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// The URL of the collection, in `namespace` when the resource is namespaced.
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        let root = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        match namespace {
            Some(ns) if self.namespaced => format!("{root}/namespaces/{ns}/{}", self.plural),
            _ => format!("{root}/{}", self.plural),
        }
    }

    /// The selectable field called `label`, if this resource supports it.
    pub fn field(&self, label: &str) -> Option<SelectableField> {
        COMMON_FIELDS
            .iter()
            .chain(self.fields.iter())
            .find(|f| f.label == label)
            .copied()
    }

    /// Its index in [`RESOURCES`] (the store's key).
    pub fn id(&'static self) -> usize {
        RESOURCES
            .iter()
            .position(|r| std::ptr::eq(r, self))
            .unwrap_or(usize::MAX)
    }
}

const COMMON_FIELDS: &[SelectableField] = &[
    SelectableField {
        label: "metadata.name",
        path: &["metadata", "name"],
        default: "",
    },
    SelectableField {
        label: "metadata.namespace",
        path: &["metadata", "namespace"],
        default: "",
    },
];

const POD_FIELDS: &[SelectableField] = &[
    SelectableField {
        label: "spec.nodeName",
        path: &["spec", "nodeName"],
        default: "",
    },
    SelectableField {
        label: "spec.restartPolicy",
        path: &["spec", "restartPolicy"],
        default: "",
    },
    SelectableField {
        label: "spec.schedulerName",
        path: &["spec", "schedulerName"],
        default: "",
    },
    SelectableField {
        label: "spec.serviceAccountName",
        path: &["spec", "serviceAccountName"],
        default: "",
    },
    SelectableField {
        label: "spec.hostNetwork",
        path: &["spec", "hostNetwork"],
        default: "false",
    },
    SelectableField {
        label: "status.phase",
        path: &["status", "phase"],
        default: "",
    },
    SelectableField {
        label: "status.podIP",
        path: &["status", "podIP"],
        default: "",
    },
    SelectableField {
        label: "status.nominatedNodeName",
        path: &["status", "nominatedNodeName"],
        default: "",
    },
];

const NODE_FIELDS: &[SelectableField] = &[SelectableField {
    label: "spec.unschedulable",
    path: &["spec", "unschedulable"],
    default: "false",
}];

/// What a core/v1 Event may be selected by (`kubectl describe` and `kubectl events --for`
/// select on the involved object).
const EVENT_FIELDS: &[SelectableField] = &[
    SelectableField {
        label: "involvedObject.kind",
        path: &["involvedObject", "kind"],
        default: "",
    },
    SelectableField {
        label: "involvedObject.namespace",
        path: &["involvedObject", "namespace"],
        default: "",
    },
    SelectableField {
        label: "involvedObject.name",
        path: &["involvedObject", "name"],
        default: "",
    },
    SelectableField {
        label: "involvedObject.uid",
        path: &["involvedObject", "uid"],
        default: "",
    },
    SelectableField {
        label: "involvedObject.apiVersion",
        path: &["involvedObject", "apiVersion"],
        default: "",
    },
    SelectableField {
        label: "involvedObject.resourceVersion",
        path: &["involvedObject", "resourceVersion"],
        default: "",
    },
    SelectableField {
        label: "involvedObject.fieldPath",
        path: &["involvedObject", "fieldPath"],
        default: "",
    },
    SelectableField {
        label: "reason",
        path: &["reason"],
        default: "",
    },
    SelectableField {
        label: "reportingComponent",
        path: &["reportingComponent"],
        default: "",
    },
    SelectableField {
        label: "source",
        path: &["source", "component"],
        default: "",
    },
    SelectableField {
        label: "type",
        path: &["type"],
        default: "",
    },
];

const NAMESPACE_FIELDS: &[SelectableField] = &[SelectableField {
    label: "status.phase",
    path: &["status", "phase"],
    default: "",
}];

/// Every resource the simulated server serves.
pub static RESOURCES: [ResourceType; 13] = [
    ResourceType {
        group: "",
        version: "v1",
        plural: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        short_names: &["ns"],
        namespaced: false,
        status: true,
        generation: Generation::None,
        create_status: CreateStatus::NamespaceActive,
        custom: false,
        fields: NAMESPACE_FIELDS,
        graceful_delete: false,
        printer_columns: &[],
        read_only: false,
    },
    ResourceType {
        group: "",
        version: "v1",
        plural: "nodes",
        singular: "node",
        kind: "Node",
        short_names: &["no"],
        namespaced: false,
        status: true,
        generation: Generation::None,
        create_status: CreateStatus::Keep,
        custom: false,
        fields: NODE_FIELDS,
        graceful_delete: false,
        printer_columns: &[],
        read_only: false,
    },
    ResourceType {
        group: "",
        version: "v1",
        plural: "pods",
        singular: "pod",
        kind: "Pod",
        short_names: &["po"],
        namespaced: true,
        status: true,
        generation: Generation::Spec,
        create_status: CreateStatus::PodPending,
        custom: false,
        fields: POD_FIELDS,
        graceful_delete: true,
        printer_columns: &[],
        read_only: false,
    },
    ResourceType {
        group: "",
        version: "v1",
        plural: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        short_names: &["cm"],
        namespaced: true,
        status: false,
        generation: Generation::None,
        create_status: CreateStatus::Keep,
        custom: false,
        fields: &[],
        graceful_delete: false,
        printer_columns: &[],
        read_only: false,
    },
    ResourceType {
        group: "apps",
        version: "v1",
        plural: "daemonsets",
        singular: "daemonset",
        kind: "DaemonSet",
        short_names: &["ds"],
        namespaced: true,
        status: true,
        generation: Generation::Spec,
        create_status: CreateStatus::Zeroed(&[
            "currentNumberScheduled",
            "numberMisscheduled",
            "desiredNumberScheduled",
            "numberReady",
        ]),
        custom: false,
        fields: &[],
        graceful_delete: false,
        printer_columns: &[],
        read_only: false,
    },
    ResourceType {
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        singular: "lease",
        kind: "Lease",
        short_names: &[],
        namespaced: true,
        status: false,
        generation: Generation::None,
        create_status: CreateStatus::Keep,
        custom: false,
        fields: &[],
        graceful_delete: false,
        printer_columns: &[],
        read_only: false,
    },
    ResourceType {
        group: "helm.toolkit.fluxcd.io",
        version: "v2",
        plural: "helmreleases",
        singular: "helmrelease",
        kind: "HelmRelease",
        short_names: &["hr"],
        namespaced: true,
        status: true,
        generation: Generation::AllButMetaStatus,
        create_status: CreateStatus::Clear,
        custom: true,
        fields: &[],
        graceful_delete: false,
        printer_columns: FLUX_COLUMNS,
        read_only: false,
    },
    ResourceType {
        group: "kustomize.toolkit.fluxcd.io",
        version: "v1",
        plural: "kustomizations",
        singular: "kustomization",
        kind: "Kustomization",
        short_names: &["ks"],
        namespaced: true,
        status: true,
        generation: Generation::AllButMetaStatus,
        create_status: CreateStatus::Clear,
        custom: true,
        fields: &[],
        graceful_delete: false,
        printer_columns: FLUX_COLUMNS,
        read_only: false,
    },
    ResourceType {
        group: "",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        short_names: &["ev"],
        namespaced: true,
        status: false,
        generation: Generation::None,
        create_status: CreateStatus::Keep,
        custom: false,
        fields: EVENT_FIELDS,
        graceful_delete: false,
        printer_columns: &[],
        read_only: false,
    },
    ResourceType {
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        short_names: &[],
        namespaced: true,
        status: false,
        generation: Generation::None,
        create_status: CreateStatus::Keep,
        custom: false,
        fields: &[],
        graceful_delete: false,
        printer_columns: &[],
        read_only: true,
    },
    ResourceType {
        group: "",
        version: "v1",
        plural: "services",
        singular: "service",
        kind: "Service",
        short_names: &["svc"],
        namespaced: true,
        status: true,
        generation: Generation::None,
        create_status: CreateStatus::Keep,
        custom: false,
        fields: &[],
        graceful_delete: false,
        printer_columns: &[],
        read_only: false,
    },
    ResourceType {
        group: "discovery.k8s.io",
        version: "v1",
        plural: "endpointslices",
        singular: "endpointslice",
        kind: "EndpointSlice",
        short_names: &[],
        namespaced: true,
        status: false,
        generation: Generation::None,
        create_status: CreateStatus::Keep,
        custom: false,
        fields: &[],
        graceful_delete: false,
        printer_columns: &[],
        read_only: false,
    },
    // The CRDs of the custom kinds above, as Flux installs them ([`crds`]); read-only: a
    // CRD the simulation did not build in would be stored and never served.
    ResourceType {
        group: "apiextensions.k8s.io",
        version: "v1",
        plural: "customresourcedefinitions",
        singular: "customresourcedefinition",
        kind: "CustomResourceDefinition",
        short_names: &["crd", "crds"],
        namespaced: false,
        status: true,
        generation: Generation::Spec,
        create_status: CreateStatus::Keep,
        custom: false,
        fields: &[],
        graceful_delete: false,
        printer_columns: &[],
        read_only: true,
    },
];

/// The CustomResourceDefinition of every custom kind served, as its API server has it once
/// Established: names, scope, the one served version with its printer columns and status
/// subresource, Established at `established_at` (RFC 3339). Their schema keeps unknown fields (the simulation validates custom
/// resources no further, see [`super::openapi`]).
pub fn crds(established_at: &str) -> Vec<serde_json::Value> {
    RESOURCES
        .iter()
        .filter(|r| r.custom)
        .map(|r| {
            let columns: Vec<serde_json::Value> = r
                .printer_columns
                .iter()
                .map(|c| {
                    serde_json::json!({"name": c.name, "type": c.type_,
                        "jsonPath": c.json_path, "priority": c.priority})
                })
                .collect();
            let names = serde_json::json!({"kind": r.kind, "listKind": r.list_kind(),
                "plural": r.plural, "singular": r.singular, "shortNames": r.short_names});
            let cond = |t: &str, reason: &str, msg: &str| {
                serde_json::json!({"type": t, "status": "True", "reason": reason,
                    "message": msg, "lastTransitionTime": established_at})
            };
            serde_json::json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{}.{}", r.plural, r.group)},
                "spec": {"group": r.group,
                    "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                    "names": names.clone(),
                    "conversion": {"strategy": "None"},
                    "versions": [{"name": r.version, "served": true, "storage": true,
                        "subresources": if r.status { serde_json::json!({"status": {}}) } else { serde_json::json!({}) },
                        "additionalPrinterColumns": columns,
                        "schema": {"openAPIV3Schema": {"type": "object",
                            "x-kubernetes-preserve-unknown-fields": true}}}]},
                "status": {"acceptedNames": names,
                    "storedVersions": [r.version],
                    "conditions": [
                        cond("NamesAccepted", "NoConflicts", "no conflicts found"),
                        cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
                    ]},
            })
        })
        .collect()
}

/// The resource served at `/api(s)/GROUP/VERSION/PLURAL`.
pub fn by_path(group: &str, version: &str, plural: &str) -> Option<&'static ResourceType> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource whose objects carry `apiVersion` and `kind`.
pub fn by_kind(api_version: &str, kind: &str) -> Option<&'static ResourceType> {
    RESOURCES
        .iter()
        .find(|r| r.kind == kind && r.api_version() == api_version)
}

/// The served group/versions: `("", "v1")`, `("apps", "v1")`, ... in table order, once each.
pub fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for r in RESOURCES.iter() {
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}

/// The key a strategic merge patch merges list items of `field` by (`containers` by `name`),
/// or `None` when the list is replaced whole. The subset of Kubernetes' `patchMergeKey`s
/// the simulated objects use.
pub fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets" => Some("name"),
        "conditions" | "addresses" => Some("type"),
        "taints" => Some("key"),
        "ports" => Some("containerPort"),
        "volumeMounts" => Some("mountPath"),
        "ownerReferences" => Some("uid"),
        _ => None,
    }
}

/// Whether a strategic merge patch merges the primitive list `field` as a set
/// (`finalizers`), rather than replacing it.
pub fn merges_as_set(field: &str) -> bool {
    field == "finalizers"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_agree() {
        let ds = by_path("apps", "v1", "daemonsets").expect("daemonsets served");
        assert_eq!(ds.kind, "DaemonSet");
        assert_eq!(by_kind("apps/v1", "DaemonSet"), Some(ds));
        assert_eq!(ds.qualified(), "daemonsets.apps");
        assert_eq!(ds.id(), 4);
        let pods = by_path("", "v1", "pods").expect("pods served");
        assert_eq!(pods.qualified(), "pods");
        assert_eq!(pods.api_version(), "v1");
        assert_eq!(
            pods.collection_path(Some("kube-system")),
            "/api/v1/namespaces/kube-system/pods"
        );
        assert!(by_kind("apps/v1", "Deployment").is_none());
        assert!(by_path("", "v1", "daemonsets").is_none());
    }

    #[test]
    fn field_selectors_per_resource() {
        let pods = by_path("", "v1", "pods").expect("pods served");
        assert!(pods.field("spec.nodeName").is_some());
        assert!(pods.field("metadata.name").is_some());
        let cm = by_path("", "v1", "configmaps").expect("configmaps served");
        assert!(cm.field("spec.nodeName").is_none());
    }

    #[test]
    fn a_crd_for_each_custom_kind() {
        let crds = crds("2026-12-03T10:00:00Z");
        let custom = RESOURCES.iter().filter(|r| r.custom).count();
        assert_eq!(crds.len(), custom);
        let hr = crds
            .iter()
            .find(|c| c["metadata"]["name"] == "helmreleases.helm.toolkit.fluxcd.io")
            .expect("the HelmRelease CRD");
        assert_eq!(hr["spec"]["names"]["shortNames"], serde_json::json!(["hr"]));
        assert_eq!(hr["spec"]["versions"][0]["name"], "v2");
        assert_eq!(
            hr["spec"]["versions"][0]["additionalPrinterColumns"][1]["name"],
            "Ready"
        );
        // It parses as the real type (what k9s and kubectl decode it into).
        let typed: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
            serde_json::from_value(hr.clone()).expect("a CRD");
        assert_eq!(typed.spec.scope, "Namespaced");
    }

    #[test]
    fn group_versions_once_each() {
        let gv = group_versions();
        assert_eq!(gv[0], ("", "v1"));
        // core, apps, coordination, the two Flux groups, events.k8s.io, discovery.k8s.io,
        // apiextensions.k8s.io.
        assert_eq!(gv.len(), 8);
    }
}
