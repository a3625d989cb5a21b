//! `wirespeed ctl` end to end: the real switch forwards between the lab's DuT interfaces while
//! the real `ctl` binary talks to its control socket; garbage and oversized requests get errors,
//! and the switch keeps forwarding, stops cleanly and removes its socket.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use wirespeed_packet::FramePool;
use wirespeed_testkit::ports::send;

mod common;
use common::*;

fn ctl(socket: &Path, words: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wirespeed"))
        .args(["ctl", "--socket"])
        .arg(socket)
        .args(words)
        .output()
        .unwrap()
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn ctl_talks_to_a_forwarding_switch_that_survives_garbage() {
    let prefix = "wstctl1";
    let Some((lab, dir)) = lab(prefix, 1) else {
        return;
    };
    let socket: PathBuf = dir.join("ctl.sock");
    let config = format!(
        "[switch]\napp = \"xconnect\"\ncontrol_socket = \"{}\"\n\n\
         [[port]]\nname = \"p0\"\nbackend = \"afpacket\"\ninterface = \"{}\"\n\n\
         [[port]]\nname = \"p1\"\nbackend = \"afpacket\"\ninterface = \"{}\"\n\n\
         [xconnect]\npairs = [[\"p0\", \"p1\"]]\n",
        socket.display(),
        lab.pairs[0].dut_if,
        lab.pairs[1].dut_if
    );
    let mut switch = Switch::start(&lab, &config, &dir);

    let mut pool = FramePool::new(4096, 2048).unwrap();
    let (mut t0, mut t1) = (tester_port(&lab, 0), tester_port(&lab, 1));
    const PROBE_PORT: u16 = 7;
    const TEST_PORT: u16 = 9;
    let deadline = Instant::now() + Duration::from_secs(10);
    while receive_all(&mut t1, &mut pool, 1, PROBE_PORT).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the switch never forwarded a probe"
        );
        send(&mut t0, &mut pool, &frames_to(1, PROBE_PORT));
    }

    // The socket exists, owner-only.
    let metadata = std::fs::symlink_metadata(&socket).unwrap();
    assert!(metadata.file_type().is_socket());
    assert_eq!(metadata.permissions().mode() & 0o777, 0o600);

    let ports = ctl(&socket, &["show", "ports"]);
    let out = text(&ports);
    assert!(ports.status.success(), "{out}");
    assert!(
        out.contains("rx packets")
            && out.contains("p0")
            && out.contains("p1")
            && out.contains("afpacket"),
        "{out}"
    );
    let ping = ctl(&socket, &["ping"]);
    assert!(ping.status.success(), "{}", text(&ping));
    assert!(text(&ping).contains("reply us"), "{}", text(&ping));

    // Garbage through ctl: a clear error and a non-zero exit.
    let garbage = ctl(&socket, &["frobnicate", "--now"]);
    assert!(!garbage.status.success());
    let out = text(&garbage);
    assert!(
        out.contains("`frobnicate`") && out.contains("fix:"),
        "{out}"
    );
    // A command the running app does not have.
    let route = ctl(
        &socket,
        &["route", "add", "10.0.0.0/8", "via", "198.18.1.1"],
    );
    assert!(!route.status.success());
    assert!(
        text(&route).contains("xconnect app does not support"),
        "{}",
        text(&route)
    );

    // Raw garbage and an oversized line on one connection: errors, and the connection works.
    let mut raw = UnixStream::connect(&socket).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    raw.write_all(b"\xff\xfe\x01\n").unwrap();
    raw.write_all(&vec![b'x'; 200_000]).unwrap();
    raw.write_all(b"\nping\n").unwrap();
    let mut reader = BufReader::new(raw.try_clone().unwrap());
    let mut lines = Vec::new();
    for _ in 0..3 {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        lines.push(line);
    }
    assert!(lines[0].contains("UTF-8"), "{lines:?}");
    assert!(lines[1].contains("longer than 65536"), "{lines:?}");
    assert!(lines[2].starts_with("{\"ok\":true"), "{lines:?}");
    drop(raw);

    // Still forwarding, every frame.
    let burst = frames_to(200, TEST_PORT);
    for chunk in burst.chunks(50) {
        send(&mut t0, &mut pool, chunk);
        std::thread::sleep(Duration::from_millis(2));
    }
    let arrived = receive_all(&mut t1, &mut pool, burst.len(), TEST_PORT);
    assert_eq!(arrived.len(), burst.len());
    assert!(arrived == burst, "forwarded frames differ");
    let counters = ctl(&socket, &["show", "counters"]);
    assert!(counters.status.success(), "{}", text(&counters));
    assert!(
        text(&counters).contains("rx_packets"),
        "{}",
        text(&counters)
    );

    let (success, out) = switch.interrupt();
    assert!(success, "switch failed:\n{out}");
    assert!(out.contains("conservation holds"), "{out}");
    assert!(
        !socket.exists(),
        "the socket file stayed after the switch stopped"
    );
    drop(lab);
    wirespeed_lab::assert_gone_for_test(prefix);
}

/// `ctl route load` reads the file itself, with its caller's rights, and sends the content: a
/// user who cannot read a file cannot have the switch (root) read it for them. Needs root, to
/// make a root-only file and run `ctl` as nobody.
#[test]
fn ctl_reads_a_file_to_load_with_the_callers_rights() {
    use std::os::unix::fs::MetadataExt;
    if std::fs::metadata("/proc/self").unwrap().uid() != 0 {
        eprintln!("skipped: needs root to run ctl as another user");
        return;
    }
    let dir = std::env::temp_dir().join(format!("wirespeed-ctl-rights-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let secret = dir.join("secret.routes");
    std::fs::write(&secret, "SECRET-CONTENT\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    for first in ["route", "acl"] {
        let output = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_wirespeed"))
            .args(["ctl", "--socket", "/nonexistent/ctl.sock", first, "load"])
            .arg(&secret)
            .output()
            .unwrap();
        let out = text(&output);
        assert!(!output.status.success(), "{out}");
        assert!(
            out.contains(&format!("reading {}", secret.display()))
                && out.contains("Permission denied"),
            "{out}"
        );
        assert!(!out.contains("SECRET-CONTENT"), "{out}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
