//! `cubicle-guest`: the workspace's first process.
//!
//! Starts Xvnc, the XFCE session and Chromium, restarts any that die (with
//! backoff), probes readiness, and serves the guest channel on the Unix
//! socket the host hands it (`--channel-fd`). The protocol is
//! `cubicle-image`'s (`desktop-image/src/`).
//!
//! It runs as the services' id, apart from the workspace's user: read
//! [`user`] for what runs as the user, [`endpoints`] for where Xvnc and
//! DevTools listen (out of the user's reach), [`caps`] for what it may
//! still do that its children may not.
//!
//! With `--vm` it is the init of a microVM ([`vm_init`]) and serves the guest
//! channel on AF_VSOCK instead ([`vsock_server`]).

mod browser_net;
mod caps;
mod channel_server;
mod control_server;
mod devtools_pipe;
mod egress_relay;
mod endpoints;
mod exec;
mod exec_stream;
mod files;
mod identity_service;
mod machine_id;
mod probes;
mod profile;
mod seccomp_load;
mod session;
mod supervisor;
mod uploads;
mod user;
mod vm_init;
mod vsock_server;

use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;

/// The in-workspace supervisor.
#[derive(Debug, Parser)]
#[command(name = "cubicle-guest", version)]
struct Args {
    /// The inherited descriptor of the guest channel socket, bound by the
    /// host in a directory of its own; the guest only listens on it.
    #[arg(long)]
    channel_fd: Option<RawFd>,
    /// Screen size, WIDTHxHEIGHT.
    #[arg(long, default_value = "1280x800")]
    geometry: String,
    /// The Xvnc binary inside the workspace.
    #[arg(long, default_value = "/usr/bin/Xvnc")]
    xvnc: PathBuf,
    /// The Chromium binary inside the workspace.
    #[arg(long, default_value = "/usr/bin/chromium")]
    chromium: PathBuf,
    /// Where each service's stdout and stderr are written.
    #[arg(long, default_value = "/tmp/cubicle-logs")]
    log_dir: PathBuf,
    /// The workspace user's home.
    #[arg(long, default_value = "/home/user")]
    home: PathBuf,
    /// The browser's home (its profile), a folder of the services' id.
    #[arg(long, default_value = "/run/cubicle-browser")]
    browser_home: PathBuf,
    /// Run as PID 1 of a microVM: mount, bring up lo, reap orphans, and
    /// serve the guest channel on vsock instead of `--channel-fd`.
    #[arg(long)]
    vm: bool,
    /// The hostname to set (with `--vm`; the jail sets its own).
    #[arg(long, default_value = "cubicle")]
    hostname: String,
    /// The host's egress proxy socket, which 127.0.0.1:3128 relays to.
    #[arg(long, default_value = egress_relay::DEFAULT_SOCKET)]
    egress_socket: PathBuf,
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    if args.vm
        && let Err(err) = vm_init::boot(&args.hostname)
    {
        eprintln!("cubicle-guest: {err}");
        // As PID 1 this ends the VM; anywhere else it only exits.
        vm_init::reboot();
    }
    // Before any other thread: the browser's network thread needs the
    // start-up capabilities, every later thread must not have them.
    let endpoints = match separate_services() {
        Ok(endpoints) => endpoints,
        Err(err) => {
            eprintln!("cubicle-guest: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("cubicle-guest: cannot start the async runtime: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args, endpoints)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("cubicle-guest: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Sets the services apart from the user: the browser's network
/// namespace, then only `SETUID`, `SETGID` and `KILL` left to this process
/// and nothing for its children. Fails the start if the browser cannot
/// have a namespace of its own (its loopback would be the user's). In a
/// microVM [`vm_init`] has made this process the services' id with the
/// same capabilities bubblewrap gives it in a jail, so the same holds.
fn separate_services() -> Result<endpoints::Endpoints, String> {
    if user::init() {
        // The services may read what the user shares with its group (the
        // browser uploads the user's files); the user gets nothing of the
        // services'.
        user::join_users_group().map_err(|err| format!("cannot join the user's group: {err}"))?;
    }
    let browser_net = browser_net::BrowserNet::create().map_err(|err| err.to_string())?;
    caps::keep_only_for_self()
        .map_err(|err| format!("cannot drop the start-up capabilities: {err}"))?;
    Ok(endpoints::Endpoints::new(browser_net))
}

async fn run(args: Args, endpoints: endpoints::Endpoints) -> Result<(), String> {
    machine_id::write()
        .map_err(|err| format!("cannot write the machine id {}: {err}", machine_id::PATH))?;
    let plan = session::Plan::from_args(&args, &endpoints)?;
    std::fs::create_dir_all(&args.log_dir)
        .map_err(|err| format!("cannot create log dir {}: {err}", args.log_dir.display()))?;
    let relay = tokio::spawn(browser_net::relay_egress(
        endpoints.browser_net.clone(),
        browser_net::EGRESS_PORT,
    ));
    let supervisor = Arc::new(supervisor::Supervisor::new(
        args.log_dir.clone(),
        endpoints,
        &args.browser_home,
    ));
    let server = if args.vm {
        let listeners = vsock_server::bind_guest_ports().map_err(|err| err.to_string())?;
        tokio::spawn(vsock_server::serve(listeners, supervisor.clone()))
    } else {
        let fd = args
            .channel_fd
            .ok_or("no --channel-fd: the host hands the guest channel socket to the jail")?;
        let listener = channel_server::listen_on_fd(fd)?;
        tokio::spawn(channel_server::serve(listener, supervisor.clone()))
    };
    let upstream = match args.vm {
        true => egress_relay::Upstream::Vsock,
        false => egress_relay::Upstream::Unix(args.egress_socket.clone()),
    };
    let egress = tokio::spawn(egress_relay::serve(upstream));
    let started = tokio::spawn(session::start(plan, supervisor.clone()));

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|err| format!("cannot watch SIGTERM: {err}"))?;
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: stopping every service"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: stopping every service"),
    }
    started.abort();
    server.abort();
    egress.abort();
    relay.abort();
    supervisor.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The init arguments `cubicle-runtime`'s microvm backend puts after
    /// ` -- ` on the kernel command line, from the builder it uses
    /// ([`cubicle_image::vm_init::VmInit`]); the kernel hands them to us as
    /// argv, split on spaces as here.
    #[test]
    fn parses_the_init_arguments_the_microvm_backend_passes() {
        let init = cubicle_image::vm_init::VmInit {
            hostname: "ws-1a2b",
            geometry: "1024x768",
            xvnc: "/opt/tigervnc/Xvnc",
        };
        let line = init.words().join(" ");
        let args =
            Args::try_parse_from(std::iter::once("cubicle-guest").chain(line.split(' '))).unwrap();
        assert!(args.vm);
        assert_eq!(args.hostname, init.hostname);
        assert_eq!(args.geometry, init.geometry);
        assert_eq!(args.xvnc, PathBuf::from(init.xvnc));
        let jail = Args::try_parse_from([
            "cubicle-guest",
            "--channel-fd",
            "11",
            "--geometry",
            "1280x800",
        ])
        .unwrap();
        assert!(!jail.vm, "the jail's command line must not turn on VM mode");
        assert_eq!(jail.channel_fd, Some(11));
    }
}
