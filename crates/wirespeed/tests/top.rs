//! `wirespeed top` in a real terminal (tmux): it draws a forwarding switch's ports, drops,
//! cycles and app counters from the control socket, refreshes, and `q` restores the terminal.

use std::process::Command;
use std::time::{Duration, Instant};

use wirespeed_packet::FramePool;
use wirespeed_testkit::ports::send;

mod common;
use common::*;

/// A detached tmux session, killed when dropped (also when the test fails).
struct Tmux(String);

impl Tmux {
    fn start(name: &str, command: &str) -> Tmux {
        let status = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                name,
                "-x",
                "150",
                "-y",
                "40",
                command,
            ])
            .status()
            .expect("tmux (installed by `make setup`)");
        assert!(status.success(), "tmux new-session failed");
        Tmux(name.to_string())
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.0])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn alive(&self) -> bool {
        Command::new("tmux")
            .args(["has-session", "-t", &self.0])
            .output()
            .is_ok_and(|out| out.status.success())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .output();
    }
}

#[test]
fn top_draws_a_forwarding_switch_and_quits_on_q() {
    let prefix = "wsttop";
    let Some((lab, dir)) = lab(prefix, 1) else {
        return;
    };
    let config = xconnect_config(&lab, "backend = \"afpacket\"");
    let mut switch = Switch::start(&lab, &config, &dir);
    let socket = format!("/run/wirespeed/{}.sock", lab.dut_ns);
    let mut pool = FramePool::new(4096, 2048).unwrap();
    let (mut t0, mut t1) = (tester_port(&lab, 0), tester_port(&lab, 1));
    wait_until_forwarding(&mut t0, &mut t1, &mut pool);

    let top = Tmux::start(
        prefix,
        &format!(
            "{} top --socket {socket} --interval 0.3",
            env!("CARGO_BIN_EXE_wirespeed")
        ),
    );
    // Traffic while top refreshes, until it shows every panel with the ports in it.
    let burst = frames(50);
    let deadline = Instant::now() + Duration::from_secs(10);
    let screen = loop {
        send(&mut t0, &mut pool, &burst);
        std::thread::sleep(Duration::from_millis(100));
        let screen = top.screen();
        let drawn = [
            "rates over the last",
            "0/p0",
            "0/p1",
            "rx Mpps",
            "drop reason",
        ]
        .iter()
        .all(|text| screen.contains(text));
        if drawn && screen.contains("process (cycles/pkt)") && screen.contains("app counter") {
            break screen;
        }
        assert!(
            Instant::now() < deadline,
            "top never drew the switch:\n{screen}"
        );
    };
    println!("{screen}");
    assert!(screen.contains("afpacket"), "{screen}");
    assert!(screen.contains("idle (% of cycles)"), "{screen}");

    // q quits and hands the terminal back.
    Command::new("tmux")
        .args(["send-keys", "-t", prefix, "q"])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while top.alive() {
        assert!(Instant::now() < deadline, "top did not quit on q");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(top);
    let (success, out) = switch.interrupt();
    assert!(success, "switch failed:\n{out}");
    drop(lab);
    wirespeed_lab::assert_gone_for_test(prefix);
}
