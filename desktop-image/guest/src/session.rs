//! What runs in a workspace, as whom, and in which order: Xvnc first (the
//! services' id, RFB on a Unix socket only); once it answers RFB, the XFCE
//! session (the user); then Chromium (the services' id, in the browser's
//! own network namespace, its profile in a folder of the services' id,
//! DevTools on a pipe to the supervisor).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::endpoints::Endpoints;
use crate::probes;
use crate::supervisor::{Probe, RunAs, ServiceSpec, Supervisor};

/// The display every workspace uses.
const DISPLAY: &str = ":0";

/// The services of one workspace, built from the command line.
pub struct Plan {
    xvnc: ServiceSpec,
    xfce: ServiceSpec,
    chromium: ServiceSpec,
    profile: PathBuf,
}

impl Plan {
    pub fn from_args(args: &crate::Args, endpoints: &Endpoints) -> Result<Self, String> {
        let (width, height) = parse_geometry(&args.geometry)?;
        let env = session_env(&args.home);
        let xvnc = ServiceSpec {
            name: "xvnc",
            program: args.xvnc.clone(),
            args: vec![
                DISPLAY.into(),
                "-geometry".into(),
                format!("{width}x{height}"),
                "-depth".into(),
                "24".into(),
                // No TCP listener at all: RFB only on a socket in the
                // services' private directory, which only the supervisor
                // (the same id) can open.
                "-rfbport".into(),
                "-1".into(),
                "-rfbunixpath".into(),
                endpoints.rfb_socket.display().to_string(),
                "-rfbunixmode".into(),
                "0600".into(),
                "-SecurityTypes".into(),
                "None".into(),
                "-AlwaysShared".into(),
                // Only the host reaches this port (through the guest channel),
                // so every connection comes from one address: Xvnc's
                // blacklist of half-finished handshakes would lock the agent
                // out along with whoever caused it.
                "-BlacklistThreshold".into(),
                "1000000".into(),
                "-desktop".into(),
                "cubicle".into(),
                // Nothing in the workspace renders through GLX (Chromium
                // has its own software path, xfwm4 composites with
                // XRender); without it Xvnc loads no Mesa/LLVM: about
                // 20 MiB less per desktop, measured.
                "-extension".into(),
                "GLX".into(),
            ],
            env: browser_env(&args.browser_home),
            run_as: RunAs::Services,
            probe: Probe::Rfb,
            fatal_after: Some(3),
        };
        let xfce = ServiceSpec {
            name: "xfce",
            program: PathBuf::from("/usr/bin/dbus-launch"),
            args: vec!["--exit-with-session".into(), "/usr/bin/startxfce4".into()],
            env,
            run_as: RunAs::User,
            probe: Probe::WindowManager,
            fatal_after: None,
        };
        let profile = args.browser_home.join("profile");
        let chromium = ServiceSpec {
            name: "chromium",
            program: args.chromium.clone(),
            args: chromium_flags(&profile, width, height),
            env: browser_env(&args.browser_home),
            run_as: RunAs::Browser,
            probe: Probe::Cdp,
            fatal_after: None,
        };
        Ok(Self {
            xvnc,
            xfce,
            chromium,
            profile,
        })
    }
}

/// Starts the plan: Xvnc; once the display answers, the XFCE session; once
/// its window manager runs, Chromium (so its window is placed once, by the
/// window manager, and does not jump after the workspace is ready). Tried:
/// Chromium beside the session, ready once the manager had framed its
/// window: under load a window mapped before the manager ran was at times
/// never seen framed and maximized (ten of 665 tests failed their create).
pub async fn start(plan: Plan, supervisor: Arc<Supervisor>) {
    if let Err(err) = supervisor.endpoints.prepare() {
        tracing::warn!(%err, "cannot make the services' private directory; Xvnc cannot listen");
    }
    if let Err(err) = crate::user::make_runtime_dir() {
        tracing::warn!(%err, "cannot make the user's runtime directory; the session only logs warnings without it");
    }
    supervisor.spawn(plan.xvnc);
    if !wait_ready(&supervisor, "xvnc").await {
        return;
    }
    supervisor.spawn(plan.xfce);
    if !wait_ready(&supervisor, "xfce").await {
        return;
    }
    if let Err(err) = prepare_profile(&plan.profile) {
        tracing::warn!(%err, "cannot prepare the browser profile; its window may be decorated by Chromium itself");
    }
    crate::egress_relay::trust_for(&plan.chromium.env);
    supervisor.spawn(plan.chromium);
}

/// Makes the window manager frame Chromium's window (not Chromium's own
/// title bar): its maximized placement is then the window manager's, stable
/// from the first frame. Only a new profile is touched.
fn prepare_profile(profile: &std::path::Path) -> std::io::Result<()> {
    let preferences = profile.join("Default/Preferences");
    if preferences.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(profile.join("Default"))?;
    std::fs::write(preferences, r#"{"browser":{"custom_chrome_frame":false}}"#)
}

/// Waits until `name` is ready; false if the workspace failed instead.
async fn wait_ready(supervisor: &Supervisor, name: &str) -> bool {
    while !supervisor.is_ready(name) {
        if supervisor.failure().is_some() {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

fn parse_geometry(text: &str) -> Result<(u32, u32), String> {
    text.split_once('x')
        .and_then(|(w, h)| Some((w.parse().ok()?, h.parse().ok()?)))
        .filter(|&(w, h): &(u32, u32)| w > 0 && h > 0)
        .ok_or_else(|| format!("--geometry {text:?} is not WIDTHxHEIGHT (e.g. 1280x800)"))
}

/// The desktop session's environment (the user's).
fn session_env(home: &std::path::Path) -> Vec<(String, String)> {
    [
        ("DISPLAY", DISPLAY),
        ("HOME", &home.to_string_lossy()),
        ("USER", "user"),
        ("LOGNAME", "user"),
        ("SHELL", "/bin/bash"),
        ("LANG", "C.UTF-8"),
        ("XDG_RUNTIME_DIR", crate::user::RUNTIME_DIR),
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
    ]
    .into_iter()
    .chain(crate::egress_relay::proxy_env())
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// The services' environment (Xvnc, Chromium): their own home, where
/// Chromium keeps its profile, caches and settings.
fn browser_env(home: &std::path::Path) -> Vec<(String, String)> {
    [
        ("DISPLAY", DISPLAY),
        ("HOME", &home.to_string_lossy()),
        ("LANG", "C.UTF-8"),
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

fn chromium_flags(profile: &std::path::Path, width: u32, height: u32) -> Vec<String> {
    vec![
        // The workspace itself is the sandbox; Chromium's own needs
        // namespaces or setuid, which the jail does not grant.
        "--no-sandbox".into(),
        "--test-type".into(),
        "--disable-gpu".into(),
        // Memory per idle desktop (anonymous pages, a plain desktop of the
        // image measured with and without): the compositor in the browser
        // process instead of a GPU process of its own, −16 MiB; Chromium's
        // low-memory mode (smaller caches, fewer spare processes), −20 MiB.
        "--in-process-gpu".into(),
        "--enable-low-end-device-mode".into(),
        "--disable-dev-shm-usage".into(),
        "--no-first-run".into(),
        "--no-default-browser-check".into(),
        "--disable-background-networking".into(),
        "--disable-component-update".into(),
        "--disable-sync".into(),
        "--password-store=basic".into(),
        // DevTools on fds 3 and 4 only, held by the supervisor: no port
        // a page could name (see `devtools_pipe`).
        crate::devtools_pipe::CHROMIUM_FLAG.into(),
        format!("--user-data-dir={}", profile.display()),
        "--window-position=0,0".into(),
        format!("--window-size={width},{height}"),
        "--start-maximized".into(),
        crate::egress_relay::chromium_flag(),
        // Every request through the egress proxy, loopback included (by
        // default Chromium goes to loopback directly, where DevTools was):
        // the host's proxy refuses loopback. WebRTC may not send UDP
        // around the proxy either.
        "--proxy-bypass-list=<-loopback>".into(),
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp".into(),
        "--webrtc-ip-handling-policy=disable_non_proxied_udp".into(),
        "about:blank".into(),
    ]
}

/// Readiness probes per kind, used by the supervisor: `None` when the
/// probe did not finish within `limit` (it is dropped, and a child it
/// started with it), else whether the service answered.
pub async fn probe(kind: Probe, endpoints: &Endpoints, limit: Duration) -> Option<bool> {
    let probe = async {
        match kind {
            Probe::WindowManager => probes::window_manager(DISPLAY).await,
            Probe::Rfb => probes::rfb(endpoints).await,
            Probe::Cdp => probes::cdp(endpoints).await && probes::browser_window(DISPLAY).await,
        }
    };
    tokio::time::timeout(limit, probe).await.ok()
}
