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

/// Runs `program args...` inside network namespace `netns` (`ip netns exec`).
pub fn run_in(netns: &str, program: &str, args: &[&str]) -> Result<String, CommandError> {
    let mut full = vec!["netns", "exec", netns, program];
    full.extend_from_slice(args);
    run("ip", &full)
}
