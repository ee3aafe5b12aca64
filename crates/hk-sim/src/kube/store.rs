//! The simulated cluster's objects: an in-memory store with the API server's write rules.
//!
//! Owns: every object (as its JSON, shared), the one global `resourceVersion` counter, a
//! bounded history of change events (for watch resumption and consistent list pages), the
//! broadcast of each change to watchers and to the simulation ([`Store::subscribe`]), and the
//! write rules the real server applies: uid/creationTimestamp/generation, optimistic
//! concurrency (409 on a stale resourceVersion), AlreadyExists, the status subresource
//! (main writes keep the status; status writes change only the status), no-op updates that
//! do not move the resourceVersion, a namespace's existence for namespaced creates.
//! The simulation's own API ([`Store::apply`], [`Store::patch_status`], [`Store::delete`], ...)
//! writes with [`Origin::Sim`], so it can tell its writes from the clients'.
//! Must not: speak HTTP (that is `server`) or invent behaviour a real server lacks.
//!
//! One file (over 800 lines): the write rules, the resourceVersion counter and the history are
//! one consistency unit; a split would expose the counter to code that must not move it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};
use tokio::sync::broadcast;

use super::fields;
use super::logs::Logs;
use super::patch::{self, PatchType};
use super::resources::{self, CreateStatus, Generation, ResourceType, RESOURCES};
use super::select::Selectors;
use super::status::ApiError;
use super::SimError;

/// An object as stored: its JSON, shared between the store, lists and watch events.
pub type Object = Arc<Value>;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    res: usize,
    namespace: String,
    name: String,
}

/// A watch event's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// Who wrote: a client through the API, or the simulation through the Rust API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Api,
    Sim,
}

/// One change, as the store broadcasts it.
#[derive(Debug)]
pub struct StoreEvent {
    pub resource_version: u64,
    pub event: EventType,
    pub resource: &'static ResourceType,
    /// `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    pub name: String,
    /// The object after the change (for DELETED: the last state, at the deletion's version).
    pub object: Object,
    /// The object before the change (MODIFIED and DELETED).
    pub prev: Option<Object>,
    pub origin: Origin,
}

/// The field manager the simulation's writes carry (in the built-in store, and on a real
/// API server through `api`).
pub const FIELD_MANAGER: &str = "hk-console-sim";

pub use super::fields::Sub;

/// A delete's options: `DeleteOptions.preconditions` and `gracePeriodSeconds`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOpts {
    pub resource_version: Option<String>,
    pub uid: Option<String>,
    pub grace_period_seconds: Option<i64>,
}

/// A list request's paging and version options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOpts {
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    /// `resourceVersion`: `None`/`"0"`/`""` serve the current state.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch=Exact`.
    pub exact: bool,
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct ListPage {
    pub items: Vec<Object>,
    pub resource_version: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<u64>,
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchFrom {
    /// After this resourceVersion: the kept events since, then live ones.
    Version(u64),
    /// Now; with `initial`, first a synthetic ADDED for every current object.
    Now { initial: bool },
}

/// A started watch: what to send first, then the live events.
pub struct WatchStart {
    pub backlog: Vec<Arc<StoreEvent>>,
    pub live: broadcast::Receiver<Arc<StoreEvent>>,
    /// Every event at or below this version is in `backlog` or was before the watch.
    pub resource_version: u64,
}

/// The oldest change a watch may resume from (see [`Store::commit`]'s bound).
pub const HISTORY_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(600);

/// The namespaces a fresh cluster has.
pub const INITIAL_NAMESPACES: &[&str] =
    &["default", "kube-node-lease", "kube-public", "kube-system"];

struct Inner {
    rv: u64,
    objects: BTreeMap<Key, Object>,
    history: VecDeque<Arc<StoreEvent>>,
    history_cap: usize,
    /// When each kept event happened (parallel to `history`), for the age bound.
    history_at: VecDeque<std::time::Instant>,
    /// The oldest resourceVersion a watch may resume from.
    floor: u64,
}

struct Shared {
    inner: Mutex<Inner>,
    tx: broadcast::Sender<Arc<StoreEvent>>,
    logs: Logs,
    /// Why the cluster's etcd has no quorum (a majority of its members down), or None.
    /// The server answers by it (`/readyz/etcd` fails, client writes time out); the store
    /// itself keeps working: it is the server's watch cache as much as its etcd.
    no_quorum: Mutex<Option<String>>,
}

/// The object store. Cheap to clone (shared).
#[derive(Clone)]
pub struct Store {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("Store")
            .field("resource_version", &inner.rv)
            .field("objects", &inner.objects.len())
            .field("history", &inner.history.len())
            .finish()
    }
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    // A failing system RNG leaves zeros; uids then still differ by the counter-free
    // resourceVersion mixed in by the caller.
    let _ = rustls::crypto::ring::default_provider()
        .secure_random
        .fill(&mut buf);
    buf
}

/// A random RFC 4122 version-4 UUID, as the real server gives `metadata.uid`.
fn new_uid(rv: u64) -> String {
    let mut b: [u8; 16] = random_bytes();
    for (i, x) in rv.to_be_bytes().iter().enumerate() {
        b[8 + i] ^= x;
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The suffix the real server appends to `generateName` (5 characters of its alphabet).
fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    random_bytes::<5>()
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
        .collect()
}

fn now_timestamp() -> Value {
    let now = Timestamp::now();
    let secs = Timestamp::from_second(now.as_second()).unwrap_or(now);
    serde_json::to_value(Time(secs)).unwrap_or(Value::Null)
}

/// The grace period of a client's pod delete: none for an unscheduled or finished pod,
/// else the request's, else the pod's `terminationGracePeriodSeconds`, else 30.
fn pod_grace(pod: &Value, asked: Option<i64>) -> i64 {
    let scheduled = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let finished = matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    );
    if !scheduled || finished {
        return 0;
    }
    asked
        .or_else(|| {
            pod.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
        })
        .unwrap_or(30)
        .max(0)
}

/// `now + secs`, as a Kubernetes timestamp.
fn timestamp_in(secs: i64) -> Value {
    let at = Timestamp::now().as_second().saturating_add(secs);
    Timestamp::from_second(at)
        .ok()
        .and_then(|t| serde_json::to_value(Time(t)).ok())
        .unwrap_or_else(now_timestamp)
}

fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    meta(obj)
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// Run `f` on the object's metadata map (made if missing). `None` if `obj` is no object.
fn with_meta<R>(obj: &mut Value, f: impl FnOnce(&mut Map<String, Value>) -> R) -> Option<R> {
    let Value::Object(m) = obj else { return None };
    let md = m.entry("metadata").or_insert_with(|| json!({}));
    if !md.is_object() {
        *md = json!({});
    }
    match md {
        Value::Object(md) => Some(f(md)),
        _ => None,
    }
}

/// The resourceVersion of a stored object.
pub fn object_rv(obj: &Value) -> u64 {
    meta_str(obj, "resourceVersion")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// `obj` without `metadata.resourceVersion` and `metadata.managedFields` (for no-op detection).
/// An object as a no-op check compares it: its managedFields count (a write that changes
/// only field ownership, as kubectl's upgrade from client-side apply, is a change).
fn comparable(obj: &Value) -> Value {
    let mut c = obj.clone();
    if let Some(Value::Object(m)) = c.get_mut("metadata") {
        m.remove("resourceVersion");
    }
    c
}

fn without_meta_status(obj: &Value) -> Value {
    let mut c = obj.clone();
    if let Value::Object(m) = &mut c {
        m.remove("metadata");
        m.remove("status");
    }
    c
}

fn spec_changed(res: &ResourceType, old: &Value, new: &Value) -> bool {
    match res.generation {
        Generation::None => false,
        Generation::Spec => old.get("spec") != new.get("spec"),
        Generation::AllButMetaStatus => without_meta_status(old) != without_meta_status(new),
    }
}

/// The continue token: base64 of `{"v","rv","start"}`, like the real server's.
fn encode_continue(rv: u64, key: &Key) -> String {
    let body = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{}/{}\u{0}", key.namespace, key.name)});
    data_encoding::BASE64.encode(body.to_string().as_bytes())
}

fn decode_continue(token: &str, res: usize) -> Result<(u64, Key), ApiError> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token}"));
    let raw = data_encoding::BASE64
        .decode(token.as_bytes())
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let start = v.get("start").and_then(Value::as_str).ok_or_else(bad)?;
    let start = start.strip_suffix('\u{0}').unwrap_or(start);
    let (ns, name) = start.split_once('/').ok_or_else(bad)?;
    Ok((
        rv,
        Key {
            res,
            namespace: ns.to_string(),
            name: name.to_string(),
        },
    ))
}

const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

impl Store {
    /// An empty store keeping the last `history` events, with the initial namespaces.
    pub fn new(history: usize) -> Store {
        let (tx, _) = broadcast::channel(4096);
        let store = Store {
            shared: Arc::new(Shared {
                inner: Mutex::new(Inner {
                    rv: 0,
                    objects: BTreeMap::new(),
                    history: VecDeque::new(),
                    history_cap: history.max(1),
                    history_at: VecDeque::new(),
                    floor: 0,
                }),
                tx,
                logs: Logs::default(),
                no_quorum: Mutex::new(None),
            }),
        };
        for ns in INITIAL_NAMESPACES {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}});
            // Cannot fail: a fresh store, distinct names.
            let _ = store.create(&RESOURCES[0], None, obj, Origin::Api);
        }
        // Like a real server's watch cache, the kept history begins at start.
        store.compact();
        store
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.shared
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The containers' logs (kept with the objects: a deleted pod's go with it).
    pub fn logs(&self) -> &Logs {
        &self.shared.logs
    }

    /// Mark the cluster's etcd without quorum (`Some(why)`) or with it again (`None`).
    pub fn set_no_quorum(&self, why: Option<String>) {
        *self
            .shared
            .no_quorum
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = why;
    }

    /// Why the cluster's etcd has no quorum, if it has none.
    pub fn no_quorum(&self) -> Option<String> {
        self.shared
            .no_quorum
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The current (latest) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// The oldest resourceVersion a watch may still resume from.
    pub fn oldest_resumable(&self) -> u64 {
        self.lock().floor
    }

    /// Every change from now on (the simulation reacts to client writes with this).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<StoreEvent>> {
        self.shared.tx.subscribe()
    }

    /// Forget the kept history: a watch from any version before now gets 410 Expired (as
    /// after an etcd compaction), and so does a continue token issued before now.
    pub fn compact(&self) {
        let mut inner = self.lock();
        inner.history.clear();
        inner.history_at.clear();
        inner.floor = inner.rv;
    }

    fn commit(
        &self,
        inner: &mut Inner,
        key: Key,
        event: EventType,
        new: Option<Value>,
        prev: Option<Object>,
        origin: Origin,
    ) -> Object {
        let res = &RESOURCES[key.res];
        inner.rv += 1;
        let rv = inner.rv;
        let object: Object = match new {
            Some(mut v) => {
                with_meta(&mut v, |m| {
                    m.insert("resourceVersion".into(), json!(rv.to_string()))
                });
                let o = Arc::new(v);
                inner.objects.insert(key.clone(), o.clone());
                o
            }
            None => {
                inner.objects.remove(&key);
                if res.kind == "Pod" && res.group.is_empty() {
                    self.shared.logs.forget_pod(&key.namespace, &key.name);
                }
                let mut last = prev.as_deref().cloned().unwrap_or(Value::Null);
                with_meta(&mut last, |m| {
                    m.insert("resourceVersion".into(), json!(rv.to_string()))
                });
                Arc::new(last)
            }
        };
        let ev = Arc::new(StoreEvent {
            resource_version: rv,
            event,
            resource: res,
            namespace: res.namespaced.then(|| key.namespace.clone()),
            name: key.name.clone(),
            object: object.clone(),
            prev,
            origin,
        });
        inner.history.push_back(ev.clone());
        let now = std::time::Instant::now();
        inner.history_at.push_back(now);
        // Besides the count, an age bound: the real server's etcd compacts every 5 minutes,
        // so a version older than two compactions is gone there too (410), and an idle demo's
        // renewals do not fill the history with twenty minutes of Lease copies.
        while inner.history.len() > inner.history_cap
            || inner
                .history_at
                .front()
                .is_some_and(|t| now.duration_since(*t) > HISTORY_MAX_AGE)
        {
            inner.history_at.pop_front();
            if let Some(dropped) = inner.history.pop_front() {
                inner.floor = dropped.resource_version;
            }
        }
        // No receivers is fine (nobody watching).
        let _ = self.shared.tx.send(ev);
        object
    }

    fn key(res: &'static ResourceType, ns: Option<&str>, name: &str) -> Key {
        Key {
            res: res.id(),
            namespace: if res.namespaced {
                ns.unwrap_or_default().to_string()
            } else {
                String::new()
            },
            name: name.to_string(),
        }
    }

    /// Check the body's apiVersion/kind against the resource, and fill them in if absent.
    fn typed_body(res: &ResourceType, obj: &mut Value) -> Result<(), ApiError> {
        let Value::Object(m) = obj else {
            return Err(ApiError::bad_request(
                "the body of the request must be a JSON object",
            ));
        };
        let want = res.api_version();
        match m.get("apiVersion").and_then(Value::as_str) {
            Some(v) if !v.is_empty() && v != want => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({v}) does not match the expected API version ({want})"
                )))
            }
            _ => {
                m.insert("apiVersion".into(), json!(want));
            }
        }
        match m.get("kind").and_then(Value::as_str) {
            Some(k) if !k.is_empty() && k != res.kind => {
                return Err(ApiError::bad_request(format!(
                    "the kind in the data ({k}) does not match the expected kind ({})",
                    res.kind
                )))
            }
            _ => {
                m.insert("kind".into(), json!(res.kind));
            }
        }
        Ok(())
    }

    /// Create `obj` (POST). The namespace of a namespaced object comes from `ns` or the body.
    pub fn create(
        &self,
        res: &'static ResourceType,
        ns: Option<&str>,
        obj: Value,
        origin: Origin,
    ) -> Result<Object, ApiError> {
        self.create_as(res, ns, obj, origin, Write::Commit)
    }

    /// [`Store::create`], or with [`Write::DryRun`] the object it would store (no
    /// resourceVersion, as the real server answers a dry-run create), nothing stored.
    fn create_as(
        &self,
        res: &'static ResourceType,
        ns: Option<&str>,
        mut obj: Value,
        origin: Origin,
        mode: Write,
    ) -> Result<Object, ApiError> {
        Self::typed_body(res, &mut obj)?;
        let body_ns = meta_str(&obj, "namespace").map(str::to_string);
        let namespace = if res.namespaced {
            match (ns, body_ns.as_deref()) {
                (Some(a), Some(b)) if a != b => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ))
                }
                (Some(a), _) => Some(a.to_string()),
                (None, Some(b)) => Some(b.to_string()),
                (None, None) => Some("default".to_string()),
            }
        } else {
            None
        };
        let mut inner = self.lock();
        let name = match meta_str(&obj, "name") {
            Some(n) => n.to_string(),
            None => match meta_str(&obj, "generateName") {
                Some(g) => format!("{g}{}", name_suffix()),
                None => {
                    return Err(ApiError::invalid(
                        res,
                        "",
                        "metadata.name",
                        "Required value: name or generateName is required",
                    ))
                }
            },
        };
        if let Some(ns) = &namespace {
            let ns_key = Self::key(&RESOURCES[0], None, ns);
            if origin == Origin::Api && !inner.objects.contains_key(&ns_key) {
                return Err(ApiError::not_found(&RESOURCES[0], ns));
            }
        }
        let key = Self::key(res, namespace.as_deref(), &name);
        if inner.objects.contains_key(&key) {
            return Err(ApiError::already_exists(res, &name));
        }
        let uid = new_uid(inner.rv);
        with_meta(&mut obj, |m| {
            m.insert("name".into(), json!(name));
            match &namespace {
                Some(ns) => {
                    m.insert("namespace".into(), json!(ns));
                }
                None => {
                    m.remove("namespace");
                }
            }
            m.insert("uid".into(), json!(uid));
            m.remove("resourceVersion");
            m.insert("creationTimestamp".into(), now_timestamp());
            if res.generation != Generation::None {
                m.insert("generation".into(), json!(1));
            } else {
                m.remove("generation");
            }
        });
        if origin == Origin::Api {
            Self::reset_status_on_create(res, &mut obj);
        }
        if mode == Write::DryRun {
            return Ok(Arc::new(obj));
        }
        Ok(self.commit(&mut inner, key, EventType::Added, Some(obj), None, origin))
    }

    fn reset_status_on_create(res: &ResourceType, obj: &mut Value) {
        let Value::Object(m) = obj else { return };
        match res.create_status {
            CreateStatus::Keep => {}
            CreateStatus::Clear => {
                m.remove("status");
            }
            CreateStatus::Zeroed(fields) => {
                let zeros: Map<String, Value> =
                    fields.iter().map(|f| (f.to_string(), json!(0))).collect();
                m.insert("status".into(), Value::Object(zeros));
            }
            CreateStatus::PodPending => {
                m.insert("status".into(), json!({"phase": "Pending"}));
            }
            CreateStatus::NamespaceActive => {
                m.insert("spec".into(), json!({"finalizers": ["kubernetes"]}));
                m.insert("status".into(), json!({"phase": "Active"}));
            }
        }
    }

    /// Replace an object (PUT), or its status (PUT .../status).
    #[allow(clippy::too_many_arguments)]
    pub fn update(
        &self,
        res: &'static ResourceType,
        ns: Option<&str>,
        name: &str,
        obj: Value,
        sub: Sub,
        origin: Origin,
    ) -> Result<Object, ApiError> {
        if res.custom && origin == Origin::Api && meta_str(&obj, "resourceVersion").is_none() {
            // Custom resources do not allow unconditional updates.
            return Err(ApiError::invalid(
                res,
                name,
                "metadata.resourceVersion",
                "Invalid value: 0: must be specified for an update",
            ));
        }
        let mut inner = self.lock();
        let key = Self::key(res, ns, name);
        let old = inner
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(res, name))?;
        self.write(
            &mut inner,
            res,
            key,
            &old,
            (obj, Write::Commit),
            sub,
            origin,
        )
    }

    /// The update path shared by PUT and PATCH: preconditions, preserved fields, the status
    /// subresource, generation, and no-op detection.
    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        inner: &mut Inner,
        res: &'static ResourceType,
        key: Key,
        old: &Object,
        (mut new, mode): (Value, Write),
        sub: Sub,
        origin: Origin,
    ) -> Result<Object, ApiError> {
        let name = key.name.clone();
        Self::typed_body(res, &mut new)?;
        if let Some(n) = meta_str(&new, "name") {
            if n != name {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
        }
        if res.namespaced {
            if let Some(n) = meta_str(&new, "namespace") {
                if n != key.namespace {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
            }
        }
        let old_rv = object_rv(old).to_string();
        if let Some(rv) = meta_str(&new, "resourceVersion") {
            if rv != old_rv {
                return Err(ApiError::conflict(res, &name));
            }
        }
        let old_uid = meta_str(old, "uid").unwrap_or_default().to_string();
        if let Some(uid) = meta_str(&new, "uid") {
            if uid != old_uid {
                return Err(ApiError::conflict_because(
                    res,
                    &name,
                    &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {old_uid}"),
                ));
            }
        }
        let mut next = match sub {
            Sub::Status => {
                let mut n = (**old).clone();
                if let Value::Object(m) = &mut n {
                    match new.get("status") {
                        Some(s) => {
                            m.insert("status".into(), s.clone());
                        }
                        None => {
                            m.remove("status");
                        }
                    }
                }
                // A status write records its field ownership too.
                if let Some(mf) = new.pointer("/metadata/managedFields") {
                    with_meta(&mut n, |m| m.insert("managedFields".into(), mf.clone()));
                }
                n
            }
            Sub::Main => {
                let mut n = new;
                if res.status && origin == Origin::Api {
                    if let Value::Object(m) = &mut n {
                        match old.get("status") {
                            Some(s) => {
                                m.insert("status".into(), s.clone());
                            }
                            None => {
                                m.remove("status");
                            }
                        }
                    }
                }
                n
            }
        };
        let old_meta = meta(old).cloned().unwrap_or_default();
        with_meta(&mut next, |m| {
            m.insert("name".into(), json!(name));
            if res.namespaced {
                m.insert("namespace".into(), json!(key.namespace));
            }
            for f in ["uid", "creationTimestamp", "generation"] {
                match old_meta.get(f) {
                    Some(v) => {
                        m.insert(f.into(), v.clone());
                    }
                    None => {
                        m.remove(f);
                    }
                }
            }
        });
        if spec_changed(res, old, &next) {
            let g = meta(old)
                .and_then(|m| m.get("generation"))
                .and_then(Value::as_i64)
                .unwrap_or(0);
            with_meta(&mut next, |m| m.insert("generation".into(), json!(g + 1)));
        }
        if comparable(&next) == comparable(old) {
            return Ok(old.clone());
        }
        if mode == Write::DryRun {
            // What would be stored, at the version it replaces (nothing is committed).
            with_meta(&mut next, |m| {
                m.insert("resourceVersion".into(), json!(old_rv))
            });
            return Ok(Arc::new(next));
        }
        Ok(self.commit(
            inner,
            key,
            EventType::Modified,
            Some(next),
            Some(old.clone()),
            origin,
        ))
    }

    /// Patch an object (PATCH), or its status. A server-side apply of a missing object
    /// creates it.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &self,
        res: &'static ResourceType,
        ns: Option<&str>,
        name: &str,
        kind: PatchType,
        body: &Value,
        sub: Sub,
        origin: Origin,
    ) -> Result<Object, ApiError> {
        if res.custom && kind == PatchType::Strategic {
            return Err(ApiError::unsupported_media_type(
                "application/strategic-merge-patch+json",
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ));
        }
        let mut inner = self.lock();
        let key = Self::key(res, ns, name);
        let Some(old) = inner.objects.get(&key).cloned() else {
            if kind == PatchType::Apply && sub == Sub::Main {
                drop(inner);
                let mut obj = body.clone();
                with_meta(&mut obj, |m| m.insert("name".into(), json!(name)));
                return self.create(res, ns, obj, origin);
            }
            return Err(ApiError::not_found(res, name));
        };
        let mut doc = (*old).clone();
        patch::apply(kind, &mut doc, body)?;
        if kind == PatchType::Apply {
            // An apply carries no resourceVersion unless the client set one on purpose.
            if meta_str(body, "resourceVersion").is_none() {
                with_meta(&mut doc, |m| m.remove("resourceVersion"));
            }
        }
        self.write(
            &mut inner,
            res,
            key,
            &old,
            (doc, Write::Commit),
            sub,
            origin,
        )
    }

    /// Delete an object; a namespace takes its objects with it.
    pub fn delete(
        &self,
        res: &'static ResourceType,
        ns: Option<&str>,
        name: &str,
        pre: &DeleteOpts,
        origin: Origin,
    ) -> Result<Object, ApiError> {
        let mut inner = self.lock();
        let key = Self::key(res, ns, name);
        let old = inner
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(res, name))?;
        if let Some(rv) = pre.resource_version.as_deref().filter(|s| !s.is_empty()) {
            let have = object_rv(&old).to_string();
            if rv != have {
                return Err(ApiError::conflict_because(
                    res,
                    name,
                    &format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {have}"),
                ));
            }
        }
        if let Some(uid) = pre.uid.as_deref().filter(|s| !s.is_empty()) {
            let have = meta_str(&old, "uid").unwrap_or_default();
            if uid != have {
                return Err(ApiError::conflict_because(
                    res,
                    name,
                    &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"),
                ));
            }
        }
        let old = if res.graceful_delete && origin == Origin::Api {
            let grace = pod_grace(&old, pre.grace_period_seconds);
            let marked = meta(&old)
                .filter(|m| m.contains_key("deletionTimestamp"))
                .and_then(|m| m.get("deletionGracePeriodSeconds"))
                .and_then(Value::as_i64);
            if marked.is_some_and(|g| grace >= g && grace > 0) {
                return Ok(old);
            }
            let mut next = (*old).clone();
            let first = marked.is_none();
            with_meta(&mut next, |m| {
                m.insert("deletionTimestamp".into(), timestamp_in(grace));
                m.insert("deletionGracePeriodSeconds".into(), json!(grace));
                if first {
                    if let Some(g) = m.get("generation").and_then(Value::as_i64) {
                        m.insert("generation".into(), json!(g + 1));
                    }
                }
            });
            let marked = self.commit(
                &mut inner,
                key.clone(),
                EventType::Modified,
                Some(next),
                Some(old),
                origin,
            );
            if grace > 0 {
                return Ok(marked);
            }
            marked
        } else {
            old
        };
        if std::ptr::eq(res, &RESOURCES[0]) {
            let contained: Vec<(Key, Object)> = inner
                .objects
                .iter()
                .filter(|(k, _)| RESOURCES[k.res].namespaced && k.namespace == name)
                .map(|(k, o)| (k.clone(), o.clone()))
                .collect();
            for (k, o) in contained {
                self.commit(&mut inner, k, EventType::Deleted, None, Some(o), origin);
            }
        }
        Ok(self.commit(&mut inner, key, EventType::Deleted, None, Some(old), origin))
    }

    /// One object.
    pub fn get(
        &self,
        res: &'static ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Object, ApiError> {
        self.lock()
            .objects
            .get(&Self::key(res, ns, name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(res, name))
    }

    /// A page of the objects of `res` (in `ns`, or everywhere) that match `sel`, consistent
    /// at one resourceVersion across pages (rebuilt from the history, 410 once it is gone).
    pub fn list(
        &self,
        res: &'static ResourceType,
        ns: Option<&str>,
        sel: &Selectors,
        opts: &ListOpts,
    ) -> Result<ListPage, ApiError> {
        let inner = self.lock();
        let rid = res.id();
        let ns = ns.filter(|_| res.namespaced);
        let (at, after) = match &opts.continue_token {
            Some(t) if !t.is_empty() => {
                let (rv, key) = decode_continue(t, rid)?;
                if rv < inner.floor || rv > inner.rv {
                    return Err(ApiError::expired(CONTINUE_EXPIRED.into()));
                }
                (rv, Some(key))
            }
            _ => {
                let asked = opts
                    .resource_version
                    .as_deref()
                    .filter(|s| !s.is_empty() && *s != "0");
                match asked {
                    Some(s) if opts.exact => {
                        let rv: u64 = s.parse().map_err(|_| {
                            ApiError::bad_request(format!("invalid resource version: {s}"))
                        })?;
                        if rv < inner.floor {
                            return Err(ApiError::expired(format!(
                                "too old resource version: {rv} ({})",
                                inner.floor
                            )));
                        }
                        (rv.min(inner.rv), None)
                    }
                    _ => (inner.rv, None),
                }
            }
        };
        let in_scope = |k: &Key| k.res == rid && ns.is_none_or(|n| k.namespace == n);
        let start = Key {
            res: rid,
            namespace: ns.unwrap_or_default().to_string(),
            name: String::new(),
        };
        let past = |k: &Key| after.as_ref().is_none_or(|a| k > a);
        let mut view: BTreeMap<Key, Object> = inner
            .objects
            .range(start..)
            .take_while(|(k, _)| in_scope(k))
            .filter(|(k, _)| past(k))
            .map(|(k, o)| (k.clone(), o.clone()))
            .collect();
        if at < inner.rv {
            for ev in inner.history.iter().rev() {
                if ev.resource_version <= at {
                    break;
                }
                let k = Key {
                    res: ev.resource.id(),
                    namespace: ev.namespace.clone().unwrap_or_default(),
                    name: ev.name.clone(),
                };
                if !in_scope(&k) || !past(&k) {
                    continue;
                }
                match (ev.event, &ev.prev) {
                    (EventType::Added, _) => {
                        view.remove(&k);
                    }
                    (_, Some(p)) => {
                        view.insert(k, p.clone());
                    }
                    (_, None) => {}
                }
            }
        }
        let limit = opts.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut last: Option<Key> = None;
        let mut more = 0u64;
        for (k, o) in view {
            if !sel.matches(&o) {
                continue;
            }
            if items.len() < limit {
                items.push(o);
                last = Some(k);
            } else {
                more += 1;
            }
        }
        let continue_token = match (more > 0, last) {
            (true, Some(k)) => Some(encode_continue(at, &k)),
            _ => None,
        };
        Ok(ListPage {
            items,
            resource_version: at,
            continue_token,
            remaining: (more > 0 && sel.is_empty()).then_some(more),
        })
    }

    /// Start a watch on `res` (in `ns`, or everywhere). The caller filters by selector.
    pub fn watch(
        &self,
        res: &'static ResourceType,
        ns: Option<&str>,
        from: WatchFrom,
    ) -> Result<WatchStart, ApiError> {
        let inner = self.lock();
        let rid = res.id();
        let ns = ns.filter(|_| res.namespaced);
        let in_scope = |r: usize, n: &str| r == rid && ns.is_none_or(|x| x == n);
        let backlog = match from {
            WatchFrom::Version(v) => {
                if v < inner.floor {
                    return Err(ApiError::expired(format!(
                        "too old resource version: {v} ({})",
                        inner.floor
                    )));
                }
                inner
                    .history
                    .iter()
                    .filter(|e| e.resource_version > v)
                    .filter(|e| in_scope(e.resource.id(), e.namespace.as_deref().unwrap_or("")))
                    .cloned()
                    .collect()
            }
            WatchFrom::Now { initial: false } => Vec::new(),
            WatchFrom::Now { initial: true } => inner
                .objects
                .iter()
                .filter(|(k, _)| in_scope(k.res, &k.namespace))
                .map(|(k, o)| {
                    Arc::new(StoreEvent {
                        resource_version: object_rv(o),
                        event: EventType::Added,
                        resource: res,
                        namespace: res.namespaced.then(|| k.namespace.clone()),
                        name: k.name.clone(),
                        object: o.clone(),
                        prev: None,
                        origin: Origin::Api,
                    })
                })
                .collect(),
        };
        Ok(WatchStart {
            backlog,
            live: self.shared.tx.subscribe(),
            resource_version: inner.rv,
        })
    }

    // ---- The simulation's API -------------------------------------------------------

    /// Create or change `obj` (any served kind; `apiVersion`, `kind`, `metadata.name` and, for
    /// namespaced kinds, `metadata.namespace` set) as a forced server-side apply by the
    /// simulation's field manager ([`FIELD_MANAGER`]), its status applied through
    /// the status subresource where the kind has one: what `KubeApi` does on a real server.
    /// Unconditional: no resourceVersion check. Fields others own and the configuration does
    /// not name stay; generation moves as on a real update.
    pub fn apply(&self, obj: Value) -> Result<Object, SimError> {
        let (res, ns, name) = identify(&obj)?;
        let mut obj = obj;
        with_meta(&mut obj, |m| m.remove("resourceVersion"));
        let sim = fields::ApplyOpts {
            manager: FIELD_MANAGER,
            force: true,
            strict_lists: false,
        };
        let applied = |live: Option<&Value>| -> Result<Value, ApiError> {
            let mut next = fields::track_apply(res, Sub::Main, live, &obj, sim)?;
            if res.status && obj.get("status").is_some() {
                next = fields::track_apply(res, Sub::Status, Some(&next), &obj, sim)?;
            }
            Ok(next)
        };
        Ok(
            self.write_with(res, ns.as_deref(), &name, Sub::Main, Origin::Sim, |live| {
                applied(live)
            })?,
        )
    }

    /// Read-modify-write of one object under the store's lock, for writes that track field
    /// ownership (it depends on the object they change): `f` gets the current object (`None`
    /// when there is none) and returns the object to store; a missing one is created.
    #[allow(clippy::too_many_arguments)]
    pub fn write_with(
        &self,
        res: &'static ResourceType,
        ns: Option<&str>,
        name: &str,
        sub: Sub,
        origin: Origin,
        f: impl FnOnce(Option<&Value>) -> Result<Value, ApiError>,
    ) -> Result<Object, ApiError> {
        self.write_as(res, (ns, name), sub, origin, Write::Commit, f)
    }

    /// [`Store::write_with`] as a dry run (`?dryRun=All`): every check and the object it
    /// would store, answered; nothing stored, no watch event, no resourceVersion spent.
    pub fn dry_run_with(
        &self,
        res: &'static ResourceType,
        ns: Option<&str>,
        name: &str,
        sub: Sub,
        origin: Origin,
        f: impl FnOnce(Option<&Value>) -> Result<Value, ApiError>,
    ) -> Result<Object, ApiError> {
        self.write_as(res, (ns, name), sub, origin, Write::DryRun, f)
    }

    fn write_as(
        &self,
        res: &'static ResourceType,
        (ns, name): (Option<&str>, &str),
        sub: Sub,
        origin: Origin,
        mode: Write,
        f: impl FnOnce(Option<&Value>) -> Result<Value, ApiError>,
    ) -> Result<Object, ApiError> {
        let mut inner = self.lock();
        let key = Self::key(res, ns, name);
        match inner.objects.get(&key).cloned() {
            None => {
                let obj = f(None)?;
                drop(inner);
                self.create_as(res, ns, obj, origin, mode)
            }
            Some(old) => {
                let next = f(Some(&old))?;
                self.write(&mut inner, res, key, &old, (next, mode), sub, origin)
            }
        }
    }

    /// A merge patch by the simulation: an Update by its field manager.
    fn sim_merge(&self, r: &ObjRef, body: &Value, sub: Sub) -> Result<Object, SimError> {
        let (res, ns) = r.resolve()?;
        Ok(self.write_with(res, ns, &r.name, sub, Origin::Sim, |live| {
            let Some(live) = live else {
                return Err(ApiError::not_found(res, &r.name));
            };
            let mut doc = live.clone();
            patch::apply(PatchType::Merge, &mut doc, body)?;
            fields::track_update(res, sub, Some(live), &mut doc, FIELD_MANAGER)?;
            Ok(doc)
        })?)
    }

    /// [`Store::apply`] for a typed object (k8s-openapi types carry apiVersion/kind).
    pub fn apply_typed<K: Serialize>(&self, obj: &K) -> Result<Object, SimError> {
        let v = serde_json::to_value(obj).map_err(|e| SimError::Invalid(e.to_string()))?;
        self.apply(v)
    }

    /// Merge-patch (RFC 7386) the object's `status` with `status`.
    pub fn patch_status(&self, r: &ObjRef, status: Value) -> Result<Object, SimError> {
        self.sim_merge(r, &json!({ "status": status }), Sub::Status)
    }

    /// Merge-patch (RFC 7386) the whole object (metadata and spec; status is kept).
    pub fn merge_patch(&self, r: &ObjRef, patch: Value) -> Result<Object, SimError> {
        let mut body = patch;
        if let Some(Value::Object(m)) = body.get_mut("metadata") {
            m.remove("resourceVersion");
        }
        self.sim_merge(r, &body, Sub::Main)
    }

    /// Delete the object (a namespace takes its objects with it).
    pub fn remove(&self, r: &ObjRef) -> Result<Object, SimError> {
        let (res, ns) = r.resolve()?;
        Ok(self.delete(res, ns, &r.name, &DeleteOpts::default(), Origin::Sim)?)
    }

    /// The object, if it exists.
    pub fn fetch(&self, r: &ObjRef) -> Result<Option<Object>, SimError> {
        let (res, ns) = r.resolve()?;
        Ok(self.get(res, ns, &r.name).ok())
    }

    /// The object, decoded as `K`.
    pub fn fetch_typed<K: DeserializeOwned>(&self, r: &ObjRef) -> Result<Option<K>, SimError> {
        match self.fetch(r)? {
            None => Ok(None),
            Some(o) => serde_json::from_value((*o).clone())
                .map(Some)
                .map_err(|e| SimError::Invalid(format!("{r}: {e}"))),
        }
    }

    /// Every object of a kind (in `namespace`, or everywhere), in key order.
    pub fn objects(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<Object>, SimError> {
        let res = resources::by_kind(api_version, kind).ok_or_else(|| SimError::UnknownKind {
            api_version: api_version.into(),
            kind: kind.into(),
        })?;
        Ok(self
            .list(res, namespace, &Selectors::default(), &ListOpts::default())?
            .items)
    }
}

/// Whether a write is stored or only answered (a dry run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Write {
    Commit,
    DryRun,
}

/// Which object: apiVersion, kind, namespace (for namespaced kinds) and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjRef {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl std::fmt::Display for ObjRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}/{}", self.api_version, self.kind, ns, self.name),
            None => write!(f, "{} {}/{}", self.api_version, self.kind, self.name),
        }
    }
}

impl ObjRef {
    pub fn new(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> ObjRef {
        ObjRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.map(str::to_string),
            name: name.into(),
        }
    }

    /// A reference to an object of the k8s-openapi type `K`.
    pub fn of<K: k8s_openapi::Resource>(namespace: Option<&str>, name: &str) -> ObjRef {
        ObjRef::new(K::API_VERSION, K::KIND, namespace, name)
    }

    fn resolve(&self) -> Result<(&'static ResourceType, Option<&str>), SimError> {
        let res = resources::by_kind(&self.api_version, &self.kind).ok_or_else(|| {
            SimError::UnknownKind {
                api_version: self.api_version.clone(),
                kind: self.kind.clone(),
            }
        })?;
        if res.namespaced && self.namespace.is_none() {
            return Err(SimError::Invalid(format!(
                "{self}: a {} is namespaced; the reference names no namespace",
                res.kind
            )));
        }
        Ok((res, self.namespace.as_deref()))
    }
}

/// The resource, namespace and name of an object the simulation hands in.
fn identify(obj: &Value) -> Result<(&'static ResourceType, Option<String>, String), SimError> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let res = resources::by_kind(api_version, kind).ok_or_else(|| SimError::UnknownKind {
        api_version: api_version.into(),
        kind: kind.into(),
    })?;
    let name = meta_str(obj, "name")
        .ok_or_else(|| SimError::Invalid(format!("a {kind} without metadata.name")))?
        .to_string();
    let ns = meta_str(obj, "namespace").map(str::to_string);
    if res.namespaced && ns.is_none() {
        return Err(SimError::Invalid(format!(
            "{kind} {name}: a namespaced kind without metadata.namespace"
        )));
    }
    Ok((res, ns, name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::resources::by_path;

    fn cm(name: &str, data: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name}, "data": {"k": data}})
    }

    fn res(group: &str, plural: &str) -> &'static ResourceType {
        let v = if group.starts_with("helm") {
            "v2"
        } else {
            "v1"
        };
        by_path(group, v, plural).expect("served")
    }

    #[test]
    fn create_sets_server_fields_and_refuses_duplicates() {
        let s = Store::new(100);
        let rv0 = s.resource_version();
        let o = s
            .create(
                res("", "configmaps"),
                Some("kube-system"),
                cm("a", "1"),
                Origin::Api,
            )
            .expect("create");
        assert_eq!(object_rv(&o), rv0 + 1);
        assert_eq!(meta_str(&o, "uid").map(str::len), Some(36));
        assert!(meta_str(&o, "creationTimestamp").is_some_and(|t| t.ends_with('Z')));
        assert!(meta(&o).is_some_and(|m| !m.contains_key("generation")));
        let e = s
            .create(
                res("", "configmaps"),
                Some("kube-system"),
                cm("a", "2"),
                Origin::Api,
            )
            .expect_err("duplicate");
        assert_eq!((e.code, e.reason), (409, "AlreadyExists"));
        let e = s
            .create(
                res("", "configmaps"),
                Some("nope"),
                cm("b", "2"),
                Origin::Api,
            )
            .expect_err("no namespace");
        assert_eq!(e.message, "namespaces \"nope\" not found");
    }

    /// `?dryRun=All` (flux diff's server-side dry-run apply): the object that would be
    /// stored is answered, at the version it would replace (none for a create), and nothing
    /// is stored, announced or counted.
    #[test]
    fn a_dry_run_answers_the_write_and_stores_nothing() {
        let s = Store::new(100);
        let r = res("", "configmaps");
        let live = s
            .create(r, Some("kube-system"), cm("a", "1"), Origin::Api)
            .expect("create");
        let rv = s.resource_version();
        let mut feed = s.subscribe();
        let changed = s
            .dry_run_with(r, Some("kube-system"), "a", Sub::Main, Origin::Api, |l| {
                let mut doc = l.cloned().expect("live");
                doc["data"]["k"] = json!("2");
                Ok(doc)
            })
            .expect("dry run of a change");
        assert_eq!(changed["data"]["k"], "2");
        assert_eq!(object_rv(&changed), object_rv(&live));
        let created = s
            .dry_run_with(r, Some("kube-system"), "b", Sub::Main, Origin::Api, |l| {
                assert!(l.is_none());
                Ok(cm("b", "1"))
            })
            .expect("dry run of a create");
        assert_eq!(meta_str(&created, "resourceVersion"), None);
        assert_eq!(meta_str(&created, "uid").map(str::len), Some(36));
        assert_eq!(s.resource_version(), rv);
        assert!(feed.try_recv().is_err(), "no watch event");
        let stored = s.get(r, Some("kube-system"), "a").expect("a");
        assert_eq!(stored["data"]["k"], "1");
        assert!(s.get(r, Some("kube-system"), "b").is_err());
        // Its checks are the write's: a create in a missing namespace is refused.
        let e = s
            .dry_run_with(r, Some("nope"), "c", Sub::Main, Origin::Api, |_| {
                Ok(cm("c", "1"))
            })
            .expect_err("no namespace");
        assert_eq!(e.message, "namespaces \"nope\" not found");
    }

    #[test]
    fn stale_update_conflicts_and_noop_keeps_version() {
        let s = Store::new(100);
        let r = res("", "configmaps");
        let o = s
            .create(r, Some("kube-system"), cm("a", "1"), Origin::Api)
            .expect("create");
        let mut v = (*o).clone();
        v["data"]["k"] = json!("2");
        let o2 = s
            .update(
                r,
                Some("kube-system"),
                "a",
                v.clone(),
                Sub::Main,
                Origin::Api,
            )
            .expect("update");
        assert_eq!(object_rv(&o2), object_rv(&o) + 1);
        let e = s
            .update(r, Some("kube-system"), "a", v, Sub::Main, Origin::Api)
            .expect_err("stale");
        assert_eq!((e.code, e.reason), (409, "Conflict"));
        let same = s
            .update(
                r,
                Some("kube-system"),
                "a",
                (*o2).clone(),
                Sub::Main,
                Origin::Api,
            )
            .expect("noop");
        assert_eq!(object_rv(&same), object_rv(&o2));
    }

    #[test]
    fn status_subresource_and_generation() {
        let s = Store::new(100);
        let ds = res("apps", "daemonsets");
        let body = json!({"metadata": {"name": "cilium"}, "spec": {"x": 1},
            "status": {"numberReady": 3}});
        let o = s
            .create(ds, Some("kube-system"), body, Origin::Api)
            .expect("create");
        assert_eq!(o["status"]["numberReady"], 0, "create resets the status");
        assert_eq!(o["metadata"]["generation"], 1);
        // Main update: status ignored, spec change bumps generation.
        let mut v = (*o).clone();
        v["spec"]["x"] = json!(2);
        v["status"] = json!({"numberReady": 9});
        let o = s
            .update(ds, Some("kube-system"), "cilium", v, Sub::Main, Origin::Api)
            .expect("update");
        assert_eq!(o["status"]["numberReady"], 0);
        assert_eq!(o["metadata"]["generation"], 2);
        // Status update: only status changes.
        let mut v = (*o).clone();
        v["spec"]["x"] = json!(3);
        v["status"] = json!({"numberReady": 2});
        let o = s
            .update(
                ds,
                Some("kube-system"),
                "cilium",
                v,
                Sub::Status,
                Origin::Api,
            )
            .expect("status");
        assert_eq!(o["spec"]["x"], 2);
        assert_eq!(o["status"]["numberReady"], 2);
        assert_eq!(o["metadata"]["generation"], 2);
    }

    #[test]
    fn watch_history_expires_and_lists_stay_consistent() {
        let s = Store::new(5);
        let r = res("", "configmaps");
        for i in 0..10 {
            s.create(
                r,
                Some("kube-system"),
                cm(&format!("c{i}"), "x"),
                Origin::Api,
            )
            .expect("create");
        }
        let rv = s.resource_version();
        let e = s
            .watch(r, Some("kube-system"), WatchFrom::Version(1))
            .err()
            .expect("expired");
        assert_eq!((e.code, e.reason), (410, "Expired"));
        let w = s
            .watch(r, Some("kube-system"), WatchFrom::Version(rv - 2))
            .expect("resumable");
        assert_eq!(w.backlog.len(), 2);
        // Paged list, with writes between pages: the second page is as of the first's version.
        let opts = ListOpts {
            limit: Some(4),
            ..Default::default()
        };
        let p1 = s
            .list(r, Some("kube-system"), &Selectors::default(), &opts)
            .expect("page 1");
        assert_eq!(p1.items.len(), 4);
        assert_eq!(p1.remaining, Some(6));
        s.delete(
            r,
            Some("kube-system"),
            "c9",
            &DeleteOpts::default(),
            Origin::Api,
        )
        .expect("delete");
        s.create(r, Some("kube-system"), cm("c99", "x"), Origin::Api)
            .expect("create");
        let opts2 = ListOpts {
            limit: Some(100),
            continue_token: p1.continue_token.clone(),
            ..Default::default()
        };
        let p2 = s
            .list(r, Some("kube-system"), &Selectors::default(), &opts2)
            .expect("page 2");
        let names: Vec<&str> = p2
            .items
            .iter()
            .filter_map(|o| meta_str(o, "name"))
            .collect();
        assert_eq!(names, ["c4", "c5", "c6", "c7", "c8", "c9"]);
        assert_eq!(p2.resource_version, p1.resource_version);
        assert!(p2.continue_token.is_none());
        s.compact();
        let e = s
            .list(r, Some("kube-system"), &Selectors::default(), &opts2)
            .expect_err("compacted");
        assert_eq!(e.code, 410);
    }

    #[test]
    fn sim_api_apply_keeps_identity_and_status() {
        let s = Store::new(100);
        let mut rx = s.subscribe();
        let hr = json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "cilium", "namespace": "kube-system"},
            "spec": {"chart": {"spec": {"chart": "cilium"}}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let a = s.apply(hr.clone()).expect("apply");
        assert_eq!(a["status"]["conditions"][0]["status"], "True");
        let mut again = hr;
        again.as_object_mut().map(|m| m.remove("status"));
        again["spec"]["interval"] = json!("5m");
        let b = s.apply(again).expect("reapply");
        assert_eq!(b["metadata"]["uid"], a["metadata"]["uid"]);
        assert_eq!(b["metadata"]["generation"], 2);
        assert_eq!(b["status"], a["status"]);
        let r = ObjRef::new(
            "helm.toolkit.fluxcd.io/v2",
            "HelmRelease",
            Some("kube-system"),
            "cilium",
        );
        let c = s
            .patch_status(
                &r,
                json!({"conditions": [{"type": "Ready", "status": "False"}]}),
            )
            .expect("status");
        assert_eq!(c["status"]["conditions"][0]["status"], "False");
        assert_eq!(c["metadata"]["generation"], 2);
        let ev = rx.try_recv().expect("event");
        assert_eq!((ev.event, ev.origin), (EventType::Added, Origin::Sim));
        s.remove(&r).expect("remove");
        assert!(s.fetch(&r).expect("known kind").is_none());
        assert!(matches!(
            s.apply(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}})),
            Err(SimError::UnknownKind { .. })
        ));
    }

    #[test]
    fn deleting_a_namespace_deletes_its_objects() {
        let s = Store::new(100);
        let r = res("", "configmaps");
        s.create(r, Some("kube-public"), cm("a", "1"), Origin::Sim)
            .expect("create");
        s.delete(
            &RESOURCES[0],
            None,
            "kube-public",
            &DeleteOpts::default(),
            Origin::Api,
        )
        .expect("delete ns");
        assert!(s.get(r, Some("kube-public"), "a").is_err());
    }
}
