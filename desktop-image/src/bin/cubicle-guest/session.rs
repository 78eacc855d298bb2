//! What runs in a workspace and in which order: Xvnc first; once it answers
//! RFB, the XFCE session and Chromium.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::probes;
use crate::supervisor::{Probe, ServiceSpec, Supervisor};

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
    pub fn from_args(args: &crate::Args) -> Result<Self, String> {
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
                "-rfbport".into(),
                cubicle_guest::ports::RFB.to_string(),
                "-localhost".into(),
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
            ],
            env: env.clone(),
            probe: Probe::Rfb,
            fatal_after: Some(3),
        };
        let xfce = ServiceSpec {
            name: "xfce",
            program: PathBuf::from("/usr/bin/dbus-launch"),
            args: vec!["--exit-with-session".into(), "/usr/bin/startxfce4".into()],
            env: env.clone(),
            probe: Probe::WindowManager,
            fatal_after: None,
        };
        let profile = args.home.join(".config/cubicle-chromium");
        let chromium = ServiceSpec {
            name: "chromium",
            program: args.chromium.clone(),
            args: chromium_flags(&profile, width, height),
            env,
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
/// window manager, and does not jump after the workspace is ready).
pub async fn start(plan: Plan, supervisor: Arc<Supervisor>) {
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
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

fn parse_geometry(text: &str) -> Result<(u32, u32), String> {
    text.split_once('x')
        .and_then(|(w, h)| Some((w.parse().ok()?, h.parse().ok()?)))
        .filter(|&(w, h): &(u32, u32)| w > 0 && h > 0)
        .ok_or_else(|| format!("--geometry {text:?} is not WIDTHxHEIGHT (e.g. 1280x800)"))
}

fn session_env(home: &std::path::Path) -> Vec<(String, String)> {
    let runtime_dir = "/tmp/runtime-user";
    // Xfce and dbus want a private runtime dir; failing here is not fatal, the
    // session only logs warnings without one.
    let _ = std::fs::create_dir_all(runtime_dir);
    let _ = std::fs::set_permissions(
        runtime_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    );
    [
        ("DISPLAY", DISPLAY),
        ("HOME", &home.to_string_lossy()),
        ("USER", "user"),
        ("LOGNAME", "user"),
        ("SHELL", "/bin/bash"),
        ("LANG", "C.UTF-8"),
        ("XDG_RUNTIME_DIR", runtime_dir),
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
        "--disable-dev-shm-usage".into(),
        "--no-first-run".into(),
        "--no-default-browser-check".into(),
        "--disable-background-networking".into(),
        "--disable-component-update".into(),
        "--disable-sync".into(),
        "--password-store=basic".into(),
        format!("--remote-debugging-port={}", cubicle_guest::ports::CDP),
        "--remote-debugging-address=127.0.0.1".into(),
        format!("--user-data-dir={}", profile.display()),
        "--window-position=0,0".into(),
        format!("--window-size={width},{height}"),
        "--start-maximized".into(),
        "about:blank".into(),
    ]
}

/// Readiness probes per kind, used by the supervisor.
pub async fn probe(kind: Probe) -> bool {
    match kind {
        Probe::WindowManager => probes::window_manager(DISPLAY).await,
        Probe::Rfb => probes::rfb(cubicle_guest::ports::RFB).await,
        Probe::Cdp => {
            probes::cdp(cubicle_guest::ports::CDP).await && probes::browser_window(DISPLAY).await
        }
    }
}
