//! Scanning held files with YARA rules (`yara-x`). The shipped rules are
//! `policies/rules/*.yar`, compiled into the binary; a deployment may add
//! its own directory of `.yar` files.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The shipped rule files, by name (`cubicle_policy::scan_rules`).
pub const SHIPPED: &[(&str, &str)] = cubicle_policy::scan_rules::SHIPPED;

/// The EICAR anti-malware test file: harmless bytes every scanner flags.
pub const EICAR: &[u8] = br"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*";

/// How long one scan may take.
const SCAN_TIMEOUT: Duration = Duration::from_secs(120);

/// A rule that matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hit {
    pub rule: String,
    pub description: Option<String>,
    pub severity: Option<String>,
}

/// What can go wrong with the rules or a scan.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("YARA rule file {file}: {message}")]
    Compile { file: String, message: String },
    #[error("cannot read the rule directory {path}: {source}")]
    Dir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("scanning {path} failed: {message}")]
    Scan { path: String, message: String },
}

/// Compiled rules, shared by every scan.
#[derive(Clone)]
pub struct Scanner {
    rules: Arc<yara_x::Rules>,
    count: usize,
}

impl std::fmt::Debug for Scanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scanner")
            .field("rules", &self.count)
            .finish()
    }
}

impl Scanner {
    /// The shipped rules plus every `.yar` in `extra_dir`.
    pub fn new(extra_dir: Option<&Path>) -> Result<Self, ScanError> {
        let mut sources: Vec<(String, String)> = SHIPPED
            .iter()
            .map(|(name, text)| ((*name).to_owned(), (*text).to_owned()))
            .collect();
        if let Some(dir) = extra_dir {
            let dir_err = |source| ScanError::Dir {
                path: dir.display().to_string(),
                source,
            };
            let mut paths: Vec<_> = std::fs::read_dir(dir)
                .map_err(dir_err)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "yar" || e == "yara"))
                .collect();
            paths.sort();
            for path in paths {
                let text = std::fs::read_to_string(&path).map_err(dir_err)?;
                sources.push((path.display().to_string(), text));
            }
        }
        let mut compiler = yara_x::Compiler::new();
        for (file, text) in &sources {
            compiler
                .add_source(yara_x::SourceCode::from(text.as_str()).with_origin(file.as_str()))
                .map_err(|err| ScanError::Compile {
                    file: file.clone(),
                    message: err.to_string(),
                })?;
        }
        let rules = compiler.build();
        let count = rules.iter().len();
        Ok(Self {
            rules: Arc::new(rules),
            count,
        })
    }

    /// How many rules are loaded.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Scans the file at `path` (blocking: call from a blocking thread).
    pub fn scan_file(&self, path: &Path) -> Result<Vec<Hit>, ScanError> {
        let mut scanner = yara_x::Scanner::new(&self.rules);
        scanner.set_timeout(SCAN_TIMEOUT);
        let results = scanner.scan_file(path).map_err(|err| ScanError::Scan {
            path: path.display().to_string(),
            message: err.to_string(),
        })?;
        Ok(results.matching_rules().map(|rule| hit(&rule)).collect())
    }

    /// Scans bytes in memory (blocking).
    pub fn scan_bytes(&self, bytes: &[u8]) -> Result<Vec<Hit>, ScanError> {
        let mut scanner = yara_x::Scanner::new(&self.rules);
        scanner.set_timeout(SCAN_TIMEOUT);
        let results = scanner.scan(bytes).map_err(|err| ScanError::Scan {
            path: "(memory)".into(),
            message: err.to_string(),
        })?;
        Ok(results.matching_rules().map(|rule| hit(&rule)).collect())
    }
}

fn hit(rule: &yara_x::Rule<'_, '_>) -> Hit {
    let meta = |key: &str| {
        rule.metadata().find_map(|(k, v)| match v {
            yara_x::MetaValue::String(s) if k == key => Some(s.to_owned()),
            _ => None,
        })
    };
    Hit {
        rule: rule.identifier().to_owned(),
        description: meta("description"),
        severity: meta("severity"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(bytes: &[u8]) -> Vec<String> {
        static SCANNER: std::sync::OnceLock<Scanner> = std::sync::OnceLock::new();
        let scanner = SCANNER.get_or_init(|| Scanner::new(None).unwrap());
        let mut names: Vec<String> = scanner
            .scan_bytes(bytes)
            .unwrap()
            .into_iter()
            .map(|h| h.rule)
            .collect();
        names.sort();
        names
    }

    /// A local file header of a zip entry with `flags`.
    fn zip_entry(name: &str, flags: u16) -> Vec<u8> {
        let mut v = vec![0x50, 0x4B, 0x03, 0x04, 20, 0];
        v.extend(flags.to_le_bytes());
        v.extend([0u8; 18]);
        v.extend((name.len() as u16).to_le_bytes());
        v.extend([0, 0]);
        v.extend(name.as_bytes());
        v.extend(b"data");
        v
    }

    #[test]
    fn every_shipped_rule_compiles_and_loads() {
        let scanner = Scanner::new(None).unwrap();
        assert!(scanner.len() >= 10, "{scanner:?}");
    }

    #[test]
    fn each_rule_flags_its_kind_and_plain_files_pass() {
        assert_eq!(rules(EICAR), ["eicar_test_file"]);
        let mut elf = b"\x7fELF\x02\x01\x01".to_vec();
        elf.resize(64, 0);
        assert_eq!(rules(&elf), ["elf_executable"]);
        let mut pe = vec![0u8; 0x100];
        pe[0] = b'M';
        pe[1] = b'Z';
        pe[0x3C] = 0x80;
        pe[0x80..0x84].copy_from_slice(b"PE\0\0");
        assert_eq!(rules(&pe), ["windows_pe_executable"]);
        let mut fake_pe = pe.clone();
        fake_pe[0x80] = b'X';
        assert!(rules(&fake_pe).is_empty(), "MZ alone is not a PE");
        let mut ole = vec![0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];
        ole.resize(512, 0);
        assert!(rules(&ole).is_empty(), "an OLE file without macros");
        ole.extend(b"_VBA_PROJECT");
        assert_eq!(rules(&ole), ["office_ole_with_vba_macros"]);
        let docm = [
            zip_entry("[Content_Types].xml", 0),
            zip_entry("word/vbaProject.bin", 0),
        ]
        .concat();
        assert_eq!(rules(&docm), ["office_openxml_with_macros"]);
        let plain_zip = [zip_entry("a.txt", 0), zip_entry("b.txt", 0)].concat();
        assert!(rules(&plain_zip).is_empty());
        let locked_zip = [zip_entry("a.txt", 0), zip_entry("secret.txt", 1)].concat();
        assert_eq!(rules(&locked_zip), ["zip_encrypted_entry"]);
        let mut seven = vec![0x37, 0x7A, 0xBC, 0xAF, 0x27, 0x1C, 0, 4];
        seven.resize(40, 0);
        assert!(rules(&seven).is_empty());
        seven.extend([0x24, 0x06, 0xF1, 0x07, 0x01]);
        assert_eq!(rules(&seven), ["seven_zip_encrypted"]);
        let rar5 = [
            0x52, 0x61, 0x72, 0x21, 0x1A, 0x07, 0x01, 0x00, 1, 2, 3, 4, 12, 4, 0, 0,
        ];
        assert_eq!(rules(&rar5), ["rar_encrypted"]);
        assert_eq!(rules(b"#!/bin/sh\nrm -rf ~\n"), ["interpreter_script"]);
        assert_eq!(
            rules(b"$c = New-Object Net.WebClient; IEX($c.DownloadString('x'))"),
            ["windows_script"]
        );
        assert!(rules(b"Hello, world.\nA plain text file.\n").is_empty());
        assert!(rules(b"%PDF-1.7\n1 0 obj\n").is_empty());
    }

    #[test]
    fn a_bad_extra_rule_names_its_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("bad.yar"),
            "rule broken { condition: nope }",
        )
        .unwrap();
        let err = Scanner::new(Some(dir.path())).unwrap_err();
        assert!(err.to_string().contains("bad.yar"), "{err}");
        std::fs::write(
            dir.path().join("bad.yar"),
            "rule local_marker { strings: $a = \"CUBICLE-MARKER\" condition: $a }",
        )
        .unwrap();
        let scanner = Scanner::new(Some(dir.path())).unwrap();
        let hits = scanner.scan_bytes(b"xx CUBICLE-MARKER xx").unwrap();
        assert_eq!(hits[0].rule, "local_marker");
    }
}
