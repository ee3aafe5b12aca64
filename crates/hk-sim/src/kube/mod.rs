//! The simulated Kubernetes API server: an embedded HTTPS server on a loopback address that
//! the console's real kube client talks to, serving real Kubernetes JSON from an in-memory
//! store the simulation drives.
//!
//! Owns: starting and stopping the server ([`SimKube::start`], shutdown on drop), its
//! throwaway CA and bearer token, the kubeconfig that reaches it ([`SimKube::kubeconfig_yaml`],
//! [`SimKube::write_kubeconfig`]), and the handles the simulation and tests use: the
//! [`Store`] (state and its change feed) and the [`RequestLog`].
//! Must not: listen on anything but the loopback address it is given (a non-loopback
//! address is refused), or persist anything but the kubeconfig it is asked to write.
//!
//! What is served (what hk-console's client and an operator's kubectl use): core/v1
//! namespaces, nodes, pods (and their `log`), configmaps, events, services;
//! discovery.k8s.io/v1 endpointslices; events.k8s.io/v1 events (a read-only view of the core
//! ones); apps/v1 daemonsets; coordination.k8s.io/v1 leases; helm.toolkit.fluxcd.io/v2
//! helmreleases; kustomize.toolkit.fluxcd.io/v1 kustomizations; apiextensions.k8s.io/v1
//! customresourcedefinitions of those two (read-only); server-side Tables
//! (`tables`), OpenAPI v3 documents with Strict field validation (`openapi`), protobuf
//! bodies where fully understood (`proto`), an admin and a read-only user. Verbs get, list (label and
//! field selectors, `limit`/`continue` pages consistent at one version), watch (history
//! replay, bookmarks, `timeoutSeconds`, `sendInitialEvents`, 410 `Expired` as the real
//! server's ERROR event), create, update, patch (merge, JSON, strategic, apply), delete,
//! the `/status` subresource, and the discovery documents.
//! As the real server: a client's delete of a scheduled pod is graceful (marked with
//! `deletionTimestamp`, removed by the "kubelet", i.e. the simulation's `Store::remove`, or by
//! a delete with `gracePeriodSeconds: 0`); custom resources refuse an update without
//! `resourceVersion` (422) and a strategic merge patch (415).
//! Field ownership is the real server's (`fields`): `metadata.managedFields` on every
//! object, Updates and server-side applies (conflicts, `force`, pruning, kubectl's
//! client-side-apply upgrade), the simulation's controllers as the manager `hk-console-sim`.
//! Known differences from a real server: list types are known by field name (`fields::
//! list_kind`): an apply through a list of another type is refused (501), an Update owns
//! such a list whole; a `null` in an apply configuration outside `metadata` is refused
//! (501); Update managers are not capped at ten; no defaulting of omitted fields, no validation beyond names, types and Strict's
//! unknown fields, no `metadata.finalizers` semantics, `deletecollection`, a `dryRun` other
//! than a PATCH's `dryRun=All` (answered, nothing stored: `flux diff`'s dry-run apply), `exec`
//! (with `attach` and `portforward`: 501), OpenAPI v2 and YAML responses are not served, a deleted namespace goes at once with its
//! objects (there is no Terminating phase), aggregated discovery is not served (the legacy
//! documents are).

pub mod api;
mod discovery;
pub mod events;
pub mod fields;
pub mod logs;
pub mod openapi;
pub mod patch;
mod proto;
pub mod resources;
pub mod route;
pub mod select;
mod server;
pub mod status;
pub mod store;
pub mod tables;
pub(crate) mod tls;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

pub use server::{RequestLog, RequestRecord};
pub use status::ApiError;
pub use store::{EventType, ObjRef, Object, Origin, Store, StoreEvent};

/// What can go wrong starting or driving the simulated API server.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("simulated API server: {addr} is not a loopback address; the simulation never listens elsewhere")]
    NotLoopback { addr: IpAddr },
    #[error("simulated API server: cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("simulated API server: TLS: {0}")]
    Tls(String),
    #[error("simulated API server: cannot write the kubeconfig {path}: {source}")]
    Kubeconfig {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("simulated API server: {api_version} {kind} is not a served kind")]
    UnknownKind { api_version: String, kind: String },
    #[error("simulated API server: {0}")]
    Invalid(String),
    #[error("simulated API server: {0}")]
    Api(#[from] ApiError),
    #[error("simulated API server: cannot build a client: {0}")]
    Client(String),
}

/// Tunables; the defaults are the real server's where it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimKubeConfig {
    /// The cluster, user and context name in the kubeconfig.
    pub name: String,
    /// Change events kept for watch resumption and list pages (older versions get 410); none
    /// older than `store::HISTORY_MAX_AGE` either.
    pub history: usize,
    /// How often a watch that allows bookmarks gets one (the real server: about a minute).
    pub bookmark_interval: Duration,
    /// A watch's length when the client gives no `timeoutSeconds` (the real server: 30 to
    /// 60 minutes).
    pub default_watch_timeout: Duration,
}

impl Default for SimKubeConfig {
    fn default() -> Self {
        SimKubeConfig {
            name: "hk-sim".into(),
            history: 1000,
            bookmark_interval: Duration::from_secs(60),
            default_watch_timeout: Duration::from_secs(1800),
        }
    }
}

/// A running simulated API server. Dropping it stops it.
pub struct SimKube {
    addr: SocketAddr,
    store: Store,
    log: RequestLog,
    token: String,
    readonly_token: String,
    ca_pem: String,
    name: String,
    cancel: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for SimKube {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimKube")
            .field("addr", &self.addr)
            .field("store", &self.store)
            .finish()
    }
}

/// RFC 3339 with microseconds, UTC (what the API server writes for MicroTime).
pub fn micro_time(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string()
}

fn random_token() -> String {
    let mut b = [0u8; 24];
    // The system RNG does not fail in practice; the server is loopback-only and throwaway.
    let _ = rustls::crypto::ring::default_provider()
        .secure_random
        .fill(&mut b);
    data_encoding::HEXLOWER.encode(&b)
}

impl SimKube {
    /// Start on a free port of `bind` (a loopback address) with the default settings.
    pub async fn start(bind: IpAddr) -> Result<SimKube, SimError> {
        SimKube::start_with(SocketAddr::new(bind, 0), SimKubeConfig::default()).await
    }

    /// Start on `bind` (port 0 = a free one) with `config`. Must run inside a tokio runtime.
    pub async fn start_with(bind: SocketAddr, config: SimKubeConfig) -> Result<SimKube, SimError> {
        if !bind.ip().is_loopback() {
            return Err(SimError::NotLoopback { addr: bind.ip() });
        }
        let pki = tls::generate(bind.ip())?;
        let listener = TcpListener::bind(bind)
            .await
            .map_err(|source| SimError::Bind { addr: bind, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| SimError::Bind { addr: bind, source })?;
        let store = Store::new(config.history);
        // A real cluster's custom kinds are there because their CRDs are (k9s and kubectl
        // read them to learn the kinds).
        let established = jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        for crd in resources::crds(&established) {
            store.apply(crd)?;
        }
        let log = RequestLog::default();
        let token = random_token();
        let readonly_token = random_token();
        let cancel = CancellationToken::new();
        let name = config.name.clone();
        let state = Arc::new(server::ServerState {
            store: store.clone(),
            token: token.clone(),
            readonly_token: readonly_token.clone(),
            user_name: config.name.clone(),
            log: log.clone(),
            config,
            addr,
            cancel: cancel.clone(),
        });
        let task = tokio::spawn(server::serve(
            listener,
            TlsAcceptor::from(pki.server.clone()),
            state,
        ));
        tracing::info!("simulated API server listening on https://{addr}");
        Ok(SimKube {
            addr,
            store,
            log,
            token,
            readonly_token,
            ca_pem: pki.ca_pem,
            name,
            cancel,
            task: Some(task),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.x.y.z:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The objects, and the simulation's handle on them.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Every request answered.
    pub fn requests(&self) -> &RequestLog {
        &self.log
    }

    /// PEM of the CA that signed the serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A kubeconfig with one cluster, user and context (all named as configured), trusting
    /// this server's CA and authenticating with its bearer token.
    pub fn kubeconfig_yaml(&self) -> String {
        self.kubeconfig_for(&self.name, &self.token)
    }

    /// A kubeconfig for the read-only user (`NAME-readonly`): like RBAC's read-only
    /// roles it may get, list and watch everything and change nothing (403 Forbidden, and
    /// access reviews say so).
    pub fn readonly_kubeconfig_yaml(&self) -> String {
        self.kubeconfig_for(&format!("{}-readonly", self.name), &self.readonly_token)
    }

    fn kubeconfig_for(&self, n: &str, token: &str) -> String {
        let ca = data_encoding::BASE64.encode(self.ca_pem.as_bytes());
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {n}\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\nusers:\n- name: {n}\n  user:\n    token: {token}\ncontexts:\n- name: {n}\n  context:\n    cluster: {n}\n    user: {n}\ncurrent-context: {n}\npreferences: {{}}\n",
            url = self.url(),
        )
    }

    /// Write [`SimKube::kubeconfig_yaml`] to `path` (owner-only permissions: it holds a token).
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), SimError> {
        write_private(path, &self.kubeconfig_yaml())
    }

    /// Write [`SimKube::readonly_kubeconfig_yaml`] to `path` (its directory made if missing).
    pub fn write_readonly_kubeconfig(&self, path: &Path) -> Result<(), SimError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| SimError::Kubeconfig {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        write_private(path, &self.readonly_kubeconfig_yaml())
    }

    /// A kube client for this server, built from its kubeconfig as the console builds one.
    pub async fn client(&self) -> Result<kube::Client, SimError> {
        let kc = kube::config::Kubeconfig::from_yaml(&self.kubeconfig_yaml())
            .map_err(|e| SimError::Client(e.to_string()))?;
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .map_err(|e| SimError::Client(e.to_string()))?;
        kube::Client::try_from(config).map_err(|e| SimError::Client(e.to_string()))
    }

    /// Stop accepting, end every connection and watch, and wait for the accept loop.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

/// Write a kubeconfig with owner-only permissions (it holds a token).
fn write_private(path: &Path, text: &str) -> Result<(), SimError> {
    let err = |source| SimError::Kubeconfig {
        path: path.to_path_buf(),
        source,
    };
    std::fs::write(path, text).map_err(err)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    }
    Ok(())
}

impl Drop for SimKube {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}
