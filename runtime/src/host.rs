//! What kind of virtualization this host offers, told in one line.

use std::path::Path;

/// The host's virtualization, as far as Cubicle cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostKind {
    /// `/dev/kvm` backed by vmx/svm: microVMs can boot a stock Linux kernel.
    HardwareVirt,
    /// `/dev/kvm` is PVM (software virtualization): only PVM-built guest
    /// kernels boot, so workspaces run in the jail backend.
    Pvm,
    /// No usable `/dev/kvm`.
    NoKvm,
}

impl HostKind {
    /// Detects the host from `/dev/kvm`, `/sys/module/kvm_pvm` and the CPU flags.
    pub fn detect() -> Self {
        Self::detect_from(Path::new("/"))
    }

    fn detect_from(root: &Path) -> Self {
        if !root.join("dev/kvm").exists() {
            return Self::NoKvm;
        }
        if root.join("sys/module/kvm_pvm").exists() {
            return Self::Pvm;
        }
        let cpuinfo = std::fs::read_to_string(root.join("proc/cpuinfo")).unwrap_or_default();
        let has_flag = cpuinfo
            .lines()
            .filter(|line| line.starts_with("flags"))
            .flat_map(|line| line.split_whitespace())
            .any(|flag| flag == "vmx" || flag == "svm");
        if has_flag {
            Self::HardwareVirt
        } else {
            Self::NoKvm
        }
    }

    /// The backend workspaces get by default on this host.
    pub fn default_backend(self) -> &'static str {
        match self {
            Self::HardwareVirt => "microvm",
            Self::Pvm | Self::NoKvm => "jail",
        }
    }

    /// One line for the log and `cubicle doctor`.
    pub fn describe(self) -> &'static str {
        match self {
            Self::HardwareVirt => {
                "host: hardware virtualization (vmx/svm) on /dev/kvm; microvm backend available, jail available"
            }
            Self::Pvm => {
                "host: /dev/kvm is PVM (software virtualization, no vmx/svm); stock Linux guests cannot boot, workspaces use the jail backend (bubblewrap)"
            }
            Self::NoKvm => {
                "host: no hardware virtualization and no /dev/kvm; workspaces use the jail backend (bubblewrap)"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_root(kvm: bool, pvm: bool, flags: &str) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("dev")).unwrap();
        std::fs::create_dir_all(root.path().join("proc")).unwrap();
        std::fs::create_dir_all(root.path().join("sys/module")).unwrap();
        if kvm {
            std::fs::write(root.path().join("dev/kvm"), "").unwrap();
        }
        if pvm {
            std::fs::create_dir_all(root.path().join("sys/module/kvm_pvm")).unwrap();
        }
        let cpuinfo = format!("processor\t: 0\nflags\t\t: fpu {flags} sse2\n");
        std::fs::write(root.path().join("proc/cpuinfo"), cpuinfo).unwrap();
        root
    }

    #[test]
    fn tells_the_three_kinds_apart() {
        let hw = fake_root(true, false, "vmx");
        assert_eq!(HostKind::detect_from(hw.path()), HostKind::HardwareVirt);
        let pvm = fake_root(true, true, "");
        assert_eq!(HostKind::detect_from(pvm.path()), HostKind::Pvm);
        let none = fake_root(false, false, "svm");
        assert_eq!(HostKind::detect_from(none.path()), HostKind::NoKvm);
        assert_eq!(HostKind::Pvm.default_backend(), "jail");
        assert_eq!(HostKind::HardwareVirt.default_backend(), "microvm");
    }
}
