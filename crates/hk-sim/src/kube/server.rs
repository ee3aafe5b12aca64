//! The HTTP side of the simulated API server: TLS connections, bearer-token auth, routing,
//! the verbs (get, list, watch, create, update, patch, delete) on the store, the response
//! shapes the real server gives (lists with list metadata, chunked watch streams of JSON
//! lines, `Status` failures), and the request log.
//!
//! Owns: the accept loop and per-connection tasks (ended by the cancellation token), turning
//! each request into a store call and its result into a response, watch streaming
//! (history replay, label/field filtering with the ADDED/DELETED a selector change implies,
//! bookmarks, `timeoutSeconds`, the 410 `Expired` ERROR event), [`RequestLog`]; content
//! negotiation (JSON, PartialObjectMetadata, Tables), the two users (admin; read-only,
//! refused writes worded as RBAC) and their access reviews, Strict field validation, log
//! streaming, and the events.k8s.io view served from core Events.
//! Must not: change objects except through the store, or listen beyond the address given.
//!
//! One file (over 800 lines): routing, the verbs and watch streaming share the request context
//! (user, negotiation, log); the shapes it answers live in tables.rs, openapi.rs and proto.rs.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{json, Map, Value};
use tokio::net::TcpListener;
use tokio::sync::{broadcast, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::discovery;
use super::fields;
use super::patch::{self, PatchType};
use super::resources::ResourceType;
use super::route::{route, Query, Route, Target};
use super::select::{FieldSelector, LabelSelector, Selectors};
use super::status::ApiError;
use super::store::{
    DeleteOpts, EventType, ListOpts, Object, Origin, Store, StoreEvent, Sub, WatchFrom,
};
use super::tables;
use super::SimKubeConfig;

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// The largest request body accepted (the real server's limit).
const MAX_BODY: usize = 3 * 1024 * 1024;
/// How long a write waits before it fails while etcd has no quorum (etcd's own request
/// timeout is 5 s and the real server retries on top; shortened so a test or an operator
/// is not kept waiting, yet long enough to be a wait).
const NO_QUORUM_WRITE_WAIT: Duration = Duration::from_secs(2);
/// Records kept in the request log (the counters keep counting past it): ~3 MB at most, so
/// a demo left running for days does not grow by it.
const LOG_CAP: usize = 10_000;

/// One request, as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    pub method: String,
    pub path: String,
    pub query: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `discovery`,
    /// `unauthorized`, `unknown`.
    pub verb: &'static str,
    /// `pods`, `daemonsets.apps/status`, ... for object requests.
    pub resource: Option<String>,
    pub code: u16,
    /// Time to the response head (for a watch: to the start of the stream).
    pub micros: u64,
}

/// Every request the server answered (the last [`LOG_CAP`]), and a running total.
#[derive(Debug, Clone, Default)]
pub struct RequestLog {
    records: Arc<Mutex<VecDeque<RequestRecord>>>,
    total: Arc<AtomicU64>,
}

impl RequestLog {
    fn record(&self, r: RequestRecord) {
        self.total.fetch_add(1, Ordering::Relaxed);
        let mut g = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        if g.len() >= LOG_CAP {
            g.pop_front();
        }
        g.push_back(r);
    }

    /// Requests answered since start.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// The kept records, oldest first.
    pub fn records(&self) -> Vec<RequestRecord> {
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    /// How many kept records have this verb and resource (`pods`, `daemonsets.apps`, ...).
    pub fn count(&self, verb: &str, resource: &str) -> usize {
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|r| r.verb == verb && r.resource.as_deref() == Some(resource))
            .count()
    }

    /// Forget the kept records (the total keeps counting).
    pub fn clear(&self) {
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

pub(crate) struct ServerState {
    pub store: Store,
    pub token: String,
    pub readonly_token: String,
    /// The configured name; the read-only user is `NAME-readonly`.
    pub user_name: String,
    pub log: RequestLog,
    pub config: SimKubeConfig,
    pub addr: SocketAddr,
    pub cancel: CancellationToken,
}

/// Accept connections until cancelled; each connection is served on its own task.
pub(crate) async fn serve(listener: TcpListener, acceptor: TlsAcceptor, st: Arc<ServerState>) {
    loop {
        let accepted = tokio::select! {
            _ = st.cancel.cancelled() => break,
            a = listener.accept() => a,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                tracing::warn!("simulated API server {}: accept failed: {e}", st.addr);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let st = st.clone();
        tokio::spawn(async move {
            let cancel = st.cancel.clone();
            let tls = tokio::select! {
                _ = cancel.cancelled() => return,
                t = acceptor.accept(tcp) => match t {
                    Ok(t) => t,
                    Err(e) => {
                        tracing::debug!("simulated API server {}: TLS handshake: {e}", st.addr);
                        return;
                    }
                },
            };
            let svc = service_fn(move |req| {
                let st = st.clone();
                async move { Ok::<_, Infallible>(handle(st, req).await) }
            });
            let conn = http1::Builder::new().serve_connection(TokioIo::new(tls), svc);
            tokio::select! {
                _ = cancel.cancelled() => {}
                r = conn => {
                    if let Err(e) = r {
                        tracing::debug!("simulated API server: connection: {e}");
                    }
                }
            }
        });
    }
}

fn full(code: u16, body: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(body)).boxed());
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn json_response(code: u16, v: &Value) -> Response<Body> {
    full(code, serde_json::to_vec(v).unwrap_or_default())
}

fn error_response(e: &ApiError) -> Response<Body> {
    json_response(e.code, &e.to_status())
}

/// How objects are returned: whole, as `PartialObjectMetadata` (kube's metadata API), or
/// as a meta.k8s.io `Table` of that version (kubectl's `get`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Full,
    Metadata,
    Table(&'static str),
}

/// The first alternative of the Accept header this server can answer, in the client's
/// order (content negotiation); `None` when it can answer none of them.
fn negotiate(accept: &str) -> Option<Shape> {
    if accept.trim().is_empty() {
        return Some(Shape::Full);
    }
    accept.split(',').find_map(|alt| {
        let mut parts = alt.split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        let params: Vec<(&str, &str)> = parts.filter_map(|p| p.split_once('=')).collect();
        let param = |k: &str| params.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
        match media {
            "*/*" | "application/*" => Some(Shape::Full),
            "application/json" => match (param("as"), param("g"), param("v")) {
                (None, _, _) => Some(Shape::Full),
                (Some("PartialObjectMetadata" | "PartialObjectMetadataList"), _, _) => {
                    Some(Shape::Metadata)
                }
                (Some("Table"), Some("meta.k8s.io") | None, Some("v1") | None) => {
                    Some(Shape::Table("v1"))
                }
                (Some("Table"), Some("meta.k8s.io") | None, Some("v1beta1")) => {
                    Some(Shape::Table("v1beta1"))
                }
                _ => None,
            },
            _ => None,
        }
    })
}

fn partial(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({}))})
}

/// How a request's objects are written out: the shape negotiated, the `includeObject` of a
/// Table, and the conversion of a view served from another resource's objects.
#[derive(Clone, Copy)]
struct Render {
    /// The resource the client asked for (a view's, not its storage's).
    res: &'static ResourceType,
    shape: Shape,
    include: tables::Include,
    convert: Option<fn(&Value) -> Value>,
}

impl Render {
    /// The object as the client's resource version has it.
    fn view(&self, obj: &Value) -> Value {
        match self.convert {
            Some(f) => f(obj),
            None => obj.clone(),
        }
    }

    /// A Table row; the cells come from the stored object a view is converted from.
    fn row(&self, obj: &Value) -> Value {
        let version = match self.shape {
            Shape::Table(v) => v,
            _ => "v1",
        };
        let now = jiff::Timestamp::now();
        let mut row = tables::row(self.res, &self.view(obj), self.include, version, now);
        if self.convert.is_some() {
            row["cells"] = json!(tables::cells(self.res, obj, now));
        }
        row
    }

    /// One object, as a response body: whole, its metadata, or a one-row Table.
    fn one(&self, obj: &Value) -> Value {
        match self.shape {
            Shape::Full => self.view(obj),
            Shape::Metadata => partial(obj),
            Shape::Table(v) => tables::table(self.res, vec![self.row(obj)], true, rv_meta(obj), v),
        }
    }
}

fn rv_meta(obj: &Value) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert(
        "resourceVersion".into(),
        obj.pointer("/metadata/resourceVersion")
            .cloned()
            .unwrap_or_else(|| json!("")),
    );
    meta
}

async fn handle(st: Arc<ServerState>, req: Request<Incoming>) -> Response<Body> {
    let started = Instant::now();
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let query_text = req.uri().query().unwrap_or("").to_string();
    let bearer = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let user = match bearer {
        Some(t) if t == st.token => Some(User::Admin),
        Some(t) if t == st.readonly_token => Some(User::ReadOnly),
        _ => None,
    };
    let (verb, resource, resp) = match user {
        Some(u) => dispatch(&st, req, &path, &Query::parse(&query_text), u).await,
        None => (
            "unauthorized",
            None,
            error_response(&ApiError::unauthorized()),
        ),
    };
    st.log.record(RequestRecord {
        method,
        path,
        query: query_text,
        verb,
        resource,
        code: resp.status().as_u16(),
        micros: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
    });
    resp
}

/// Who a request comes from: the demo's admin (cluster-admin, as k3s' admin kubeconfig), or
/// its read-only user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum User {
    Admin,
    ReadOnly,
}

/// What the read-only user may do: what RBAC's read-only roles allow.
const READ_VERBS: [&str; 3] = ["get", "list", "watch"];

async fn dispatch(
    st: &Arc<ServerState>,
    req: Request<Incoming>,
    path: &str,
    q: &Query,
    user: User,
) -> (&'static str, Option<String>, Response<Body>) {
    let get = req.method() == Method::GET;
    let method = req.method().to_string();
    let doc = |v: Value| ("discovery", None, json_response(200, &v));
    let accept = req
        .headers()
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let routed = route(path);
    let shape = match (&routed, negotiate(&accept)) {
        (Route::Objects(_), Some(s)) => s,
        (_, Some(_)) if json_acceptable(&accept) => Shape::Full,
        _ => {
            let e = ApiError::not_simulated(406, &format!("a response as {accept}"));
            return ("unknown", None, error_response(&e));
        }
    };
    match routed {
        Route::Version if get => doc(discovery::version()),
        Route::CoreVersions if get => doc(discovery::core_versions(st.addr)),
        Route::Groups if get => doc(discovery::groups()),
        Route::Group(g) if get => doc(discovery::group(&g)),
        Route::ResourceList { group, version } if get => {
            doc(discovery::resource_list(&group, &version))
        }
        Route::Objects(t) => {
            let label = if t.status {
                format!("{}/status", t.res.qualified())
            } else {
                t.res.qualified()
            };
            if user == User::ReadOnly && req.method() != Method::GET {
                let verb = match (req.method().as_str(), t.name.is_some()) {
                    ("POST", _) => "create",
                    ("PUT", _) => "update",
                    ("PATCH", _) => "patch",
                    ("DELETE", true) => "delete",
                    ("DELETE", false) => "deletecollection",
                    _ => "unknown",
                };
                let who = format!("{}-readonly", st.user_name);
                let e = ApiError::forbidden(&t, &who, verb);
                return (verb, Some(label), error_response(&e));
            }
            // Without quorum etcd commits nothing: a write waits out etcd's request
            // timeout and fails as the real server's does (500, no reason, etcd's words).
            if req.method() != Method::GET {
                if let Some(why) = st.store.no_quorum() {
                    tracing::debug!("simulated API server {}: write refused: {why}", st.addr);
                    let verb = match req.method().as_str() {
                        "POST" => "create",
                        "PUT" => "update",
                        "PATCH" => "patch",
                        _ => "delete",
                    };
                    tokio::time::sleep(NO_QUORUM_WRITE_WAIT).await;
                    return (verb, Some(label), error_response(&ApiError::etcd_timeout()));
                }
            }
            let (verb, resp) = objects(st, req, t, q, shape).await;
            (verb, Some(label), resp)
        }
        Route::Health { endpoint, check } if get => {
            let quorum = st.store.no_quorum().is_none();
            match health(
                &endpoint,
                check.as_deref(),
                q.get("verbose").is_some(),
                quorum,
            ) {
                Some((code, text)) => ("health", None, text_response(code, text)),
                None => (
                    "unknown",
                    None,
                    error_response(&ApiError::not_simulated(404, &format!("GET {path}"))),
                ),
            }
        }
        Route::OpenApi(None) if get => doc(super::openapi::index()),
        Route::OpenApi(Some(gv)) if get => match super::openapi::group_version(&gv) {
            Some(d) => doc(d),
            None => (
                "unknown",
                None,
                error_response(&ApiError::not_simulated(404, &format!("GET {path}"))),
            ),
        },
        Route::Log { namespace, name } if get => (
            "get",
            Some("pods/log".into()),
            pod_log(st, &namespace, &name, q),
        ),
        Route::Review(kind) if req.method() == Method::POST => {
            // kubectl sends reviews as protobuf; the answer is JSON, which its Accept allows.
            let r = read_body(req)
                .await
                .and_then(|(ct, b)| decoded_body(&ct, &b));
            let resp = match r.and_then(|body| review(&kind, body, user)) {
                Ok(v) => json_response(201, &v),
                Err(e) => error_response(&e),
            };
            ("create", Some(format!("{kind}.authorization.k8s.io")), resp)
        }
        // 501, not 404: the real server has it, the simulation does not (ssh to the node).
        Route::PodUnsimulated(sub) => (
            "unknown",
            Some(sub.clone()),
            error_response(&ApiError::not_simulated(501, &sub)),
        ),
        Route::NotFound => (
            "unknown",
            None,
            error_response(&ApiError::not_simulated(404, &format!("{method} {path}"))),
        ),
        _ => (
            "unknown",
            None,
            error_response(&ApiError::not_simulated(405, &format!("{method} {path}"))),
        ),
    }
}

/// The query parameters of a log request the simulation honours.
/// (`timeout` bounds a short request on the real server too; a follow is long-running.)
const LOG_PARAMS: [&str; 8] = [
    "timeout",
    "container",
    "follow",
    "tailLines",
    "timestamps",
    "sinceSeconds",
    "pretty",
    "previous",
];

/// A container's log, as the kubelet serves it through the API server: its recent lines
/// (`tailLines`, `sinceSeconds`, `timestamps`), and with `follow` the new ones as they come
/// until the pod goes.
fn pod_log(st: &Arc<ServerState>, ns: &str, name: &str, q: &Query) -> Response<Body> {
    if let Some((k, v)) = q.pairs().find(|(k, v)| {
        !LOG_PARAMS.contains(k) || (*k == "previous" && !["true", "false"].contains(v))
    }) {
        return error_response(&ApiError::not_simulated(501, &format!("?{k}={v}")));
    }
    let Some(pods) = super::resources::by_kind("v1", "Pod") else {
        return error_response(&ApiError::internal("pods are not served"));
    };
    let pod = match st.store.get(pods, Some(ns), name) {
        Ok(p) => p,
        Err(e) => return error_response(&e),
    };
    let containers: Vec<String> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let container = match q.get("container") {
        Some(c) if containers.iter().any(|x| x == c) => c.to_string(),
        Some(c) => {
            return error_response(&ApiError::bad_request(format!(
                "container {c} is not valid for pod {name}"
            )))
        }
        None if containers.len() == 1 => containers[0].clone(),
        None => {
            return error_response(&ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                containers.join(" ")
            )))
        }
    };
    let number = |k: &str| -> Result<Option<i64>, ApiError> {
        q.get(k)
            .map(|v| {
                v.parse::<i64>()
                    .map_err(|_| ApiError::bad_request(format!("{k}: not a number: {v}")))
            })
            .transpose()
    };
    let (tail, since) = match (number("tailLines"), number("sinceSeconds")) {
        (Ok(t), Ok(s)) => (t, s),
        (Err(e), _) | (_, Err(e)) => return error_response(&e),
    };
    // The kubelet answers `previous` from the pod's status: only a container that has a
    // last terminated state has a previous log.
    let which = if q.flag("previous") {
        let terminated = pod
            .pointer("/status/containerStatuses")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["name"].as_str() == Some(&container)))
            .and_then(|c| c.pointer("/lastState/terminated"))
            .is_some();
        if !terminated {
            return error_response(&ApiError::bad_request(format!(
                "previous terminated container \"{container}\" in pod \"{name}\" not found"
            )));
        }
        super::logs::Instance::Previous
    } else {
        super::logs::Instance::Current
    };
    let stamps = q.flag("timestamps");
    let render = move |l: &super::logs::Line| -> Bytes {
        let mut t = String::new();
        if stamps {
            t.push_str(&l.at.strftime("%Y-%m-%dT%H:%M:%S.%fZ").to_string());
            t.push(' ');
        }
        t.push_str(&l.text);
        t.push('\n');
        Bytes::from(t)
    };
    let logs = st.store.logs().clone();
    // Subscribed before reading the kept lines: nothing written in between is lost.
    let live = logs.follow();
    let (mut lines, instance, upto) =
        logs.lines(ns, name, &container, which)
            .unwrap_or((Vec::new(), 0, 0));
    if let Some(s) = since {
        let from = jiff::Timestamp::now().as_second() - s;
        lines.retain(|l| l.at.as_second() >= from);
    }
    if let Some(n) = tail.and_then(|n| usize::try_from(n).ok()) {
        let skip = lines.len().saturating_sub(n);
        lines.drain(..skip);
    }
    let text_head = |mut r: Response<Body>| {
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        r
    };
    // A terminated container writes nothing more: following its log ends at once, as the
    // kubelet's follow of an exited container does.
    if !q.flag("follow") || which == super::logs::Instance::Previous {
        let body: Vec<u8> = lines.iter().flat_map(|l| render(l).to_vec()).collect();
        return text_head(full(200, body));
    }
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let mut events = st.store.subscribe();
    let cancel = st.cancel.clone();
    let (ns, name) = (ns.to_string(), name.to_string());
    tokio::spawn(async move {
        let mut live = live;
        for l in &lines {
            if tx.send(render(l)).await.is_err() {
                return;
            }
        }
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tx.closed() => return,
                l = live.recv() => match l {
                    Ok(l) if l.seq > upto && l.namespace == ns && l.pod == name
                        && l.container == container => {
                        // The followed container exited and a new one runs: the kubelet
                        // ends the stream (kubectl logs -f returns).
                        if l.instance != instance {
                            return;
                        }
                        if tx.send(render(&l)).await.is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    // A follower too slow for the feed is ended (kubectl reconnects).
                    Err(_) => return,
                },
                e = events.recv() => match e {
                    // The pod is gone: so is its log stream, as on a real node.
                    Ok(e) if e.event == EventType::Deleted && e.resource.kind == "Pod"
                        && e.namespace.as_deref() == Some(ns.as_str()) && e.name == name => return,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                },
            }
        }
    });
    text_head(streaming(rx))
}

/// The checks each health endpoint runs on a k3s server (the real server's names).
fn health_checks(endpoint: &str) -> &'static [&'static str] {
    match endpoint {
        "readyz" => &[
            "ping",
            "log",
            "etcd",
            "etcd-readiness",
            "informer-sync",
            "shutdown",
        ],
        _ => &["ping", "log", "etcd"],
    }
}

/// Whether a health check passes: the etcd ones fail while etcd has no quorum.
fn check_passes(check: &str, quorum: bool) -> bool {
    quorum || !check.starts_with("etcd")
}

/// `/healthz` `ok`; `?verbose` lists each check as the real server does; `/readyz/etcd`
/// one check. Without quorum (`quorum` false) the etcd checks fail as the real server's
/// do: one check alone answers 500 `internal server error: ...` (the healthz handler of a
/// single check), the whole endpoint 500 listing every check, the failed ones `[-]etcd
/// failed: reason withheld`, verbose or not. None for a check the simulation does not have.
fn health(
    endpoint: &str,
    check: Option<&str>,
    verbose: bool,
    quorum: bool,
) -> Option<(u16, String)> {
    let checks = health_checks(endpoint);
    if let Some(c) = check {
        if !checks.contains(&c) {
            return None;
        }
        return Some(if check_passes(c, quorum) {
            (200, "ok".to_string())
        } else {
            (
                500,
                "internal server error: etcd: context deadline exceeded\n".to_string(),
            )
        });
    }
    let failing = checks.iter().any(|c| !check_passes(c, quorum));
    if !verbose && !failing {
        return Some((200, "ok".into()));
    }
    let mut t: String = checks
        .iter()
        .map(|c| {
            if check_passes(c, quorum) {
                format!("[+]{c} ok\n")
            } else {
                format!("[-]{c} failed: reason withheld\n")
            }
        })
        .collect();
    let (code, word) = if failing {
        (500, "failed")
    } else {
        (200, "passed")
    };
    t.push_str(&format!("{endpoint} check {word}\n"));
    Some((code, t))
}

fn text_response(code: u16, text: String) -> Response<Body> {
    let mut r = full(code, text.into_bytes());
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// A SelfSubjectAccessReview or SelfSubjectRulesReview answered for the user: the admin is
/// cluster-admin (`system:masters`, as k3s' admin kubeconfig): everything is allowed; the
/// read-only user may get, list and watch.
fn review_kind(plural: &str) -> &'static str {
    if plural == "selfsubjectaccessreviews" {
        "SelfSubjectAccessReview"
    } else {
        "SelfSubjectRulesReview"
    }
}

fn review(kind: &str, body: Value, user: User) -> Result<Value, ApiError> {
    let want_kind = review_kind(kind);
    if body.get("kind").and_then(Value::as_str) != Some(want_kind) {
        return Err(ApiError::bad_request(format!(
            "the body is not a {want_kind} (kind {:?})",
            body.get("kind")
        )));
    }
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    let status = match (kind, user) {
        ("selfsubjectaccessreviews", User::Admin) => json!({"allowed": true}),
        ("selfsubjectaccessreviews", User::ReadOnly) => {
            let verb = spec
                .pointer("/resourceAttributes/verb")
                .or_else(|| spec.pointer("/nonResourceAttributes/verb"))
                .and_then(Value::as_str)
                .unwrap_or("");
            if READ_VERBS.contains(&verb) {
                json!({"allowed": true, "reason": "the demo's read-only user may get, list and watch"})
            } else {
                json!({"allowed": false})
            }
        }
        (_, User::Admin) => json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false
        }),
        (_, User::ReadOnly) => json!({
            "resourceRules": [
                {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
                {"verbs": READ_VERBS, "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/api", "/api/*",
                "/apis", "/apis/*", "/healthz", "/livez", "/readyz", "/version", "/version/"]}],
            "incomplete": false
        }),
    };
    Ok(json!({
        "kind": want_kind,
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": null},
        "spec": spec,
        "status": status
    }))
}

/// Whether one of the Accept header's alternatives is plain JSON (or a metadata-only
/// view, or anything): then answering JSON is what content negotiation allows, even when
/// the client preferred protobuf or a Table. Otherwise the simulation cannot answer.
fn json_acceptable(accept: &str) -> bool {
    if accept.trim().is_empty() {
        return true;
    }
    accept.split(',').any(|alt| {
        let mut parts = alt.split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        let as_kind = parts.find_map(|p| p.strip_prefix("as="));
        match media {
            "*/*" | "application/*" => true,
            "application/json" => {
                matches!(
                    as_kind,
                    None | Some("PartialObjectMetadata" | "PartialObjectMetadataList")
                )
            }
            _ => false,
        }
    })
}

/// Query parameters this server honours; anything else is not simulated (a `dryRun`
/// that wrote, or a strict validation that was skipped, would be a lie).
const KNOWN_PARAMS: [&str; 16] = [
    "includeObject",
    "labelSelector",
    "fieldSelector",
    "watch",
    "resourceVersion",
    "resourceVersionMatch",
    "timeoutSeconds",
    "allowWatchBookmarks",
    "limit",
    "continue",
    "sendInitialEvents",
    "gracePeriodSeconds",
    "propagationPolicy",
    "fieldManager",
    "pretty",
    "timeout",
];

/// `strict_checked`: a write whose body the server checks field by field, so Strict field
/// validation holds. `apply`: a server-side apply, where `force` means what it says (field
/// ownership is modelled, `fields`). `patch`: a PATCH, whose `dryRun=All` is modelled (the
/// store answers what it would store and stores nothing: `flux diff`'s server-side dry-run
/// apply); a dry run of any other write is not.
fn unmodelled_param(q: &Query, strict_checked: bool, apply: bool, patch: bool) -> Option<String> {
    q.pairs().find_map(|(k, v)| {
        let known = KNOWN_PARAMS.contains(&k)
            || (k == "fieldValidation" && v == "Ignore")
            || (k == "fieldValidation" && v == "Strict" && strict_checked)
            || (k == "force" && (v == "true" || v == "false") && apply)
            || (k == "dryRun" && v == "All" && patch);
        (!known).then(|| format!("?{k}={v}"))
    })
}

/// The field manager of a write: `fieldManager`, else the User-Agent's prefix (the real
/// server's default).
fn field_manager(q: &Query, user_agent: &str) -> String {
    match q.get("fieldManager") {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => fields::manager_from_user_agent(user_agent),
    }
}

/// The real server's refusal of a `PatchOptions` it cannot take.
fn invalid_patch_options(field: &str, detail: &str) -> ApiError {
    ApiError {
        code: 422,
        reason: "Invalid",
        message: format!("PatchOptions.meta.k8s.io \"\" is invalid: {field}: {detail}"),
        details: None,
    }
}

async fn read_body(req: Request<Incoming>) -> Result<(String, Vec<u8>), ApiError> {
    let ct = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let collected = Limited::new(req.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|_| ApiError::too_large())?;
    Ok((ct, collected.to_bytes().to_vec()))
}

/// Strict field validation of a body (`raw`: its JSON bytes, for duplicate keys): unknown
/// fields and duplicates refused as the real server words it.
fn strict_check(
    res: &'static ResourceType,
    v: &Value,
    raw: Option<&[u8]>,
    whole: bool,
) -> Result<(), ApiError> {
    let mut problems: Vec<String> = raw
        .and_then(super::openapi::duplicate_field)
        .map(|d| format!("json: {d}"))
        .into_iter()
        .collect();
    problems.extend(
        super::openapi::unknown_fields_of(res, v)
            .into_iter()
            .map(|f| format!("unknown field \"{f}\"")),
    );
    if problems.is_empty() {
        return Ok(());
    }
    let head = if whole {
        format!(
            "{} in version \"{}\" cannot be handled as a {}: ",
            res.kind, res.version, res.kind
        )
    } else {
        String::new()
    };
    Err(ApiError::bad_request(format!(
        "{head}strict decoding error: {}",
        problems.join(", ")
    )))
}

/// Strict validation of a patch: the object it would make (or, creating, the body).
fn strict_patch(
    store: &Store,
    res: &'static ResourceType,
    ns: Option<&str>,
    name: &str,
    kind: PatchType,
    p: &Value,
    raw: &[u8],
) -> Result<(), ApiError> {
    let raw = (kind != PatchType::Apply).then_some(raw);
    match store.get(res, ns, name) {
        Ok(current) => {
            let mut doc = (*current).clone();
            patch::apply(kind, &mut doc, p)?;
            strict_check(res, &doc, raw, false)
        }
        Err(_) => strict_check(res, p, raw, false),
    }
}

/// A JSON body, or a protobuf one `proto` can read entirely (415 naming what it cannot).
fn decoded_body(content_type: &str, bytes: &[u8]) -> Result<Value, ApiError> {
    if content_type.contains("protobuf") {
        return super::proto::decode(bytes).map_err(|what| {
            ApiError::not_simulated(415, &format!("a request body as {content_type} ({what})"))
        });
    }
    json_body(bytes)
}

fn json_body(bytes: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::bad_request(format!("the body of the request is not valid JSON: {e}"))
    })
}

fn selectors(res: &ResourceType, q: &Query) -> Result<Selectors, ApiError> {
    Ok(Selectors {
        labels: LabelSelector::parse(q.get("labelSelector").unwrap_or(""))
            .map_err(|e| ApiError::bad_request(e.to_string()))?,
        fields: FieldSelector::parse(q.get("fieldSelector").unwrap_or(""), res)
            .map_err(|e| ApiError::bad_request(e.to_string()))?,
    })
}

/// The resource whose objects a view is made of, and the conversion (events.k8s.io/v1
/// Events are the core/v1 ones, converted).
type Convert = Option<fn(&Value) -> Value>;

fn storage_of(res: &'static ResourceType) -> (&'static ResourceType, Convert) {
    if res.group == "events.k8s.io" && res.kind == "Event" {
        if let Some(core) = super::resources::by_kind("v1", "Event") {
            return (core, Some(super::events::to_events_v1));
        }
    }
    (res, None)
}

async fn objects(
    st: &Arc<ServerState>,
    req: Request<Incoming>,
    t: Target,
    q: &Query,
    shape: Shape,
) -> (&'static str, Response<Body>) {
    // Strict field validation is done for every write with a body (`strict_check`).
    let strict = q.get("fieldValidation") == Some("Strict");
    let writes = matches!(req.method(), &Method::POST | &Method::PUT | &Method::PATCH);
    let is_apply = req.method() == Method::PATCH
        && req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("application/apply-patch"));
    if req.method() == Method::PATCH && !is_apply && q.get("force").is_some() {
        let e = invalid_patch_options(
            "force",
            "Forbidden: may not be specified for non-apply patch",
        );
        return ("patch", error_response(&e));
    }
    let is_patch = req.method() == Method::PATCH;
    if let Some(p) = unmodelled_param(q, writes, is_apply, is_patch) {
        return ("unknown", error_response(&ApiError::not_simulated(501, &p)));
    }
    let user_agent = req
        .headers()
        .get(USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let manager = field_manager(q, &user_agent);
    // Protobuf bodies are read where they can be (creates and updates of the kinds
    // `proto` knows); elsewhere a protobuf or CBOR body is refused, never guessed at.
    let readable = matches!(req.method(), &Method::POST | &Method::PUT);
    if let Some(ct) = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .filter(|ct| ct.contains("cbor") || (ct.contains("protobuf") && !readable))
    {
        let e = ApiError::not_simulated(415, &format!("a request body as {ct}"));
        return ("unknown", error_response(&e));
    }
    let method = req.method().clone();
    let include = match tables::Include::parse(q.get("includeObject")) {
        Ok(i) => i,
        Err(e) => {
            return (
                "unknown",
                error_response(&ApiError::bad_request(e.to_string())),
            )
        }
    };
    // A Table answers reads; a write answers with the object.
    let shape = match shape {
        Shape::Table(_) if method != Method::GET => Shape::Full,
        s => s,
    };
    let (res, convert) = storage_of(t.res);
    if t.res.read_only && method != Method::GET {
        let what = if std::ptr::eq(res, t.res) {
            format!(
                "{method} of {} (served for reading only: the simulation serves the kinds it has built in)",
                t.res.qualified()
            )
        } else {
            format!(
                "{method} of {} (served for reading only; write {} instead)",
                t.res.qualified(),
                res.qualified()
            )
        };
        return (
            "unknown",
            error_response(&ApiError::not_simulated(405, &what)),
        );
    }
    let render = Render {
        res: t.res,
        shape,
        include,
        convert,
    };
    let sub = if t.status { Sub::Status } else { Sub::Main };
    let ns = t.namespace.as_deref();
    let store = &st.store;
    let one = |r: Result<Object, ApiError>, code: u16| match r {
        Ok(o) => json_response(code, &render.one(&o)),
        Err(e) => error_response(&e),
    };
    match (&method, t.name.as_deref()) {
        (&Method::GET, Some(name)) => ("get", one(store.get(res, ns, name), 200)),
        (&Method::GET, None) if q.flag("watch") => match selectors(t.res, q) {
            Ok(sel) => ("watch", watch(st, res, ns, sel, q, render)),
            Err(e) => ("watch", error_response(&e)),
        },
        (&Method::GET, None) => ("list", list(store, res, ns, q, render)),
        (&Method::POST, None) => {
            let r = match read_body(req).await.and_then(|(ct, b)| {
                let v = decoded_body(&ct, &b)?;
                if strict && !ct.contains("protobuf") {
                    strict_check(res, &v, Some(&b), true)?;
                }
                Ok(v)
            }) {
                Ok(mut body) => fields::track_update(res, Sub::Main, None, &mut body, &manager)
                    .and_then(|()| store.create(res, ns, body, Origin::Api)),
                Err(e) => Err(e),
            };
            ("create", one(r, 201))
        }
        (&Method::PUT, Some(name)) => {
            let r = match read_body(req).await.and_then(|(ct, b)| {
                let v = decoded_body(&ct, &b)?;
                if strict && !ct.contains("protobuf") {
                    strict_check(res, &v, Some(&b), true)?;
                }
                Ok(v)
            }) {
                Ok(body) => update_tracked(store, res, ns, name, body, sub, &manager),
                Err(e) => Err(e),
            };
            ("update", one(r, 200))
        }
        (&Method::PATCH, Some(name)) => {
            let r = match read_body(req).await {
                Ok((ct, b)) => match PatchType::from_content_type(&ct) {
                    None => Err(ApiError::unsupported_media_type(&ct, patch::ACCEPTED)),
                    Some(kind) => patch::parse_body(kind, &b).and_then(|p| {
                        if strict {
                            strict_patch(store, res, ns, name, kind, &p, &b)?;
                        }
                        let how = Write {
                            manager: &manager,
                            force: q.get("force") == Some("true"),
                            dry_run: q.get("dryRun") == Some("All"),
                        };
                        patch_tracked(store, res, (ns, name), kind, p, sub, how)
                    }),
                },
                Err(e) => Err(e),
            };
            ("patch", one(r, 200))
        }
        (&Method::DELETE, Some(name)) if !t.status => {
            let r = match read_body(req).await {
                Ok((_, b)) => match unmodelled_delete_option(&b) {
                    Some(what) => Err(ApiError::not_simulated(501, &what)),
                    None => {
                        let pre = delete_opts(&b, q);
                        store.delete(res, ns, name, &pre, Origin::Api)
                    }
                },
                Err(e) => Err(e),
            };
            ("delete", one(r, 200))
        }
        _ => {
            let what = format!(
                "{method} on {}{}",
                t.res.qualified(),
                if t.name.is_some() {
                    " (one object)"
                } else {
                    " (the collection)"
                }
            );
            (
                "unknown",
                error_response(&ApiError::not_simulated(405, &what)),
            )
        }
    }
}

/// A replace (PUT) of an object or its status: an Update by `manager` in field ownership.
fn update_tracked(
    store: &Store,
    res: &'static ResourceType,
    ns: Option<&str>,
    name: &str,
    body: Value,
    sub: Sub,
    manager: &str,
) -> Result<Object, ApiError> {
    if res.custom && body.pointer("/metadata/resourceVersion").is_none() {
        // Custom resources do not allow unconditional updates.
        return Err(ApiError::invalid(
            res,
            name,
            "metadata.resourceVersion",
            "Invalid value: 0: must be specified for an update",
        ));
    }
    store.write_with(res, ns, name, sub, Origin::Api, |live| {
        let Some(live) = live else {
            return Err(ApiError::not_found(res, name));
        };
        let mut new = body;
        fields::track_update(res, sub, Some(live), &mut new, manager)?;
        Ok(new)
    })
}

/// How a PATCH writes: its field manager, `force`, and whether it is a dry run.
struct Write<'a> {
    manager: &'a str,
    force: bool,
    dry_run: bool,
}

/// The store's write of `f`'s object, or with `dry_run` what it would store (nothing is).
fn store_write(
    store: &Store,
    dry_run: bool,
    res: &'static ResourceType,
    (ns, name): (Option<&str>, &str),
    sub: Sub,
    f: impl FnOnce(Option<&Value>) -> Result<Value, ApiError>,
) -> Result<Object, ApiError> {
    if dry_run {
        store.dry_run_with(res, ns, name, sub, Origin::Api, f)
    } else {
        store.write_with(res, ns, name, sub, Origin::Api, f)
    }
}

/// A PATCH: a server-side apply (field ownership, conflicts, `force`), or another patch
/// type applied to the live object as an Update by the manager. A server-side apply of a
/// missing object creates it. A dry run goes through every check and stores nothing.
fn patch_tracked(
    store: &Store,
    res: &'static ResourceType,
    (ns, name): (Option<&str>, &str),
    kind: PatchType,
    p: Value,
    sub: Sub,
    how: Write<'_>,
) -> Result<Object, ApiError> {
    let Write {
        manager,
        force,
        dry_run,
    } = how;
    if res.custom && kind == PatchType::Strategic {
        return Err(ApiError::unsupported_media_type(
            "application/strategic-merge-patch+json",
            "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        ));
    }
    if kind == PatchType::Apply {
        if manager.is_empty() {
            return Err(invalid_patch_options(
                "fieldManager",
                "Required value: is required for apply patch",
            ));
        }
        let mut config = p;
        if !config.is_object() {
            return Err(ApiError::bad_request(
                "error decoding YAML apply patch: the configuration is not an object",
            ));
        }
        if config.pointer("/metadata/name").is_none() {
            config["metadata"]["name"] = json!(name);
        }
        let opts = fields::ApplyOpts {
            manager,
            force,
            strict_lists: true,
        };
        return store_write(store, dry_run, res, (ns, name), sub, |live| {
            if live.is_none() && sub == Sub::Status {
                return Err(ApiError::not_found(res, name));
            }
            fields::track_apply(res, sub, live, &config, opts)
        });
    }
    store_write(store, dry_run, res, (ns, name), sub, |live| {
        let Some(live) = live else {
            return Err(ApiError::not_found(res, name));
        };
        let mut doc = live.clone();
        patch::apply(kind, &mut doc, &p)?;
        fields::track_update(res, sub, Some(live), &mut doc, manager)?;
        Ok(doc)
    })
}

/// A DeleteOptions field the store does not honour (kubectl sends `--dry-run=server` of a
/// delete in the body, not the query): a dry run that deleted would be the worst lie.
fn unmodelled_delete_option(body: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let dry = v
        .get("dryRun")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty());
    if let Some(d) = dry {
        let d: Vec<String> = d
            .iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect();
        return Some(format!("DeleteOptions.dryRun={}", d.join(",")));
    }
    v.get("orphanDependents")
        .filter(|o| !o.is_null())
        .map(|o| format!("DeleteOptions.orphanDependents={o}"))
}

/// `DeleteOptions` (preconditions, grace period) from a delete body, or from the query.
fn delete_opts(body: &[u8], q: &Query) -> DeleteOpts {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let p = v.get("preconditions");
    let s = |f: &str| {
        p.and_then(|p| p.get(f))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    DeleteOpts {
        resource_version: s("resourceVersion"),
        uid: s("uid"),
        grace_period_seconds: v
            .get("gracePeriodSeconds")
            .and_then(Value::as_i64)
            .or_else(|| q.get("gracePeriodSeconds").and_then(|g| g.parse().ok())),
    }
}

/// An item of a list: the object without apiVersion/kind for built-in kinds, as the real
/// server lists them; custom resources keep theirs.
struct Item<'a> {
    obj: &'a Value,
    keep_type: bool,
}

impl Serialize for Item<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.obj {
            Value::Object(m) if !self.keep_type => {
                let mut map = s.serialize_map(None)?;
                for (k, v) in m {
                    if k != "apiVersion" && k != "kind" {
                        map.serialize_entry(k, v)?;
                    }
                }
                map.end()
            }
            other => other.serialize(s),
        }
    }
}

struct Items<'a> {
    items: &'a [Object],
    keep_type: bool,
    render: Render,
}

impl Serialize for Items<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.items.len()))?;
        for o in self.items {
            match (self.render.shape, self.render.convert) {
                (Shape::Full, None) => seq.serialize_element(&Item {
                    obj: o,
                    keep_type: self.keep_type,
                })?,
                (Shape::Full, Some(f)) => seq.serialize_element(&Item {
                    obj: &f(o),
                    keep_type: self.keep_type,
                })?,
                (Shape::Metadata, _) => seq.serialize_element(&partial(o))?,
                (Shape::Table(_), _) => seq.serialize_element(&self.render.row(o))?,
            }
        }
        seq.end()
    }
}

fn list(
    store: &Store,
    res: &'static ResourceType,
    ns: Option<&str>,
    q: &Query,
    render: Render,
) -> Response<Body> {
    let sel = match selectors(render.res, q) {
        Ok(s) => s,
        Err(e) => return error_response(&e),
    };
    let limit = q.get("limit").and_then(|l| l.parse::<usize>().ok());
    let opts = ListOpts {
        limit,
        continue_token: q.get("continue").map(str::to_string),
        resource_version: q.get("resourceVersion").map(str::to_string),
        exact: q.get("resourceVersionMatch") == Some("Exact"),
    };
    let page = match store.list(res, ns, &sel, &opts) {
        Ok(p) => p,
        Err(e) => return error_response(&e),
    };
    let mut meta = Map::new();
    meta.insert(
        "resourceVersion".into(),
        json!(page.resource_version.to_string()),
    );
    if let Some(c) = &page.continue_token {
        meta.insert("continue".into(), json!(c));
    }
    if let Some(n) = page.remaining {
        meta.insert("remainingItemCount".into(), json!(n));
    }
    let (kind, api_version) = match render.shape {
        Shape::Full => (render.res.list_kind(), render.res.api_version()),
        Shape::Metadata => (
            "PartialObjectMetadataList".to_string(),
            "meta.k8s.io/v1".to_string(),
        ),
        Shape::Table(v) => ("Table".to_string(), format!("meta.k8s.io/{v}")),
    };
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct ListDoc<'a> {
        kind: String,
        api_version: String,
        metadata: Map<String, Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        column_definitions: Option<Vec<Value>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        items: Option<Items<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        rows: Option<Items<'a>>,
    }
    let table = matches!(render.shape, Shape::Table(_));
    let items = Items {
        items: &page.items,
        keep_type: render.res.custom,
        render,
    };
    let (items, rows) = if table {
        (None, Some(items))
    } else {
        (Some(items), None)
    };
    let doc = ListDoc {
        kind,
        api_version,
        metadata: meta,
        column_definitions: table.then(|| tables::columns(render.res)),
        items,
        rows,
    };
    match serde_json::to_vec(&doc) {
        Ok(b) => full(200, b),
        Err(e) => error_response(&ApiError::internal(format!("encoding the list: {e}"))),
    }
}

/// One watch-event line: `{"type":...,"object":...}\n`.
fn event_line(kind: &str, obj: &Value) -> Bytes {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    if serde_json::to_writer(&mut out, obj).is_err() {
        out.extend_from_slice(b"null");
    }
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

fn bookmark(res: &ResourceType, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = Map::new();
    meta.insert("resourceVersion".into(), json!(rv.to_string()));
    if initial_end {
        meta.insert(
            "annotations".into(),
            json!({"k8s.io/initial-events-end": "true"}),
        );
    }
    event_line(
        "BOOKMARK",
        &json!({"kind": res.kind, "apiVersion": res.api_version(), "metadata": meta}),
    )
}

/// What a watcher with `sel` sees of a change: the selector turns a MODIFIED into ADDED
/// (starts matching) or DELETED (stops matching), as the real watch cache does.
fn visible(ev: &StoreEvent, sel: &Selectors) -> Option<(EventType, Object)> {
    let now = sel.matches(&ev.object);
    let before = ev.prev.as_ref().is_some_and(|p| sel.matches(p));
    match ev.event {
        EventType::Added => now.then(|| (EventType::Added, ev.object.clone())),
        EventType::Deleted => (now || before).then(|| (EventType::Deleted, ev.object.clone())),
        EventType::Modified => match (before, now) {
            (true, true) => Some((EventType::Modified, ev.object.clone())),
            (false, true) => Some((EventType::Added, ev.object.clone())),
            (true, false) => {
                let mut last = ev.prev.as_deref().cloned().unwrap_or(Value::Null);
                if let Some(Value::Object(m)) = last.get_mut("metadata") {
                    m.insert(
                        "resourceVersion".into(),
                        json!(ev.resource_version.to_string()),
                    );
                }
                Some((EventType::Deleted, Arc::new(last)))
            }
            (false, false) => None,
        },
    }
}

fn streaming(rx: mpsc::Receiver<Bytes>) -> Response<Body> {
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    let mut r = Response::new(StreamBody::new(stream).boxed());
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

struct WatchSpec {
    res: &'static ResourceType,
    ns: Option<String>,
    sel: Selectors,
    render: Render,
    bookmarks: bool,
    initial_end: bool,
    timeout: Duration,
    bookmark_every: Duration,
}

fn watch(
    st: &Arc<ServerState>,
    res: &'static ResourceType,
    ns: Option<&str>,
    sel: Selectors,
    q: &Query,
    render: Render,
) -> Response<Body> {
    let rv = q.get("resourceVersion").unwrap_or("");
    let send_initial = q.get("sendInitialEvents").map(|v| v == "true");
    let from = match (rv, send_initial) {
        (_, Some(true)) => WatchFrom::Now { initial: true },
        ("" | "0", Some(false)) => WatchFrom::Now { initial: false },
        ("" | "0", None) => WatchFrom::Now { initial: true },
        (v, _) => match v.parse::<u64>() {
            Ok(n) => WatchFrom::Version(n),
            Err(_) => {
                return error_response(&ApiError::bad_request(format!(
                    "invalid resource version: {v}"
                )))
            }
        },
    };
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let start = match st.store.watch(res, ns, from) {
        Ok(s) => s,
        Err(e) if e.code == 410 => {
            // The real server answers 200 and sends the failure as the stream's one event.
            let _ = tx.try_send(event_line("ERROR", &e.to_status()));
            return streaming(rx);
        }
        Err(e) => return error_response(&e),
    };
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .filter(|t| *t > 0)
        .map(Duration::from_secs)
        .unwrap_or(st.config.default_watch_timeout);
    let spec = WatchSpec {
        res,
        ns: ns.map(str::to_string),
        sel,
        render,
        bookmarks: q.flag("allowWatchBookmarks"),
        initial_end: send_initial == Some(true),
        timeout,
        bookmark_every: st.config.bookmark_interval,
    };
    let cancel = st.cancel.clone();
    tokio::spawn(run_watch(spec, start, tx, cancel));
    streaming(rx)
}

async fn run_watch(
    spec: WatchSpec,
    start: super::store::WatchStart,
    tx: mpsc::Sender<Bytes>,
    cancel: CancellationToken,
) {
    let started = tokio::time::Instant::now();
    let deadline = started + spec.timeout;
    let pre_timeout = deadline.checked_sub(Duration::from_secs(2));
    let next_bookmark = |now: tokio::time::Instant| {
        let periodic = now + spec.bookmark_every;
        match pre_timeout {
            Some(p) if p > now && p < periodic => p,
            _ => periodic,
        }
    };
    let rid = spec.res.id();
    // A Table watch sends the column definitions with its first event only, as the real
    // server's embedded encoder does.
    let mut headers = true;
    let mut line = |kind: EventType, obj: &Object| match spec.render.shape {
        Shape::Full if spec.render.convert.is_none() => event_line(kind.as_str(), obj),
        Shape::Full => event_line(kind.as_str(), &spec.render.view(obj)),
        Shape::Metadata => event_line(kind.as_str(), &partial(obj)),
        Shape::Table(v) => {
            let t = tables::table(
                spec.render.res,
                vec![spec.render.row(obj)],
                headers,
                rv_meta(obj),
                v,
            );
            headers = false;
            event_line(kind.as_str(), &t)
        }
    };
    for ev in &start.backlog {
        if let Some((kind, obj)) = visible(ev, &spec.sel) {
            if tx.send(line(kind, &obj)).await.is_err() {
                return;
            }
        }
    }
    let mut seen = start.resource_version;
    if spec.initial_end && spec.bookmarks && tx.send(bookmark(spec.res, seen, true)).await.is_err()
    {
        return;
    }
    let mut live = start.live;
    let mut bookmark_at = next_bookmark(started);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tx.closed() => return,
            _ = tokio::time::sleep_until(deadline) => return,
            _ = tokio::time::sleep_until(bookmark_at), if spec.bookmarks => {
                if tx.send(bookmark(spec.res, seen, false)).await.is_err() {
                    return;
                }
                bookmark_at = next_bookmark(tokio::time::Instant::now());
            }
            r = live.recv() => match r {
                Ok(ev) => {
                    if ev.resource_version <= seen {
                        continue;
                    }
                    seen = ev.resource_version;
                    let in_scope = ev.resource.id() == rid
                        && spec.ns.as_deref().is_none_or(|n| ev.namespace.as_deref() == Some(n));
                    if !in_scope {
                        continue;
                    }
                    if let Some((kind, obj)) = visible(&ev, &spec.sel) {
                        if tx.send(line(kind, &obj)).await.is_err() {
                            return;
                        }
                    }
                }
                // A watcher too slow for the broadcast is ended, like the real server ends a
                // blocked watcher; the client resumes from its last version.
                Err(broadcast::error::RecvError::Lagged(_)) => return,
                Err(broadcast::error::RecvError::Closed) => return,
            },
        }
    }
}
