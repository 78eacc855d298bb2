//! Per-workspace resource limits: what a workspace may use (memory, CPU,
//! processes, disk), how a create request asks for them, and how much of
//! them it uses now.
//!
//! The kernel enforces them: a cgroup per workspace below the daemon's own
//! ([`cgroup`]) for memory, CPU and processes, and an ext4 image on a loop
//! device for the writable home and `/tmp` ([`disk`]). This module only
//! holds the numbers; the jail and microvm backends apply them. Start with [`Limits`].

pub mod cgroup;
pub mod disk;
pub mod freeze;
pub mod shared_memory;

use serde::{Deserialize, Serialize};
use serde_json::Value;

const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;

/// Smallest memory limit: the desktop and browser need ~600 MiB to idle.
const MIN_MEMORY_MB: u64 = 256;
/// Smallest disk: room for the browser profile and a little work.
const MIN_DISK_MB: u64 = 64;
const MIN_CPUS: f64 = 0.1;
const MIN_PIDS: u32 = 64;
/// `cpu.weight` range of cgroup v2 (v1 `cpu.shares` is derived from it).
const WEIGHT_RANGE: std::ops::RangeInclusive<u32> = 1..=10_000;

/// What is wrong with a limits request; each names the field and the range.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LimitsError {
    #[error("limits must be a JSON object with memory_mb, cpus, cpu_weight, pids or disk_mb")]
    NotAnObject,
    #[error(
        "limits.{0} is not a known limit: allowed are memory_mb, cpus, cpu_weight, pids and disk_mb"
    )]
    UnknownField(String),
    #[error("limits.{field} must be {expected} (got {got})")]
    Type {
        field: &'static str,
        expected: &'static str,
        got: String,
    },
    #[error("limits.{field} = {got} is out of range: allowed {min}..={max}{unit}")]
    Range {
        field: &'static str,
        got: String,
        min: String,
        max: String,
        unit: &'static str,
    },
}

/// The limits of one workspace, valid against the server's policy. Only
/// [`LimitsPolicy::resolve`] and the defaults make one, so a value of this
/// type has always been checked.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    memory_bytes: u64,
    cpus: f64,
    cpu_weight: u32,
    pids: u32,
    disk_bytes: u64,
}

impl Default for Limits {
    /// 2 GiB of memory, 2 CPUs at weight 100, 4096 tasks, 4 GiB of disk.
    fn default() -> Self {
        Self {
            memory_bytes: 2 * GIB,
            cpus: 2.0,
            cpu_weight: 100,
            pids: 4096,
            disk_bytes: 4 * GIB,
        }
    }
}

impl Limits {
    /// Memory (RAM, including tmpfs pages and page cache; no swap) in bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.memory_bytes
    }
    /// CPU time per wall-clock second, in CPUs (a CFS quota).
    pub fn cpus(&self) -> f64 {
        self.cpus
    }
    /// Share of CPU under contention, 1..=10000 (100 is everyone's default).
    pub fn cpu_weight(&self) -> u32 {
        self.cpu_weight
    }
    /// Most tasks (processes and threads) at once.
    pub fn pids(&self) -> u32 {
        self.pids
    }
    /// Size of the writable home and `/tmp` together, in bytes.
    pub fn disk_bytes(&self) -> u64 {
        self.disk_bytes
    }

    /// The same limits with `bytes` more memory: for a process that holds
    /// the workspace's memory and some of its own (a microVM's VMM holds
    /// the guest's RAM, sized by [`Limits::memory_bytes`], plus itself).
    pub fn with_extra_memory(self, bytes: u64) -> Self {
        Self {
            memory_bytes: self.memory_bytes.saturating_add(bytes),
            ..self
        }
    }

    /// The stored form (JSON) for the state database.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("Limits is plain numbers and always serializes")
    }

    /// Reads the stored form. The store is ours, but a value out of today's
    /// policy still runs with what was stored: it was valid when created.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// What a create request asks for; unset fields take the server's default.
/// JSON: `{"memory_mb": 2048, "cpus": 2.0, "cpu_weight": 100, "pids": 4096,
/// "disk_mb": 4096}`, every field optional.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsRequest {
    pub memory_mb: Option<u64>,
    pub cpus: Option<f64>,
    pub cpu_weight: Option<u32>,
    pub pids: Option<u32>,
    pub disk_mb: Option<u64>,
}

impl LimitsRequest {
    /// Parses the `limits` value of a create body; errors name the field.
    pub fn from_value(value: &Value) -> Result<Self, LimitsError> {
        let Value::Object(fields) = value else {
            return Err(LimitsError::NotAnObject);
        };
        let mut request = Self::default();
        for (key, value) in fields {
            match key.as_str() {
                "memory_mb" => request.memory_mb = Some(whole(value, "memory_mb")?),
                "disk_mb" => request.disk_mb = Some(whole(value, "disk_mb")?),
                "pids" => request.pids = Some(small(value, "pids")?),
                "cpu_weight" => request.cpu_weight = Some(small(value, "cpu_weight")?),
                "cpus" => {
                    request.cpus = Some(value.as_f64().ok_or_else(|| LimitsError::Type {
                        field: "cpus",
                        expected: "a number of CPUs such as 1.5",
                        got: value.to_string(),
                    })?)
                }
                other => return Err(LimitsError::UnknownField(other.to_owned())),
            }
        }
        Ok(request)
    }
}

fn whole(value: &Value, field: &'static str) -> Result<u64, LimitsError> {
    value.as_u64().ok_or_else(|| LimitsError::Type {
        field,
        expected: "a whole number of MiB",
        got: value.to_string(),
    })
}

fn small(value: &Value, field: &'static str) -> Result<u32, LimitsError> {
    value
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| LimitsError::Type {
            field,
            expected: "a whole number",
            got: value.to_string(),
        })
}

/// The server's defaults and maxima: what a workspace gets when it asks for
/// nothing, and what no create may exceed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LimitsPolicy {
    pub default: Limits,
    pub max_memory_bytes: u64,
    pub max_cpus: f64,
    pub max_pids: u32,
    pub max_disk_bytes: u64,
}

impl LimitsPolicy {
    /// Maxima from this host: its RAM, its CPUs, 32768 tasks, 64 GiB of
    /// disk. Defaults are [`Limits::default`], lowered to fit the maxima.
    pub fn for_host() -> Self {
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let max_memory_bytes = mem_total(&meminfo).unwrap_or(16 * GIB);
        let max_cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        Self::with_maxima(max_memory_bytes, max_cpus, 32_768, 64 * GIB)
    }

    /// A policy with these maxima and the default limits clamped to them.
    pub fn with_maxima(memory: u64, cpus: f64, pids: u32, disk: u64) -> Self {
        let base = Limits::default();
        Self {
            default: Limits {
                memory_bytes: base.memory_bytes.min(memory),
                cpus: base.cpus.min(cpus),
                cpu_weight: base.cpu_weight,
                pids: base.pids.min(pids),
                disk_bytes: base.disk_bytes.min(disk),
            },
            max_memory_bytes: memory,
            max_cpus: cpus,
            max_pids: pids,
            max_disk_bytes: disk,
        }
    }

    /// The limits for `request`: its values where given, the defaults
    /// elsewhere, each checked against this policy.
    pub fn resolve(&self, request: &LimitsRequest) -> Result<Limits, LimitsError> {
        let d = self.default;
        let memory_mb = request.memory_mb.unwrap_or(d.memory_bytes / MIB);
        let max_memory_mb = self.max_memory_bytes / MIB;
        check_range("memory_mb", memory_mb, MIN_MEMORY_MB, max_memory_mb, " MiB")?;
        let disk_mb = request.disk_mb.unwrap_or(d.disk_bytes / MIB);
        let max_disk_mb = self.max_disk_bytes / MIB;
        check_range("disk_mb", disk_mb, MIN_DISK_MB, max_disk_mb, " MiB")?;
        let pids = request.pids.unwrap_or(d.pids);
        check_range("pids", pids, MIN_PIDS, self.max_pids, "")?;
        let weight = request.cpu_weight.unwrap_or(d.cpu_weight);
        let (low, high) = (*WEIGHT_RANGE.start(), *WEIGHT_RANGE.end());
        check_range("cpu_weight", weight, low, high, "")?;
        let cpus = request.cpus.unwrap_or(d.cpus);
        if !cpus.is_finite() || cpus < MIN_CPUS || cpus > self.max_cpus {
            return Err(LimitsError::Range {
                field: "cpus",
                got: cpus.to_string(),
                min: MIN_CPUS.to_string(),
                max: self.max_cpus.to_string(),
                unit: " CPUs",
            });
        }
        Ok(Limits {
            memory_bytes: memory_mb * MIB,
            cpus,
            cpu_weight: weight,
            pids,
            disk_bytes: disk_mb * MIB,
        })
    }
}

fn check_range<T: PartialOrd + ToString>(
    field: &'static str,
    got: T,
    min: T,
    max: T,
    unit: &'static str,
) -> Result<(), LimitsError> {
    if got < min || got > max {
        return Err(LimitsError::Range {
            field,
            got: got.to_string(),
            min: min.to_string(),
            max: max.to_string(),
            unit,
        });
    }
    Ok(())
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// What a workspace uses now, next to its limits. Fields a host cannot
/// measure are `None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Usage {
    /// Memory charged to the workspace (RAM, tmpfs, page cache).
    pub memory_bytes: Option<u64>,
    pub memory_limit_bytes: u64,
    /// CPU time used since the workspace started, in microseconds.
    pub cpu_usage_usec: Option<u64>,
    pub cpus: f64,
    /// Tasks (processes and threads) now.
    pub pids: Option<u64>,
    pub pids_limit: u32,
    /// Bytes used on the workspace's disk (home and `/tmp`).
    pub disk_used_bytes: Option<u64>,
    pub disk_limit_bytes: u64,
    /// Processes the kernel killed for reaching the memory limit, since the
    /// workspace started.
    pub oom_kills: u64,
}

impl Usage {
    /// The limits with nothing measured.
    pub fn of_limits(limits: &Limits) -> Self {
        Self {
            memory_limit_bytes: limits.memory_bytes,
            cpus: limits.cpus,
            pids_limit: limits.pids,
            disk_limit_bytes: limits.disk_bytes,
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy() -> LimitsPolicy {
        LimitsPolicy::with_maxima(8 * GIB, 2.0, 10_000, 16 * GIB)
    }

    #[test]
    fn empty_request_gets_the_defaults() {
        let limits = policy().resolve(&LimitsRequest::default()).unwrap();
        assert_eq!(limits, Limits::default());
        assert_eq!(limits.memory_bytes(), 2 * GIB);
        assert_eq!(limits.disk_bytes(), 4 * GIB);
        assert_eq!(limits.pids(), 4096);
    }

    #[test]
    fn defaults_shrink_to_a_small_host() {
        let small = LimitsPolicy::with_maxima(GIB, 1.0, 1000, GIB);
        let limits = small.resolve(&LimitsRequest::default()).unwrap();
        assert_eq!(limits.memory_bytes(), GIB);
        assert_eq!(limits.cpus(), 1.0);
        assert_eq!(limits.pids(), 1000);
    }

    #[test]
    fn request_values_are_taken_and_checked() {
        let request =
            LimitsRequest::from_value(&json!({"memory_mb": 512, "cpus": 0.5, "disk_mb": 1024}))
                .unwrap();
        let limits = policy().resolve(&request).unwrap();
        assert_eq!(limits.memory_bytes(), 512 * MIB);
        assert_eq!(limits.cpus(), 0.5);
        assert_eq!(limits.disk_bytes(), GIB);
        assert_eq!(limits.cpu_weight(), 100);
    }

    #[test]
    fn errors_name_the_field_and_the_range() {
        let over = LimitsRequest {
            memory_mb: Some(9 * 1024),
            ..Default::default()
        };
        let message = policy().resolve(&over).unwrap_err().to_string();
        assert!(
            message.contains("limits.memory_mb") && message.contains("8192"),
            "{message}"
        );
        let disk = LimitsRequest {
            disk_mb: Some(17 * 1024),
            ..Default::default()
        };
        let message = policy().resolve(&disk).unwrap_err().to_string();
        assert!(message.contains("limits.disk_mb"), "{message}");
        for cpus in [0.0, -1.0, 3.0, f64::NAN] {
            let bad = LimitsRequest {
                cpus: Some(cpus),
                ..Default::default()
            };
            let message = policy().resolve(&bad).unwrap_err().to_string();
            assert!(message.contains("limits.cpus"), "{message}");
        }
        let weight = LimitsRequest {
            cpu_weight: Some(0),
            ..Default::default()
        };
        assert!(matches!(
            policy().resolve(&weight),
            Err(LimitsError::Range {
                field: "cpu_weight",
                ..
            })
        ));
    }

    #[test]
    fn parsing_names_bad_and_unknown_fields() {
        let err = LimitsRequest::from_value(&json!({"memory_mb": "lots"})).unwrap_err();
        assert!(err.to_string().contains("limits.memory_mb"), "{err}");
        let err = LimitsRequest::from_value(&json!({"memory_mb": 1.5})).unwrap_err();
        assert!(err.to_string().contains("whole number"), "{err}");
        let err = LimitsRequest::from_value(&json!({"ram": 1})).unwrap_err();
        assert_eq!(err, LimitsError::UnknownField("ram".into()));
        let err = LimitsRequest::from_value(&json!([1])).unwrap_err();
        assert_eq!(err, LimitsError::NotAnObject);
        let err = LimitsRequest::from_value(&json!({"pids": 1u64 << 40})).unwrap_err();
        assert!(err.to_string().contains("limits.pids"), "{err}");
    }

    #[test]
    fn stored_form_round_trips() {
        let limits = policy()
            .resolve(&LimitsRequest {
                cpus: Some(1.25),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(Limits::from_json(&limits.to_json()).unwrap(), limits);
    }

    #[test]
    fn reads_mem_total() {
        let meminfo = "MemTotal:       24683904 kB\nMemFree:  1 kB\n";
        assert_eq!(mem_total(meminfo), Some(24_683_904 * 1024));
        assert_eq!(mem_total("nothing"), None);
    }
}
