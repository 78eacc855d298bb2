//! The policies a gateway knows, by name: loaded from a directory of
//! `NAME.toml` files at start, or the ones shipped with Cubicle.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::{Policy, PolicyError};

/// The policies shipped beside this crate, as (name, TOML).
pub const SHIPPED: [(&str, &str); 3] = [
    ("default", include_str!("../default.toml")),
    ("strict", include_str!("../strict.toml")),
    ("open", include_str!("../open.toml")),
];

/// Policies by name.
#[derive(Debug, Clone, Default)]
pub struct PolicySet {
    policies: BTreeMap<String, Arc<Policy>>,
}

impl PolicySet {
    /// The shipped policies, parsed from the copies compiled into the binary.
    pub fn shipped() -> Result<Self, PolicyError> {
        let mut set = Self::default();
        for (name, source) in SHIPPED {
            let policy = Policy::parse(&format!("{name}.toml"), name, source)?;
            set.policies.insert(name.to_owned(), Arc::new(policy));
        }
        Ok(set)
    }

    /// Every `NAME.toml` in `dir` (not below it); the first bad file stops
    /// the load with an error naming its file, line and field.
    pub fn load_dir(dir: &Path) -> Result<Self, PolicyError> {
        let read = |path: &Path, source: std::io::Error| PolicyError::Read {
            path: path.display().to_string(),
            source,
        };
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| read(dir, e))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "toml") && p.is_file())
            // The shipped policies sit beside this crate's manifest.
            .filter(|p| p.file_name().is_none_or(|n| n != "Cargo.toml"))
            .collect();
        paths.sort();
        let mut set = Self::default();
        for path in paths {
            let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            let source = std::fs::read_to_string(&path).map_err(|e| read(&path, e))?;
            let file = path.display().to_string();
            if !valid_name(name) {
                return Err(PolicyError::Invalid {
                    file,
                    line: 1,
                    field: "(file name)".into(),
                    message: format!(
                        "{name:?} is not a policy name: use 1..=64 of a-z, 0-9, '-', '_'"
                    ),
                });
            }
            let policy = Policy::parse(&file, name, &source)?;
            set.policies.insert(name.to_owned(), Arc::new(policy));
        }
        if set.policies.is_empty() {
            return Err(PolicyError::Empty(dir.display().to_string()));
        }
        Ok(set)
    }

    /// Adds (or replaces) a policy parsed elsewhere.
    pub fn insert(&mut self, policy: Policy) {
        self.policies.insert(policy.name.clone(), Arc::new(policy));
    }

    /// Policy `name`, or an error listing the known ones.
    pub fn get(&self, name: &str) -> Result<Arc<Policy>, PolicyError> {
        self.policies
            .get(name)
            .cloned()
            .ok_or_else(|| PolicyError::Unknown {
                name: name.to_owned(),
                known: self.names(),
            })
    }

    pub fn names(&self) -> Vec<String> {
        self.policies.keys().cloned().collect()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Policy>> {
        self.policies.values()
    }
}

/// Whether `name` may name a policy.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}
