//! Counters the API reports: vCPU exits by reason, device events, and the
//! process's memory use split into guest RAM and VMM overhead.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// Why vCPUs left KVM_RUN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ExitKind {
    /// Port input.
    IoIn,
    /// Port output.
    IoOut,
    /// MMIO read.
    MmioRead,
    /// MMIO write.
    MmioWrite,
    /// HLT (rare with an in-kernel irqchip).
    Hlt,
    /// Triple fault / shutdown.
    Shutdown,
    /// KVM system event (reset, shutdown).
    SystemEvent,
    /// Interrupted by the VMM (pause, stop).
    Interrupted,
    /// Entry failure or internal error.
    Failure,
    /// Anything else.
    Other,
}

const KINDS: [(ExitKind, &str); 10] = [
    (ExitKind::IoIn, "io_in"),
    (ExitKind::IoOut, "io_out"),
    (ExitKind::MmioRead, "mmio_read"),
    (ExitKind::MmioWrite, "mmio_write"),
    (ExitKind::Hlt, "hlt"),
    (ExitKind::Shutdown, "shutdown"),
    (ExitKind::SystemEvent, "system_event"),
    (ExitKind::Interrupted, "interrupted"),
    (ExitKind::Failure, "failure"),
    (ExitKind::Other, "other"),
];

/// Exit counters shared by all vCPU threads.
#[derive(Debug, Default)]
pub struct ExitCounters {
    counts: [AtomicU64; 10],
}

impl ExitCounters {
    /// Counts one exit.
    pub fn count(&self, kind: ExitKind) {
        self.counts[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// A snapshot by reason name.
    pub fn snapshot(&self) -> BTreeMap<&'static str, u64> {
        KINDS
            .iter()
            .map(|(k, name)| (*name, self.counts[*k as usize].load(Ordering::Relaxed)))
            .collect()
    }
}

/// Memory of the VMM process, from /proc/self/smaps.
#[derive(Debug, Default, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct MemoryReport {
    /// Configured guest RAM.
    pub guest_bytes: u64,
    /// Guest RAM the guest has touched (resident).
    pub guest_resident_bytes: u64,
    /// Resident set of the whole process.
    pub process_rss_bytes: u64,
    /// Proportional set of the whole process.
    pub process_pss_bytes: u64,
    /// RSS outside guest RAM: what the VMM itself costs.
    pub overhead_rss_bytes: u64,
    /// PSS outside guest RAM.
    pub overhead_pss_bytes: u64,
}

/// Measures memory, treating mappings inside `guest_ranges` (host
/// addresses) as guest RAM. Reads /proc/self/smaps; returns zeros where it
/// cannot.
pub fn memory_report(guest_ranges: &[(u64, u64)]) -> MemoryReport {
    let guest_bytes = guest_ranges.iter().map(|r| r.1).sum();
    let text = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let mut report = MemoryReport {
        guest_bytes,
        ..Default::default()
    };
    let mut in_guest = false;
    for line in text.lines() {
        if let Some(start) = mapping_start(line) {
            in_guest = guest_ranges
                .iter()
                .any(|&(s, l)| start >= s && start < s + l);
            continue;
        }
        let (rss, pss) = (field_kib(line, "Rss:"), field_kib(line, "Pss:"));
        report.process_rss_bytes += rss;
        report.process_pss_bytes += pss;
        if in_guest {
            report.guest_resident_bytes += rss;
        } else {
            report.overhead_rss_bytes += rss;
            report.overhead_pss_bytes += pss;
        }
    }
    report
}

/// The start address of an smaps mapping header line ("start-end perms ...").
fn mapping_start(line: &str) -> Option<u64> {
    let range = line.split_whitespace().next()?;
    let (start, end) = range.split_once('-')?;
    u64::from_str_radix(end, 16).ok()?;
    u64::from_str_radix(start, 16).ok()
}

fn field_kib(line: &str, name: &str) -> u64 {
    line.strip_prefix(name)
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_memory() {
        let c = ExitCounters::default();
        c.count(ExitKind::IoOut);
        c.count(ExitKind::IoOut);
        assert_eq!(c.snapshot()["io_out"], 2);
        let report = memory_report(&[]);
        assert!(report.process_rss_bytes > 0);
        assert_eq!(report.process_rss_bytes, report.overhead_rss_bytes);
        assert_eq!(mapping_start("7f00-7f10 r-xp 0 00:00 0"), Some(0x7f00));
        assert_eq!(mapping_start("Rss:  4 kB"), None);
    }
}
