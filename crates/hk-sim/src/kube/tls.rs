//! The simulated server's throwaway PKI: a CA made at start, a serving certificate for the
//! bound IP address signed by it, and the rustls server configuration (ring provider, the
//! same crypto the kube client uses).
//!
//! Owns: minting a CA and a serving certificate (rcgen; [`mint`], which `demo --apiserver`'s
//! real kube-apiserver is given too), and the built-in server's `ServerConfig`.
//! Must not: write keys to disk (the kubeconfig carries only the CA certificate and a token;
//! `sim::apiserver` writes its own copy for the real server, which reads files).

use std::net::IpAddr;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::SimError;

/// The CA (for the kubeconfig) and the server's TLS configuration.
pub struct Pki {
    /// PEM of the CA certificate.
    pub ca_pem: String,
    pub server: Arc<rustls::ServerConfig>,
}

/// A CA and a serving certificate it signed, fresh for one simulated server.
pub struct Minted {
    pub ca: rcgen::Certificate,
    pub cert: rcgen::Certificate,
    /// The serving certificate's key.
    pub key: KeyPair,
}

/// Which step of minting failed, and rcgen's reason.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct MintError {
    pub what: &'static str,
    #[source]
    pub source: rcgen::Error,
}

fn step(what: &'static str) -> impl Fn(rcgen::Error) -> MintError {
    move |source| MintError { what, source }
}

/// A CA named `ca_name`, and a serving certificate (CN kube-apiserver, server auth) it
/// signed for the DNS names `dns` and the addresses `ips`. Both the built-in server and the
/// real kube-apiserver of `demo --apiserver` serve with one of these.
pub fn mint(ca_name: &str, dns: Vec<String>, ips: &[IpAddr]) -> Result<Minted, MintError> {
    let ca_key = KeyPair::generate().map_err(step("CA key"))?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(step("CA"))?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, ca_name);
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = ca_params.self_signed(&ca_key).map_err(step("CA"))?;
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate().map_err(step("serving key"))?;
    let mut params = CertificateParams::new(dns).map_err(step("serving"))?;
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    params
        .subject_alt_names
        .extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(step("serving certificate"))?;
    Ok(Minted { ca, cert, key })
}

/// A fresh CA and a serving certificate whose only SAN is `ip`.
pub fn generate(ip: IpAddr) -> Result<Pki, SimError> {
    let Minted { ca, cert, key } = mint("hk-console simulated cluster CA", Vec::new(), &[ip])
        .map_err(|e| SimError::Tls(e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain: Vec<CertificateDer<'static>> = vec![cert.der().clone(), ca.der().clone()];
    let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SimError::Tls(format!("TLS versions: {e}")))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| SimError::Tls(format!("serving certificate: {e}")))?;
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Pki {
        ca_pem: ca.pem(),
        server: Arc::new(server),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makes_a_ca_and_a_server_config() {
        let pki = generate("127.0.0.1".parse().expect("ip")).expect("pki");
        assert!(pki.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_eq!(pki.server.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }
}
