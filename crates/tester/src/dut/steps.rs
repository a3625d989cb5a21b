//! The undo stack every DuT driver changes the system through.
//!
//! A step is a command and, if it changes something, the command that changes it back. Steps are
//! recorded as the engineer would type them (for the report) and undone last first, so a setup
//! that fails at step *k* leaves exactly steps *1..k-1* to undo. Undo failures of things that are
//! already gone (a device deleted with its bridge) are not errors: the goal state is reached.
//!
//! **Where they run.** Steps run on a [`Host`]: this machine, or a remote one reached with the
//! system's `ssh` client (key authentication and the user's ssh configuration, `BatchMode=yes`
//! so that a missing key is an error rather than a password prompt). A driver writes its
//! commands for the DuT's namespace in the lab (`ip -n NS ...`, `ip netns exec NS ...`); on a
//! remote host the DuT is the host itself, so that prefix is dropped there and the rest runs
//! in the host's own namespace, on the interfaces the wiring names. Every step is then one ssh
//! connection; the undo stack, the log and the errors work the same, and the log shows the
//! `ssh` that ran each command.

use std::path::PathBuf;

use wirespeed_lab::{CommandError, run, run_with_input};

use super::DutError;

/// Where a DuT's steps run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Host {
    /// This machine (the lab's DuT namespace).
    #[default]
    Local,
    /// A host reached with `ssh`: `destination` is `user@host` (or a `Host` of the ssh
    /// configuration); `config`, when given, is the configuration file used instead of the
    /// user's (`ssh -F`).
    Ssh {
        destination: String,
        config: Option<PathBuf>,
    },
}

impl Host {
    /// How reports name it: `this machine` or `ssh user@host`.
    pub fn label(&self) -> String {
        match self {
            Host::Local => "this machine".into(),
            Host::Ssh { destination, .. } => format!("ssh {destination}"),
        }
    }

    /// Whether the steps run on another machine.
    pub fn is_remote(&self) -> bool {
        matches!(self, Host::Ssh { .. })
    }

    /// Runs `command` (written for the DuT's namespace) on this host and returns its standard
    /// output; `input`, when given, is its standard input.
    pub fn run(&self, command: &[&str], input: Option<&str>) -> Result<String, CommandError> {
        let words = self.command(command);
        let (program, args) = words.split_first().ok_or_else(|| CommandError::Failed {
            command: String::new(),
            status: "not run".into(),
            stderr: "empty command".into(),
        })?;
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        match input {
            None => run(program, &args),
            Some(input) => run_with_input(program, &args, input),
        }
    }

    /// The words that run `command` here: the command itself, or an `ssh` that runs it on the
    /// remote host, without its namespace prefix.
    pub fn command(&self, command: &[&str]) -> Vec<String> {
        let Host::Ssh {
            destination,
            config,
        } = self
        else {
            return command.iter().map(|word| word.to_string()).collect();
        };
        let mut words: Vec<String> = vec!["ssh".into(), "-o".into(), "BatchMode=yes".into()];
        if let Some(config) = config {
            words.extend(["-F".into(), config.to_string_lossy().into_owned()]);
        }
        // The remote shell joins and splits the words again: each goes quoted.
        let remote: Vec<String> = without_namespace(command)
            .iter()
            .map(|word| shell_quoted(word))
            .collect();
        words.extend([destination.clone(), "--".into(), remote.join(" ")]);
        words
    }
}

/// `command` without the prefix that puts it in a namespace of this machine (`ip -n NS ...`
/// becomes `ip ...`, `ip netns exec NS program ...` becomes `program ...`).
fn without_namespace<'a>(command: &[&'a str]) -> Vec<&'a str> {
    match command {
        ["ip", "netns", "exec", _, rest @ ..] => rest.to_vec(),
        ["ip", "-n", _, rest @ ..] => std::iter::once("ip").chain(rest.iter().copied()).collect(),
        _ => command.to_vec(),
    }
}

/// `word` as a POSIX shell reads it back: bare when it has nothing the shell would interpret,
/// otherwise in single quotes (a quote inside closes, escapes and reopens them).
fn shell_quoted(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./_-".contains(&b));
    if plain {
        return word.to_owned();
    }
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// Recorded commands and the undo stack of one DuT.
#[derive(Debug, Default)]
pub struct Steps {
    dut: String,
    host: Host,
    log: Vec<String>,
    undo: Vec<Vec<String>>,
}

impl Steps {
    /// An empty stack for DuT `dut` (the name used in errors).
    pub fn new(dut: &str) -> Self {
        Self {
            dut: dut.into(),
            ..Self::default()
        }
    }

    /// Makes every later step run on `host` (before setup: the undo stack runs where its steps
    /// ran).
    pub fn set_host(&mut self, host: Host) {
        self.host = host;
    }

    /// Where the steps run.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// Runs `command` (recorded), and on success pushes `undo`. `step` names the step in the
    /// error. Returns the command's standard output.
    pub fn run(
        &mut self,
        step: &str,
        command: &[&str],
        undo: Option<&[&str]>,
    ) -> Result<String, DutError> {
        self.run_with(step, command, None, undo)
    }

    /// Writes `text` to file `path` where the steps run (recorded as its first `shown` lines,
    /// then the line `more`), and pushes its removal.
    pub fn write(
        &mut self,
        step: &str,
        path: &str,
        text: &str,
        (shown, more): (usize, &str),
    ) -> Result<(), DutError> {
        let head: Vec<&str> = text.lines().take(shown).collect();
        let write = ["sh", "-c", &format!("cat > {path}")];
        let command = match &self.host {
            Host::Local => format!("cat > {path}"),
            remote => remote.command(&write).join(" "),
        };
        self.log
            .push(format!("{command} <<EOF\n{}\n{more}\nEOF", head.join("\n")));
        self.run_unlogged(step, &write, Some(text))?;
        self.push_undo(&["rm", "-f", path]);
        Ok(())
    }

    fn run_with(
        &mut self,
        step: &str,
        command: &[&str],
        input: Option<&str>,
        undo: Option<&[&str]>,
    ) -> Result<String, DutError> {
        self.log.push(self.host.command(command).join(" "));
        let out = self.run_unlogged(step, command, input)?;
        if let Some(undo) = undo {
            self.push_undo(undo);
        }
        Ok(out)
    }

    fn run_unlogged(
        &self,
        step: &str,
        command: &[&str],
        input: Option<&str>,
    ) -> Result<String, DutError> {
        self.host
            .run(command, input)
            .map_err(|source| DutError::Step {
                dut: self.dut.clone(),
                step: step.into(),
                source,
            })
    }

    /// An error naming `package` unless `program` is installed where the steps run: here, an
    /// executable file in a directory of `PATH` (or the sbin directories, which a non-login
    /// root shell may lack); on a remote host, a program its shell finds. A DuT whose software
    /// is missing says so before it changes anything.
    pub fn require(&self, program: &str, package: &str) -> Result<(), DutError> {
        let (found, place) = match &self.host {
            Host::Local => {
                let path = std::env::var("PATH").unwrap_or_default();
                let found = path
                    .split(':')
                    .chain(["/usr/sbin", "/sbin", "/usr/bin"])
                    .filter(|dir| !dir.is_empty())
                    .any(|dir| std::path::Path::new(dir).join(program).is_file());
                (found, String::new())
            }
            remote => {
                let look = format!("PATH=$PATH:/usr/sbin:/sbin command -v {program}");
                match remote.run(&["sh", "-c", &look], None) {
                    Ok(_) => (true, String::new()),
                    Err(error) => (false, format!(" on {} ({error})", remote.label())),
                }
            }
        };
        if found {
            return Ok(());
        }
        Err(DutError::Start {
            dut: self.dut.clone(),
            step: format!("find {program}"),
            detail: format!(
                "{program} is not installed{place}; install the Debian package {package} \
                 (scripts/setup-debian.sh does)"
            ),
        })
    }

    /// Records a line that is not a command run through [`Steps::run`] (a file written, a
    /// process started, a program attached).
    pub fn record(&mut self, line: String) {
        self.log.push(line);
    }

    /// Pushes a command that undoes something done outside [`Steps::run`].
    pub fn push_undo(&mut self, undo: &[&str]) {
        self.undo.push(undo.iter().map(|s| s.to_string()).collect());
    }

    /// Everything recorded, in order.
    pub fn log(&self) -> &[String] {
        &self.log
    }

    /// Runs the undo stack, last first; every command is tried. Reports the first failure that
    /// is not "already gone".
    pub fn undo_all(&mut self) -> Result<(), DutError> {
        let mut first = None;
        while let Some(command) = self.undo.pop() {
            let command: Vec<&str> = command.iter().map(String::as_str).collect();
            self.log.push(self.host.command(&command).join(" "));
            if let Err(error) = self.host.run(&command, None) {
                let text = error.to_string();
                let gone = ["Cannot find device", "No such file", "No such process"]
                    .iter()
                    .any(|s| text.contains(s));
                if !gone {
                    first.get_or_insert(DutError::Teardown {
                        dut: self.dut.clone(),
                        detail: text,
                    });
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Whether nothing is left to undo.
    pub fn is_clear(&self) -> bool {
        self.undo.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_step_is_one_ssh_that_runs_the_command_without_its_namespace() {
        let host = Host::Ssh {
            destination: "root@198.18.0.254".into(),
            config: Some("/tmp/ssh config".into()),
        };
        let ssh = "ssh -o BatchMode=yes -F /tmp/ssh config root@198.18.0.254 --";
        let command = |words: &[&str]| host.command(words).join(" ");
        assert_eq!(
            command(&["ip", "-n", "ws-dut", "link", "set", "ws-d0", "up"]),
            format!("{ssh} ip link set ws-d0 up")
        );
        assert_eq!(
            command(&["ip", "netns", "exec", "ws-dut", "sysctl", "-qw", "a.b=1"]),
            format!("{ssh} sysctl -qw a.b=1")
        );
        assert_eq!(
            command(&["sh", "-c", "cat > /tmp/it's"]),
            format!("{ssh} sh -c 'cat > /tmp/it'\\''s'")
        );
        assert_eq!(
            Host::Local.command(&["ip", "-n", "x", "l"]),
            ["ip", "-n", "x", "l"]
        );
        assert_eq!(host.label(), "ssh root@198.18.0.254");
    }

    #[test]
    fn a_missing_program_names_its_package_before_anything_runs() {
        let steps = Steps::new("demo");
        let error = steps
            .require("wirespeed-no-such-program", "some-package")
            .unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("DuT demo: find wirespeed-no-such-program failed")
                && text.contains("install the Debian package some-package"),
            "{text}"
        );
        assert!(steps.log().is_empty());
        steps.require("sh", "dash").unwrap();
    }

    #[test]
    fn a_failed_step_keeps_the_earlier_undos_and_names_itself() {
        let dir = std::env::temp_dir().join(format!("wst-steps-{}", std::process::id()));
        let marker = dir.join("made");
        let marker_text = marker.to_string_lossy().to_string();
        let mut steps = Steps::new("demo");
        steps
            .run(
                "make a directory",
                &["mkdir", "-p", &dir.to_string_lossy()],
                Some(&["rmdir", &dir.to_string_lossy()]),
            )
            .unwrap();
        steps
            .run(
                "touch a marker",
                &["touch", &marker_text],
                Some(&["rm", &marker_text]),
            )
            .unwrap();
        let error = steps
            .run("a step that fails", &["false"], Some(&["true"]))
            .unwrap_err();
        assert!(error.to_string().contains("DuT demo: a step that fails"));
        assert!(marker.exists());
        steps.undo_all().unwrap();
        assert!(!dir.exists(), "undo removed the marker, then the directory");
        assert!(steps.is_clear());
        assert_eq!(steps.log().len(), 5, "{:?}", steps.log());
        assert_eq!(steps.log()[3], format!("rm {marker_text}"));
    }
}
