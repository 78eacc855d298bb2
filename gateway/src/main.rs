//! The `cubicle` command: `serve`, `image build`, `doctor`, and the
//! commands for people against a running gateway (`ws`, `approvals`,
//! `downloads`, `events`).

mod bench;
mod cli;
mod cluster_cli;
mod remote;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,sqlx=warn,tower_http=warn".into()),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal: logs piped to a
        // file, journald or another program stay plain text.
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .init();
    let args = cli::Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("cubicle: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("cubicle: {err:#}");
            // The remote commands end with a code scripts can use.
            match err.downcast_ref::<remote::Failure>() {
                Some(failure) => ExitCode::from(failure.code),
                None => ExitCode::FAILURE,
            }
        }
    }
}
