//! Run/pause/stop coordination between the VMM thread and vCPU threads.
//! A vCPU checks the target state before each KVM_RUN; the VMM thread kicks
//! vCPUs out of KVM_RUN with a signal. A kick can land just before a vCPU
//! enters KVM_RUN and be lost, so the VMM re-kicks every millisecond until
//! every vCPU has acknowledged (simpler than immediate_exit from a signal
//! handler, and just as correct).

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// What the VMM wants the vCPUs to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Run the guest.
    Run,
    /// Park until resumed.
    Pause,
    /// Leave the run loop.
    Stop,
}

#[derive(Debug)]
struct Shared {
    target: Target,
    parked: usize,
    exited: usize,
}

/// Shared by the VMM thread and all vCPU threads.
#[derive(Debug)]
pub struct RunControl {
    vcpus: usize,
    shared: Mutex<Shared>,
    cond: Condvar,
}

impl RunControl {
    /// Control for `vcpus` vCPUs, initially running.
    pub fn new(vcpus: usize) -> Self {
        let shared = Shared {
            target: Target::Run,
            parked: 0,
            exited: 0,
        };
        RunControl {
            vcpus,
            shared: Mutex::new(shared),
            cond: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Called by a vCPU before KVM_RUN: parks while paused; false means stop.
    pub fn may_run(&self) -> bool {
        let mut s = self.lock();
        if s.target == Target::Pause {
            s.parked += 1;
            self.cond.notify_all();
            while s.target == Target::Pause {
                s = self.cond.wait(s).unwrap_or_else(PoisonError::into_inner);
            }
            s.parked -= 1;
        }
        s.target != Target::Stop
    }

    /// Called by a vCPU thread as it leaves its loop.
    pub fn exited(&self) {
        self.lock().exited += 1;
        self.cond.notify_all();
    }

    /// Sets the target; with Pause or Stop, calls `kick` until every vCPU
    /// has parked or exited.
    pub fn set(&self, target: Target, kick: impl Fn()) {
        let mut s = self.lock();
        s.target = target;
        self.cond.notify_all();
        if target == Target::Run {
            return;
        }
        while s.parked + s.exited < self.vcpus {
            drop(s);
            kick();
            s = self.lock();
            let (guard, _) = self
                .cond
                .wait_timeout(s, Duration::from_millis(1))
                .unwrap_or_else(PoisonError::into_inner);
            s = guard;
        }
    }

    /// The current target.
    pub fn target(&self) -> Target {
        self.lock().target
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn pause_resume_stop() {
        let control = Arc::new(RunControl::new(2));
        let spins = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (c, n) = (control.clone(), spins.clone());
                std::thread::spawn(move || {
                    while c.may_run() {
                        n.fetch_add(1, Ordering::Relaxed);
                        std::thread::yield_now();
                    }
                    c.exited();
                })
            })
            .collect();
        control.set(Target::Pause, || {});
        let frozen = spins.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(
            spins.load(Ordering::Relaxed),
            frozen,
            "paused vCPUs do not run"
        );
        control.set(Target::Run, || {});
        control.set(Target::Stop, || {});
        for t in threads {
            t.join().expect("vCPU thread");
        }
    }
}
