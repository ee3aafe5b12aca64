//! The simulated server's OpenAPI v3 documents (`/openapi/v3` and one per group/version),
//! generated from k8s-openapi's schemas (its `schemars` feature), never copied from the
//! upstream documents; and Strict field validation (`?fieldValidation=Strict`) of a body
//! against the same schemas.
//!
//! Owns: the discovery index, each group/version's paths (the operations served, each with
//! the real server's `x-kubernetes-group-version-kind` and `x-kubernetes-action`, PATCH
//! listing `fieldValidation`: kubectl then validates on the server instead of downloading
//! the protobuf OpenAPI v2), the component schemas, and [`strict_problems`] (unknown fields
//! by their path, as the real server's strict decoding names them; duplicate keys).
//! Must not: serve requests (that is `server`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{json, Map, Value};

use super::discovery::KUBE_VERSION;
use super::resources::{group_versions, ResourceType, RESOURCES};

/// The schema name of a served kind's k8s-openapi type (adds its definitions to `gen`);
/// `None` for custom resources (their CRDs keep unknown fields).
fn kind_schema(gen: &mut SchemaGenerator, res: &ResourceType) -> Option<String> {
    use k8s_openapi::api;
    let s = match (res.group, res.kind) {
        ("", "Namespace") => gen.subschema_for::<api::core::v1::Namespace>(),
        ("", "Node") => gen.subschema_for::<api::core::v1::Node>(),
        ("", "Pod") => gen.subschema_for::<api::core::v1::Pod>(),
        ("", "ConfigMap") => gen.subschema_for::<api::core::v1::ConfigMap>(),
        ("", "Event") => gen.subschema_for::<api::core::v1::Event>(),
        ("", "Service") => gen.subschema_for::<api::core::v1::Service>(),
        ("apps", "DaemonSet") => gen.subschema_for::<api::apps::v1::DaemonSet>(),
        ("coordination.k8s.io", "Lease") => gen.subschema_for::<api::coordination::v1::Lease>(),
        ("events.k8s.io", "Event") => gen.subschema_for::<api::events::v1::Event>(),
        ("discovery.k8s.io", "EndpointSlice") => {
            gen.subschema_for::<api::discovery::v1::EndpointSlice>()
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => gen.subschema_for::<
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        >(),
        _ => return None,
    };
    s.get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.rsplit('/').next())
        .map(str::to_string)
}

/// Every served kind's schema, with the definitions they use (built once).
struct Schemas {
    roots: BTreeMap<usize, String>,
    defs: Map<String, Value>,
}

fn schemas() -> &'static Schemas {
    static S: OnceLock<Schemas> = OnceLock::new();
    S.get_or_init(|| {
        let mut gen = SchemaGenerator::new(SchemaSettings::openapi3());
        let mut roots = BTreeMap::new();
        for (i, r) in RESOURCES.iter().enumerate() {
            if let Some(name) = kind_schema(&mut gen, r) {
                roots.insert(i, name);
            }
        }
        Schemas {
            roots,
            defs: gen.take_definitions(true),
        }
    })
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// A stable content hash for the index's URLs (the documents only change with the binary).
const HASH: &str = "hk-sim-1";

/// `GET /openapi/v3`: where each group/version's document is.
pub fn index() -> Value {
    let paths: Map<String, Value> = group_versions()
        .into_iter()
        .map(|(g, v)| {
            let p = gv_path(g, v);
            (
                p.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={HASH}")}),
            )
        })
        .collect();
    json!({ "paths": paths })
}

fn gvk(res: &ResourceType) -> Value {
    json!({"group": res.group, "version": res.version, "kind": res.kind})
}

fn query(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description,
        "schema": {"type": "string", "uniqueItems": true}})
}

fn operation(res: &ResourceType, action: &str, id: &str, schema_ref: &Value) -> Value {
    let mut op = json!({
        "operationId": id,
        "responses": {"200": {"description": "OK",
            "content": {"application/json": {"schema": schema_ref}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(res),
    });
    let mut params = vec![query("pretty", "Pretty-print the output.")];
    match action {
        "patch" => {
            params.push(query(
                "fieldManager",
                "The name of the actor making the change.",
            ));
            params.push(query(
                "fieldValidation",
                "Ignore or Strict (unknown and duplicate fields refused).",
            ));
            let mut types = vec![
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/apply-patch+yaml",
            ];
            if !res.custom {
                types.push("application/strategic-merge-patch+json");
            }
            let content: Map<String, Value> = types
                .into_iter()
                .map(|t| (t.to_string(), json!({"schema": {"type": "object"}})))
                .collect();
            op["requestBody"] = json!({"content": content, "required": true});
        }
        "post" | "put" => {
            params.push(query(
                "fieldManager",
                "The name of the actor making the change.",
            ));
            params.push(query(
                "fieldValidation",
                "Ignore or Strict (unknown and duplicate fields refused).",
            ));
            op["requestBody"] = json!({"content": {"application/json": {"schema": schema_ref}},
                "required": true});
        }
        "list" | "watchlist" => {
            for p in [
                "labelSelector",
                "fieldSelector",
                "limit",
                "continue",
                "resourceVersion",
            ] {
                params.push(query(p, ""));
            }
        }
        _ => {}
    }
    op["parameters"] = Value::Array(params);
    op
}

/// `GET /openapi/v3/apis/GROUP/VERSION`: its paths and schemas; `None` if not served.
pub fn group_version(path: &str) -> Option<Value> {
    let (group, version) = group_versions()
        .into_iter()
        .find(|(g, v)| gv_path(g, v) == path.trim_matches('/'))?;
    let all = schemas();
    let mut paths = Map::new();
    let mut schemas_out = Map::new();
    for (i, res) in RESOURCES.iter().enumerate() {
        if res.group != group || res.version != version {
            continue;
        }
        let name = all.roots.get(&i).cloned().unwrap_or_else(|| {
            format!(
                "{}.{}.{}",
                res.group.split('.').rev().collect::<Vec<_>>().join("."),
                res.version,
                res.kind
            )
        });
        if !all.roots.contains_key(&i) {
            schemas_out.insert(
                name.clone(),
                json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                    "x-kubernetes-group-version-kind": [gvk(res)]}),
            );
        }
        let schema_ref = json!({"$ref": format!("#/components/schemas/{name}")});
        let kind = res.kind;
        let ns = if res.namespaced { "Namespaced" } else { "" };
        let collection = res.collection_path(Some("{namespace}"));
        let item = format!("{collection}/{{name}}");
        paths.insert(
            collection.clone(),
            json!({
                "get": operation(res, "list", &format!("list{ns}{kind}"), &schema_ref),
                "post": operation(res, "post", &format!("create{ns}{kind}"), &schema_ref),
            }),
        );
        let mut ops = json!({
            "get": operation(res, "get", &format!("read{ns}{kind}"), &schema_ref),
            "put": operation(res, "put", &format!("replace{ns}{kind}"), &schema_ref),
            "patch": operation(res, "patch", &format!("patch{ns}{kind}"), &schema_ref),
            "delete": operation(res, "delete", &format!("delete{ns}{kind}"), &schema_ref),
        });
        if res.read_only {
            ops = json!({"get": ops["get"].clone()});
            paths.insert(
                collection,
                json!({"get": operation(res, "list", &format!("list{ns}{kind}"), &schema_ref)}),
            );
        }
        paths.insert(item.clone(), ops);
        if res.status {
            paths.insert(
                format!("{item}/status"),
                json!({
                    "get": operation(res, "get", &format!("read{ns}{kind}Status"), &schema_ref),
                    "put": operation(res, "put", &format!("replace{ns}{kind}Status"), &schema_ref),
                    "patch": operation(res, "patch", &format!("patch{ns}{kind}Status"), &schema_ref),
                }),
            );
        }
    }
    // Every definition goes along: a document is self-contained, as the real server's.
    for (k, v) in &all.defs {
        schemas_out.insert(k.clone(), v.clone());
    }
    let (_, _, git) = KUBE_VERSION;
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (hk-console simulation)", "version": git},
        "paths": paths,
        "components": {"schemas": schemas_out},
    }))
}

fn resolve<'a>(schema: &'a Value, defs: &'a Map<String, Value>) -> &'a Value {
    let mut s = schema;
    for _ in 0..32 {
        match s.get("$ref").and_then(Value::as_str) {
            Some(r) => match r.rsplit('/').next().and_then(|n| defs.get(n)) {
                Some(d) => s = d,
                None => return s,
            },
            None => return s,
        }
    }
    s
}

fn unknown_fields(
    v: &Value,
    schema: &Value,
    defs: &Map<String, Value>,
    path: &str,
    out: &mut Vec<String>,
) {
    let schema = resolve(schema, defs);
    // allOf/anyOf wrappers (schemars adds them around a described $ref).
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        if let Some(first) = all.first() {
            unknown_fields(v, first, defs, path, out);
        }
        return;
    }
    match v {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties");
            if props.is_none() && extra.is_none() {
                // No structure declared (RawExtension, a free-form object): anything goes.
                return;
            }
            for (k, child) in m {
                let here = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match (props.and_then(|p| p.get(k)), extra) {
                    (Some(s), _) => unknown_fields(child, s, defs, &here, out),
                    (None, Some(Value::Bool(false)) | None) => out.push(here),
                    (None, Some(Value::Bool(true))) => {}
                    (None, Some(s)) => unknown_fields(child, s, defs, &here, out),
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for (i, child) in items.iter().enumerate() {
                    unknown_fields(child, item, defs, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// The fields of `obj` (a whole object or a patch of one) that `res`'s schema does not
/// have, by path (`spec.containers[0].imagee`). Custom resources keep unknown fields, as
/// their CRDs say (none is reported). Strategic-merge directives (`$patch`, ...) are not
/// fields.
pub fn unknown_fields_of(res: &'static ResourceType, obj: &Value) -> Vec<String> {
    let all = schemas();
    let Some(root) = all.roots.get(&res.id()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let schema = json!({"$ref": format!("#/components/schemas/{root}")});
    unknown_fields(obj, &schema, &all.defs, "", &mut out);
    out.retain(|p| {
        !p.rsplit('.')
            .next()
            .is_some_and(|last| last.starts_with('$'))
    });
    out
}

/// Walks a JSON document refusing a key given twice in one object (what Strict field
/// validation refuses and a JSON parser would silently resolve).
struct NoDuplicates;

impl<'de> DeserializeSeed<'de> for NoDuplicates {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(NoDuplicates)
    }
}

impl<'de> Visitor<'de> for NoDuplicates {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(NoDuplicates)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::BTreeSet::new();
        while let Some(k) = map.next_key::<String>()? {
            if !seen.insert(k.clone()) {
                return Err(de::Error::custom(format!("duplicate field \"{k}\"")));
            }
            map.next_value_seed(NoDuplicates)?;
        }
        Ok(())
    }
}

/// A JSON body's duplicate key, if any (`duplicate field "x"`).
pub fn duplicate_field(body: &[u8]) -> Option<String> {
    let mut d = serde_json::Deserializer::from_slice(body);
    match NoDuplicates.deserialize(&mut d) {
        Ok(()) => None,
        Err(e) => {
            let text = e.to_string();
            text.starts_with("duplicate field")
                .then(|| text.split(" at line").next().unwrap_or(&text).to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::resources::by_path;

    #[test]
    fn unknown_fields_are_named_by_path() {
        let pods = by_path("", "v1", "pods").expect("pods");
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "b"}, "bogus": 1},
            "spec": {"containers": [{"name": "c", "image": "x", "imagee": "y",
                "env": [{"name": "A", "value": "1"}], "resources": {"requests": {"cpu": "1"}}}],
                "$setElementOrder/containers": [{"name": "c"}]}});
        assert_eq!(
            unknown_fields_of(pods, &pod),
            ["metadata.bogus", "spec.containers[0].imagee"]
        );
        let hr = by_path("helm.toolkit.fluxcd.io", "v2", "helmreleases").expect("hr");
        assert!(unknown_fields_of(hr, &json!({"spec": {"anything": 1}})).is_empty());
    }

    #[test]
    fn duplicates_are_found() {
        assert_eq!(
            duplicate_field(br#"{"a": {"b": 1, "b": 2}}"#).as_deref(),
            Some("duplicate field \"b\"")
        );
        assert_eq!(duplicate_field(br#"{"a": [{"b": 1}, {"b": 2}]}"#), None);
    }

    #[test]
    fn documents_advertise_strict_validation() {
        let idx = index();
        assert!(idx["paths"]["apis/apps/v1"]["serverRelativeURL"]
            .as_str()
            .is_some_and(|u| u.starts_with("/openapi/v3/apis/apps/v1?hash=")));
        let doc = group_version("apis/apps/v1").expect("served");
        let patch =
            &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"],
            json!({"group": "apps", "version": "v1", "kind": "DaemonSet"})
        );
        assert!(patch["parameters"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p["name"] == "fieldValidation")));
        assert!(doc["components"]["schemas"]["io.k8s.api.apps.v1.DaemonSet"].is_object());
        assert!(group_version("apis/nope/v1").is_none());
    }
}
