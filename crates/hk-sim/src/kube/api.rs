//! The one small interface the simulated controllers write a cluster through
//! ([`ClusterApi`]), so that the same controller can drive the built-in [`Store`] or a real
//! kube-apiserver through a kube client ([`KubeApi`]).
//!
//! Owns: the six operations the controllers use (fetch, list a kind, apply, merge-patch the
//! object or its status, remove) with the built-in store's meaning, and their translation to
//! API calls (forced server-side apply under the simulation's field manager, merge patches
//! as Updates by the same manager, so both modes show the same managedFields; a
//! delete with no grace period: the simulation plays the kubelet that finishes it).
//! Must not: decide anything a controller decides; know a kind beyond what
//! [`super::resources`] says of it.

use std::future::Future;

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::Value;

use super::resources::{self, ResourceType};
use super::store::{ObjRef, Store};
use super::SimError;

pub use super::store::FIELD_MANAGER;

/// What a simulated controller may do to a cluster. Each call is one read or one write; a
/// controller never holds anything between calls but names.
pub trait ClusterApi: Send + Sync {
    /// The object, if it exists.
    fn fetch(&self, r: &ObjRef) -> impl Future<Output = Result<Option<Value>, SimError>> + Send;
    /// Every object of a kind (in `namespace`, or everywhere).
    fn objects(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> impl Future<Output = Result<Vec<Value>, SimError>> + Send;
    /// Create or replace `obj` (its status too, when it has one). Returns what is stored.
    fn apply(&self, obj: Value) -> impl Future<Output = Result<Value, SimError>> + Send;
    /// Merge-patch (RFC 7386) the object (metadata and spec).
    fn merge_patch(
        &self,
        r: &ObjRef,
        patch: Value,
    ) -> impl Future<Output = Result<Value, SimError>> + Send;
    /// Merge-patch the object's `status` with `status`.
    fn patch_status(
        &self,
        r: &ObjRef,
        status: Value,
    ) -> impl Future<Output = Result<Value, SimError>> + Send;
    /// Delete the object now.
    fn remove(&self, r: &ObjRef) -> impl Future<Output = Result<(), SimError>> + Send;
}

impl ClusterApi for Store {
    async fn fetch(&self, r: &ObjRef) -> Result<Option<Value>, SimError> {
        Ok(Store::fetch(self, r)?.map(|o| (*o).clone()))
    }

    async fn objects(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, SimError> {
        Ok(Store::objects(self, api_version, kind, namespace)?
            .into_iter()
            .map(|o| (*o).clone())
            .collect())
    }

    async fn apply(&self, obj: Value) -> Result<Value, SimError> {
        self.committable()?;
        Ok((*Store::apply(self, obj)?).clone())
    }

    async fn merge_patch(&self, r: &ObjRef, patch: Value) -> Result<Value, SimError> {
        self.committable()?;
        Ok((*Store::merge_patch(self, r, patch)?).clone())
    }

    async fn patch_status(&self, r: &ObjRef, status: Value) -> Result<Value, SimError> {
        self.committable()?;
        Ok((*Store::patch_status(self, r, status)?).clone())
    }

    async fn remove(&self, r: &ObjRef) -> Result<(), SimError> {
        self.committable()?;
        Store::remove(self, r).map(|_| ())
    }
}

impl Store {
    /// A write through the store commits only while etcd has a quorum: without one it
    /// fails as the real server's does (etcd's request timeout), for the simulated
    /// controllers as for a client. No Lease renewed, no status posted.
    fn committable(&self) -> Result<(), SimError> {
        match self.no_quorum() {
            None => Ok(()),
            Some(_) => Err(SimError::Api(super::status::ApiError::etcd_timeout())),
        }
    }
}

/// [`ClusterApi`] over a kube client: the controllers' writes go to a real API server.
#[derive(Clone)]
pub struct KubeApi {
    client: kube::Client,
}

impl std::fmt::Debug for KubeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeApi").finish_non_exhaustive()
    }
}

fn kind_of(api_version: &str, kind: &str) -> Result<&'static ResourceType, SimError> {
    resources::by_kind(api_version, kind).ok_or_else(|| SimError::UnknownKind {
        api_version: api_version.into(),
        kind: kind.into(),
    })
}

/// Where kube finds objects of `res`.
pub fn api_resource(res: &ResourceType) -> ApiResource {
    let api_version = if res.group.is_empty() {
        res.version.to_string()
    } else {
        format!("{}/{}", res.group, res.version)
    };
    ApiResource {
        group: res.group.to_string(),
        version: res.version.to_string(),
        api_version,
        kind: res.kind.to_string(),
        plural: res.plural.to_string(),
    }
}

/// Where an object of `res` in `namespace` is (every namespace when `None`).
fn api(client: &kube::Client, res: &ResourceType, namespace: Option<&str>) -> Api<DynamicObject> {
    let ar = api_resource(res);
    match namespace {
        Some(ns) if res.namespaced => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    }
}

fn api_for(client: &kube::Client, r: &ObjRef) -> Result<Api<DynamicObject>, SimError> {
    let res = kind_of(&r.api_version, &r.kind)?;
    if res.namespaced && r.namespace.is_none() {
        return Err(SimError::Invalid(format!(
            "{r}: a {} is namespaced; the reference names no namespace",
            res.kind
        )));
    }
    Ok(api(client, res, r.namespace.as_deref()))
}

fn failed(what: &str, e: kube::Error) -> SimError {
    SimError::Client(format!("{what}: {e}"))
}

fn to_value(what: &str, o: &DynamicObject) -> Result<Value, SimError> {
    serde_json::to_value(o).map_err(|e| SimError::Invalid(format!("{what}: {e}")))
}

impl KubeApi {
    pub fn new(client: kube::Client) -> KubeApi {
        KubeApi { client }
    }

    /// The whole-object server-side apply the simulation's writes are: forced, so that the
    /// simulation owns what it sets even after an operator's kubectl touched it.
    fn params() -> PatchParams {
        PatchParams::apply(FIELD_MANAGER).force()
    }

    /// The merge patches are Updates under the same manager name, as the built-in store
    /// records them (without it the real server would name the manager after the client's
    /// User-Agent).
    fn update_params() -> PatchParams {
        PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        }
    }
}

impl ClusterApi for KubeApi {
    async fn fetch(&self, r: &ObjRef) -> Result<Option<Value>, SimError> {
        let api = api_for(&self.client, r)?;
        match api.get_opt(&r.name).await {
            Ok(Some(o)) => Ok(Some(to_value(&r.to_string(), &o)?)),
            Ok(None) => Ok(None),
            Err(e) => Err(failed(&format!("get {r}"), e)),
        }
    }

    async fn objects(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, SimError> {
        let res = kind_of(api_version, kind)?;
        let what = format!("list {api_version} {kind}");
        let list = api(&self.client, res, namespace)
            .list(&ListParams::default())
            .await
            .map_err(|e| failed(&what, e))?;
        list.items
            .iter()
            .map(|o| {
                // A list's items carry no apiVersion/kind on the wire; the built-in store's do.
                let mut v = to_value(&what, o)?;
                v["apiVersion"] = Value::from(api_version);
                v["kind"] = Value::from(kind);
                Ok(v)
            })
            .collect()
    }

    async fn apply(&self, obj: Value) -> Result<Value, SimError> {
        let field = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("");
        let r = ObjRef::new(
            field("/apiVersion"),
            field("/kind"),
            obj.pointer("/metadata/namespace").and_then(Value::as_str),
            field("/metadata/name"),
        );
        let api = api_for(&self.client, &r)?;
        let what = format!("apply {r}");
        let mut body = obj.clone();
        let status = body.as_object_mut().and_then(|m| m.remove("status"));
        let mut stored = api
            .patch(&r.name, &Self::params(), &Patch::Apply(&body))
            .await
            .map_err(|e| failed(&what, e))?;
        if let Some(status) = status {
            let res = kind_of(&r.api_version, &r.kind)?;
            // Kinds with a status subresource ignore status on the main resource.
            if res.status {
                let patch = serde_json::json!({"apiVersion": r.api_version, "kind": r.kind,
                    "status": status});
                stored = api
                    .patch_status(&r.name, &Self::params(), &Patch::Apply(&patch))
                    .await
                    .map_err(|e| failed(&format!("{what} status"), e))?;
            }
        }
        to_value(&what, &stored)
    }

    async fn merge_patch(&self, r: &ObjRef, patch: Value) -> Result<Value, SimError> {
        let api = api_for(&self.client, r)?;
        let what = format!("patch {r}");
        let o = api
            .patch(&r.name, &Self::update_params(), &Patch::Merge(&patch))
            .await
            .map_err(|e| failed(&what, e))?;
        to_value(&what, &o)
    }

    async fn patch_status(&self, r: &ObjRef, status: Value) -> Result<Value, SimError> {
        let api = api_for(&self.client, r)?;
        let what = format!("patch {r} status");
        let body = serde_json::json!({ "status": status });
        let o = api
            .patch_status(&r.name, &Self::update_params(), &Patch::Merge(&body))
            .await
            .map_err(|e| failed(&what, e))?;
        to_value(&what, &o)
    }

    async fn remove(&self, r: &ObjRef) -> Result<(), SimError> {
        let api = api_for(&self.client, r)?;
        api.delete(&r.name, &DeleteParams::default().grace_period(0))
            .await
            .map(|_| ())
            .map_err(|e| failed(&format!("delete {r}"), e))
    }
}
