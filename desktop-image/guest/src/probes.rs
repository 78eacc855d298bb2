//! Readiness probes: is a service inside the workspace answering its
//! protocol? None has a time limit of its own: the caller gives each whole
//! probe one (`session::probe`), and a child a probe started is killed when
//! the probe is dropped.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::endpoints::{Endpoints, Service};

/// RFB security type "None".
const SECURITY_NONE: u8 = 1;

/// Xvnc is ready when a whole RFB 3.8 handshake succeeds (version, security
/// type None, ServerInit) on its socket. A half handshake would count as a
/// security failure and get the prober blacklisted by Xvnc.
pub async fn rfb(endpoints: &Endpoints) -> bool {
    let attempt = async {
        match endpoints.connect(cubicle_image::ports::RFB).await.ok()? {
            Service::Unix(stream) => rfb_handshake(stream).await,
        }
    };
    attempt.await == Some(true)
}

async fn rfb_handshake<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S) -> Option<bool> {
    let mut banner = [0u8; 12];
    stream.read_exact(&mut banner).await.ok()?;
    if !banner.starts_with(b"RFB ") {
        return Some(false);
    }
    stream.write_all(b"RFB 003.008\n").await.ok()?;
    let count = stream.read_u8().await.ok()?;
    let mut types = vec![0u8; usize::from(count)];
    stream.read_exact(&mut types).await.ok()?;
    if !types.contains(&SECURITY_NONE) {
        return Some(false);
    }
    stream.write_u8(SECURITY_NONE).await.ok()?;
    if stream.read_u32().await.ok()? != 0 {
        return Some(false);
    }
    stream.write_u8(1).await.ok()?; // ClientInit: shared
    let width = stream.read_u16().await.ok()?;
    Some(width > 0)
}

/// Chromium is ready when `Browser.getVersion` is answered over its
/// DevTools pipe.
pub async fn cdp(endpoints: &Endpoints) -> bool {
    endpoints.devtools.answers().await
}

/// The window manager is ready when the root window names it
/// (`_NET_SUPPORTING_WM_CHECK`, set by xfwm4 once it manages windows).
/// Windows mapped before that are placed again when it starts, so the
/// browser is started only after this passes.
pub async fn window_manager(display: &str) -> bool {
    run(
        display,
        "/usr/bin/xprop",
        &["-root", "_NET_SUPPORTING_WM_CHECK"],
    )
    .await
    .is_some_and(|out| out.contains("window id"))
}

/// The browser's window is shown and the window manager has maximized it:
/// from then on it does not move, so coordinates an agent reads from a
/// screenshot stay true.
pub async fn browser_window(display: &str) -> bool {
    let Some(ids) = run(
        display,
        "/usr/bin/xdotool",
        &["search", "--onlyvisible", "--class", "chromium"],
    )
    .await
    else {
        return false;
    };
    for id in ids.split_whitespace() {
        let state = run(display, "/usr/bin/xprop", &["-id", id, "_NET_WM_STATE"]).await;
        if state.is_some_and(|s| {
            s.contains("_NET_WM_STATE_MAXIMIZED_HORZ") && s.contains("_NET_WM_STATE_MAXIMIZED_VERT")
        }) {
            return true;
        }
    }
    false
}

/// Runs an X client on `display`; its stdout, or None if it failed.
async fn run(display: &str, program: &str, args: &[&str]) -> Option<String> {
    let out = tokio::process::Command::new(program)
        .args(args)
        .env_clear()
        .env("DISPLAY", display)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}
