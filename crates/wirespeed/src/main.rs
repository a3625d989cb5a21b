//! The `wirespeed` command line: one subcommand per module in `cli/`.
#![deny(unsafe_code)]

mod cli;

use clap::{Parser, Subcommand};

/// User-space packet forwarding and the benchmark suite that measures it.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a configured app over the configured ports until Ctrl-C.
    Switch(cli::switch::SwitchArgs),
    /// Forward a capture file offline through an app.
    Pcap(cli::pcap::PcapArgs),
    /// Send a template out of an interface as fast as possible or at a rate; count arrivals.
    Gen(cli::generate::GenArgs),
    /// Build, inspect or remove the network-namespace testbed.
    Lab(cli::lab::LabArgs),
    /// Generate traffic into a capture and forward it through wirespeed: the short tour.
    Demo(cli::demo::DemoArgs),
    /// Send one request to a running switch's control socket (`wirespeed ctl help`).
    Ctl(cli::ctl::CtlArgs),
    /// Measure wirespeed and its peers side by side in a namespace lab.
    Bench(cli::bench::BenchArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Switch(args) => cli::switch::run(args),
        Command::Pcap(args) => cli::pcap::run(args),
        Command::Gen(args) => cli::generate::run(args),
        Command::Lab(args) => cli::lab::run(args),
        Command::Demo(args) => cli::demo::run(args),
        Command::Ctl(args) => cli::ctl::run(args),
        Command::Bench(args) => cli::bench::run(args),
    }
}
