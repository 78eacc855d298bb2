//! The `cubicle-vmm` binary: `run` a VM from flags or a JSON file, serve the
//! API on a Unix socket, or `bench` against QEMU. `run --jail-root` first
//! confines the process the way Firecracker's jailer does (see
//! [`cubicle_vmm::jail`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use cubicle_vmm::builder::{self, BuildOptions};
use cubicle_vmm::config::{DEFAULT_CMDLINE, DiskConfig, VmConfig, VsockConfig};
use cubicle_vmm::hardening::{self, ThreadKind};
use cubicle_vmm::jail::{self, JailSpec};
use cubicle_vmm::snapshot::restore::{self, MemoryFiles, Overrides};
use cubicle_vmm::{api, bench, bench_snapshot};

#[derive(Parser)]
#[command(
    name = "cubicle-vmm",
    about = "Cubicle's microVM monitor on KVM (one process per VM)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build and run one VM until the guest exits.
    Run(Box<RunArgs>),
    /// Serve the HTTP API on a Unix socket: configure, start, pause, resume, stop, metrics.
    Api {
        /// Unix socket to listen on (must not exist).
        #[arg(long)]
        socket: PathBuf,
        /// Do not install seccomp filters (debugging only).
        #[arg(long)]
        no_seccomp: bool,
    },
    /// Compare start-up and exit times with QEMU microvm, and measure memory overhead.
    Bench(bench::BenchArgs),
    /// Restores from a snapshot against cold boots of the same guest, one
    /// and many at once, their memory, and snapshot times.
    BenchSnapshot(bench_snapshot::SnapshotBenchArgs),
}

#[derive(Args)]
struct RunArgs {
    /// JSON configuration file (see README.md); other VM flags are then not allowed.
    #[arg(long, conflicts_with_all = ["kernel", "initrd", "memory_mib", "vcpus", "disk", "vsock", "serial_log"])]
    config: Option<PathBuf>,
    /// Kernel: ELF vmlinux or bzImage.
    #[arg(long, required_unless_present_any = ["config", "restore"])]
    kernel: Option<PathBuf>,
    /// Restore the snapshot whose state file this is (with --restore-memory)
    /// instead of booting; --disk, --vsock and --serial-log then replace
    /// the snapshot's (disks by id).
    #[arg(long, requires = "restore_memory", conflicts_with_all = ["config", "kernel", "initrd", "memory_mib", "vcpus"])]
    restore: Option<PathBuf>,
    /// The snapshot's memory file (mapped copy-on-write).
    #[arg(long, requires = "restore")]
    restore_memory: Option<PathBuf>,
    /// With --restore of a diff snapshot: the memory file of the snapshot
    /// it was taken against.
    #[arg(long, requires = "restore")]
    restore_base: Option<PathBuf>,
    /// With --restore: check the memory file's CRC before mapping it.
    #[arg(long, requires = "restore")]
    verify_memory: bool,
    /// Initrd.
    #[arg(long)]
    initrd: Option<PathBuf>,
    /// Kernel command line.
    #[arg(long, default_value = DEFAULT_CMDLINE)]
    cmdline: String,
    /// Guest memory in MiB.
    #[arg(long, default_value_t = 128)]
    memory_mib: u64,
    /// vCPUs.
    #[arg(long, default_value_t = 1)]
    vcpus: u8,
    /// A disk: id=NAME,path=FILE[,ro][,overlay=FILE] (repeatable).
    #[arg(long)]
    disk: Vec<String>,
    /// vsock: cid=N,uds=PATH.
    #[arg(long)]
    vsock: Option<String>,
    /// COM1 output file (default: stdout).
    #[arg(long)]
    serial_log: Option<PathBuf>,
    /// Also serve the API on this socket while running.
    #[arg(long)]
    api_socket: Option<PathBuf>,
    /// Do not install seccomp filters (debugging only).
    #[arg(long)]
    no_seccomp: bool,
    /// Test hook: a vCPU makes a forbidden syscall after its filter is installed.
    #[arg(long, hide = true)]
    seccomp_self_test: bool,
    /// Jail: an empty directory of root's to build the VMM's own root on
    /// (started as root; the VM is built after the drop to --jail-uid).
    #[arg(long, requires_all = ["jail_uid", "jail_gid"])]
    jail_root: Option<PathBuf>,
    /// Jail: the unprivileged uid the VMM runs as.
    #[arg(long, requires = "jail_root")]
    jail_uid: Option<u32>,
    /// Jail: its gid.
    #[arg(long, requires = "jail_root")]
    jail_gid: Option<u32>,
    /// Jail: its only supplementary groups (comma-separated; /dev/kvm's).
    #[arg(long, requires = "jail_root", value_delimiter = ',')]
    jail_groups: Vec<u32>,
    /// Jail: a directory of the host's the VMM may write snapshots into,
    /// seen inside as /snapshots (give the API's snapshot paths there).
    #[arg(long, requires = "jail_root")]
    snapshot_dir: Option<PathBuf>,
    /// Jail: the KVM device node bound at /dev/kvm inside.
    #[arg(long, requires = "jail_root", default_value = "/dev/kvm")]
    jail_kvm: PathBuf,
}

impl RunArgs {
    fn jail(&self) -> Option<JailSpec> {
        Some(JailSpec {
            root: self.jail_root.clone()?,
            uid: self.jail_uid?,
            gid: self.jail_gid?,
            groups: self.jail_groups.clone(),
            kvm: self.jail_kvm.clone(),
        })
    }
}

fn main() -> ExitCode {
    hardening::one_malloc_arena();
    hardening::close_inherited_fds();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run(*args),
        Command::Api { socket, no_seccomp } => {
            api::serve_until_stopped(&socket, !no_seccomp).map_err(|e| e.to_string())
        }
        Command::BenchSnapshot(args) => bench_snapshot::run(&args)
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| e.to_string()),
        Command::Bench(args) => bench::run(&args)
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| e.to_string()),
    };
    result.unwrap_or_else(|message| {
        eprintln!("cubicle-vmm: {message}");
        ExitCode::from(1)
    })
}

fn run(args: RunArgs) -> Result<ExitCode, String> {
    cubicle_vmm::snapshot::memory::open_pagemap();
    if args.restore.is_some() {
        return run_restored(&args);
    }
    let config = config_from(&args)?;
    let (config, api_socket) = match args.jail() {
        Some(spec) => {
            let (mut binds, inside, api) =
                jail::plan(&config, args.api_socket.as_deref(), &spec.kvm)
                    .map_err(|e| error_chain(&e))?;
            binds.extend(args.snapshot_dir.as_deref().map(jail::snapshot_dir_bind));
            jail::enter(&spec, &binds).map_err(|e| error_chain(&e))?;
            (inside, api)
        }
        None => (config, args.api_socket.clone()),
    };
    let options = BuildOptions {
        seccomp: !args.no_seccomp,
        forbidden_syscall_test: args.seccomp_self_test,
    };
    let mut vmm = builder::build(&config, options).map_err(|e| error_chain(&e))?;
    if let Some(socket) = &api_socket {
        return api::serve_running(socket, vmm, options.seccomp).map_err(|e| e.to_string());
    }
    vmm.start().map_err(|e| error_chain(&e))?;
    if options.seccomp {
        hardening::apply(ThreadKind::Vmm).map_err(|e| error_chain(&e))?;
    }
    Ok(vmm.wait().exit_code())
}

/// `run --restore`: a VM from a snapshot, started at once.
fn run_restored(args: &RunArgs) -> Result<ExitCode, String> {
    let (Some(state), Some(memory)) = (&args.restore, &args.restore_memory) else {
        return Err("--restore needs --restore-memory".into());
    };
    let overrides = Overrides {
        disks: args
            .disk
            .iter()
            .map(|d| parse_disk(d))
            .collect::<Result<_, _>>()?,
        vsock: args.vsock.as_deref().map(parse_vsock).transpose()?,
        serial_log: args.serial_log.clone(),
    };
    let options = BuildOptions {
        seccomp: !args.no_seccomp,
        forbidden_syscall_test: args.seccomp_self_test,
    };
    let mut prepared = restore::prepare(state, &overrides).map_err(|e| error_chain(&e))?;
    // Opened here, before any jail: the jailed VMM sees no snapshot files.
    let files = MemoryFiles::open(memory, args.restore_base.as_deref(), args.verify_memory)
        .map_err(|e| error_chain(&e))?;
    let api_socket = match args.jail() {
        Some(spec) => {
            let (mut binds, inside, api) =
                jail::plan_restore(&prepared.config, args.api_socket.as_deref(), &spec.kvm)
                    .map_err(|e| error_chain(&e))?;
            binds.extend(args.snapshot_dir.as_deref().map(jail::snapshot_dir_bind));
            jail::enter(&spec, &binds).map_err(|e| error_chain(&e))?;
            prepared.config = inside;
            api
        }
        None => args.api_socket.clone(),
    };
    let (mut vmm, _sha256) =
        restore::build(prepared, files, options).map_err(|e| error_chain(&e))?;
    if let Some(socket) = &api_socket {
        return api::serve_running(socket, vmm, options.seccomp).map_err(|e| e.to_string());
    }
    vmm.start().map_err(|e| error_chain(&e))?;
    if options.seccomp {
        hardening::apply(ThreadKind::Vmm).map_err(|e| error_chain(&e))?;
    }
    Ok(vmm.wait().exit_code())
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn config_from(args: &RunArgs) -> Result<VmConfig, String> {
    if let Some(path) = &args.config {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("configuration {}: {e}", path.display()))?;
        return VmConfig::from_json(&text, &path.display().to_string())
            .map_err(|e| error_chain(&e));
    }
    let kernel = args
        .kernel
        .clone()
        .ok_or("--kernel or --config is required")?;
    let disks = args
        .disk
        .iter()
        .map(|d| parse_disk(d))
        .collect::<Result<_, _>>()?;
    let vsock = args.vsock.as_deref().map(parse_vsock).transpose()?;
    Ok(VmConfig {
        kernel,
        initrd: args.initrd.clone(),
        cmdline: args.cmdline.clone(),
        memory_mib: args.memory_mib,
        vcpus: args.vcpus,
        disks,
        vsock,
        serial_log: args.serial_log.clone(),
    })
}

fn key_values(spec: &str) -> impl Iterator<Item = (&str, &str)> {
    spec.split(',')
        .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
}

fn parse_disk(spec: &str) -> Result<DiskConfig, String> {
    let mut disk = DiskConfig {
        id: String::new(),
        path: PathBuf::new(),
        read_only: false,
        overlay: None,
    };
    for (k, v) in key_values(spec) {
        match k {
            "id" => disk.id = v.into(),
            "path" => disk.path = v.into(),
            "ro" => disk.read_only = true,
            "overlay" => disk.overlay = Some(v.into()),
            _ => {
                return Err(format!(
                    "--disk {spec}: unknown key {k:?}; use id=,path=,ro,overlay="
                ));
            }
        }
    }
    if disk.id.is_empty() || disk.path.as_os_str().is_empty() {
        return Err(format!("--disk {spec}: id= and path= are required"));
    }
    Ok(disk)
}

fn parse_vsock(spec: &str) -> Result<VsockConfig, String> {
    let (mut cid, mut uds) = (None, None);
    for (k, v) in key_values(spec) {
        match k {
            "cid" => {
                cid = Some(
                    v.parse()
                        .map_err(|_| format!("--vsock {spec}: cid must be a number"))?,
                )
            }
            "uds" => uds = Some(PathBuf::from(v)),
            _ => return Err(format!("--vsock {spec}: unknown key {k:?}; use cid=,uds=")),
        }
    }
    match (cid, uds) {
        (Some(guest_cid), Some(uds_path)) => Ok(VsockConfig {
            guest_cid,
            uds_path,
        }),
        _ => Err(format!("--vsock {spec}: cid= and uds= are required")),
    }
}
