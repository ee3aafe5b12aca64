//! The simulated server's throwaway PKI: a CA made at start, a serving certificate for the
//! bound IP address signed by it, and the rustls server configuration (ring provider, the
//! same crypto the kube client uses).
//!
//! Owns: generating the CA and serving certificate (rcgen), and the `ServerConfig`.
//! Must not: write keys to disk (the kubeconfig carries only the CA certificate and a token).

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

fn tls_err(what: &str) -> impl Fn(rcgen::Error) -> SimError + '_ {
    move |e| SimError::Tls(format!("{what}: {e}"))
}

/// A fresh CA and a serving certificate whose only SAN is `ip`.
pub fn generate(ip: IpAddr) -> Result<Pki, SimError> {
    let ca_key = KeyPair::generate().map_err(tls_err("CA key"))?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(tls_err("CA"))?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "hk-console simulated cluster CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).map_err(tls_err("CA"))?;
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate().map_err(tls_err("server key"))?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(tls_err("server"))?;
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    params.subject_alt_names = vec![SanType::IpAddress(ip)];
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(tls_err("server certificate"))?;

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain: Vec<CertificateDer<'static>> = vec![cert.der().clone(), ca_cert.der().clone()];
    let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SimError::Tls(format!("TLS versions: {e}")))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| SimError::Tls(format!("serving certificate: {e}")))?;
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Pki {
        ca_pem: ca_cert.pem(),
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
