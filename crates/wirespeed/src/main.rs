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
    /// Watch a running switch live: Mpps per port, drops, cycles per packet, tables.
    Top(cli::top::TopArgs),
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
        Command::Top(args) => cli::top::run(args),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// Every subcommand's arguments parse into their fields with the defaults (and "1" for what
    /// is required): a value parser whose type differs from its field's only panics when the
    /// arguments are read, so a subcommand no other test runs would ship that panic.
    #[test]
    fn every_subcommand_parses_its_defaults() {
        fn leaves(command: &clap::Command, path: Vec<String>, out: &mut Vec<Vec<String>>) {
            if command.get_subcommands().next().is_none() {
                let mut argv = path;
                for arg in command.get_arguments().filter(|arg| arg.is_required_set()) {
                    match arg.get_long() {
                        Some(long) => argv.extend([format!("--{long}"), "1".into()]),
                        None => argv.push("1".into()),
                    }
                }
                out.push(argv);
                return;
            }
            for sub in command.get_subcommands() {
                let mut next = path.clone();
                next.push(sub.get_name().to_string());
                leaves(sub, next, out);
            }
        }
        let mut all = Vec::new();
        leaves(&Cli::command(), vec!["wirespeed".into()], &mut all);
        assert!(all.len() >= 10, "{all:?}");
        for argv in all {
            if let Err(error) = Cli::try_parse_from(&argv) {
                panic!("{argv:?}: {error}");
            }
        }
    }
}
