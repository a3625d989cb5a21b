//! The undo stack every DuT driver changes the system through.
//!
//! A step is a command and, if it changes something, the command that changes it back. Steps are
//! recorded as the engineer would type them (for the report) and undone last first, so a setup
//! that fails at step *k* leaves exactly steps *1..k-1* to undo. Undo failures of things that are
//! already gone (a device deleted with its bridge) are not errors: the goal state is reached.

use wirespeed_lab::run;

use super::DutError;

/// Recorded commands and the undo stack of one DuT.
#[derive(Debug, Default)]
pub struct Steps {
    dut: String,
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

    /// Runs `command` (recorded), and on success pushes `undo`. `step` names the step in the
    /// error. Returns the command's standard output.
    pub fn run(
        &mut self,
        step: &str,
        command: &[&str],
        undo: Option<&[&str]>,
    ) -> Result<String, DutError> {
        self.log.push(command.join(" "));
        let (program, args) = command.split_first().ok_or_else(|| DutError::Start {
            dut: self.dut.clone(),
            step: step.into(),
            detail: "empty command".into(),
        })?;
        let out = run(program, args).map_err(|source| DutError::Step {
            dut: self.dut.clone(),
            step: step.into(),
            source,
        })?;
        if let Some(undo) = undo {
            self.push_undo(undo);
        }
        Ok(out)
    }

    /// An error naming `package` unless `program` is an executable file in a directory of
    /// `PATH` (or the sbin directories, which a non-login root shell may lack): a DuT whose
    /// software is missing says so before it changes anything.
    pub fn require(&self, program: &str, package: &str) -> Result<(), DutError> {
        let path = std::env::var("PATH").unwrap_or_default();
        let found = path
            .split(':')
            .chain(["/usr/sbin", "/sbin", "/usr/bin"])
            .filter(|dir| !dir.is_empty())
            .any(|dir| std::path::Path::new(dir).join(program).is_file());
        if found {
            return Ok(());
        }
        Err(DutError::Start {
            dut: self.dut.clone(),
            step: format!("find {program}"),
            detail: format!(
                "{program} is not installed; install the Debian package {package} \
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
            self.log.push(command.join(" "));
            let Some((program, args)) = command.split_first() else {
                continue;
            };
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            if let Err(error) = run(program, &args) {
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
