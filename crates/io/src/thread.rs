//! Placing a worker thread: which core it runs on and whether it preempts the kernel's threads.
//!
//! On a machine where the kernel's NAPI thread for a port shares the worker's core, the worker at
//! SCHED_FIFO priority 1 runs above it and drains its rings before they overflow (DESIGN §8: this
//! took a probe from 0.47 to 0.7–0.8 Mpps). A worker that sleeps in poll(2) when idle still
//! leaves the core to the kernel whenever there is nothing to forward.

/// Pins the calling thread to `core`.
pub fn pin_to_core(core: usize) -> std::io::Result<()> {
    set_thread_affinity(0, &[core])
}

/// Lets thread `tid` (0: the calling thread) run on `cores` only.
pub fn set_thread_affinity(tid: u32, cores: &[usize]) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is a plain bit array for which all-zero is the valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &core in cores {
        if core >= libc::CPU_SETSIZE as usize {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "core {core} is beyond the {} cores a CPU set can name",
                    libc::CPU_SETSIZE
                ),
            ));
        }
        // SAFETY: `core` is below CPU_SETSIZE (checked above), so CPU_SET writes inside `set`.
        unsafe { libc::CPU_SET(core, &mut set) };
    }
    let pid = kernel_tid(tid)?;
    // SAFETY: the set is initialised and its size is passed; the kernel only reads it.
    let rc = unsafe { libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// `tid` as the kernel's pid_t (0: the calling thread).
fn kernel_tid(tid: u32) -> std::io::Result<libc::pid_t> {
    libc::pid_t::try_from(tid).map_err(|_| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "thread id out of range")
    })
}

/// The cores thread `tid` (0: the calling thread) may run on, in order.
pub fn thread_affinity(tid: u32) -> std::io::Result<Vec<usize>> {
    let pid = kernel_tid(tid)?;
    // SAFETY: cpu_set_t is a plain bit array for which all-zero is the valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer and size describe `set`, which the kernel writes and which outlives
    // the call.
    let rc =
        unsafe { libc::sched_getaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: every index is below CPU_SETSIZE, so CPU_ISSET reads inside `set`.
        .filter(|&core| unsafe { libc::CPU_ISSET(core, &set) })
        .collect())
}

/// Moves the calling thread to SCHED_FIFO at `priority` (1..=99).
pub fn set_fifo_priority(priority: i32) -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param that outlives the call.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Number of cores this process may run on.
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The cores the calling thread may run on (its affinity mask, narrowed by `taskset` or a
/// cgroup's cpuset), in order: a configuration that pins a worker elsewhere can be refused
/// before anything starts instead of when the worker pins itself.
pub fn allowed_cores() -> std::io::Result<Vec<usize>> {
    thread_affinity(0)
}

/// `cores` (ascending) as the kernel's CPU lists write them: `0-3,8,10-11`.
pub fn cpu_list(cores: &[usize]) -> String {
    let mut out = Vec::new();
    let mut rest = cores;
    while let Some((&first, tail)) = rest.split_first() {
        let run = tail
            .iter()
            .zip(1..)
            .take_while(|&(&core, step)| core == first + step)
            .count();
        out.push(match run {
            0 => first.to_string(),
            _ => format!("{first}-{}", first + run),
        });
        rest = &tail[run..];
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowed_cores_include_the_one_this_thread_was_pinned_to() {
        std::thread::spawn(|| {
            let all = allowed_cores().unwrap();
            assert_eq!(all.len(), available_cores());
            let core = *all.last().unwrap();
            pin_to_core(core).unwrap();
            assert_eq!(allowed_cores().unwrap(), vec![core]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn cpu_lists_join_runs() {
        assert_eq!(cpu_list(&[]), "");
        assert_eq!(cpu_list(&[5]), "5");
        assert_eq!(cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(cpu_list(&[0, 2, 4]), "0,2,4");
    }

    #[test]
    fn pinning_to_core_zero_works_and_absurd_cores_are_refused() {
        std::thread::spawn(|| {
            pin_to_core(0).unwrap();
            assert!(pin_to_core(1 << 20).is_err());
        })
        .join()
        .unwrap();
    }
}
