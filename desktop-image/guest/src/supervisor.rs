//! Keeps the workspace's services running: spawns each in its own process
//! group, restarts it with exponential backoff when it dies, probes its
//! readiness, and reports all of it to the control service.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cubicle_image::control::{Health, ServiceStatus};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::endpoints::Endpoints;

const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// A run this long counts as healthy: the next crash starts backoff afresh.
const STABLE_RUN: Duration = Duration::from_secs(30);
const LOG_TAIL_BYTES: u64 = 2048;
/// The time a readiness probe gets at first, and at most: a probe that
/// runs out of time is not an answer, so the next one gets twice as long
/// (a loaded host, or a machine just restored from a snapshot paging its
/// memory in, makes spawning `xprop` take seconds); the first answer sets
/// it back.
const PROBE_LIMIT: Duration = Duration::from_secs(2);
const PROBE_LIMIT_MAX: Duration = Duration::from_secs(64);
/// How long a held service has to exit on SIGTERM before SIGKILL (a
/// browser writes its profile out meanwhile).
const HOLD_GRACE: Duration = Duration::from_secs(10);

/// How to tell that a service is ready.
#[derive(Debug, Clone, Copy)]
pub enum Probe {
    Rfb,
    WindowManager,
    Cdp,
}

/// Who a service runs as, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAs {
    /// The supervisor's own id (Xvnc).
    Services,
    /// The services' id, in the browser's network namespace (Chromium).
    Browser,
    /// The workspace's user (the desktop session).
    User,
}

/// One service to keep running.
#[derive(Debug, Clone)]
pub struct ServiceSpec {
    pub name: &'static str,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub run_as: RunAs,
    pub probe: Probe,
    /// Fail the whole workspace after this many consecutive exits before the
    /// service was ever ready (Xvnc: without a display nothing works).
    pub fatal_after: Option<u32>,
}

#[derive(Debug, Default)]
struct State {
    services: Vec<ServiceStatus>,
    pids: Vec<(&'static str, u32)>,
    failed: Option<String>,
}

/// The owner of every service task and child process of the workspace.
pub struct Supervisor {
    /// How to reach the services (shared with the guest channel servers).
    pub endpoints: Endpoints,
    /// Where uploads for the browser are kept ([`crate::uploads`]).
    pub uploads: PathBuf,
    /// The browser's profile and its archives ([`crate::profile`]).
    pub profile: crate::profile::Places,
    log_dir: PathBuf,
    state: Mutex<State>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Services closed on purpose ([`Supervisor::hold`]): not restarted
    /// until released.
    held: Mutex<HashSet<&'static str>>,
    released: Notify,
}

impl Supervisor {
    pub fn new(log_dir: PathBuf, endpoints: Endpoints, browser_home: &std::path::Path) -> Self {
        Self {
            endpoints,
            uploads: browser_home.join("uploads"),
            profile: crate::profile::Places::under(browser_home),
            log_dir,
            state: Mutex::new(State::default()),
            tasks: Mutex::new(Vec::new()),
            held: Mutex::new(HashSet::new()),
            released: Notify::new(),
        }
    }

    fn held(&self) -> MutexGuard<'_, HashSet<&'static str>> {
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Closes service `name` and keeps it closed until
    /// [`Supervisor::release`]: first `politely` (a request the service
    /// honours by exiting cleanly), then SIGTERM to its group after
    /// [`HOLD_GRACE`], SIGKILL after another; returns once it has exited.
    pub async fn hold(
        &self,
        name: &'static str,
        politely: impl std::future::Future<Output = bool>,
    ) -> Result<(), String> {
        self.held().insert(name);
        let pids = || -> Vec<u32> {
            self.state()
                .pids
                .iter()
                .filter(|&&(n, _)| n == name)
                .map(|&(_, pid)| pid)
                .collect()
        };
        let running = pids();
        if running.is_empty() {
            return Ok(());
        }
        let mut signal = if politely.await { 0 } else { 1 };
        let mut next = Instant::now()
            + if signal == 0 {
                HOLD_GRACE
            } else {
                Duration::ZERO
            };
        while !pids().is_empty() {
            if Instant::now() >= next {
                match signal {
                    0 | 1 => signal_groups(&running, libc::SIGTERM),
                    2 => signal_groups(&running, libc::SIGKILL),
                    _ => return Err(format!("{name} did not exit, even on SIGKILL")),
                }
                signal += if signal == 0 { 2 } else { 1 };
                next = Instant::now() + HOLD_GRACE;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // What the process left in its group (a browser's helpers) goes too.
        signal_groups(&running, libc::SIGKILL);
        Ok(())
    }

    /// Lets a held service run again.
    pub fn release(&self, name: &'static str) {
        self.held().remove(name);
        self.released.notify_waiters();
    }

    /// Waits until service `name` is ready; false after `limit` or once
    /// the workspace failed.
    pub async fn wait_ready(&self, name: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.is_ready(name) {
                return true;
            }
            if self.failure().is_some() {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// Returns once `name` is not held.
    async fn until_released(&self, name: &str) {
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if !self.held().contains(name) {
                return;
            }
            released.await;
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock leaves plain data behind; keep going.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts keeping `spec` running.
    pub fn spawn(self: &Arc<Self>, spec: ServiceSpec) {
        self.state().services.push(ServiceStatus {
            name: spec.name.to_owned(),
            state: "starting".into(),
            ready: false,
            restarts: 0,
            last_exit: None,
        });
        let task = tokio::spawn(self.clone().keep_running(spec));
        self.tasks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(task);
    }

    pub fn is_ready(&self, name: &str) -> bool {
        self.state()
            .services
            .iter()
            .any(|service| service.name == name && service.ready)
    }

    pub fn failure(&self) -> Option<String> {
        self.state().failed.clone()
    }

    /// The control service's health report.
    pub fn health(&self) -> Health {
        let state = self.state();
        let ready = ["xvnc", "xfce", "chromium"].iter().all(|name| {
            state
                .services
                .iter()
                .any(|service| service.name == *name && service.ready)
        });
        Health {
            ready: ready && state.failed.is_none(),
            failed: state.failed.clone(),
            services: state.services.clone(),
        }
    }

    fn update(&self, name: &str, change: impl FnOnce(&mut ServiceStatus)) {
        if let Some(service) = self.state().services.iter_mut().find(|s| s.name == name) {
            change(service);
        }
    }

    async fn keep_running(self: Arc<Self>, spec: ServiceSpec) {
        let mut backoff = FIRST_BACKOFF;
        let mut early_exits = 0u32;
        loop {
            let started = Instant::now();
            let (exit, was_ready) = self.run_once(&spec).await;
            tracing::warn!(service = spec.name, %exit, "service ended");
            self.update(spec.name, |s| {
                s.state = "restarting".into();
                s.ready = false;
                s.restarts += 1;
                s.last_exit = Some(exit.clone());
            });
            if started.elapsed() >= STABLE_RUN {
                backoff = FIRST_BACKOFF;
            }
            if self.held().contains(spec.name) {
                // Closed on purpose: not an exit that counts against it.
                self.update(spec.name, |s| s.state = "held".into());
                self.until_released(spec.name).await;
                backoff = FIRST_BACKOFF;
                continue;
            }
            early_exits = if was_ready { 0 } else { early_exits + 1 };
            if spec.fatal_after.is_some_and(|limit| early_exits >= limit) {
                self.fail(&spec, early_exits, &exit);
                return;
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    fn fail(&self, spec: &ServiceSpec, exits: u32, exit: &str) {
        let tail = log_tail(&self.log_path(spec.name));
        let reason = format!(
            "{} ({}) exited {exits} times before it was ready; last: {exit}; log: {tail}",
            spec.name,
            spec.program.display()
        );
        self.update(spec.name, |s| s.state = "failed".into());
        self.state().failed = Some(reason);
    }

    fn log_path(&self, name: &str) -> PathBuf {
        self.log_dir.join(format!("{name}.log"))
    }

    /// Runs the service once; returns how it ended and whether it was ready.
    async fn run_once(&self, spec: &ServiceSpec) -> (String, bool) {
        let mut child = match self.start(spec).await {
            Ok(child) => child,
            Err(err) => return (format!("cannot start: {err}"), false),
        };
        let pid = child.id().unwrap_or_default();
        self.state().pids.push((spec.name, pid));
        self.update(spec.name, |s| s.state = "running".into());
        let mut was_ready = false;
        let status = tokio::select! {
            status = child.wait() => status,
            () = self.watch_readiness(spec, &mut was_ready) => unreachable_watch(),
        };
        self.state().pids.retain(|&(_, p)| p != pid);
        let exit = match status {
            Ok(status) => status.to_string(),
            Err(err) => format!("wait failed: {err}"),
        };
        (exit, was_ready)
    }

    async fn start(&self, spec: &ServiceSpec) -> std::io::Result<tokio::process::Child> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(spec.name))?;
        let mut command = tokio::process::Command::new(&spec.program);
        command
            .args(&spec.args)
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .kill_on_drop(true);
        match spec.run_as {
            RunAs::Services => command.spawn(),
            RunAs::User => {
                crate::user::run_as_user(&mut command);
                command.spawn()
            }
            RunAs::Browser => {
                // A new DevTools pipe per start (Chromium's fds 3 and 4).
                let pipe = self.endpoints.devtools.pipe_for_start()?;
                pipe.install(&mut command);
                // Forked from the thread that lives in the browser's
                // network namespace, so the child is born there.
                let runtime = tokio::runtime::Handle::current();
                self.endpoints
                    .browser_net
                    .run(move || {
                        let _context = runtime.enter();
                        let child = command.spawn();
                        // Only the child keeps Chromium's ends open.
                        drop(pipe);
                        child
                    })
                    .await
                    .map_err(std::io::Error::other)?
            }
        }
    }

    /// Probes until the child exits (the caller's select ends this future).
    /// A probe that runs out of time counts as not ready (a wedged service
    /// is not ready) and gives the next one twice the time.
    async fn watch_readiness(&self, spec: &ServiceSpec, was_ready: &mut bool) {
        let mut limit = PROBE_LIMIT;
        let spawned = Instant::now();
        loop {
            let answer = crate::session::probe(spec.probe, &self.endpoints, limit).await;
            limit = match answer {
                Some(_) => PROBE_LIMIT,
                None => {
                    let next = next_probe_limit(limit);
                    tracing::warn!(
                        service = spec.name,
                        ?limit,
                        ?next,
                        "readiness probe ran out of time"
                    );
                    next
                }
            };
            let ready = answer == Some(true);
            if ready && !*was_ready {
                let ms = spawned.elapsed().as_millis();
                tracing::info!(service = spec.name, ms, "ready");
            }
            *was_ready |= ready;
            self.update(spec.name, |s| s.ready = ready);
            // Not ready yet: asked again soon, as the workspace's start
            // waits on it (a probe is a connect or an X client's run).
            let pause = if ready { 2000 } else { 40 };
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
    }

    /// Stops every service: SIGTERM to each process group, SIGKILL to what
    /// is left after two seconds.
    pub async fn shutdown(&self) {
        for task in self
            .tasks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .drain(..)
        {
            task.abort();
        }
        let pids: Vec<u32> = self.state().pids.iter().map(|&(_, pid)| pid).collect();
        signal_groups(&pids, libc::SIGTERM);
        tokio::time::sleep(Duration::from_secs(2)).await;
        signal_groups(&pids, libc::SIGKILL);
    }
}

/// The time the probe after one that ran out of `limit` gets.
fn next_probe_limit(limit: Duration) -> Duration {
    (limit * 2).min(PROBE_LIMIT_MAX)
}

fn unreachable_watch() -> std::io::Result<std::process::ExitStatus> {
    // watch_readiness loops forever; select! only ever completes on wait().
    Err(std::io::Error::other("readiness watch ended"))
}

fn signal_groups(pids: &[u32], signal: libc::c_int) {
    for &pid in pids {
        let Ok(pgid) = libc::pid_t::try_from(pid) else {
            continue;
        };
        // SAFETY: killpg only sends a signal; a stale group id fails with
        // ESRCH, which is harmless here.
        unsafe {
            libc::killpg(pgid, signal);
        }
    }
}

/// The last lines of a service log, on one line, for an error message.
fn log_tail(path: &std::path::Path) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else {
        return "(no log)".into();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL_BYTES)));
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(4)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_that_runs_out_of_time_gets_twice_as_long_up_to_the_cap() {
        let mut limit = PROBE_LIMIT;
        let mut seen = vec![limit];
        while limit < PROBE_LIMIT_MAX {
            limit = next_probe_limit(limit);
            seen.push(limit);
        }
        let secs: Vec<u64> = seen.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [2, 4, 8, 16, 32, 64]);
        assert_eq!(next_probe_limit(limit), PROBE_LIMIT_MAX);
    }
}
