//! Least privilege for `wirespeed switch`: once its part of the set-up is done, every thread of
//! the switch gives up the capabilities it started with, so a flaw in a stage or in the control
//! socket's parsing cannot be turned into root's powers.
//!
//! Capabilities belong to a thread on Linux, and a new thread starts with its creator's; so each
//! thread drops its own, as soon as it no longer needs them: a worker after it pinned itself and
//! took SCHED_FIFO (CAP_SYS_NICE), the control socket's thread before it accepts a client (the
//! client threads it starts inherit nothing), the main thread once it started the workers. After
//! that nothing needs a capability: AF_XDP kicks, AF_PACKET sends and receives go through
//! sockets already open, a BPF link detaches when its descriptor closes, and since Linux 6.5 a
//! BPF map is read and updated through its descriptor without one (the check moved to the
//! map's and the program's creation). Before 6.5, with `kernel.unprivileged_bpf_disabled` set
//! (the default of most distributions), the fast path's map updates (the bridge's MAC mirror,
//! counters for `ctl`) would need CAP_BPF, so the switch keeps that one capability, and only
//! while a fast path is in force.
//!
//! A thread also sets `no_new_privs` and empties its inheritable and ambient sets, and, where it
//! may (CAP_SETPCAP), its bounding set: no program it could ever execute would regain anything.
//! See docs/configuration.md, "Privileges", for the set a non-root user needs to start it.

use anyhow::{Result, anyhow};
use rustix::io::Errno;
use rustix::thread::{self, CapabilitySet, CapabilitySets};
use wirespeed_control::config::{BackendConfig, Config, FastPathMode, Realtime};

/// The first release where a BPF map's descriptor suffices to read and update it (the
/// unprivileged check moved into map and program creation).
const MAPS_WITHOUT_CAPABILITY: (u32, u32) = (6, 5);

/// The capabilities a thread of the switch keeps once its set-up is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kept(CapabilitySet);

impl Kept {
    /// What the switch keeps on this kernel: nothing, or CAP_BPF while an XDP fast path is in
    /// force on a kernel older than 6.5 (or one whose release cannot be read).
    pub fn for_switch(fast_path: bool) -> Kept {
        Kept::choose(fast_path, kernel_release())
    }

    fn choose(fast_path: bool, kernel: Option<(u32, u32)>) -> Kept {
        let maps_need_bpf = kernel.is_none_or(|release| release < MAPS_WITHOUT_CAPABILITY);
        if fast_path && maps_need_bpf {
            Kept(CapabilitySet::BPF)
        } else {
            Kept(CapabilitySet::empty())
        }
    }

    /// One line for the switch's start-up report.
    pub fn describe(self) -> &'static str {
        if self.0.is_empty() {
            "privileges: every thread drops all its capabilities once set up"
        } else {
            "privileges: every thread keeps only CAP_BPF once set up (the fast path updates its \
             maps, which needs CAP_BPF before Linux 6.5)"
        }
    }

    /// Drops every capability but these from the calling thread, sets its `no_new_privs` and
    /// empties its inheritable and ambient sets and, where it holds CAP_SETPCAP, its bounding
    /// set. Other threads keep theirs: each thread calls this for itself.
    pub fn drop_the_rest(self) -> Result<(), DropError> {
        let failed = |step| move |errno| DropError { step, errno };
        thread::set_no_new_privs(true).map_err(failed("prctl(PR_SET_NO_NEW_PRIVS)"))?;
        let current = thread::capabilities(None).map_err(failed("capget"))?;
        if current.effective.contains(CapabilitySet::SETPCAP) {
            drop_bounding_except(self.0).map_err(failed("prctl(PR_CAPBSET_DROP)"))?;
        }
        thread::clear_ambient_capability_set()
            .map_err(failed("prctl(PR_CAP_AMBIENT_CLEAR_ALL)"))?;
        let keep = self.0 & current.permitted;
        thread::set_capabilities(
            None,
            CapabilitySets {
                effective: keep,
                permitted: keep,
                inheritable: CapabilitySet::empty(),
            },
        )
        .map_err(failed("capset"))
    }
}

/// A thread could not give up its capabilities: the kernel refused a step that only ever
/// lowers them, which a seccomp filter or a security module may do.
#[derive(Debug)]
pub struct DropError {
    step: &'static str,
    errno: Errno,
}

impl DropError {
    /// How to fix it.
    pub fn fix(&self) -> &'static str {
        "a seccomp filter or security module forbids it: run the switch without that restriction"
    }

    /// The error for the thread named `thread`, with its fix.
    pub fn in_thread(&self, thread: impl std::fmt::Display) -> anyhow::Error {
        anyhow!("{thread}: {self}\n  fix: {}", self.fix())
    }
}

impl std::fmt::Display for DropError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "dropping capabilities: {} failed ({})",
            self.step, self.errno
        )
    }
}

impl std::error::Error for DropError {}

/// A capability the configuration needs to start, and what for.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Need {
    capability: CapabilitySet,
    name: &'static str,
    what_for: String,
}

/// The capabilities `config` needs to start: sockets, XDP programs and maps are created, and
/// SCHED_FIFO taken, during set-up only. CAP_IPC_LOCK is not among them: a memlock limit as
/// large as the AF_XDP frame pools does instead, and the port says so when it is too small.
/// `rtprio` is the soft RLIMIT_RTPRIO (`None`: unlimited), which also allows SCHED_FIFO 1.
fn needs(config: &Config, rtprio: Option<u64>) -> Vec<Need> {
    let need = |capability, name, what_for: String| Need {
        capability,
        name,
        what_for,
    };
    let mut needs = Vec::new();
    for port in &config.ports {
        let name = &port.name;
        match port.backend {
            BackendConfig::AfXdp { .. } => needs.extend([
                need(
                    CapabilitySet::NET_RAW,
                    "CAP_NET_RAW",
                    format!("port {name}: its AF_XDP sockets"),
                ),
                need(
                    CapabilitySet::NET_ADMIN,
                    "CAP_NET_ADMIN",
                    format!("port {name}: attaching its XDP program, its XSKMAP"),
                ),
                need(
                    CapabilitySet::BPF,
                    "CAP_BPF",
                    format!("port {name}: loading its XDP program and maps"),
                ),
            ]),
            BackendConfig::AfPacket { .. } => needs.push(need(
                CapabilitySet::NET_RAW,
                "CAP_NET_RAW",
                format!("port {name}: its AF_PACKET sockets"),
            )),
            BackendConfig::Pcap { .. } => {}
        }
    }
    if config.switch.fast_path == FastPathMode::Xdp {
        let fast_path = "fast_path = \"xdp\"";
        needs.extend([
            need(
                CapabilitySet::NET_ADMIN,
                "CAP_NET_ADMIN",
                format!("{fast_path}: its XSKMAP and DEVMAP"),
            ),
            need(
                CapabilitySet::BPF,
                "CAP_BPF",
                format!("{fast_path}: loading its program and maps"),
            ),
            need(
                CapabilitySet::PERFMON,
                "CAP_PERFMON",
                format!(
                    "{fast_path}: the verifier admits the program's packet pointer arithmetic \
                     only with it"
                ),
            ),
        ]);
    }
    if config.switch.realtime == Realtime::On && rtprio.is_some_and(|limit| limit < 1) {
        needs.push(need(
            CapabilitySet::SYS_NICE,
            "CAP_SYS_NICE",
            "realtime = true: SCHED_FIFO for the workers (or an RLIMIT_RTPRIO of 1)".into(),
        ));
    }
    needs
}

/// The capabilities in `needs` that `held` lacks, one line each: the capability and what needs
/// it.
fn missing(needs: &[Need], held: CapabilitySet) -> Vec<String> {
    let mut lines: Vec<(&'static str, Vec<&str>)> = Vec::new();
    for need in needs.iter().filter(|need| !held.contains(need.capability)) {
        match lines.iter_mut().find(|(name, _)| *name == need.name) {
            Some((_, uses)) => uses.push(&need.what_for),
            None => lines.push((need.name, vec![&need.what_for])),
        }
    }
    lines
        .into_iter()
        .map(|(name, uses)| format!("{name} ({})", uses.join("; ")))
        .collect()
}

/// Refuses, before anything is opened, a configuration that needs a capability this process
/// does not hold (a non-root user given too few), naming each one and what needs it: the
/// kernel's own refusals (EPERM, a verifier log) do not say which.
pub fn check(config: &Config) -> Result<()> {
    let held = thread::capabilities(None)
        .map_err(|errno| anyhow!("reading this process's capabilities (capget): {errno}"))?
        .effective;
    let rtprio = rustix::process::getrlimit(rustix::process::Resource::Rtprio).current;
    let missing = missing(&needs(config, rtprio), held);
    anyhow::ensure!(
        missing.is_empty(),
        "this process lacks capabilities the configuration needs:\n  {}\n  fix: run the switch \
         as root, or give its user these capabilities (docs/configuration.md, \"Privileges\")",
        missing.join("\n  ")
    );
    Ok(())
}

/// Removes every capability but `kept` from the calling thread's bounding set.
fn drop_bounding_except(kept: CapabilitySet) -> Result<(), Errno> {
    for bit in 0..u64::BITS {
        let capability = CapabilitySet::from_bits_retain(1 << bit);
        match thread::capability_is_in_bounding_set(capability) {
            Ok(true) if !kept.contains(capability) => {
                thread::remove_capability_from_bounding_set(capability)?;
            }
            Ok(_) => {}
            // Beyond the last capability this kernel knows.
            Err(Errno::INVAL) => break,
            Err(errno) => return Err(errno),
        }
    }
    Ok(())
}

/// The running kernel's (major, minor) release, from /proc/sys/kernel/osrelease.
fn kernel_release() -> Option<(u32, u32)> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    parse_release(&release)
}

/// "6.18.44-fc-v782" -> (6, 18).
fn parse_release(release: &str) -> Option<(u32, u32)> {
    let mut numbers = release.trim().split(['.', '-']);
    let major = numbers.next()?.parse().ok()?;
    let minor = numbers.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_is_read_as_major_and_minor() {
        assert_eq!(parse_release("6.18.44-fc-v782\n"), Some((6, 18)));
        assert_eq!(parse_release("5.15.0-91-generic"), Some((5, 15)));
        assert_eq!(parse_release("6.5-rc1"), Some((6, 5)));
        assert_eq!(parse_release("garbage"), None);
        assert_eq!(parse_release(""), None);
    }

    fn config(backend: &str, switch_lines: &str) -> Config {
        let text = format!(
            "[switch]\napp = \"xconnect\"\n{switch_lines}\n\n\
             [[port]]\nname = \"p0\"\n{}\n\n\
             [[port]]\nname = \"p1\"\n{}\n\n\
             [xconnect]\npairs = [[\"p0\", \"p1\"]]\n",
            backend.replace("PORT", "p0"),
            backend.replace("PORT", "p1"),
        );
        wirespeed_control::config::parse("test.toml", &text).unwrap()
    }

    fn names(needs: &[Need]) -> Vec<&'static str> {
        let mut names: Vec<_> = needs.iter().map(|need| need.name).collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// What `config` needs where RLIMIT_RTPRIO allows no realtime priority.
    fn needs_of(config: &Config) -> Vec<Need> {
        needs(config, Some(0))
    }

    #[test]
    fn each_backend_and_setting_needs_its_capabilities() {
        let afxdp = "backend = \"afxdp\"\ninterface = \"eth0\"";
        let afpacket = "backend = \"afpacket\"\ninterface = \"eth0\"";
        let pcap = "backend = \"pcap\"\ntx = \"PORT.pcap\"";
        assert_eq!(
            names(&needs_of(&config(afxdp, ""))),
            ["CAP_BPF", "CAP_NET_ADMIN", "CAP_NET_RAW"]
        );
        assert_eq!(
            names(&needs_of(&config(afxdp, "fast_path = \"xdp\""))),
            ["CAP_BPF", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_PERFMON"]
        );
        assert_eq!(names(&needs_of(&config(afpacket, ""))), ["CAP_NET_RAW"]);
        assert!(needs_of(&config(pcap, "")).is_empty());
        let realtime = config(pcap, "realtime = true");
        assert_eq!(names(&needs(&realtime, Some(0))), ["CAP_SYS_NICE"]);
        assert!(needs(&realtime, Some(1)).is_empty());
        assert!(needs(&realtime, None).is_empty());
    }

    #[test]
    fn what_is_missing_is_named_once_with_everything_that_needs_it() {
        let afxdp = "backend = \"afxdp\"\ninterface = \"eth0\"";
        let needs = needs_of(&config(afxdp, "fast_path = \"xdp\""));
        let held = CapabilitySet::NET_RAW | CapabilitySet::NET_ADMIN | CapabilitySet::BPF;
        assert_eq!(
            missing(&needs, held),
            [
                "CAP_PERFMON (fast_path = \"xdp\": the verifier admits the program's packet \
              pointer arithmetic only with it)"
            ]
        );
        let lines = missing(&needs, CapabilitySet::NET_ADMIN | CapabilitySet::BPF);
        assert_eq!(
            lines[0],
            "CAP_NET_RAW (port p0: its AF_XDP sockets; port p1: its AF_XDP sockets)"
        );
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(missing(&needs, CapabilitySet::all()).is_empty());
    }

    /// On a thread of its own (sets are per thread, so the test's others keep theirs): what a
    /// switch keeps on a kernel before 6.5 with a fast path, CAP_BPF, is all that thread holds
    /// afterwards, and it can execute nothing that would regain more.
    #[test]
    fn a_thread_keeps_only_what_it_was_told_to() {
        let before = thread::capabilities(None).unwrap();
        let after = std::thread::spawn(|| {
            Kept(CapabilitySet::BPF).drop_the_rest().unwrap();
            // Each capability the kernel knows (it answers EINVAL past the last), if held.
            let bounding: Vec<u32> = (0..u64::BITS)
                .map_while(|bit| {
                    let capability = CapabilitySet::from_bits_retain(1 << bit);
                    let held = thread::capability_is_in_bounding_set(capability).ok()?;
                    Some((bit, held))
                })
                .filter_map(|(bit, held)| held.then_some(bit))
                .collect();
            (
                thread::capabilities(None).unwrap(),
                thread::no_new_privs().unwrap(),
                thread::capability_is_in_ambient_set(CapabilitySet::BPF).unwrap(),
                bounding,
            )
        })
        .join()
        .unwrap();
        let (sets, no_new_privs, ambient, bounding) = after;
        let kept = before.permitted & CapabilitySet::BPF;
        assert_eq!(sets.effective, kept);
        assert_eq!(sets.permitted, kept);
        assert!(sets.inheritable.is_empty());
        assert!(no_new_privs && !ambient);
        if before.effective.contains(CapabilitySet::SETPCAP) {
            assert_eq!(bounding, [CapabilitySet::BPF.bits().trailing_zeros()]);
        }
        // This thread was not touched.
        assert_eq!(thread::capabilities(None).unwrap(), before);
    }

    #[test]
    fn cap_bpf_is_kept_only_for_a_fast_path_on_a_kernel_before_6_5() {
        let none = Kept(CapabilitySet::empty());
        let bpf = Kept(CapabilitySet::BPF);
        assert_eq!(Kept::choose(false, Some((5, 15))), none);
        assert_eq!(Kept::choose(false, None), none);
        assert_eq!(Kept::choose(true, Some((6, 5))), none);
        assert_eq!(Kept::choose(true, Some((6, 18))), none);
        assert_eq!(Kept::choose(true, Some((6, 4))), bpf);
        assert_eq!(Kept::choose(true, Some((5, 15))), bpf);
        // A release that cannot be read is taken for an old one: keeping CAP_BPF is safe.
        assert_eq!(Kept::choose(true, None), bpf);
    }
}
