//! Running the setup commands (`ip`, `sysctl`, `ethtool`) with errors that show the command.

use std::process::Command;

/// A setup command failed or could not be started.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("`{command}` could not be started: {source}; is it installed?")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: String,
        stderr: String,
    },
}

/// Runs `program args...` and returns its standard output.
pub fn run(program: &str, args: &[&str]) -> Result<String, CommandError> {
    let command = format!("{program} {}", args.join(" "));
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|source| CommandError::Spawn {
            command: command.clone(),
            source,
        })?;
    if !output.status.success() {
        return Err(CommandError::Failed {
            command,
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Runs `program args...` inside network namespace `netns` (`ip netns exec`); [`HERE`] runs it
/// in this process's own namespace.
pub fn run_in(netns: &str, program: &str, args: &[&str]) -> Result<String, CommandError> {
    if netns == HERE {
        return run(program, args);
    }
    let mut full = vec!["netns", "exec", netns, program];
    full.extend_from_slice(args);
    run("ip", &full)
}

/// Runs `ip args...` on network namespace `netns` (`ip -n`); [`HERE`] on this process's own.
pub fn ip_in(netns: &str, args: &[&str]) -> Result<String, CommandError> {
    if netns == HERE {
        return run("ip", args);
    }
    let mut full = vec!["-n", netns];
    full.extend_from_slice(args);
    run("ip", &full)
}

/// The name that stands for the network namespace this process runs in, where a namespace is
/// asked for: an external DuT is wired to interfaces of the tester's own namespace, not to a
/// lab's, and [`run_in`], [`ip_in`] and [`crate::enter`] then leave the namespace alone.
pub const HERE: &str = "";
