//! TLS interception: the installation's certificate authority (made at
//! first start, its key 0600 under the data directory), leaf certificates
//! made on the fly for each host a workspace reaches, and the client side
//! that verifies upstream servers against the host's trust store plus any
//! extra CA files (`--egress-extra-ca`).
//!
//! Crypto is rustls with ring; the CA key is ECDSA P-256.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

/// Leaf certificates made and kept at once, at most (then the cache starts over).
const LEAF_CACHE: usize = 1024;
/// How long a leaf is valid (Chromium wants at most 398 days).
const LEAF_DAYS: i64 = 30;
const CA_YEARS: i64 = 10;

/// What can go wrong with the CA or a TLS configuration.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("certificate: {0}")]
    Cert(#[from] rcgen::Error),
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("{path}: no usable certificate in it ({reason}); give a PEM file of CA certificates")]
    ExtraCa { path: String, reason: String },
    #[error(
        "{path} is not the CA's key file of this installation ({reason}); move it away to make a new CA (workspaces then trust the new one from their next start)"
    )]
    BadKey { path: String, reason: String },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> TlsError + '_ {
    move |source| TlsError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The installation's CA, and the leaf certificates it signs.
pub struct CertificateAuthority {
    issuer: Issuer<'static, KeyPair>,
    cert_der: CertificateDer<'static>,
    cert_pem: String,
    /// One key for every leaf (made at start): each leaf is only a name.
    leaf_key: KeyPair,
    servers: Mutex<HashMap<String, Arc<ServerConfig>>>,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority")
            .finish_non_exhaustive()
    }
}

/// Writes `bytes` to `path` through a temporary file of `mode`, so a
/// crash never leaves half a key.
fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), TlsError> {
    let partial = path.with_extension("partial");
    let _ = std::fs::remove_file(&partial);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&partial)
        .map_err(io_err(&partial))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(io_err(&partial))?;
    std::fs::rename(&partial, path).map_err(io_err(path))
}

impl CertificateAuthority {
    /// The CA in `dir` (`ca.key` 0600, `ca.pem`), made there if missing.
    pub fn load_or_create(dir: &Path) -> Result<Self, TlsError> {
        match std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
        {
            Err(err) if err.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(io_err(dir)(err));
            }
            _ => {}
        }
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(io_err(dir))?;
        let key_path = dir.join("ca.key");
        let cert_path = dir.join("ca.pem");
        if !key_path.exists() || !cert_path.exists() {
            let key = KeyPair::generate()?;
            let cert = Self::ca_params().self_signed(&key)?;
            write_atomic(&key_path, key.serialize_pem().as_bytes(), 0o600)?;
            write_atomic(&cert_path, cert.pem().as_bytes(), 0o644)?;
            tracing::info!(path = %cert_path.display(), "made this installation's egress CA");
        }
        std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o600))
            .map_err(io_err(&key_path))?;
        let key_pem = std::fs::read_to_string(&key_path).map_err(io_err(&key_path))?;
        let cert_pem = std::fs::read_to_string(&cert_path).map_err(io_err(&cert_path))?;
        let bad_key = |reason: String| TlsError::BadKey {
            path: key_path.display().to_string(),
            reason,
        };
        let key = KeyPair::from_pem(&key_pem).map_err(|e| bad_key(e.to_string()))?;
        let cert_der = CertificateDer::from_pem_slice(cert_pem.as_bytes())
            .map_err(|e| bad_key(format!("{}: {e}", cert_path.display())))?;
        let issuer = Issuer::from_ca_cert_der(&cert_der, key)?;
        Ok(Self {
            issuer,
            cert_der,
            cert_pem,
            leaf_key: KeyPair::generate()?,
            servers: Mutex::new(HashMap::new()),
        })
    }

    fn ca_params() -> CertificateParams {
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        let tag: u32 = rand::random();
        name.push(DnType::CommonName, format!("Cubicle egress CA {tag:08x}"));
        name.push(DnType::OrganizationName, "Cubicle");
        params.distinguished_name = name;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(1);
        params.not_after = now + time::Duration::days(365 * CA_YEARS);
        params
    }

    /// The CA certificate, PEM (what workspaces trust).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A server configuration presenting a leaf for `host` (a name or an
    /// IP address), made once and cached.
    pub fn server_config(&self, host: &str) -> Result<Arc<ServerConfig>, TlsError> {
        let mut cache = self
            .servers
            .lock()
            .expect("the leaf cache's lock is never held across a panic");
        if let Some(config) = cache.get(host) {
            return Ok(config.clone());
        }
        let mut params = CertificateParams::new(vec![host.to_owned()])?;
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, host);
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::hours(1);
        params.not_after = now + time::Duration::days(LEAF_DAYS);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.use_authority_key_identifier_extension = true;
        let leaf = params.signed_by(&self.leaf_key, &self.issuer)?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.leaf_key.serialize_der()));
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der().clone(), self.cert_der.clone()], key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        // A leaf's configuration is every workspace's: a TLS session the
        // proxy kept could be resumed by any client holding its id, and a
        // fork of a memory snapshot holds its parent's browser's. The
        // proxy keeps none (no session ids, no TLS 1.3 tickets): every
        // workspace's connection makes its own keys.
        config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        config.send_tls13_tickets = 0;
        let config = Arc::new(config);
        if cache.len() >= LEAF_CACHE {
            cache.clear();
        }
        cache.insert(host.to_owned(), config.clone());
        Ok(config)
    }
}

/// The client side: upstream servers are verified against the host's trust
/// store plus `extra_ca` files.
pub fn client_config(extra_ca: &[PathBuf]) -> Result<Arc<ClientConfig>, TlsError> {
    let mut roots = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for err in &native.errors {
        tracing::warn!(%err, "cannot read part of the host's trust store");
    }
    let (added, _) = roots.add_parsable_certificates(native.certs);
    tracing::debug!(added, "host trust store loaded for egress");
    for path in extra_ca {
        let extra_err = |reason: String| TlsError::ExtraCa {
            path: path.display().to_string(),
            reason,
        };
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|e| extra_err(e.to_string()))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| extra_err(e.to_string()))?;
        if certs.is_empty() {
            return Err(extra_err("no CERTIFICATE block".into()));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| extra_err(e.to_string()))?;
        }
    }
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Both sides of interception.
#[derive(Debug)]
pub struct Interception {
    pub ca: CertificateAuthority,
    pub client: Arc<ClientConfig>,
}

/// Upstream TLS sessions one workspace's proxy keeps for resuming.
const SESSIONS_PER_WORKSPACE: usize = 64;

impl Interception {
    /// The upstream side for one workspace: `client` with a session cache
    /// of its own, so a session one workspace made is resumed by it alone
    /// (a shared cache would let an origin tie two workspaces, or two
    /// forks of one snapshot, together).
    pub fn client_for_workspace(&self) -> Arc<ClientConfig> {
        let mut config = (*self.client).clone();
        config.resumption = rustls::client::Resumption::in_memory_sessions(SESSIONS_PER_WORKSPACE);
        Arc::new(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_is_made_once_with_a_private_key_and_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        let ca_dir = dir.path().join("ca");
        let first = CertificateAuthority::load_or_create(&ca_dir).unwrap();
        let mode = std::fs::metadata(ca_dir.join("ca.key"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        let dir_mode = std::fs::metadata(&ca_dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(dir_mode, 0o700);
        let second = CertificateAuthority::load_or_create(&ca_dir).unwrap();
        assert_eq!(first.cert_pem(), second.cert_pem(), "the same CA again");
        let config = second.server_config("example.org").unwrap();
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
        assert!(Arc::ptr_eq(
            &config,
            &second.server_config("example.org").unwrap()
        ));
        second.server_config("127.0.0.1").unwrap();
    }

    #[test]
    fn a_corrupt_key_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        CertificateAuthority::load_or_create(dir.path()).unwrap();
        std::fs::write(dir.path().join("ca.key"), "garbage").unwrap();
        let err = CertificateAuthority::load_or_create(dir.path()).unwrap_err();
        assert!(err.to_string().contains("move it away"), "{err}");
    }

    #[test]
    fn extra_ca_files_must_hold_certificates() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "nothing").unwrap();
        let err = client_config(&[empty]).unwrap_err();
        assert!(err.to_string().contains("no CERTIFICATE"), "{err}");
        let ca = CertificateAuthority::load_or_create(&dir.path().join("ca")).unwrap();
        let good = dir.path().join("good.pem");
        std::fs::write(&good, ca.cert_pem()).unwrap();
        client_config(&[good]).unwrap();
    }
}
