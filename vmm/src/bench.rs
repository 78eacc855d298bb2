//! Benchmark (in progress).

/// Bench flags.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {}

/// Runs the bench.
pub fn run(_args: &BenchArgs) -> Result<(), String> {
    Err("not yet".into())
}
