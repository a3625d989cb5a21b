//! `SIGHUP` reloads the configuration file of a running switch (`systemctl reload`): a thread
//! of its own waits for the signal and asks the dispatcher, as `wirespeed ctl reload` does
//! (see `wirespeed_control::reload` for what changes and what needs a restart).
//!
//! Each event is one log line. Under systemd (which sets `JOURNAL_STREAM` for a service's
//! output) a line starts with its syslog level (`<6>`, `<4>`, `<3>`), which journald takes as
//! the entry's priority; in a terminal warnings and errors go to stderr with their level in
//! words.

use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use signal_hook::consts::SIGHUP;
use signal_hook::iterator::{Handle, Signals};
use wirespeed_control::dispatch::Dispatcher;
use wirespeed_control::reload::{Event, Level};

use super::privileges;

/// SIGHUP caught from the start, before the (possibly long) build of the workers: under
/// systemd a `systemctl reload` may come as soon as the process runs, and SIGHUP's default
/// action would end it. Signals that arrive before [`OnHangup::start`] wait for it.
pub struct Hangups(Signals);

impl Hangups {
    /// Installs the handler: from now on a SIGHUP is kept for the reload thread.
    pub fn catch() -> Result<Hangups> {
        Ok(Hangups(
            Signals::new([SIGHUP]).context("installing the SIGHUP handler")?,
        ))
    }
}

/// The thread that reloads on SIGHUP; stopped and joined when dropped.
pub struct OnHangup {
    handle: Handle,
    thread: Option<JoinHandle<()>>,
}

impl OnHangup {
    /// Reloads through `dispatcher` on every SIGHUP, from a thread that holds only the
    /// capabilities `kept`. Without a dispatcher (a switch with no control socket, so no
    /// command channels) a SIGHUP only says so: it must not end the switch, as it would by
    /// default.
    pub fn start(
        Hangups(mut signals): Hangups,
        dispatcher: Option<Arc<Dispatcher>>,
        kept: privileges::Kept,
    ) -> Result<OnHangup> {
        let handle = signals.handle();
        let thread = std::thread::Builder::new()
            .name("reload".into())
            .spawn(move || {
                if let Err(error) = kept.drop_the_rest() {
                    log(&Event {
                        level: Level::Error,
                        text: format!(
                            "reload: off: the reload thread could not drop its capabilities: \
                             {error} (fix: {})",
                            error.fix()
                        ),
                    });
                    return;
                }
                for _ in signals.forever() {
                    let events = match &dispatcher {
                        Some(dispatcher) => dispatcher.reload(),
                        None => vec![Event {
                            level: Level::Error,
                            text: "reload: SIGHUP ignored: a switch without a control socket \
                                   (control_socket = \"\") cannot change at run time; restart \
                                   it to apply the file"
                                .into(),
                        }],
                    };
                    events.iter().for_each(log);
                }
            })
            .context("starting the reload thread")?;
        Ok(OnHangup {
            handle,
            thread: Some(thread),
        })
    }
}

impl Drop for OnHangup {
    fn drop(&mut self) {
        self.handle.close();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Writes `event` as one line (see the module documentation).
fn log(event: &Event) {
    let journal = std::env::var_os("JOURNAL_STREAM").is_some();
    let text = event.text.replace('\n', " ");
    match (event.level, journal) {
        (Level::Info, true) => println!("<6>{text}"),
        (Level::Warning, true) => println!("<4>{text}"),
        (Level::Error, true) => println!("<3>{text}"),
        (Level::Info, false) => println!("{text}"),
        (Level::Warning, false) => eprintln!("warning: {text}"),
        (Level::Error, false) => eprintln!("error: {text}"),
    }
}
