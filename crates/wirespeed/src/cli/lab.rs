//! `wirespeed lab up|down|status`: the namespace testbed by hand.

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use wirespeed_lab::{Testbed, TestbedConfig};

use super::numbers;

#[derive(Args)]
pub struct LabArgs {
    #[command(subcommand)]
    action: LabAction,
}

#[derive(Subcommand)]
enum LabAction {
    /// Build the tester and DuT namespaces and their veth pairs; they stay until `lab down`.
    Up {
        #[arg(long, default_value = "ws")]
        prefix: String,
        /// Tester <-> DuT veth pairs.
        #[arg(long, default_value_t = 2, value_parser = numbers::whole(1u16, 64))]
        pairs: u16,
        /// RX/TX queues per veth.
        #[arg(long, default_value_t = 1, value_parser = numbers::whole(1u16, 64))]
        queues: u16,
        /// Also the looped-back calibration pair `{prefix}-c0` <-> `{prefix}-c1`, both ends in
        /// the tester namespace (the generator measured alone).
        #[arg(long)]
        calibration: bool,
        /// MTU of every veth (68..=16106; 9000 for jumbo frames up to 9018 bytes).
        #[arg(long, default_value_t = wirespeed_lab::DEFAULT_MTU, value_parser = numbers::whole(68u32, 16106))]
        mtu: u32,
    },
    /// Remove the lab with this prefix, also the leftovers of a killed run.
    Down {
        #[arg(long, default_value = "ws")]
        prefix: String,
    },
    /// Show the lab's namespaces, interfaces and addresses.
    Status {
        #[arg(long, default_value = "ws")]
        prefix: String,
    },
}

pub fn run(args: LabArgs) -> Result<()> {
    match args.action {
        LabAction::Up {
            prefix,
            pairs,
            queues,
            calibration,
            mtu,
        } => {
            let lab = Testbed::up(&TestbedConfig {
                prefix: prefix.clone(),
                pairs,
                queues,
                calibration,
                mtu,
            })?;
            for command in lab.commands() {
                println!("+ {command}");
            }
            // The lab outlives this command: `lab down` removes it.
            std::mem::forget(lab);
            println!("lab {prefix} is up; `wirespeed lab status --prefix {prefix}` shows it");
        }
        LabAction::Down { prefix } => {
            let removed = wirespeed_lab::down(&prefix)?;
            if removed.is_empty() {
                println!("no lab with prefix {prefix}");
            } else {
                println!("removed {}", removed.join(", "));
            }
        }
        LabAction::Status { prefix } => {
            let namespaces: Vec<String> = wirespeed_lab::list()?
                .into_iter()
                .filter(|ns| ns == &format!("{prefix}-tester") || ns == &format!("{prefix}-dut"))
                .collect();
            if namespaces.is_empty() {
                println!("no lab with prefix {prefix}");
            }
            for ns in namespaces {
                println!("namespace {ns}:");
                let out = wirespeed_lab::run("ip", &["-n", &ns, "-br", "addr", "show"])
                    .with_context(|| format!("listing interfaces of {ns}"))?;
                for line in out.lines().filter(|l| !l.starts_with("lo ")) {
                    println!("  {line}");
                }
            }
        }
    }
    Ok(())
}
