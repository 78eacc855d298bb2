//! Either backend behind one type, so the daemon's `Manager<AnyBackend>` can
//! run whichever the host and the operator chose, by plain delegation.

use crate::backend::{Backend, BackendError, Exit, WorkspaceSpec};
use crate::channel::GuestChannel;
use crate::host::HostKind;
use crate::jail::JailBackend;
use crate::microvm::{self, MicrovmBackend, MicrovmConfig};

/// What can go wrong choosing a backend.
#[derive(Debug, thiserror::Error)]
pub enum AnyBackendError {
    #[error("unknown backend {0:?}: choose `jail` or `microvm`")]
    Unknown(String),
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// The jail or the microvm backend.
#[derive(Debug, Clone)]
pub enum AnyBackend {
    Jail(JailBackend),
    Microvm(MicrovmBackend),
}

impl AnyBackend {
    /// The backend named `requested`, or the host's default
    /// ([`HostKind::default_backend`]) when none is asked for. Only the
    /// chosen one is built: `microvm` is called only if the microvm backend
    /// is chosen (finding the kernel and the ext4 image can fail or take
    /// time), and asking for it on a host without hardware virtualization
    /// fails with [`BackendError::Unavailable`], saying that jail is available.
    pub fn select(
        requested: Option<&str>,
        host: HostKind,
        jail: impl FnOnce() -> Result<JailBackend, BackendError>,
        microvm: impl FnOnce() -> Result<MicrovmConfig, BackendError>,
    ) -> Result<Self, AnyBackendError> {
        match requested.unwrap_or(host.default_backend()) {
            "jail" => Ok(Self::Jail(jail()?)),
            "microvm" => {
                // Refuse before `microvm()` builds anything on a host that
                // cannot run it.
                microvm::check_host(host)?;
                Ok(Self::Microvm(MicrovmBackend::new_on(host, microvm()?)?))
            }
            other => Err(AnyBackendError::Unknown(other.to_owned())),
        }
    }
}

impl Backend for AnyBackend {
    fn name(&self) -> &'static str {
        match self {
            Self::Jail(b) => b.name(),
            Self::Microvm(b) => b.name(),
        }
    }

    fn create(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        match self {
            Self::Jail(b) => b.create(spec),
            Self::Microvm(b) => b.create(spec),
        }
    }

    fn start(
        &self,
        spec: &WorkspaceSpec,
    ) -> Result<(i32, tokio::sync::oneshot::Receiver<Exit>), BackendError> {
        match self {
            Self::Jail(b) => b.start(spec),
            Self::Microvm(b) => b.start(spec),
        }
    }

    fn is_running(&self, spec: &WorkspaceSpec, pid: i32) -> bool {
        match self {
            Self::Jail(b) => b.is_running(spec, pid),
            Self::Microvm(b) => b.is_running(spec, pid),
        }
    }

    async fn stop(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        match self {
            Self::Jail(b) => b.stop(spec).await,
            Self::Microvm(b) => b.stop(spec).await,
        }
    }

    async fn pause(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        match self {
            Self::Jail(b) => b.pause(spec).await,
            Self::Microvm(b) => b.pause(spec).await,
        }
    }

    async fn resume(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        match self {
            Self::Jail(b) => b.resume(spec).await,
            Self::Microvm(b) => b.resume(spec).await,
        }
    }

    fn memory_snapshots(&self) -> bool {
        match self {
            Self::Jail(b) => b.memory_snapshots(),
            Self::Microvm(b) => b.memory_snapshots(),
        }
    }

    async fn snapshot_memory(
        &self,
        spec: &WorkspaceSpec,
        files: &crate::snapshots::Files,
        id: &str,
    ) -> Result<crate::snapshots::MemoryParts, BackendError> {
        match self {
            Self::Jail(b) => b.snapshot_memory(spec, files, id).await,
            Self::Microvm(b) => b.snapshot_memory(spec, files, id).await,
        }
    }

    fn start_restored(
        &self,
        spec: &WorkspaceSpec,
        image: &crate::snapshots::MemoryImage,
    ) -> Result<(i32, tokio::sync::oneshot::Receiver<Exit>), BackendError> {
        match self {
            Self::Jail(b) => b.start_restored(spec, image),
            Self::Microvm(b) => b.start_restored(spec, image),
        }
    }

    fn clean(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        match self {
            Self::Jail(b) => b.clean(spec),
            Self::Microvm(b) => b.clean(spec),
        }
    }

    fn destroy(&self, spec: &WorkspaceSpec) -> Result<(), BackendError> {
        match self {
            Self::Jail(b) => b.destroy(spec),
            Self::Microvm(b) => b.destroy(spec),
        }
    }

    fn usage(&self, spec: &WorkspaceSpec) -> crate::limits::Usage {
        match self {
            Self::Jail(b) => b.usage(spec),
            Self::Microvm(b) => b.usage(spec),
        }
    }

    fn channel(&self, spec: &WorkspaceSpec) -> GuestChannel {
        match self {
            Self::Jail(b) => b.channel(spec),
            Self::Microvm(b) => b.channel(spec),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jail() -> Result<JailBackend, BackendError> {
        JailBackend::new(
            "/img".into(),
            "/bin/guest".into(),
            "/bin/shim".into(),
            "/usr/bin/Xvnc".into(),
        )
    }

    fn no_microvm() -> Result<MicrovmConfig, BackendError> {
        panic!("the microvm config must not be built on this path")
    }

    #[test]
    fn pvm_host_defaults_to_jail_and_refuses_microvm_without_building_it() {
        let chosen = AnyBackend::select(None, HostKind::Pvm, jail, no_microvm).unwrap();
        assert_eq!(chosen.name(), "jail");
        let err = AnyBackend::select(Some("microvm"), HostKind::Pvm, jail, no_microvm).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("PVM") && message.contains("jail"),
            "{message}"
        );
        let err = AnyBackend::select(Some("qemu"), HostKind::Pvm, jail, no_microvm).unwrap_err();
        assert!(matches!(err, AnyBackendError::Unknown(_)));
    }
}
