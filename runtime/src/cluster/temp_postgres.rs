//! A PostgreSQL server of a test's own, for the shared store's contract
//! tests and the multi-node rig: Debian's `postgresql`, a fresh cluster made
//! by `initdb` in a temporary directory, reached only by its Unix socket
//! there. Not for production: trust authentication, and gone when dropped.

use std::path::PathBuf;
use std::process::Command;

/// A PostgreSQL server of the test's own: a fresh cluster in a temporary
/// directory, listening only on a Unix socket there, stopped when dropped.
/// As root it runs as the `postgres` user the Debian package made
/// (PostgreSQL refuses to run as root).
pub struct TempPostgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    run_as: Option<String>,
}

impl TempPostgres {
    /// Starts one; `Err` says why it cannot here (a skip, not a failure).
    pub fn start() -> Result<Self, String> {
        let bin = postgres_bin().ok_or(
            "PostgreSQL's server is not installed (apt-get install postgresql; scripts/setup does)",
        )?;
        let root = is_root();
        let run_as = root.then(|| "postgres".to_owned());
        let dir = tempfile::Builder::new()
            .prefix("cubicle-pg-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        if let Some(user) = &run_as {
            let status = Command::new("chown")
                .arg(user)
                .arg(dir.path())
                .status()
                .map_err(|e| format!("chown: {e}"))?;
            assert!(status.success(), "chown {user} {}", dir.path().display());
        }
        let server = Self { dir, bin, run_as };
        let data = server.dir.path().join("data");
        server.run(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                "cubicle".as_ref(),
                "-A".as_ref(),
                "trust".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
                "--no-sync".as_ref(),
            ],
        );
        server.start_server();
        Ok(server)
    }

    /// Stops the server at once (as a crash would) and starts it again on
    /// the same files: what a database restart looks like to its clients.
    pub fn restart(&self) {
        let data = self.dir.path().join("data");
        self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-m".as_ref(),
                "immediate".as_ref(),
                "-w".as_ref(),
                "stop".as_ref(),
            ],
        );
        self.start_server();
    }

    fn start_server(&self) {
        let data = self.dir.path().join("data");
        let options = format!("-k {} -c listen_addresses=''", self.dir.path().display());
        let log = self.dir.path().join("server.log");
        self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-o".as_ref(),
                options.as_ref(),
                "-l".as_ref(),
                log.as_os_str(),
                "-w".as_ref(),
                "start".as_ref(),
            ],
        );
    }

    fn run(&self, tool: &str, args: &[&std::ffi::OsStr]) {
        let program = self.bin.join(tool);
        let mut command = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&program);
                c
            }
            None => Command::new(&program),
        };
        let out = command.args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{tool} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A new empty database on the server; its URL.
    pub fn database(&self, name: &str) -> String {
        let socket = self.dir.path().display().to_string();
        let out = Command::new(self.bin.join("createdb"))
            .args(["-h", &socket, "-U", "cubicle", name])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "createdb {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        format!("postgres://cubicle@localhost/{name}?host={socket}")
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let program = self.bin.join("pg_ctl");
        let mut command = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&program);
                c
            }
            None => Command::new(&program),
        };
        let _ = command
            .arg("-D")
            .arg(&data)
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}

/// The newest installed server's `bin` directory (Debian keeps each major
/// version under `/usr/lib/postgresql/<version>/bin`).
fn postgres_bin() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("pg_ctl").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
