//! Running the setup commands (`ip`, `sysctl`, `ethtool`) with errors that show the command.

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

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
    finish(command, output)
}

/// [`run`] with `input` on the program's standard input (a file written over ssh, say).
pub fn run_with_input(program: &str, args: &[&str], input: &str) -> Result<String, CommandError> {
    let command = format!("{program} {}", args.join(" "));
    let spawn_error = |source| CommandError::Spawn {
        command: command.clone(),
        source,
    };
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_error)?;
    if let Some(mut stdin) = child.stdin.take() {
        // A program that exits without reading says why on stderr, which the status reports.
        let _ = stdin.write_all(input.as_bytes());
    }
    let output = child.wait_with_output().map_err(spawn_error)?;
    finish(command, output)
}

/// The standard output of `command`, which ended with `output`, or why it failed.
fn finish(command: String, output: Output) -> Result<String, CommandError> {
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
