//! The `wirespeed` command line.
#![deny(unsafe_code)]

use clap::Parser;

/// User-space packet forwarding and the benchmark suite that measures it.
#[derive(Parser)]
#[command(version, about)]
struct Cli {}

fn main() -> anyhow::Result<()> {
    let _cli = Cli::parse();
    Ok(())
}
