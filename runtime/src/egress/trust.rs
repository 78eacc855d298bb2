//! What makes a workspace trust the installation's CA, prepared once per
//! daemon start in `<data>/egress/trust/` (root's, world-readable: it holds
//! only public certificates) and shown to every jail read-only:
//!
//! - `ca.pem`, the CA certificate;
//! - `ca-bundle.crt`, the image's system bundle plus the CA, bound over
//!   `/etc/ssl/certs/ca-certificates.crt` (curl, Python, OpenSSL, GnuTLS);
//! - `nssdb/`, an NSS database trusting the CA for TLS servers, made with
//!   the host's `certutil` (Debian: libnss3-tools) and copied by
//!   `cubicle-guest` into the browser's `~/.pki/nssdb` at start, which is
//!   where Chromium on Linux reads locally trusted roots from. Without
//!   `certutil` on the host there is none, and Chromium in the workspaces
//!   refuses intercepted sites (curl still works); `cubicle doctor` says so.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the jail sees the trust directory.
pub const GUEST_DIR: &str = "/run/cubicle-trust";
/// The system bundle path inside the image (Debian's).
pub const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
const NICKNAME: &str = "Cubicle egress CA";

/// The installation's trust files.
#[derive(Debug, Clone)]
pub struct TrustFiles {
    pub dir: PathBuf,
}

impl TrustFiles {
    /// Writes the trust files for `ca_pem`, with `image_bundle` (the
    /// image's own system bundle) as the base of `ca-bundle.crt`.
    pub fn prepare(
        data_dir: &Path,
        ca_pem: &str,
        image_bundle: Option<&Path>,
    ) -> std::io::Result<Self> {
        let dir = data_dir.join("egress").join("trust");
        std::fs::create_dir_all(&dir)?;
        for d in [data_dir.join("egress"), dir.clone()] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755))?;
        }
        let public = |path: &Path, bytes: &[u8]| -> std::io::Result<()> {
            std::fs::write(path, bytes)?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))
        };
        public(&dir.join("ca.pem"), ca_pem.as_bytes())?;
        let mut bundle = match image_bundle {
            Some(path) => std::fs::read(path).unwrap_or_default(),
            None => Vec::new(),
        };
        if !bundle.is_empty() && !bundle.ends_with(b"\n") {
            bundle.push(b'\n');
        }
        bundle.extend_from_slice(ca_pem.as_bytes());
        public(&dir.join("ca-bundle.crt"), &bundle)?;
        let files = Self { dir };
        if let Err(err) = files.make_nssdb() {
            tracing::warn!(%err, "no NSS database for the egress CA: Chromium in workspaces will not trust intercepted sites (install libnss3-tools)");
        }
        Ok(files)
    }

    pub fn bundle(&self) -> PathBuf {
        self.dir.join("ca-bundle.crt")
    }

    pub fn nssdb(&self) -> PathBuf {
        self.dir.join("nssdb")
    }

    pub fn has_nssdb(&self) -> bool {
        self.nssdb().join("cert9.db").exists()
    }

    fn make_nssdb(&self) -> Result<(), String> {
        let fresh = self.dir.join("nssdb.partial");
        let _ = std::fs::remove_dir_all(&fresh);
        std::fs::create_dir_all(&fresh).map_err(|e| e.to_string())?;
        let db = format!("sql:{}", fresh.display());
        let run = |args: &[&str]| -> Result<(), String> {
            let out = Command::new("certutil")
                .args(args)
                .output()
                .map_err(|e| format!("certutil: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "certutil {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        };
        run(&["-N", "-d", &db, "--empty-password"])?;
        let ca = self.dir.join("ca.pem");
        run(&[
            "-A",
            "-d",
            &db,
            "-n",
            NICKNAME,
            "-t",
            "C,,",
            "-i",
            &ca.to_string_lossy(),
        ])?;
        for entry in std::fs::read_dir(&fresh)
            .map_err(|e| e.to_string())?
            .flatten()
        {
            let _ = std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o644));
        }
        std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| e.to_string())?;
        let _ = std::fs::remove_dir_all(self.nssdb());
        std::fs::rename(&fresh, self.nssdb()).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundle_ends_with_the_ca_and_everything_is_readable() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("system.crt");
        std::fs::write(
            &base,
            "-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----",
        )
        .unwrap();
        let ca = super::super::tls::CertificateAuthority::load_or_create(&dir.path().join("ca"))
            .unwrap();
        let files = TrustFiles::prepare(dir.path(), ca.cert_pem(), Some(&base)).unwrap();
        let bundle = std::fs::read_to_string(files.bundle()).unwrap();
        assert!(bundle.starts_with("-----BEGIN CERTIFICATE-----\nAAA"));
        assert!(bundle.ends_with(ca.cert_pem()));
        let mode = std::fs::metadata(&files.dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755);
        if Command::new("certutil").arg("-H").output().is_ok() {
            assert!(files.has_nssdb(), "certutil is here, so the NSS db must be");
            let listed = Command::new("certutil")
                .args(["-L", "-d", &format!("sql:{}", files.nssdb().display())])
                .output()
                .unwrap();
            assert!(String::from_utf8_lossy(&listed.stdout).contains(NICKNAME));
        } else {
            cubicle_skip::skip(
                "no certutil on this host, no NSS db checked (scripts/setup installs libnss3-tools)",
            );
        }
    }
}
