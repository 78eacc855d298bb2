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
    /// Bumped for each round of jobs parked vCPUs run.
    job: u64,
    /// vCPUs done with the current round.
    jobs_done: usize,
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
            job: 0,
            jobs_done: 0,
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

    /// Called by a vCPU before KVM_RUN: parks while paused, running `job`
    /// once for each round [`RunControl::run_jobs`] starts; false means stop.
    pub fn may_run(&self, mut job: impl FnMut()) -> bool {
        let mut s = self.lock();
        if s.target == Target::Pause {
            s.parked += 1;
            self.cond.notify_all();
            let mut seen = s.job;
            while s.target == Target::Pause {
                if s.job != seen {
                    seen = s.job;
                    drop(s);
                    job();
                    s = self.lock();
                    s.jobs_done += 1;
                    self.cond.notify_all();
                    continue;
                }
                s = self.cond.wait(s).unwrap_or_else(PoisonError::into_inner);
            }
            s.parked -= 1;
        }
        s.target != Target::Stop
    }

    /// While paused: has every parked vCPU run its job once and waits for
    /// them. A vCPU that has exited runs none.
    pub fn run_jobs(&self) {
        let mut s = self.lock();
        debug_assert_eq!(s.target, Target::Pause, "jobs run only on parked vCPUs");
        s.job += 1;
        s.jobs_done = 0;
        self.cond.notify_all();
        while s.jobs_done < s.parked {
            s = self.cond.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
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
        let jobs = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (c, n, j) = (control.clone(), spins.clone(), jobs.clone());
                std::thread::spawn(move || {
                    while c.may_run(|| {
                        j.fetch_add(1, Ordering::SeqCst);
                    }) {
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
        control.run_jobs();
        assert_eq!(
            jobs.load(Ordering::SeqCst),
            2,
            "each parked vCPU ran the job once"
        );
        control.run_jobs();
        assert_eq!(jobs.load(Ordering::SeqCst), 4);
        control.set(Target::Run, || {});
        control.set(Target::Stop, || {});
        for t in threads {
            t.join().expect("vCPU thread");
        }
    }
}
