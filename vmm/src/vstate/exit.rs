//! How a VM asks to stop: the first reason wins, a flag vCPUs check after
//! every exit (so a vCPU never runs past a reset it just requested), and an
//! eventfd that wakes the VMM thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use vm_superio::Trigger;
use vmm_sys_util::eventfd::EventFd;

/// Why the VM stopped.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitReason {
    /// The guest asked for a reset (i8042, or KVM reset event): a clean exit.
    GuestReset,
    /// The guest shut down (KVM shutdown event).
    GuestShutdown,
    /// The guest triple-faulted (it crashed).
    /// Where it was, when its registers could be read.
    TripleFault(String),
    /// The API asked to stop.
    Stopped,
    /// KVM reported a failure.
    Failed(String),
}

/// Shared by vCPUs, devices and the VMM thread.
#[derive(Debug)]
pub struct ExitSignal {
    requested: AtomicBool,
    reason: Mutex<Option<ExitReason>>,
    evt: EventFd,
}

impl ExitSignal {
    /// A signal that wakes `evt`.
    pub fn new(evt: EventFd) -> Self {
        ExitSignal {
            requested: AtomicBool::new(false),
            reason: Mutex::new(None),
            evt,
        }
    }

    /// Records `reason` (if none yet) and wakes the VMM thread.
    pub fn request(&self, reason: ExitReason) {
        self.reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(reason);
        self.requested.store(true, Ordering::SeqCst);
        // If the eventfd cannot be written, the flag still stops the vCPUs.
        let _ = self.evt.write(1);
    }

    /// Whether an exit was requested.
    pub fn requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// The first recorded reason.
    pub fn reason(&self) -> Option<ExitReason> {
        self.reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The eventfd the VMM thread waits on.
    pub fn event(&self) -> &EventFd {
        &self.evt
    }
}

/// The i8042's reset line: a guest reset request.
pub struct ResetTrigger(pub std::sync::Arc<ExitSignal>);

impl Trigger for ResetTrigger {
    type E = std::convert::Infallible;

    fn trigger(&self) -> Result<(), Self::E> {
        self.0.request(ExitReason::GuestReset);
        Ok(())
    }
}

impl ExitReason {
    /// The VMM process's exit code for this guest exit: 0 for a clean
    /// exit; 2, with the reason on stderr, for a crash or a KVM failure.
    pub fn exit_code(&self) -> std::process::ExitCode {
        match self {
            ExitReason::GuestReset | ExitReason::GuestShutdown | ExitReason::Stopped => {
                std::process::ExitCode::SUCCESS
            }
            ExitReason::TripleFault(state) => {
                eprintln!("cubicle-vmm: the guest triple-faulted (crashed){state}");
                std::process::ExitCode::from(2)
            }
            ExitReason::Failed(why) => {
                eprintln!("cubicle-vmm: guest failed: {why}");
                std::process::ExitCode::from(2)
            }
        }
    }
}
