//! HTTPS for the emulator, as kube-apiserver serves it in a cluster: a certificate
//! authority made when the emulator starts, a serving certificate it signed for the
//! loopback names (`127.0.0.1`, `::1`, `localhost`), and rustls with the aws-lc-rs
//! provider (the one kube-rs uses) speaking HTTP/2 and HTTP/1.1.
//!
//! Clients trust the server through [`Certificates::ca_pem`]: the emulator's kubeconfig
//! carries it as `certificate-authority-data`, and a pod gets it as the service account's
//! `ca.crt`. A client without it is refused in the handshake.

use std::sync::Arc;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;

/// The names the serving certificate is valid for.
pub const SERVING_NAMES: [&str; 3] = ["127.0.0.1", "::1", "localhost"];

/// The emulator's certificate authority and the server configuration it signed.
#[derive(Clone)]
pub struct Certificates {
    ca_pem: String,
    server: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for Certificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificates").finish_non_exhaustive()
    }
}

/// Why certificates could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// rcgen refused the parameters or could not sign.
    #[error("cannot make the emulator's certificates: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the certificate or key.
    #[error("cannot configure TLS: {0}")]
    Rustls(#[from] rustls::Error),
}

impl From<TlsError> for std::io::Error {
    fn from(e: TlsError) -> Self {
        std::io::Error::other(e)
    }
}

impl Certificates {
    /// A fresh authority and a serving certificate for [`SERVING_NAMES`].
    pub fn generate() -> Result<Self, TlsError> {
        let ca_key = KeyPair::generate()?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.distinguished_name = DistinguishedName::new();
        ca.distinguished_name
            .push(DnType::CommonName, "kube-emulator-ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, ca_key);

        let key = KeyPair::generate()?;
        let mut serving = CertificateParams::new(
            SERVING_NAMES
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>(),
        )?;
        serving.distinguished_name = DistinguishedName::new();
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = serving.signed_by(&key, &issuer)?;

        let chain = vec![cert.der().clone(), ca_cert.der().clone()];
        let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut server = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, private)?;
        server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Certificates {
            ca_pem: ca_cert.pem(),
            server: Arc::new(server),
        })
    }

    /// The authority's certificate, PEM-encoded: what clients must trust.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The server side: the serving certificate with its chain (for tests that put
    /// another server behind the same authority).
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        Arc::clone(&self.server)
    }

    /// The authority's certificate, DER-encoded.
    pub fn ca_der(&self) -> Vec<u8> {
        pem_to_der(&self.ca_pem)
    }
}

/// The DER bytes of the first PEM block of `pem` (empty when there is none).
fn pem_to_der(pem: &str) -> Vec<u8> {
    use base64::Engine as _;
    let body: String = pem
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap_or_default()
}

/// Serves `router` over TLS on `listener` until `stopped` fires; dropping the task (an
/// abort) closes every connection with it.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    certificates: Certificates,
    stopped: oneshot::Receiver<()>,
) {
    let acceptor = TlsAcceptor::from(certificates.server);
    let mut connections = JoinSet::new();
    tokio::pin!(stopped);
    loop {
        let (stream, _) = tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "kube-emulator: accept failed");
                    continue;
                }
            },
            // Reap finished connections so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let acceptor = acceptor.clone();
        let router = router.clone();
        connections.spawn(async move {
            // A client that does not trust the authority ends the handshake here.
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let service = TowerToHyperService::new(router.map_request(
                |r: axum::http::Request<hyper::body::Incoming>| r.map(axum::body::Body::new),
            ));
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection_with_upgrades(TokioIo::new(tls), service)
                .await;
        });
    }
    // Stopping: open watches were cut; give the other requests in flight a moment.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), async {
        while connections.join_next().await.is_some() {}
    })
    .await;
}
