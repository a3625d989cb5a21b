//! The core shield of the RFC 2544 placement: other processes and this one's unpinned threads
//! leave the DuT core while it stands and get their masks back after, including a process one
//! of them started meanwhile; a thread pinned to the DuT core keeps it.
//! Needs root (CAP_SYS_NICE over other users' processes) and two cores, as CI has.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use wirespeed_io::thread::{allowed_cores, thread_affinity};
use wirespeed_tester::bench::placement::Plan;
use wirespeed_tester::bench::shield::CoreShield;

/// Kills the shell (and with it its sleeping child) however the test ends.
struct Reap(Child, Option<u32>);

impl Drop for Reap {
    fn drop(&mut self) {
        if let Some(pid) = self.1 {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text.trim().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "{} never written",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A thread (pinned to `core` if given) that lives until told to stop; its thread id.
fn parked_thread(core: Option<usize>) -> (u32, std::sync::mpsc::Sender<()>) {
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Some(core) = core {
            wirespeed_io::thread::pin_to_core(core).unwrap();
        }
        // `/proc/thread-self` links to `<pid>/task/<tid>`.
        let link = std::fs::read_link("/proc/thread-self").unwrap();
        let tid: u32 = link.file_name().unwrap().to_str().unwrap().parse().unwrap();
        tid_tx.send(tid).unwrap();
        let _ = stop_rx.recv();
    });
    (tid_rx.recv().unwrap(), stop_tx)
}

#[test]
fn other_processes_leave_the_dut_core_and_get_it_back() {
    let all = allowed_cores().unwrap();
    assert!(
        all.len() >= 2,
        "the test needs two cores, this machine has {all:?}"
    );
    let dir = std::env::temp_dir().join(format!("wirespeed-shield-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (go, child_pid) = (dir.join("go"), dir.join("child"));
    // A shell that exists before the shield, and starts a child once told to (after it).
    let script = format!(
        "while [ ! -e {go} ]; do sleep 0.02; done; sleep 60 & echo $! > {child}; wait",
        go = go.display(),
        child = child_pid.display()
    );
    let shell = Command::new("sh").args(["-c", &script]).spawn().unwrap();
    let mut reap = Reap(shell, None);
    let shell_pid = reap.0.id();
    assert_eq!(thread_affinity(shell_pid).unwrap(), all);

    let dut_cpu = all[1];
    // A thread of this process pinned to the DuT core (as a DuT's worker is) keeps its mask;
    // an unpinned one loses the DuT core.
    let (pinned_tid, stop_pinned) = parked_thread(Some(dut_cpu));
    let (unpinned_tid, stop_unpinned) = parked_thread(None);
    let plan = Plan {
        generator_cpu: all[0],
        dut_cpu,
        receiver_cpu: all[0],
        nice: Some(0),
    };
    let shield = CoreShield::raise(&plan).expect("a shield in the real-time placement");
    assert!(shield.summary().contains(&format!("CPU {dut_cpu} kept")));
    let narrowed: Vec<usize> = all.iter().copied().filter(|&c| c != dut_cpu).collect();
    assert_eq!(thread_affinity(shell_pid).unwrap(), narrowed);
    // This process's unpinned threads leave too (the tester's own kernel work is not the
    // DuT's); its pinned ones stay, and so does the raising thread, whose children (the DuTs)
    // pin their workers to the DuT core.
    assert_eq!(thread_affinity(unpinned_tid).unwrap(), narrowed);
    assert_eq!(thread_affinity(pinned_tid).unwrap(), vec![dut_cpu]);
    assert_eq!(allowed_cores().unwrap(), all);

    std::fs::write(&go, "").unwrap();
    let child: u32 = wait_for(&child_pid).parse().unwrap();
    reap.1 = Some(child);
    assert_eq!(
        thread_affinity(child).unwrap(),
        narrowed,
        "started by a moved process"
    );

    drop(shield);
    assert_eq!(thread_affinity(unpinned_tid).unwrap(), all);
    assert_eq!(thread_affinity(pinned_tid).unwrap(), vec![dut_cpu]);
    stop_pinned.send(()).unwrap();
    stop_unpinned.send(()).unwrap();
    assert_eq!(thread_affinity(shell_pid).unwrap(), all);
    assert_eq!(
        thread_affinity(child).unwrap(),
        all,
        "its parent's mask back"
    );
    drop(reap);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_shield_where_the_tester_receives_on_the_dut_core() {
    let plan = Plan::default();
    assert_eq!(plan.receiver_cpu, plan.dut_cpu);
    assert!(CoreShield::raise(&plan).is_none());
    let unprioritised = Plan {
        receiver_cpu: 0,
        nice: None,
        ..Plan::default()
    };
    assert!(CoreShield::raise(&unprioritised).is_none());
}
