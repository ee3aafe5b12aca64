//! A simulated server's etcd endpoints as real listeners (issue 37), for a node whose
//! commands run in a real userland: the client API's JSON gateway over TLS with client
//! certificates (as k3s runs etcd: `client-cert-auth`), and the plain metrics listener, on
//! the node's own loopback address. The node's real `curl` reaches them with the
//! certificates written into its k3s data dir; what they answer is the member the
//! simulation keeps ([`super::node::SimEtcd`], [`NodeState::etcd_metrics`]), the same
//! answers the emulated shell's `curl` gives.
//!
//! A member that does not run (its k3s stopped, the server dead or rebooting) has no
//! listener: its ports refuse, as a stopped etcd's do.
//!
//! Owns: [`EtcdEndpoint`] (the URLs, the PEMs a client needs, the listeners' life).
//! Must not: listen on anything but the node's loopback address.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::node::{NodeState, UnitState};

/// How often a listener looks whether its member runs.
const LOOK: Duration = Duration::from_millis(200);

/// One server's etcd endpoints, served until dropped.
pub struct EtcdEndpoint {
    /// `https://ADDR:PORT`: what the `etcd_client_url` hostvar says.
    pub client_url: String,
    /// `http://ADDR:PORT/metrics`: what the `etcd_metrics_url` hostvar says.
    pub metrics_url: String,
    /// The CA that signed the member's serving certificate and the client's (k3s's
    /// `server-ca.crt`).
    pub ca_pem: String,
    /// k3s's etcd `client.crt` and `client.key`.
    pub client_cert_pem: String,
    pub client_key_pem: String,
    stop: CancellationToken,
}

impl Drop for EtcdEndpoint {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Why the endpoints could not be made.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("etcd endpoint on {addr}: {what}: {why}")]
    Tls {
        addr: IpAddr,
        what: &'static str,
        why: String,
    },
    #[error("etcd endpoint on {addr}: no free port: {source}")]
    Bind {
        addr: IpAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Whether the member on this node runs now.
fn serving(state: &Arc<Mutex<NodeState>>) -> bool {
    state.lock().is_ok_and(|s| {
        !s.down
            && s.etcd_up
            && s.etcd.is_some()
            && matches!(s.units.get("k3s.service"), Some(u) if u.state == UnitState::Active)
    })
}

struct Pems {
    ca: String,
    client_cert: String,
    client_key: String,
    server: Arc<rustls::ServerConfig>,
}

fn pki(addr: IpAddr) -> Result<Pems, EndpointError> {
    let tls = |what: &'static str| {
        move |e: rcgen::Error| EndpointError::Tls {
            addr,
            what,
            why: e.to_string(),
        }
    };
    let ca_key = KeyPair::generate().map_err(tls("CA key"))?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(tls("CA"))?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "etcd-server-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = ca_params.self_signed(&ca_key).map_err(tls("CA"))?;
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf = |cn: &str, eku: ExtendedKeyUsagePurpose, ips: &[IpAddr]| {
        let key = KeyPair::generate().map_err(tls("key"))?;
        let mut p = CertificateParams::new(vec!["localhost".to_string()]).map_err(tls("leaf"))?;
        p.distinguished_name.push(DnType::CommonName, cn);
        p.subject_alt_names
            .extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        p.extended_key_usages = vec![eku];
        let cert = p.signed_by(&key, &issuer).map_err(tls("certificate"))?;
        Ok::<_, EndpointError>((cert, key))
    };
    let loopback: IpAddr = [127, 0, 0, 1].into();
    let (server_cert, server_key) = leaf(
        "etcd-server",
        ExtendedKeyUsagePurpose::ServerAuth,
        &[addr, loopback],
    )?;
    let (client_cert, client_key) = leaf("etcd-client", ExtendedKeyUsagePurpose::ClientAuth, &[])?;

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(ca.der().clone())
        .map_err(|e| EndpointError::Tls {
            addr,
            what: "client CA",
            why: e.to_string(),
        })?;
    // etcd under k3s asks every client for a certificate its CA signed.
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| EndpointError::Tls {
        addr,
        what: "client verifier",
        why: e.to_string(),
    })?;
    let chain: Vec<CertificateDer<'static>> = vec![server_cert.der().clone(), ca.der().clone()];
    let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| EndpointError::Tls {
            addr,
            what: "TLS versions",
            why: e.to_string(),
        })?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, private)
        .map_err(|e| EndpointError::Tls {
            addr,
            what: "serving certificate",
            why: e.to_string(),
        })?;
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Pems {
        ca: ca.pem(),
        client_cert: client_cert.pem(),
        client_key: client_key.serialize_pem(),
        server: Arc::new(server),
    })
}

/// Starts the member's endpoints on `addr` (free ports), answering from `state`.
pub async fn start(
    addr: IpAddr,
    state: Arc<Mutex<NodeState>>,
) -> Result<EtcdEndpoint, EndpointError> {
    let pems = pki(addr)?;
    let bind = |port| async move {
        TcpListener::bind(SocketAddr::new(addr, port))
            .await
            .map_err(|source| EndpointError::Bind { addr, source })
    };
    let client = bind(0).await?;
    let metrics = bind(0).await?;
    let client_addr = client
        .local_addr()
        .map_err(|source| EndpointError::Bind { addr, source })?;
    let metrics_addr = metrics
        .local_addr()
        .map_err(|source| EndpointError::Bind { addr, source })?;
    let stop = CancellationToken::new();
    let tls = tokio_rustls::TlsAcceptor::from(pems.server.clone());
    tokio::spawn(listen(
        client,
        client_addr,
        state.clone(),
        Some(tls),
        stop.clone(),
    ));
    tokio::spawn(listen(metrics, metrics_addr, state, None, stop.clone()));
    Ok(EtcdEndpoint {
        client_url: format!("https://{client_addr}"),
        metrics_url: format!("http://{metrics_addr}/metrics"),
        ca_pem: pems.ca,
        client_cert_pem: pems.client_cert,
        client_key_pem: pems.client_key,
        stop,
    })
}

/// Serves on `listener` while the member runs; closes the port while it does not (a
/// connection is then refused) and binds it again when it runs again.
async fn listen(
    listener: TcpListener,
    at: SocketAddr,
    state: Arc<Mutex<NodeState>>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    stop: CancellationToken,
) {
    let mut listener = Some(listener);
    let mut tick = tokio::time::interval(LOOK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let up = serving(&state);
        match (&listener, up) {
            (Some(_), false) => listener = None,
            (None, true) => listener = TcpListener::bind(at).await.ok(),
            _ => {}
        }
        let Some(l) = &listener else {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => continue,
            }
        };
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => continue,
            a = l.accept() => a,
        };
        let Ok((socket, _)) = accepted else { continue };
        let state = state.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let gateway = tls.is_some();
            let service = hyper::service::service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(answer(&state, gateway, req).await) }
            });
            match tls {
                Some(tls) => {
                    let Ok(stream) = tls.accept(socket).await else {
                        return;
                    };
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                }
                None => {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(socket), service)
                        .await;
                }
            }
        });
    }
}

async fn answer(
    state: &Arc<Mutex<NodeState>>,
    gateway: bool,
    req: Request<hyper::body::Incoming>,
) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let _ = body.collect().await;
    let reply = |code: StatusCode, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = code;
        r
    };
    let Ok(s) = state.lock() else {
        return reply(StatusCode::SERVICE_UNAVAILABLE, String::new());
    };
    let path = parts.uri.path();
    if !gateway {
        return if path == "/metrics" {
            reply(StatusCode::OK, s.etcd_metrics())
        } else {
            reply(StatusCode::NOT_FOUND, "404 page not found\n".into())
        };
    }
    if parts.method != hyper::Method::POST {
        // The gateway serves its v3 API on POST only.
        return reply(
            StatusCode::METHOD_NOT_ALLOWED,
            r#"{"code":5,"message":"Not Found"}"#.into(),
        );
    }
    match s
        .etcd
        .as_ref()
        .and_then(|m| m.answer(path, s.etcd_db_size()))
    {
        Some(body) => reply(StatusCode::OK, body),
        None => reply(
            StatusCode::NOT_FOUND,
            r#"{"code":5,"message":"Not Found"}"#.into(),
        ),
    }
}
