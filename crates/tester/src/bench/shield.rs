//! The DuT's core kept for the DuT while a benchmark runs (what `cset shield` does), raised by
//! `bench rfc2544` and `bench compare` when asked (`--shield-dut-core`). Not by default: raised
//! by one benchmark process it narrows another running beside it (parallel lab tests), whose
//! placement then fails.
//!
//! Kernels built without kernel preemption (PREEMPT_NONE, or PREEMPT_DYNAMIC left at "none",
//! which kernel lockdown may forbid changing, as on the development VM) switch to a woken
//! real-time thread only when the code running on its core reaches a preemption point. So a
//! DuT's ingress NAPI thread at SCHED_FIFO ([`super::placement::make_kernel_dut_realtime`])
//! still waits while another process is inside a system call or a page fault on its core.
//! Traced (sched_switch and reschedule IPIs, `tracefs`) during a search of the XDP redirect DuT
//! beside a Rust build: `d0`'s NAPI thread waited up to 5.4 ms after its wake-up, 36 times over
//! 1 ms in 87 s, each time behind `rustc` in the kernel, and `d0`'s 256-frame ring overflowed at
//! 0.085 Mpps (NDRs 0.31 and 0.05 Mpps in two searches). With every other process off the DuT
//! core the longest wait was 1.1 ms, behind `kdamond` and unbound workqueue workers, kernel
//! threads that may move too; the tester's own unpinned threads (its main thread loading BPF
//! programs and reading maps, in the kernel) took it for up to 7.7 ms.
//!
//! While a [`CoreShield`] lives, every thread allowed on the DuT core and on others loses the
//! DuT core: other processes' threads, this process's own unpinned threads (the ones that
//! matter are pinned where they must run, and keep their mask), the kernel threads that accept
//! a new mask (per-CPU ones refuse and stay), and the unbound workqueues
//! (`/sys/devices/virtual/workqueue/cpumask`). The thread that raises the shield keeps its
//! mask: it starts the DuTs, which inherit it and must be free to pin their workers to the DuT
//! core (a wirespeed switch refuses a configured core its mask lacks, and so does DPDK). On
//! drop every moved thread gets its mask back, and so do the threads and processes the moved
//! ones started meanwhile (they inherited the narrowed mask). Only a benchmark killed by SIGKILL
//! leaves other processes narrowed, until they exit.

use std::collections::HashMap;

use wirespeed_io::thread::{set_thread_affinity, thread_affinity};

use super::placement::Plan;

const WORKQUEUE_CPUMASK: &str = "/sys/devices/virtual/workqueue/cpumask";

/// `task_struct.flags` bit of a kernel thread (`PF_KTHREAD`, include/linux/sched.h).
const PF_KTHREAD: u64 = 0x0020_0000;

/// One thread moved off the DuT core.
#[derive(Debug)]
struct Moved {
    tid: u32,
    before: Vec<usize>,
    after: Vec<usize>,
}

/// Other work kept off the DuT core until drop (see the module documentation).
#[derive(Debug)]
pub struct CoreShield {
    moved: Vec<Moved>,
    /// Per moved process (by thread group id): its masks before and after, for the threads
    /// and children it starts while the shield stands.
    processes: HashMap<u32, (Vec<usize>, Vec<usize>)>,
    /// When the shield went up, in clock ticks since boot (`/proc/<pid>/stat` starttime).
    raised_at: u64,
    /// The unbound workqueues' mask before, as the kernel wrote it.
    workqueue: Option<String>,
    summary: String,
}

/// The fields of `/proc/<pid>/task/<tid>/stat` the shield reads.
struct Stat {
    ppid: u32,
    flags: u64,
    starttime: u64,
}

fn stat(path: &str) -> Option<Stat> {
    let text = std::fs::read_to_string(path).ok()?;
    // The command name may hold spaces and parentheses: fields resume after the last ')'.
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    Some(Stat {
        ppid: fields.get(1)?.parse().ok()?,
        flags: fields.get(6)?.parse().ok()?,
        starttime: fields.get(19)?.parse().ok()?,
    })
}

/// Every thread on the machine as (thread group id, thread id).
fn threads() -> Vec<(u32, u32)> {
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut all = Vec::new();
    for process in processes.flatten() {
        let Some(tgid) = process.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{tgid}/task")) else {
            continue;
        };
        all.extend(tasks.flatten().filter_map(|task| {
            let tid = task.file_name().to_str()?.parse().ok()?;
            Some((tgid, tid))
        }));
    }
    all
}

/// The calling thread's id (`/proc/thread-self` links to `<pid>/task/<tid>`).
fn this_thread() -> Option<u32> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    link.file_name()?.to_str()?.parse().ok()
}

/// Clock ticks since boot, the unit of a thread's starttime: USER_HZ, which the kernel fixes
/// at 100 for user space on every architecture it still supports (`sysconf(_SC_CLK_TCK)`).
fn ticks_now() -> u64 {
    const USER_HZ: f64 = 100.0;
    let uptime = std::fs::read_to_string("/proc/uptime").unwrap_or_default();
    let seconds: f64 = uptime
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.0);
    (seconds * USER_HZ) as u64
}

/// The kernel's hexadecimal CPU mask (`ff,ffffffff`: 32-bit groups, most significant first)
/// without CPU `core`; `None` when it does not parse or would be left empty.
fn mask_without(mask: &str, core: usize) -> Option<String> {
    let mut groups: Vec<u32> = mask
        .trim()
        .split(',')
        .map(|group| u32::from_str_radix(group, 16).ok())
        .collect::<Option<_>>()?;
    let index = groups.len().checked_sub(1 + core / 32)?;
    groups[index] &= !(1u32 << (core % 32));
    if groups.iter().all(|&group| group == 0) {
        return None;
    }
    let width = mask.trim().split(',').map(str::len).collect::<Vec<_>>();
    Some(
        groups
            .iter()
            .zip(width)
            .map(|(group, width)| format!("{group:0width$x}"))
            .collect::<Vec<_>>()
            .join(","),
    )
}

impl CoreShield {
    /// Whether `plan` is one a shield is for: priorities set (the DuT's kernel threads run
    /// real-time) and the tester's receive on another core than the DuT (a shield would move
    /// nothing of the tester's receive, which then shares the DuT core anyway); the reason if
    /// not, phrased for the command line.
    pub fn check(plan: &Plan) -> Result<(), &'static str> {
        if plan.nice.is_none() {
            return Err("the DuT core is kept for the DuT's real-time threads: drop `--nice off`");
        }
        if plan.receiver_cpu == plan.dut_cpu {
            return Err(
                "the tester's receive runs on the DuT core: give `--receiver-cpu` another core",
            );
        }
        Ok(())
    }

    /// Keeps other work off `plan.dut_cpu` where the plan runs the DuT's kernel threads
    /// real-time (priorities set, the tester's receive on another core); `None` otherwise,
    /// or when nothing could be moved. What it did is in [`CoreShield::summary`].
    pub fn raise(plan: &Plan) -> Option<Self> {
        Self::check(plan).ok()?;
        let core = plan.dut_cpu;
        let raised_at = ticks_now();
        let raising = this_thread();
        let mut shield = Self {
            moved: Vec::new(),
            processes: HashMap::new(),
            raised_at,
            workqueue: None,
            summary: String::new(),
        };
        let (mut kernel, mut refused) = (0, 0);
        for (tgid, tid) in threads() {
            let Some(stat) = stat(&format!("/proc/{tgid}/task/{tid}/stat")) else {
                continue;
            };
            let Ok(before) = thread_affinity(tid) else {
                continue;
            };
            if Some(tid) == raising || before.len() < 2 || !before.contains(&core) {
                continue;
            }
            let after: Vec<usize> = before.iter().copied().filter(|&c| c != core).collect();
            if set_thread_affinity(tid, &after).is_err() {
                refused += 1;
                continue;
            }
            if stat.flags & PF_KTHREAD != 0 {
                kernel += 1;
            } else {
                shield
                    .processes
                    .entry(tgid)
                    .or_insert_with(|| (before.clone(), after.clone()));
            }
            shield.moved.push(Moved { tid, before, after });
        }
        let workqueue = std::fs::read_to_string(WORKQUEUE_CPUMASK).ok();
        let mut workqueue_note = String::new();
        if let Some(old) = workqueue.as_deref().map(str::trim)
            && let Some(new) = mask_without(old, core)
        {
            match std::fs::write(WORKQUEUE_CPUMASK, &new) {
                Ok(()) => {
                    workqueue_note = format!("; unbound workqueues {old} -> {new}");
                    shield.workqueue = Some(old.to_owned());
                }
                Err(error) => workqueue_note = format!("; unbound workqueues kept ({error})"),
            }
        }
        let user = shield.moved.len() - kernel;
        shield.summary = format!(
            "# CPU {core} kept for the DuT while the run lasted: {user} threads of {} other \
             processes and {kernel} kernel threads moved off it ({refused} refused: per-CPU \
             kernel threads){workqueue_note}; restored after",
            shield.processes.len(),
        );
        if shield.moved.is_empty() && shield.workqueue.is_none() {
            return None;
        }
        Some(shield)
    }

    /// What the shield did, as a comment line for the report's placement commands.
    pub fn summary(&self) -> &str {
        &self.summary
    }

    /// The moved process a thread started after the shield went up descends from: its own
    /// process, or the nearest ancestor (at most 32 generations up).
    fn origin(&self, tgid: u32) -> Option<&(Vec<usize>, Vec<usize>)> {
        let mut pid = tgid;
        for _ in 0..32 {
            if let Some(masks) = self.processes.get(&pid) {
                return Some(masks);
            }
            pid = stat(&format!("/proc/{pid}/stat"))?.ppid;
            if pid <= 1 {
                return None;
            }
        }
        None
    }
}

impl Drop for CoreShield {
    fn drop(&mut self) {
        if let Some(old) = &self.workqueue {
            let _ = std::fs::write(WORKQUEUE_CPUMASK, old);
        }
        let mut restored: Vec<u32> = Vec::with_capacity(self.moved.len());
        for moved in &self.moved {
            // A thread that changed its own mask since keeps its choice.
            if thread_affinity(moved.tid).is_ok_and(|now| now == moved.after) {
                let _ = set_thread_affinity(moved.tid, &moved.before);
            }
            restored.push(moved.tid);
        }
        for (tgid, tid) in threads() {
            if restored.contains(&tid) {
                continue;
            }
            let Some(stat) = stat(&format!("/proc/{tgid}/task/{tid}/stat")) else {
                continue;
            };
            if stat.flags & PF_KTHREAD != 0 || stat.starttime < self.raised_at {
                continue;
            }
            if let Some((before, after)) = self.origin(tgid)
                && thread_affinity(tid).is_ok_and(|now| &now == after)
            {
                let _ = set_thread_affinity(tid, before);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_leaves_the_kernels_hexadecimal_mask() {
        assert_eq!(mask_without("3", 1).as_deref(), Some("1"));
        assert_eq!(mask_without("3\n", 0).as_deref(), Some("2"));
        assert_eq!(
            mask_without("ff,ffffffff", 1).as_deref(),
            Some("ff,fffffffd")
        );
        assert_eq!(
            mask_without("ff,ffffffff", 33).as_deref(),
            Some("fd,ffffffff")
        );
        assert_eq!(mask_without("00000002", 1), None, "no CPU would be left");
        assert_eq!(mask_without("zz", 1), None);
        assert_eq!(mask_without("3", 64), None, "a CPU beyond the mask");
    }
}
