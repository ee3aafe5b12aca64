//! A real Kubernetes API for the kube tests, the way controller-runtime's envtest does it:
//! a real `kube-apiserver` (built by tests/apiserver/build.sh from k8s.io/kubernetes) over a
//! real `etcd`, both on 127.0.0.1, with throwaway certificates, RBAC on, an admin token in
//! group system:masters, service-account tokens through TokenRequest, and an audit log of
//! every request at level Metadata.
//!
//! The servers start exactly as `demo --apiserver` starts them: the PKI, the token file,
//! the etcd and kube-apiserver command lines, the readiness wait and the watchdogs are the
//! library's ([`hk_sim::apiserver`]); this harness adds what only tests want (the
//! audit log, a per-process etcd, an observer with a TokenRequest token, fixtures).
//!
//! Owns: the shared per-process etcd and PKI, one kube-apiserver per [`ApiServer`] (its own
//! `--etcd-prefix`, so tests never see each other's objects), kubeconfigs for an admin and a
//! read-only observer, reading the audit log, the Flux CRDs, and fixtures that make the API
//! look like the home-lab k3s cluster (nodes, the kube-vip Lease, the cilium DaemonSet and
//! its pods, ConfigMaps).
//! Must not: leave processes or files behind, talk to anything but 127.0.0.1, or stand in
//! for the API server (no fakes: every call here goes to the real binary).
//!
//! Processes: each binary runs under the library's watchdog ([`lib::Watched`]): when its
//! pipe closes (drop of [`ApiServer`], or this process exiting in any way, SIGKILL
//! included) it SIGKILLs its binary and deletes its directory. The etcd lives in a
//! `static` (never dropped), so the pipe closing at process exit is what ends it.
//! `tests/kube_apiserver.rs` proves this by SIGKILLing a test process that holds both.
//!
//! Needs `etcd` and `kube-apiserver` in `$HK_APISERVER_BIN_DIR` (default
//! `<repo>/target/apiserver-bin`, made by `bash tests/apiserver/build.sh`). Missing tools
//! FAIL the test with that hint.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use hk_sim::apiserver as lib;
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

pub use lib::{alive, log_tail};

pub const BUILD_HINT: &str =
    "etcd/kube-apiserver missing: run `bash tests/apiserver/build.sh` (needs Go; cold build takes minutes)";

/// The admin's user name (static token, group system:masters).
pub const ADMIN_USER: &str = "hk-admin";
/// The context name in [`ApiServer::admin_kubeconfig`].
pub const ADMIN_CONTEXT: &str = "hk-test-admin";
/// The context name in [`ApiServer::observer_kubeconfig`].
pub const OBSERVER_CONTEXT: &str = "hk-test-observer";
pub const OBSERVER_SA: &str = "hk-observer";
pub const KUBE_SYSTEM: &str = "kube-system";
/// The user the API server sees for the observer's token.
pub const OBSERVER_USER: &str = "system:serviceaccount:kube-system:hk-observer";
/// kube-vip's leader-election Lease for the control-plane VIP (its documented default).
pub const VIP_LEASE: &str = "plndr-cp-lock";
/// Verbs that change state, as the audit log names them.
pub const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// How long a kube-apiserver may take to answer /readyz (2 shared cores, cold page cache).
const READY_TIMEOUT: Duration = Duration::from_secs(120);
const ETCD_READY_TIMEOUT: Duration = Duration::from_secs(30);
const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// `$HK_APISERVER_BIN_DIR`, else `<repo>/target/apiserver-bin`.
pub fn bin_dir() -> PathBuf {
    hk_test_support::tools::apiserver_bin_dir()
}

/// Both binaries, checked the way `demo --apiserver` checks them.
fn binaries() -> lib::Binaries {
    lib::Binaries::find(&bin_dir()).unwrap_or_else(|e| panic!("{e}\n{BUILD_HINT}"))
}

/// Runs `f` to completion on a thread with its own runtime: the harness is called from
/// plain and from async tests alike, and a runtime cannot block inside another.
fn block_on_own_thread<T: Send>(f: impl std::future::Future<Output = T> + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("tokio runtime")
                .block_on(f)
        })
        .join()
        .expect("harness thread")
    })
}

/// What a failed start needs to show: the log's error lines (a Go panic's first line, klog
/// E/F lines, cobra's `Error:`) and its last lines; a panic's tail alone is only stack.
fn log_digest(path: &Path, text: &str) -> String {
    let errors: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.starts_with("panic:")
                || l.starts_with("fatal error:")
                || l.starts_with("Error:")
                || l.starts_with('F')
                || l.starts_with('E')
        })
        .take(15)
        .collect();
    format!(
        "--- error lines of {p} ---\n{}\n--- tail of {p} ---\n{}",
        errors.join("\n"),
        log_tail(path, 30),
        p = path.display()
    )
}

// ---------------------------------------------------------------------------------------
// Per-process shared state: PKI, admin token, audit policy, etcd.

struct Shared {
    /// Removed by the etcd watchdog when the process exits.
    dir: PathBuf,
    etcd_url: String,
    etcd_port: u16,
    etcd_pid: u32,
    admin_token: String,
    pki: lib::Pki,
    token_file: PathBuf,
    audit_policy: PathBuf,
    /// Never dropped: the pipe closes when the process exits.
    _etcd: std::sync::Mutex<lib::Watched>,
}

static SHARED: OnceLock<Shared> = OnceLock::new();
static NEXT_ID: AtomicUsize = AtomicUsize::new(0);

fn shared() -> &'static Shared {
    SHARED.get_or_init(Shared::start)
}

/// The per-process etcd's pid (starting it if needed): for tests of the cleanup.
pub fn etcd_pid() -> u32 {
    shared().etcd_pid
}

/// The per-process directory (PKI, admin token, etcd data): for tests of the cleanup.
pub fn shared_dir() -> PathBuf {
    shared().dir.clone()
}

/// Every request at level Metadata; one event per request (no RequestReceived stage).
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\n\
omitStages: [\"RequestReceived\"]\nrules:\n- level: Metadata\n";

impl Shared {
    /// For failure messages: is the shared etcd still running and healthy?
    fn etcd_state(&self) -> String {
        if block_on_own_thread(lib::etcd_healthy(self.etcd_port)) {
            return format!("(etcd at {} is healthy)", self.etcd_url);
        }
        format!(
            "etcd at {} is NOT healthy (pid {} running: {}, {} exists: {})\n{}",
            self.etcd_url,
            self.etcd_pid,
            alive(self.etcd_pid),
            self.dir.display(),
            self.dir.exists(),
            log_digest(
                &self.dir.join("etcd.log"),
                &std::fs::read_to_string(self.dir.join("etcd.log")).unwrap_or_default()
            ),
        )
    }

    fn start() -> Shared {
        let bins = binaries();
        let dir = tempfile::Builder::new()
            .prefix("hk-apiserver-shared-")
            .tempdir()
            .expect("temp dir")
            .keep();
        let admin_token = lib::random_hex(24);
        let started = block_on_own_thread(lib::start_etcd(
            &bins.etcd,
            &dir,
            "hk-test",
            ETCD_READY_TIMEOUT,
            |dir| {
                let pki = lib::make_pki(dir, &[])?;
                let token_file = dir.join("tokens.csv");
                lib::write_token_file(
                    &token_file,
                    &[lib::StaticToken {
                        token: &admin_token,
                        user: ADMIN_USER,
                        uid: "hk-admin-uid",
                        groups: &["system:masters"],
                    }],
                )?;
                let audit_policy = dir.join("audit-policy.yaml");
                std::fs::write(&audit_policy, AUDIT_POLICY).map_err(|source| {
                    lib::ApiServerError::Write {
                        path: audit_policy.clone(),
                        source,
                    }
                })?;
                Ok((pki, token_file, audit_policy))
            },
        ));
        let (etcd, (pki, token_file, audit_policy)) = started
            .unwrap_or_else(|e| panic!("could not start etcd from {}: {e}", bins.etcd.display()));
        Shared {
            etcd_url: etcd.url,
            etcd_port: etcd.port,
            etcd_pid: etcd.proc.pid(),
            dir,
            admin_token,
            pki,
            token_file,
            audit_policy,
            _etcd: std::sync::Mutex::new(etcd.proc),
        }
    }
}

// ---------------------------------------------------------------------------------------
// One kube-apiserver.

/// A real kube-apiserver on 127.0.0.1 with its own etcd prefix; killed (and its directory
/// removed) on drop.
pub struct ApiServer {
    /// This server's directory: kubeconfigs, audit log, apiserver.log.
    pub dir: PathBuf,
    pub port: u16,
    pub etcd_prefix: String,
    pub log: PathBuf,
    pub audit_log: PathBuf,
    /// How long [`ApiServer::start`] took (etcd and PKI included when it was the first).
    pub startup: Duration,
    proc: lib::Watched,
}

/// A kube client for a kubeconfig file written by this harness, with its current context.
pub async fn client_for(kubeconfig: &Path) -> Client {
    let yaml = std::fs::read_to_string(kubeconfig)
        .unwrap_or_else(|e| panic!("read kubeconfig {}: {e}", kubeconfig.display()));
    lib::client_of(&yaml)
        .await
        .unwrap_or_else(|e| panic!("kubeconfig {}: {e}", kubeconfig.display()))
}

impl ApiServer {
    /// Starts a kube-apiserver (and, the first time in this process, etcd) and waits until
    /// it is ready and kube-system exists. Panics with the apiserver log's tail otherwise.
    pub fn start() -> ApiServer {
        let t0 = Instant::now();
        let bins = binaries();
        let sh = shared();
        let id = NEXT_ID.fetch_add(1, Ordering::SeqCst);
        let mut last = String::new();
        for _ in 0..3 {
            let dir = tempfile::Builder::new()
                .prefix(&format!("hk-apiserver-{id}-"))
                .tempdir()
                .expect("temp dir")
                .keep();
            let port = lib::free_port(LOOPBACK).expect("a free port on 127.0.0.1");
            let etcd_prefix = format!("/hk-test-{id}");
            let log = dir.join("apiserver.log");
            let audit_log = dir.join("audit.log");
            let args = lib::ApiServerFlags {
                etcd_url: &sh.etcd_url,
                etcd_prefix: &etcd_prefix,
                bind: LOOPBACK,
                port,
                cert_dir: &dir.join("certs"),
                pki: &sh.pki,
                token_file: &sh.token_file,
                extra: vec![
                    // Compaction is etcd-wide: one server compacting under another's
                    // watches is noise.
                    "--etcd-compaction-interval=0".into(),
                    format!("--audit-policy-file={}", sh.audit_policy.display()),
                    format!("--audit-log-path={}", audit_log.display()),
                ],
            }
            .args();
            let proc = lib::Watched::spawn(&dir, &log, &bins.kube_apiserver, &args)
                .unwrap_or_else(|e| panic!("{e}"));
            let mut server = ApiServer {
                dir,
                port,
                etcd_prefix,
                log,
                audit_log,
                startup: Duration::ZERO,
                proc,
            };
            std::fs::write(
                server.admin_kubeconfig(),
                lib::kubeconfig(
                    ADMIN_CONTEXT,
                    &server.url(),
                    &sh.pki.ca_pem,
                    ADMIN_USER,
                    &sh.admin_token,
                ),
            )
            .expect("write admin kubeconfig");
            match server.wait_ready() {
                Ok(()) => {
                    server.startup = t0.elapsed();
                    return server;
                }
                Err(e) => {
                    let text = std::fs::read_to_string(&server.log).unwrap_or_default();
                    // Our port was taken between choosing and binding it: choose again.
                    let port_taken =
                        text.contains(&format!("{port}: bind: address already in use"));
                    last = format!(
                        "{e}\n{}\n{}",
                        log_digest(&server.log, &text),
                        sh.etcd_state()
                    );
                    if !port_taken {
                        break;
                    }
                }
            }
        }
        panic!(
            "kube-apiserver ({}) did not become ready: {last}",
            bins.kube_apiserver.display()
        );
    }

    /// The library's readiness wait, on a thread of its own (start() may be called from
    /// async tests): Err when the process exits or the deadline passes.
    fn wait_ready(&self) -> Result<(), String> {
        let kubeconfig = self.admin_kubeconfig();
        let pid = self.proc.pid();
        block_on_own_thread(async {
            let client = client_for(&kubeconfig).await;
            lib::wait_ready(&client, pid, READY_TIMEOUT).await
        })
    }

    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The kube-apiserver's pid (for tests of the cleanup).
    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// The PEM CA that signed the serving certificate.
    pub fn ca_file(&self) -> PathBuf {
        shared().pki.ca.clone()
    }

    /// A kubeconfig (context `hk-test-admin`) for the admin: group system:masters.
    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }

    pub async fn admin_client(&self) -> Client {
        client_for(&self.admin_kubeconfig()).await
    }

    /// ServiceAccount kube-system/hk-observer bound to a ClusterRole that may only get,
    /// list and watch what the console reads; a kubeconfig (context `hk-test-observer`)
    /// with a token from the TokenRequest API. Idempotent.
    pub async fn observer_kubeconfig(&self) -> PathBuf {
        let admin = self.admin_client().await;
        create_or_keep(
            &Api::<ServiceAccount>::namespaced(admin.clone(), KUBE_SYSTEM),
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": OBSERVER_SA, "namespace": KUBE_SYSTEM}}),
        )
        .await;
        create_or_keep(
            &Api::<ClusterRole>::all(admin.clone()),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": OBSERVER_SA},
                "rules": observer_rules(),
            }),
        )
        .await;
        create_or_keep(
            &Api::<ClusterRoleBinding>::all(admin.clone()),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": OBSERVER_SA},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": OBSERVER_SA},
                "subjects": [{"kind": "ServiceAccount", "name": OBSERVER_SA,
                              "namespace": KUBE_SYSTEM}],
            }),
        )
        .await;
        wait_observer_authorized(&admin).await;
        let tr = Api::<ServiceAccount>::namespaced(admin, KUBE_SYSTEM)
            .create_token_request(
                OBSERVER_SA,
                &PostParams::default(),
                &TokenRequest {
                    metadata: Default::default(),
                    spec: TokenRequestSpec {
                        audiences: vec![],
                        expiration_seconds: Some(3600),
                        bound_object_ref: None,
                    },
                    status: None,
                },
            )
            .await
            .expect("TokenRequest for kube-system/hk-observer");
        let token = tr.status.expect("TokenRequest status").token;
        let path = self.dir.join("observer.kubeconfig");
        std::fs::write(
            &path,
            lib::kubeconfig(
                OBSERVER_CONTEXT,
                &self.url(),
                &shared().pki.ca_pem,
                OBSERVER_SA,
                &token,
            ),
        )
        .expect("write observer kubeconfig");
        path
    }

    /// Every audit event written so far (JSON lines), in file order.
    pub fn audit_events(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.audit_log).unwrap_or_default();
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| {
                    panic!("audit line in {}: {e}: {l}", self.audit_log.display())
                })
            })
            .collect()
    }

    /// One event per request by `user` (the last stage seen for its auditID: a watch still
    /// open is `ResponseStarted`, anything finished is `ResponseComplete`).
    pub fn requests_by(&self, user: &str) -> Vec<Value> {
        let mut out: Vec<Value> = Vec::new();
        for e in self.audit_events() {
            if e.pointer("/user/username").and_then(Value::as_str) != Some(user) {
                continue;
            }
            let id = e.get("auditID").cloned();
            match out.iter_mut().find(|o| o.get("auditID").cloned() == id) {
                Some(slot) => *slot = e,
                None => out.push(e),
            }
        }
        out
    }

    /// The requests by `user` whose verb changes state (create, update, patch, delete,
    /// deletecollection), whatever their outcome (a 403 attempt is listed too).
    pub fn writes_by(&self, user: &str) -> Vec<Value> {
        self.requests_by(user)
            .into_iter()
            .filter(|e| {
                e.get("verb")
                    .and_then(Value::as_str)
                    .is_some_and(|v| WRITE_VERBS.contains(&v))
            })
            .collect()
    }

    /// The HTTP status of each finished request by `user` (e.g. to look for 403s).
    pub fn status_codes_by(&self, user: &str) -> Vec<u16> {
        self.requests_by(user)
            .iter()
            .filter_map(|e| e.pointer("/responseStatus/code").and_then(Value::as_u64))
            .map(|c| c as u16)
            .collect()
    }

    /// Waits until every request finished before this call is in the audit log: the admin
    /// asks for a uniquely named (absent) namespace and we wait for that request's event.
    /// The log backend writes each event after its response is sent, hence the marker.
    pub async fn audit_settle(&self) {
        let marker = format!("hk-audit-mark-{}", lib::random_hex(6));
        let ns: Api<Namespace> = Api::all(self.admin_client().await);
        let _ = ns.get_opt(&marker).await;
        let t0 = Instant::now();
        loop {
            let seen = self.audit_events().iter().any(|e| {
                e.get("stage").and_then(Value::as_str) == Some("ResponseComplete")
                    && e.pointer("/objectRef/name").and_then(Value::as_str) == Some(&marker)
            });
            if seen {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "audit marker {marker} never reached {}",
                self.audit_log.display()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Creates the object; an AlreadyExists (409) keeps the existing one.
async fn create_or_keep<K>(api: &Api<K>, obj: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let typed: K = serde_json::from_value(obj.clone())
        .unwrap_or_else(|e| panic!("fixture does not fit its type: {e}: {obj}"));
    match api.create(&PostParams::default(), &typed).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("create {obj}: {e}"),
    }
}

/// What the observer may do: get/list/watch, on exactly what the console reads.
fn observer_rules() -> Value {
    let read = json!(["get", "list", "watch"]);
    json!([
        {"apiGroups": [""], "resources": ["nodes", "pods", "configmaps"], "verbs": read},
        {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": read},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": read},
        {"apiGroups": ["helm.toolkit.fluxcd.io"], "resources": ["helmreleases"], "verbs": read},
        {"apiGroups": ["kustomize.toolkit.fluxcd.io"], "resources": ["kustomizations"], "verbs": read},
    ])
}

/// RBAC is served from informers: wait until the new binding is in effect for every rule,
/// asking the authorizer (SubjectAccessReview, as the admin) rather than trying as the
/// observer, so the observer's own audit trail starts clean.
async fn wait_observer_authorized(admin: &Client) {
    let sar: Api<SubjectAccessReview> = Api::all(admin.clone());
    let rules = observer_rules();
    let t0 = Instant::now();
    for rule in rules.as_array().expect("rules") {
        let group = rule["apiGroups"][0].as_str().expect("group");
        for resource in rule["resources"].as_array().expect("resources") {
            let resource = resource.as_str().expect("resource");
            loop {
                let review: SubjectAccessReview = serde_json::from_value(json!({
                    "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                    "spec": {"user": OBSERVER_USER,
                             "groups": ["system:serviceaccounts",
                                        "system:serviceaccounts:kube-system",
                                        "system:authenticated"],
                             "resourceAttributes": {"group": group, "resource": resource,
                                                    "verb": "list"}},
                }))
                .expect("SubjectAccessReview");
                let allowed = sar
                    .create(&PostParams::default(), &review)
                    .await
                    .expect("create SubjectAccessReview")
                    .status
                    .is_some_and(|s| s.allowed);
                if allowed {
                    break;
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(30),
                    "RBAC never allowed {OBSERVER_USER} to list {resource}.{group}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Flux CRDs.

fn flux_crd(group: &str, version: &str, kind: &str, plural: &str, short: &str) -> Value {
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "listKind": format!("{kind}List"), "plural": plural,
                      "singular": kind.to_lowercase(), "shortNames": [short]},
            "versions": [{
                "name": version, "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": open, "status": open},
                }},
            }],
        },
    })
}

/// HelmRelease helm.toolkit.fluxcd.io/v2, for `Api<DynamicObject>`.
pub fn helm_release_resource() -> ApiResource {
    ApiResource {
        group: "helm.toolkit.fluxcd.io".into(),
        version: "v2".into(),
        api_version: "helm.toolkit.fluxcd.io/v2".into(),
        kind: "HelmRelease".into(),
        plural: "helmreleases".into(),
    }
}

/// Kustomization kustomize.toolkit.fluxcd.io/v1, for `Api<DynamicObject>`.
pub fn kustomization_resource() -> ApiResource {
    ApiResource {
        group: "kustomize.toolkit.fluxcd.io".into(),
        version: "v1".into(),
        api_version: "kustomize.toolkit.fluxcd.io/v1".into(),
        kind: "Kustomization".into(),
        plural: "kustomizations".into(),
    }
}

/// Installs the HelmRelease and Kustomization CRDs (minimal structural schemas that keep
/// unknown fields, status subresource) and waits until both are Established.
pub async fn install_flux_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let defs = [
        flux_crd(
            "helm.toolkit.fluxcd.io",
            "v2",
            "HelmRelease",
            "helmreleases",
            "hr",
        ),
        flux_crd(
            "kustomize.toolkit.fluxcd.io",
            "v1",
            "Kustomization",
            "kustomizations",
            "ks",
        ),
    ];
    for d in &defs {
        create_or_keep(&crds, d.clone()).await;
    }
    let names: Vec<String> = defs
        .iter()
        .map(|d| {
            d["metadata"]["name"]
                .as_str()
                .expect("crd name")
                .to_string()
        })
        .collect();
    lib::wait_established(client, &names, Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

// ---------------------------------------------------------------------------------------
// k3s-like fixtures. All created by whoever `client` is (normally the admin).

/// A k3s server node as the console sees it.
#[derive(Clone, Debug)]
pub struct FixtureNode {
    pub name: String,
    pub internal_ip: String,
    pub control_plane: bool,
    pub ready: bool,
    /// Extra labels, on top of the k3s ones.
    pub labels: Vec<(String, String)>,
}

impl FixtureNode {
    /// A Ready k3s server (control-plane, etcd, master roles).
    pub fn server(name: &str, internal_ip: &str) -> Self {
        FixtureNode {
            name: name.into(),
            internal_ip: internal_ip.into(),
            control_plane: true,
            ready: true,
            labels: Vec::new(),
        }
    }

    pub fn not_ready(mut self) -> Self {
        self.ready = false;
        self
    }

    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.labels.push((k.into(), v.into()));
        self
    }
}

fn now() -> String {
    Timestamp::now().to_string()
}

/// Creates the Node, then sets its addresses and Ready condition through the status
/// subresource (what a kubelet would do).
pub async fn create_node(client: &Client, n: &FixtureNode) -> Node {
    let mut labels = serde_json::Map::new();
    for (k, v) in [
        ("kubernetes.io/hostname", n.name.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("node.kubernetes.io/instance-type", "k3s"),
    ] {
        labels.insert(k.into(), v.into());
    }
    if n.control_plane {
        for k in [
            "node-role.kubernetes.io/control-plane",
            "node-role.kubernetes.io/etcd",
            "node-role.kubernetes.io/master",
        ] {
            labels.insert(k.into(), "true".into());
        }
    }
    for (k, v) in &n.labels {
        labels.insert(k.clone(), v.clone().into());
    }
    let api: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": n.name, "labels": labels},
    }))
    .expect("Node");
    api.create(&PostParams::default(), &node)
        .await
        .unwrap_or_else(|e| panic!("create node {}: {e}", n.name));
    api.patch_status(
        &n.name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "addresses": [{"type": "InternalIP", "address": n.internal_ip},
                          {"type": "Hostname", "address": n.name}],
            "conditions": [node_ready_condition(n.ready)],
            "nodeInfo": {"kubeletVersion": "v1.34.4+k3s1", "kubeProxyVersion": "",
                         "containerRuntimeVersion": "containerd://2.0.0-k3s1",
                         "operatingSystem": "linux", "architecture": "amd64",
                         "osImage": "Debian GNU/Linux 13 (trixie)", "kernelVersion": "6.12.0",
                         "machineID": "", "systemUUID": "", "bootID": ""},
        }})),
    )
    .await
    .unwrap_or_else(|e| panic!("set status of node {}: {e}", n.name))
}

fn node_ready_condition(ready: bool) -> Value {
    let t = now();
    let (status, reason, message) = if ready {
        ("True", "KubeletReady", "kubelet is posting ready status")
    } else {
        (
            "Unknown",
            "NodeStatusUnknown",
            "Kubelet stopped posting node status.",
        )
    };
    json!({"type": "Ready", "status": status, "reason": reason, "message": message,
           "lastHeartbeatTime": t, "lastTransitionTime": t})
}

/// Flips a node's Ready condition through the status subresource.
pub async fn set_node_ready(client: &Client, name: &str, ready: bool) -> Node {
    Api::<Node>::all(client.clone())
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": {"conditions": [node_ready_condition(ready)]}})),
        )
        .await
        .unwrap_or_else(|e| panic!("set Ready={ready} on node {name}: {e}"))
}

/// The kubelet's heartbeat: node `name`'s Lease in kube-node-lease renewed now (created
/// with the namespace the first time), as a kubelet that is up does every 10 s.
pub async fn renew_node_lease(client: &Client, name: &str) -> Lease {
    let _ = Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "kube-node-lease"}}))
                .expect("namespace"),
        )
        .await;
    Api::<Lease>::namespaced(client.clone(), "kube-node-lease")
        .patch(
            name,
            &PatchParams::apply("hk-test-kubelet").force(),
            &Patch::Apply(json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                         "renewTime": Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}
            })),
        )
        .await
        .unwrap_or_else(|e| panic!("renew the kubelet Lease of {name}: {e}"))
}

/// The kube-vip leader-election Lease.
#[derive(Clone, Debug)]
pub struct VipLease {
    pub holder: Option<String>,
    pub renew_time: Timestamp,
    pub lease_duration_seconds: i32,
    pub transitions: i32,
}

impl VipLease {
    /// Held by `holder`, renewed `ago` before now, kube-vip's default 5 s duration.
    pub fn held_by(holder: &str, ago: Duration) -> Self {
        let ago = k8s_openapi::jiff::SignedDuration::try_from(ago).expect("lease age");
        VipLease {
            holder: Some(holder.into()),
            renew_time: Timestamp::now() - ago,
            lease_duration_seconds: 5,
            transitions: 0,
        }
    }
}

fn lease_spec(l: &VipLease) -> Value {
    json!({
        "holderIdentity": l.holder,
        "leaseDurationSeconds": l.lease_duration_seconds,
        "leaseTransitions": l.transitions,
        "acquireTime": micro_time(l.renew_time),
        "renewTime": micro_time(l.renew_time),
    })
}

/// RFC 3339 with microseconds, as a MicroTime travels.
fn micro_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// Creates kube-system/plndr-cp-lock.
pub async fn create_vip_lease(client: &Client, l: &VipLease) -> Lease {
    let lease: Lease = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": VIP_LEASE, "namespace": KUBE_SYSTEM},
        "spec": lease_spec(l),
    }))
    .expect("Lease");
    Api::<Lease>::namespaced(client.clone(), KUBE_SYSTEM)
        .create(&PostParams::default(), &lease)
        .await
        .unwrap_or_else(|e| panic!("create lease {KUBE_SYSTEM}/{VIP_LEASE}: {e}"))
}

/// Rewrites the Lease's spec (a renewal, or a new holder).
pub async fn update_vip_lease(client: &Client, l: &VipLease) -> Lease {
    Api::<Lease>::namespaced(client.clone(), KUBE_SYSTEM)
        .patch(
            VIP_LEASE,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": lease_spec(l)})),
        )
        .await
        .unwrap_or_else(|e| panic!("patch lease {KUBE_SYSTEM}/{VIP_LEASE}: {e}"))
}

/// Where an env var's value comes from in the agent container.
#[derive(Clone, Debug)]
pub enum EnvValue {
    Literal(String),
    /// `valueFrom.configMapKeyRef` (ConfigMap in kube-system).
    ConfigMapKey {
        name: String,
        key: String,
    },
}

/// The cilium-agent's API endpoint env.
#[derive(Clone, Debug)]
pub struct AgentEnv {
    pub host: EnvValue,
    pub port: EnvValue,
}

impl AgentEnv {
    pub fn literal(host: &str, port: u16) -> Self {
        AgentEnv {
            host: EnvValue::Literal(host.into()),
            port: EnvValue::Literal(port.to_string()),
        }
    }

    /// Both from keys of one ConfigMap in kube-system.
    pub fn from_configmap(configmap: &str, host_key: &str, port_key: &str) -> Self {
        let r = |key: &str| EnvValue::ConfigMapKey {
            name: configmap.into(),
            key: key.into(),
        };
        AgentEnv {
            host: r(host_key),
            port: r(port_key),
        }
    }
}

fn env_var(name: &str, v: &EnvValue) -> Value {
    match v {
        EnvValue::Literal(s) => json!({"name": name, "value": s}),
        EnvValue::ConfigMapKey { name: cm, key } => json!({
            "name": name,
            "valueFrom": {"configMapKeyRef": {"name": cm, "key": key}},
        }),
    }
}

pub const CILIUM_IMAGE: &str = "quay.io/cilium/cilium:v1.18.4";

fn agent_container(env: &AgentEnv) -> Value {
    json!({
        "name": "cilium-agent",
        "image": CILIUM_IMAGE,
        "command": ["cilium-agent"],
        "args": ["--config-dir=/tmp/cilium/config-map"],
        "env": [
            {"name": "K8S_NODE_NAME",
             "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}},
            env_var("KUBERNETES_SERVICE_HOST", &env.host),
            env_var("KUBERNETES_SERVICE_PORT", &env.port),
        ],
    })
}

/// kube-system/cilium: the DaemonSet (k8s-app=cilium, rolling update maxUnavailable 1).
pub async fn create_cilium_daemonset(client: &Client, env: &AgentEnv) -> DaemonSet {
    let ds: DaemonSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "cilium", "namespace": KUBE_SYSTEM,
                     "labels": {"k8s-app": "cilium", "app.kubernetes.io/name": "cilium-agent"}},
        "spec": {
            "selector": {"matchLabels": {"k8s-app": "cilium"}},
            "updateStrategy": {"type": "RollingUpdate",
                               "rollingUpdate": {"maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"k8s-app": "cilium",
                                        "app.kubernetes.io/name": "cilium-agent"}},
                "spec": {"hostNetwork": true, "containers": [agent_container(env)]},
            },
        },
    }))
    .expect("DaemonSet");
    Api::<DaemonSet>::namespaced(client.clone(), KUBE_SYSTEM)
        .create(&PostParams::default(), &ds)
        .await
        .unwrap_or_else(|e| panic!("create daemonset {KUBE_SYSTEM}/cilium: {e}"))
}

/// Replaces the agent env in kube-system/cilium's pod template (a new generation, as a
/// Flux reconcile of a changed value does).
pub async fn set_cilium_daemonset_env(client: &Client, env: &AgentEnv) -> DaemonSet {
    Api::<DaemonSet>::namespaced(client.clone(), KUBE_SYSTEM)
        .patch(
            "cilium",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {
                "containers": [agent_container(env)]}}}})),
        )
        .await
        .unwrap_or_else(|e| panic!("patch daemonset {KUBE_SYSTEM}/cilium: {e}"))
}

/// A DaemonSet status with `desired` pods of which `updated` run the newest template and
/// `ready` are ready; observedGeneration left for [`set_daemonset_status`] to fill.
pub fn rollout_status(desired: i32, updated: i32, ready: i32) -> DaemonSetStatus {
    DaemonSetStatus {
        desired_number_scheduled: desired,
        current_number_scheduled: desired,
        updated_number_scheduled: Some(updated),
        number_ready: ready,
        number_available: Some(ready),
        number_unavailable: Some(desired - ready),
        number_misscheduled: 0,
        ..Default::default()
    }
}

/// Writes a DaemonSet's status through the status subresource (what the DaemonSet
/// controller would do). An unset observedGeneration becomes the current generation.
pub async fn set_daemonset_status(
    client: &Client,
    namespace: &str,
    name: &str,
    status: &DaemonSetStatus,
) -> DaemonSet {
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), namespace);
    let mut status = status.clone();
    if status.observed_generation.is_none() {
        let ds = api
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("get daemonset {namespace}/{name}: {e}"));
        status.observed_generation = ds.metadata.generation;
    }
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await
    .unwrap_or_else(|e| panic!("set status of daemonset {namespace}/{name}: {e}"))
}

/// One cilium-agent pod.
#[derive(Clone, Debug)]
pub struct CiliumPod {
    pub name: String,
    pub node: String,
    pub env: AgentEnv,
    pub ready: bool,
}

/// Creates kube-system/<name> on `node` (spec.nodeName), owned by the cilium DaemonSet
/// when it exists (template generation label from it), then sets phase Running and the
/// Ready condition through the status subresource (what a kubelet would do).
pub async fn create_cilium_pod(client: &Client, p: &CiliumPod) -> Pod {
    let ds = Api::<DaemonSet>::namespaced(client.clone(), KUBE_SYSTEM)
        .get_opt("cilium")
        .await
        .unwrap_or_else(|e| panic!("get daemonset {KUBE_SYSTEM}/cilium: {e}"));
    let mut meta = json!({
        "name": p.name, "namespace": KUBE_SYSTEM,
        "labels": {"k8s-app": "cilium", "app.kubernetes.io/name": "cilium-agent"},
    });
    if let Some(ds) = ds {
        meta["ownerReferences"] = json!([{
            "apiVersion": "apps/v1", "kind": "DaemonSet", "name": "cilium",
            "uid": ds.metadata.uid, "controller": true, "blockOwnerDeletion": true,
        }]);
        if let Some(g) = ds.metadata.generation {
            meta["labels"]["pod-template-generation"] = json!(g.to_string());
        }
    }
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": {"nodeName": p.node, "hostNetwork": true,
                 "containers": [agent_container(&p.env)]},
    }))
    .expect("Pod");
    let api: Api<Pod> = Api::namespaced(client.clone(), KUBE_SYSTEM);
    api.create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("create pod {KUBE_SYSTEM}/{}: {e}", p.name));
    set_pod_ready(client, KUBE_SYSTEM, &p.name, p.ready).await
}

/// Sets phase Running and Ready/ContainersReady (true or false) on every container.
pub async fn set_pod_ready(client: &Client, namespace: &str, name: &str, ready: bool) -> Pod {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pod = api
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("get pod {namespace}/{name}: {e}"));
    let t = now();
    let flag = if ready { "True" } else { "False" };
    let containers: Vec<Value> = pod
        .spec
        .map(|s| s.containers)
        .unwrap_or_default()
        .iter()
        .map(|c| {
            json!({"name": c.name, "ready": ready, "started": true, "restartCount": 0,
                   "image": c.image, "imageID": "",
                   "state": {"running": {"startedAt": t}}})
        })
        .collect();
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "phase": "Running",
            "startTime": t,
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": t},
                {"type": "Initialized", "status": "True", "lastTransitionTime": t},
                {"type": "ContainersReady", "status": flag, "lastTransitionTime": t},
                {"type": "Ready", "status": flag, "lastTransitionTime": t},
            ],
            "containerStatuses": containers,
        }})),
    )
    .await
    .unwrap_or_else(|e| panic!("set status of pod {namespace}/{name}: {e}"))
}

/// Creates a ConfigMap with these keys.
pub async fn create_configmap(
    client: &Client,
    namespace: &str,
    name: &str,
    data: &[(&str, &str)],
) -> ConfigMap {
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| ((*k).to_string(), json!(v)))
        .collect();
    let cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }))
    .expect("ConfigMap");
    Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap_or_else(|e| panic!("create configmap {namespace}/{name}: {e}"))
}
