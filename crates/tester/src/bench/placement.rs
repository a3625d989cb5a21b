//! Where the benchmark's work runs, applied identically for every DuT and read back.
//!
//! On a two-core machine the generator and the DuT share the box, so which core runs which
//! kernel work decides the result. A veth without NAPI hands a frame to the receiving side's
//! backlog on the *sender's* core: the DuT's whole forwarding path would then run in softirq on
//! the generator's core, and every DuT would look faster than it is. So:
//!
//! * the **generator** thread (AF_XDP TX on `t0`, RX on `t1`) is pinned to `generator_cpu` (0);
//! * the **DuT's ingress NAPI**, `d0`'s, gets NAPI (GRO on; an XDP program, where a DuT attaches
//!   one, also enables it), threaded NAPI, and its `napi/<d0>-<id>` kthread pinned to `dut_cpu`
//!   (1). The sender `t0` gets TSO and GSO off: veth passes a frame to the peer's NAPI only when
//!   the sending device has no TSO (`veth_skb_is_eligible_for_gro`), and otherwise queues it to
//!   the backlog of the *sending* CPU, which put the bridge's, the router's and AF_PACKET's
//!   receive on the generator's core until 2026-11-23 (an XDP program on `d0` turns `t0`'s TSO
//!   off by itself, so AF_XDP DuTs and the XDP redirect always ran on the DuT core). For every DuT this is where the DuT's receive starts: the bridge's and the router's
//!   whole forwarding path (GRO, bridge or FIB lookup, transmit into `d1`) runs in this thread;
//!   for `xdp-redirect` the XDP program and the redirect; for wirespeed over AF_XDP the copy of
//!   each frame into the switch's UMEM, over AF_PACKET the copy into its packet ring;
//! * a **user-space DuT** (wirespeed) pins its worker to `dut_cpu` itself (`cores = [1]`); its
//!   worker threads' affinity is read back;
//! * what a DuT transmits into `d1` is received by the veth peer `t1`, i.e. it runs `t1`'s NAPI
//!   (the tester's AF_XDP program and the copy into the generator's UMEM). `d1`'s own NAPI
//!   only serves frames coming *from* `t1` and is idle here. `t1`'s NAPI is made threaded too
//!   and pinned to `receiver_cpu`, by default the DuT core: the generator's core then does
//!   nothing but generate, and every DuT pays the same receive cost on its core (a conservative
//!   choice that cannot flatter any DuT; `receiver_cpu = 0` gives the DuT core to the DuT alone
//!   at the price of a generator that shares its core).
//!
//! `ethtool -K <if> gro on` and `echo 1 > /sys/class/net/<if>/threaded` are run inside the
//! interface's namespace with `ip netns exec`, which mounts that namespace's /sys.
//!
//! **Priority.** These machines are shared with other jobs (compilers, tests) that would take
//! turns on the DuT core. With `nice` set, every thread above (generator, both NAPI threads,
//! every thread of a user-space DuT) gets that nice value, -20 by default: the other jobs then
//! get a sliver of the cores, while the benchmark's own threads keep *equal* weights among
//! themselves, so the kernel shares the DuT core between a DuT's worker and its NAPI threads as
//! it would on an idle machine. (SCHED_FIFO would shield them too, but it would also let a
//! polling worker starve the NAPI thread it depends on, changing what is measured.)
//!
//! One exception ([`make_kernel_dut_realtime`]): for a DuT that forwards in the kernel (bridge,
//! router, XDP redirect, wirespeed's XDP fast path), where the tester's receive runs on another
//! core (`receiver_cpu` is not `dut_cpu`: the RFC 2544 suite's placement), the DuT's ingress
//! NAPI thread runs at
//! SCHED_FIFO 1, as wirespeed's worker does (the wirespeed DuT driver). That thread is the
//! kernel DuT's worker, and at a normal priority another job's busy loop still took its core
//! for a whole scheduler tick (4 ms at HZ 250) a few times a second: d0's 256-frame ring
//! overflowed under a shaper passing 104 kframes/s, and the searches found 64–81 kframes/s on
//! a loaded machine against 104.5–104.9 with the thread real-time (issue 16). Where the
//! tester's receive shares the DuT core (`bench forwarding`), the thread keeps the plan's nice
//! value: real-time there, it would starve that receive under overload. In the same placement
//! the tester's receive (`t1`'s NAPI thread, on the generator's core) is real-time for every
//! DuT ([`make_receiver_realtime`]): its ring has no backpressure, and a receive that waited for
//! the generator's time slice capped every XDP forwarder's zero-loss rate. Real-time is not
//! enough on a kernel without preemption ([`super::shield::CoreShield`] says why).
//!
//! A thread's nice value only weighs it against the threads of its own *autogroup* (with
//! `kernel.sched_autogroup_enabled = 1`, each session is one scheduling group, and groups share
//! a core equally whatever the nice values inside them). So a nice -20 generator still got only
//! an equal share against another session's compiler. [`SessionShield`] gives the benchmark's own
//! session the same nice value while it runs (and restores it after), and [`place_process`]
//! gives a DuT that runs in a session of its own (a daemon) its group's value too. NAPI threads
//! are kernel threads, outside every autogroup, and are weighed by their own nice value.

use wirespeed_lab::{CommandError, run, run_in};

use crate::dut::{Host, Wiring};

/// Which core runs what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub generator_cpu: usize,
    pub dut_cpu: usize,
    /// Core of `t1`'s NAPI thread, the tester's receive.
    pub receiver_cpu: usize,
    /// Nice value of every placed thread (-20..=19), `None` to leave priorities alone.
    pub nice: Option<i32>,
}

impl Default for Plan {
    fn default() -> Self {
        Self {
            generator_cpu: 0,
            dut_cpu: 1,
            receiver_cpu: 1,
            nice: Some(-20),
        }
    }
}

/// One thread and the CPUs it may run on, as read back from /proc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    /// e.g. `napi/wsb-d0-8193 (pid 712)`.
    pub thread: String,
    /// `Cpus_allowed_list` of the thread, e.g. `1`.
    pub cpus: String,
    /// The thread's nice value as read back.
    pub nice: Option<i32>,
}

/// A placement step failed or did not take.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    #[error("placement: {0}")]
    Command(#[from] CommandError),
    #[error(
        "placement: no napi/{interface}-* kernel thread after enabling threaded NAPI; the \
         interface has no NAPI (is GRO on?)"
    )]
    NoNapiThread { interface: String },
    #[error("placement: {thread} should have nice {want} but has {nice:?}")]
    Nice {
        thread: String,
        want: i32,
        nice: Option<i32>,
    },
    #[error("placement: {thread} should run on CPU {want} but may run on {cpus}")]
    NotPinned {
        thread: String,
        want: usize,
        cpus: String,
    },
}

/// Gives `d0` (in the DuT namespace) and `t1` (in the tester namespace) threaded NAPI and pins
/// their NAPI threads; returns the threads as read back. Commands run are appended to `log`.
/// A DuT on a remote host ([`Wiring::dut_host`]) gets the same over ssh
/// ([`place_remote_napi`]); an external DuT is left alone: only the tester's side is placed.
pub fn place_kernel(
    wiring: &Wiring,
    plan: &Plan,
    log: &mut Vec<String>,
) -> Result<Vec<Placed>, PlacementError> {
    let mut placed = Vec::new();
    // veth hands a frame to the receiving side's NAPI only if the sender has no TSO (or the
    // receiver an XDP program, which turns the sender's TSO off by itself); otherwise `d0`'s
    // whole receive, and a kernel DuT's forwarding, runs in softirq on the generator's core.
    let sender = &wiring.ingress.tester_if;
    let offloads = ["-K", sender.as_str(), "tso", "off", "gso", "off"];
    log.push(format!(
        "ip netns exec {} ethtool {}",
        wiring.tester_ns,
        offloads.join(" ")
    ));
    run_in(&wiring.tester_ns, "ethtool", &offloads)?;
    let dut = (&wiring.dut_ns, &wiring.ingress.dut_if, plan.dut_cpu);
    let tester = (
        &wiring.tester_ns,
        &wiring.egress.tester_if,
        plan.receiver_cpu,
    );
    let local = matches!(wiring.dut_host, Some(Host::Local));
    for (ns, interface, cpu) in [Some(dut).filter(|_| local), Some(tester)]
        .into_iter()
        .flatten()
    {
        placed.extend(place_napi_niced(ns, interface, cpu, plan.nice, log)?);
    }
    if let Some(remote @ Host::Ssh { .. }) = &wiring.dut_host {
        let interface = &wiring.ingress.dut_if;
        placed.extend(place_remote_napi(
            remote,
            interface,
            plan.dut_cpu,
            plan.nice,
            log,
        )?);
    }
    Ok(placed)
}

/// For a DuT that forwards in the kernel ([`crate::dut::Dut::forwards_in_ingress_napi`]),
/// after [`place_kernel`]: its ingress NAPI thread, which is its worker, runs at SCHED_FIFO 1
/// as wirespeed's worker does, where priorities are set and nothing of the tester shares the
/// DuT's core (see the module documentation). That includes wirespeed with its XDP fast path:
/// its worker (SCHED_FIFO 1 too, asleep while no exception arrives) sees only what the kernel
/// hands up, and at a normal priority the thread that forwards everything else lost its core to
/// any other job for a scheduler tick, overflowing `d0`'s 256-frame ring (zero-loss rates
/// spread 3-14x over repeats, 2026-11-26). A DuT whose process forwards every frame keeps the
/// plan's nice value on that thread: its own threads are what it is measured by.
pub fn make_kernel_dut_realtime(
    wiring: &Wiring,
    plan: &Plan,
    log: &mut Vec<String>,
) -> Result<(), PlacementError> {
    if !realtime_placement(plan) {
        return Ok(());
    }
    match &wiring.dut_host {
        Some(Host::Local) => realtime(&wiring.ingress.dut_if, log),
        Some(remote) => {
            let script = format!(
                "for pid in $(pgrep '^napi/{}-'); do chrt -f -p 1 $pid; done",
                wiring.ingress.dut_if
            );
            log.push(remote.command(&["sh", "-c", &script]).join(" "));
            remote.run(&["sh", "-c", &script], None)?;
            Ok(())
        }
        None => Ok(()),
    }
}

/// In the same placement, for every DuT: the tester's receive (`t1`'s NAPI thread, on the
/// generator's core) runs at SCHED_FIFO 1 too. A frame an XDP forwarder redirects to `d1` waits
/// in `t1`'s 256-frame ring, which has no backpressure: a full ring drops it. At the
/// generator's nice value the thread waited for the generator's slice to end (EEVDF lets the
/// running thread finish its slice, up to milliseconds), so that ring overflowed at rates far
/// below the DuT's capacity, and every XDP forwarder's zero-loss rate was the tester's
/// scheduling, not the DuT (the kernel's own XDP redirect: 0.21 Mpps, below the Linux bridge).
/// Real-time, it runs as soon as frames arrive; what it does per frame is the tester's
/// receive, as cheap as before (an XDP count, or the copy of a frame a probe receiver parses),
/// and a generator that falls behind its schedule for it is seen by the departures (issue 16).
/// `receiver` is `t1`, or the calibration's receiving end, which must be measured alike.
pub fn make_receiver_realtime(
    receiver: &str,
    plan: &Plan,
    log: &mut Vec<String>,
) -> Result<(), PlacementError> {
    if !realtime_placement(plan) {
        return Ok(());
    }
    realtime(receiver, log)
}

/// Whether `plan` is the placement whose kernel threads run real-time: priorities are set, and
/// the tester's receive is off the DuT's core (see the module documentation).
fn realtime_placement(plan: &Plan) -> bool {
    plan.nice.is_some() && plan.receiver_cpu != plan.dut_cpu
}

/// Puts the NAPI threads of `interface` at SCHED_FIFO 1.
fn realtime(interface: &str, log: &mut Vec<String>) -> Result<(), PlacementError> {
    for (pid, comm) in napi_threads(interface) {
        let pid = pid.to_string();
        log.push(format!("chrt -f -p 1 {pid}  # {comm}"));
        run("chrt", &["-f", "-p", "1", &pid])?;
    }
    Ok(())
}

/// Gives `interface` (in namespace `ns`) threaded NAPI and pins its NAPI threads to `cpu`,
/// leaving their priority alone; returns them as read back. Commands run are appended to `log`.
pub fn place_napi(
    ns: &str,
    interface: &str,
    cpu: usize,
    log: &mut Vec<String>,
) -> Result<Vec<Placed>, PlacementError> {
    place_napi_niced(ns, interface, cpu, None, log)
}

/// [`place_napi`], also giving the NAPI threads nice value `nice` when there is one.
pub fn place_napi_niced(
    ns: &str,
    interface: &str,
    cpu: usize,
    nice: Option<i32>,
    log: &mut Vec<String>,
) -> Result<Vec<Placed>, PlacementError> {
    let mut placed = Vec::new();
    let threaded = format!("echo 1 > /sys/class/net/{interface}/threaded");
    for (program, args) in [
        ("ethtool", vec!["-K", interface, "gro", "on"]),
        ("sh", vec!["-c", threaded.as_str()]),
    ] {
        log.push(format!("ip netns exec {ns} {program} {}", args.join(" ")));
        run_in(ns, program, &args)?;
    }
    let threads = napi_threads(interface);
    if threads.is_empty() {
        return Err(PlacementError::NoNapiThread {
            interface: interface.into(),
        });
    }
    for (pid, comm) in threads {
        let pid_text = pid.to_string();
        let cpu_text = cpu.to_string();
        log.push(format!("taskset -pc {cpu} {pid}  # {comm}"));
        run("taskset", &["-pc", &cpu_text, &pid_text])?;
        renice(pid, nice, log)?;
        let thread = format!("{comm} (pid {pid})");
        placed.push(expect_on(&thread, &format!("/proc/{pid}"), cpu, nice)?);
    }
    Ok(placed)
}

/// [`place_napi_niced`] for interface `interface` of a remote `host`, in one ssh: GRO and
/// threaded NAPI on, every `napi/<interface>-*` thread pinned to `cpu` (and reniced), and each
/// read back from the host's /proc as `PID COMM CPUS NICE`.
pub fn place_remote_napi(
    host: &Host,
    interface: &str,
    cpu: usize,
    nice: Option<i32>,
    log: &mut Vec<String>,
) -> Result<Vec<Placed>, PlacementError> {
    let renice = nice.map_or(String::new(), |nice| {
        format!("renice -n {nice} -p $pid >/dev/null; ")
    });
    let script = format!(
        "ethtool -K {interface} gro on && echo 1 > /sys/class/net/{interface}/threaded && \
         for pid in $(pgrep '^napi/{interface}-'); do taskset -pc {cpu} $pid >/dev/null; \
         {renice}echo $pid $(cat /proc/$pid/comm) \
         $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/$pid/status) \
         $(cut -d' ' -f19 /proc/$pid/stat); done"
    );
    log.push(host.command(&["sh", "-c", &script]).join(" "));
    let text = host.run(&["sh", "-c", &script], None)?;
    let mut placed = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let [pid, comm, cpus, niced] = words[..] else {
            continue;
        };
        let thread = format!("{comm} (pid {pid} on {})", host.label());
        let placed_nice = niced.parse().ok();
        if cpus != cpu.to_string() {
            return Err(PlacementError::NotPinned {
                thread,
                want: cpu,
                cpus: cpus.into(),
            });
        }
        if let Some(want) = nice.filter(|&want| placed_nice != Some(want)) {
            return Err(PlacementError::Nice {
                thread,
                want,
                nice: placed_nice,
            });
        }
        placed.push(Placed {
            thread,
            cpus: cpus.into(),
            nice: placed_nice,
        });
    }
    if placed.is_empty() {
        return Err(PlacementError::NoNapiThread {
            interface: format!("{interface} on {}", host.label()),
        });
    }
    Ok(placed)
}

/// Checks that every thread of process `pid` whose name starts with `prefix` may run only on
/// `cpu`, leaving priorities alone; returns them. An error if there is none.
pub fn check_threads(pid: u32, prefix: &str, cpu: usize) -> Result<Vec<Placed>, PlacementError> {
    place_process(pid, prefix, cpu, None, &mut Vec::new())
}

/// Gives every thread of process `pid` the plan's nice value, and checks that the threads whose
/// name starts with `prefix` may run only on `cpu`; returns them. An error if there is none.
pub fn place_process(
    pid: u32,
    prefix: &str,
    cpu: usize,
    nice: Option<i32>,
    log: &mut Vec<String>,
) -> Result<Vec<Placed>, PlacementError> {
    let mut placed = Vec::new();
    renice_autogroup(pid, nice, log);
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Err(PlacementError::NotPinned {
            thread: format!("process {pid}"),
            want: cpu,
            cpus: "(process gone)".into(),
        });
    };
    for task in tasks.flatten() {
        let path = task.path();
        let Ok(tid) = task.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        renice(tid, nice, log)?;
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        let comm = comm.trim();
        if comm.starts_with(prefix) {
            let thread = format!("{comm} (pid {pid}, tid {tid})");
            placed.push(expect_on(&thread, &path.to_string_lossy(), cpu, nice)?);
        }
    }
    if placed.is_empty() {
        return Err(PlacementError::NotPinned {
            thread: format!("{prefix}* threads of process {pid}"),
            want: cpu,
            cpus: "(no such thread)".into(),
        });
    }
    Ok(placed)
}

/// Gives the calling thread the plan's nice value and returns it as read back (for the
/// generator, which pins itself).
pub fn place_this_thread(name: &str, nice: Option<i32>) -> Result<Placed, PlacementError> {
    let tid = std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|link| link.file_name()?.to_str()?.parse::<u32>().ok());
    if let Some(tid) = tid {
        renice(tid, nice, &mut Vec::new())?;
    }
    let placed = this_thread(name);
    if let Some(want) = nice
        && placed.nice != Some(want)
    {
        return Err(PlacementError::Nice {
            thread: name.into(),
            want,
            nice: placed.nice,
        });
    }
    Ok(placed)
}

/// The benchmark's session (autogroup) at the plan's nice value while this lives; the value it
/// had before comes back on drop. Without autogroups (or without a nice value) it does nothing.
#[derive(Debug)]
pub struct SessionShield {
    restore: Option<i32>,
}

impl SessionShield {
    /// Raises (or lowers) this process's autogroup to `nice`. Failing to is not an error: the
    /// benchmark then runs as it did before autogroups were taken into account, and says so.
    pub fn new(nice: Option<i32>) -> Self {
        let Some(nice) = nice else {
            return Self { restore: None };
        };
        let Some((_, previous)) = autogroup("self") else {
            return Self { restore: None };
        };
        if let Err(error) = std::fs::write("/proc/self/autogroup", nice.to_string()) {
            eprintln!(
                "note: could not give this session (autogroup) nice {nice}: {error}; other \
                 sessions' jobs will take equal turns with the benchmark's threads"
            );
            return Self { restore: None };
        }
        Self {
            restore: Some(previous),
        }
    }
}

impl Drop for SessionShield {
    fn drop(&mut self) {
        if let Some(previous) = self.restore {
            let _ = std::fs::write("/proc/self/autogroup", previous.to_string());
        }
    }
}

/// The autogroup of process `pid` (`self` for this one) and its nice value, from
/// `/proc/<pid>/autogroup` (`/autogroup-212 nice 0`); `None` without autogroups.
fn autogroup(pid: &str) -> Option<(String, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/autogroup")).ok()?;
    let mut words = text.split_whitespace();
    let group = words.next()?.to_owned();
    let nice = words.nth(1)?.parse().ok()?;
    Some((group, nice))
}

/// Gives the autogroup of `pid` nice value `nice` when it is not this process's own (a DuT
/// daemon in a session of its own); this process's group is the [`SessionShield`]'s to set.
fn renice_autogroup(pid: u32, nice: Option<i32>, log: &mut Vec<String>) {
    let (Some(nice), Some((theirs, _))) = (nice, autogroup(&pid.to_string())) else {
        return;
    };
    if autogroup("self").is_some_and(|(ours, _)| ours == theirs) {
        return;
    }
    log.push(format!("echo {nice} > /proc/{pid}/autogroup  # {theirs}"));
    let _ = std::fs::write(format!("/proc/{pid}/autogroup"), nice.to_string());
}

fn renice(tid: u32, nice: Option<i32>, log: &mut Vec<String>) -> Result<(), PlacementError> {
    if let Some(nice) = nice {
        let (nice, tid) = (nice.to_string(), tid.to_string());
        log.push(format!("renice -n {nice} -p {tid}"));
        run("renice", &["-n", &nice, "-p", &tid])?;
    }
    Ok(())
}

/// The calling thread as read back (for the generator).
pub fn this_thread(name: &str) -> Placed {
    Placed {
        thread: name.into(),
        cpus: cpus_allowed("/proc/thread-self/status").unwrap_or_else(|| "?".into()),
        nice: nice_of("/proc/thread-self/stat"),
    }
}

/// Reads back the thread at `/proc` directory `dir`: an error unless it may run only on `cpu`
/// and has nice value `nice` (when one is asked for).
fn expect_on(
    thread: &str,
    dir: &str,
    cpu: usize,
    nice: Option<i32>,
) -> Result<Placed, PlacementError> {
    let cpus = cpus_allowed(&format!("{dir}/status")).unwrap_or_else(|| "(unreadable)".into());
    if cpus != cpu.to_string() {
        return Err(PlacementError::NotPinned {
            thread: thread.into(),
            want: cpu,
            cpus,
        });
    }
    let actual = nice_of(&format!("{dir}/stat"));
    if let Some(want) = nice
        && actual != Some(want)
    {
        return Err(PlacementError::Nice {
            thread: thread.into(),
            want,
            nice: actual,
        });
    }
    Ok(Placed {
        thread: thread.into(),
        cpus,
        nice: actual,
    })
}

/// The nice value from a /proc `stat` file (field 19; the fields after the command name, which
/// may contain spaces, start at field 3).
fn nice_of(stat: &str) -> Option<i32> {
    let text = std::fs::read_to_string(stat).ok()?;
    let (_, after) = text.rsplit_once(')')?;
    after.split_whitespace().nth(16)?.parse().ok()
}

/// `Cpus_allowed_list` from a /proc status file.
fn cpus_allowed(status: &str) -> Option<String> {
    let text = std::fs::read_to_string(status).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .map(|cpus| cpus.trim().to_string())
}

/// The kernel threads named `napi/<interface>-<id>` (names are cut at 15 bytes, so an interface
/// name of at most 9 bytes keeps them apart), as (pid, name).
pub fn napi_threads(interface: &str) -> Vec<(u32, String)> {
    let prefix = format!("napi/{interface}-");
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        let comm = comm.trim();
        if comm.starts_with(&prefix) {
            found.push((pid, comm.to_string()));
        }
    }
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_shield_sets_this_sessions_nice_and_gives_the_old_one_back() {
        let Some((_, before)) = autogroup("self") else {
            eprintln!("skipped: this kernel has no autogroups (kernel.sched_autogroup_enabled)");
            return;
        };
        if wirespeed_lab::unavailable_reason().is_some() {
            eprintln!("skipped: giving a session its nice value back needs root");
            return;
        }
        let nice = if before == 5 { 6 } else { 5 };
        let shield = SessionShield::new(Some(nice));
        assert_eq!(autogroup("self").map(|(_, n)| n), Some(nice));
        drop(shield);
        assert_eq!(autogroup("self").map(|(_, n)| n), Some(before));
        let untouched = SessionShield::new(None);
        assert_eq!(autogroup("self").map(|(_, n)| n), Some(before));
        drop(untouched);
    }

    #[test]
    fn the_calling_thread_reads_back_its_own_pinning() {
        std::thread::spawn(|| {
            wirespeed_io::thread::pin_to_core(0).unwrap();
            let placed = place_this_thread("generator", None).unwrap();
            assert_eq!(placed.cpus, "0");
            assert!(placed.nice.is_some(), "the nice value is read back");
            let pid = std::process::id();
            assert!(place_process(pid, "no-such-thread", 0, None, &mut Vec::new()).is_err());
        })
        .join()
        .unwrap();
    }
}
