//! Least privilege, end to end: once `wirespeed switch` forwards, no thread of it holds a
//! capability, whether root started it or a non-root user given only the documented set
//! (docs/configuration.md, "Privileges"); the XDP fast path and the control socket keep
//! working without them; a user given too few is refused before anything opens, naming each
//! missing capability.
//!
//! Each test runs as root (it makes namespaces and switches users with util-linux's
//! `setpriv`), skips with a printed reason elsewhere, and runs in CI, which is root.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use wirespeed_lab::Testbed;
use wirespeed_packet::FramePool;
use wirespeed_testkit::ports::send;

mod common;
use common::*;

/// What a non-root user needs to start a switch of AF_XDP ports with the XDP fast path at
/// SCHED_FIFO, as setpriv names them (docs/configuration.md, "Privileges").
const NON_ROOT_CAPABILITIES: [&str; 6] = [
    "net_admin",
    "net_raw",
    "bpf",
    "perfmon",
    "ipc_lock",
    "sys_nice",
];

/// The user the non-root switch runs as.
const NOBODY: &str = "65534";

/// `setpriv` switching to nobody with exactly `capabilities` (inheritable and ambient, so that
/// they survive the change of user and the exec), then `wirespeed`: the program and arguments
/// to run.
fn as_nobody_with(capabilities: &[&str]) -> Vec<String> {
    let list = capabilities
        .iter()
        .map(|capability| format!("+{capability}"))
        .collect::<Vec<_>>()
        .join(",");
    [
        "setpriv",
        "--reuid",
        NOBODY,
        "--regid",
        NOBODY,
        "--clear-groups",
        "--inh-caps",
        &list,
        "--ambient-caps",
        &list,
        env!("CARGO_BIN_EXE_wirespeed"),
    ]
    .map(String::from)
    .to_vec()
}

/// An xconnect of d0 and d1 over AF_XDP with the XDP fast path, its control socket at `socket`.
fn fast_path_config(lab: &Testbed, socket: &Path) -> String {
    format!(
        "[switch]\napp = \"xconnect\"\nfast_path = \"xdp\"\ncontrol_socket = \"{}\"\n\n\
         [[port]]\nname = \"p0\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[port]]\nname = \"p1\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [xconnect]\npairs = [[\"p0\", \"p1\"]]\n",
        socket.display(),
        lab.pairs[0].dut_if,
        lab.pairs[1].dut_if
    )
}

/// Each thread of process `pid`: its name and the capability lines of its status
/// (`CapInh`, `CapPrm`, `CapEff`, `CapBnd`, `CapAmb`, and `NoNewPrivs`).
fn threads(pid: u32) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut threads = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return threads;
    };
    for task in tasks.flatten() {
        let path = task.path();
        let (Ok(name), Ok(status)) = (
            std::fs::read_to_string(path.join("comm")),
            std::fs::read_to_string(path.join("status")),
        ) else {
            continue; // the thread ended meanwhile
        };
        let fields = status
            .lines()
            .filter_map(|line| line.split_once(':'))
            .filter(|(key, _)| key.starts_with("Cap") || *key == "NoNewPrivs")
            .map(|(key, value)| (key.to_string(), value.trim().to_string()))
            .collect();
        let tid = task.file_name().to_string_lossy().into_owned();
        threads.insert(format!("{} ({tid})", name.trim()), fields);
    }
    threads
}

/// Waits (at most 5 s: the main thread drops its set just after starting the workers) until
/// every thread of `pid` holds no capability (`CapBnd` too where `bounding`) and has
/// `no_new_privs`, and every thread in `expected` exists; panics showing every thread's lines
/// otherwise.
fn assert_no_thread_holds_a_capability(pid: u32, expected: &[&str], bounding: bool) {
    let zero = "0000000000000000";
    let mut sets = vec!["CapInh", "CapPrm", "CapEff", "CapAmb"];
    if bounding {
        sets.push("CapBnd");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let threads = threads(pid);
        let present = expected.iter().all(|name| {
            threads
                .keys()
                .any(|thread| thread.starts_with(&format!("{name} (")))
        });
        let dropped = threads.values().all(|fields| {
            sets.iter()
                .all(|set| fields.get(*set).map(String::as_str) == Some(zero))
                && fields.get("NoNewPrivs").map(String::as_str) == Some("1")
        });
        if present && dropped {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "threads of {pid} (want {expected:?}, each with {sets:?} zero and NoNewPrivs 1):\n\
             {threads:#?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts the fast-path xconnect in lab `prefix` (as nobody with `capabilities`, or as root
/// with `None`), and checks that once it forwards no thread holds a capability, while a
/// control client is connected; that `ctl show counters` still reads the fast path's maps;
/// that 100 frames cross in the kernel; and that it stops cleanly. Returns its output.
fn forwards_holding_nothing(prefix: &str, capabilities: Option<&[&str]>) -> Option<String> {
    let (lab, dir) = lab(prefix, 1)?;
    // The non-root switch creates its control socket here.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let socket = dir.join(format!("{prefix}.sock"));
    let config = dir.join(format!("{prefix}.toml"));
    std::fs::write(&config, fast_path_config(&lab, &socket)).unwrap();
    // The tester's ends take frames redirected in XDP only while they run NAPI.
    receive_with_napi(&lab, 0);
    receive_with_napi(&lab, 1);

    let mut command = Command::new("ip");
    command.args(["netns", "exec", &lab.dut_ns]);
    match capabilities {
        Some(capabilities) => command.args(as_nobody_with(capabilities)),
        None => command.arg(env!("CARGO_BIN_EXE_wirespeed")),
    };
    let child = command
        .args(["switch", "--config"])
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start wirespeed switch");
    // `ip netns exec` and setpriv exec what they run: the pid is the switch's.
    let pid = child.id();
    let mut switch = Switch(Some(child));

    let mut pool = FramePool::new(4096, 2048).unwrap();
    let (mut t0, mut t1) = (tester_port(&lab, 0), tester_port(&lab, 1));
    wait_until_forwarding(&mut t0, &mut t1, &mut pool);
    wait_for_control(&socket);
    // A client the switch serves on a thread of its own while the sets are read.
    let _client = UnixStream::connect(&socket).expect("connect to the control socket");
    assert_no_thread_holds_a_capability(
        pid,
        &["wirespeed", "worker-0", "control", "control-client"],
        capabilities.is_none(),
    );

    // The fast path's counters are read through the maps' descriptors, with no capability.
    let (ok, counters) = ctl_at(&socket, &["show", "counters"]);
    assert!(ok && counters.contains("fast_path"), "{counters}");
    let forward = frames(100);
    send(&mut t0, &mut pool, &forward);
    assert_same(
        &receive_all(&mut t1, &mut pool, forward.len(), TEST_PORT),
        &forward,
    );

    let (success, out) = switch.interrupt();
    assert!(success, "switch failed:\n{out}");
    assert!(out.contains("conservation holds"), "{out}");
    assert!(
        out.contains("privileges: every thread drops all its capabilities once set up"),
        "{out}"
    );
    assert!(fast_path_row(&out, "p0")[0] >= 100, "{out}");
    assert!(!socket.exists(), "the control socket outlived the switch");
    drop(lab);
    wirespeed_lab::assert_gone_for_test(prefix);
    // The directory any user could write goes with the test.
    std::fs::remove_dir_all(&dir).unwrap();
    Some(out)
}

#[test]
fn a_root_switch_holds_no_capability_in_any_thread_once_it_forwards() {
    forwards_holding_nothing("wstpv1", None);
}

#[test]
fn a_non_root_switch_runs_with_the_documented_capabilities_and_drops_them() {
    let Some(out) = forwards_holding_nothing("wstpv2", Some(&NON_ROOT_CAPABILITIES)) else {
        return;
    };
    // CAP_SYS_NICE gave the worker its realtime priority before it was dropped.
    assert!(out.contains("worker 0: any core, SCHED_FIFO 1"), "{out}");
    assert!(!out.contains("SCHED_FIFO refused"), "{out}");
}

/// A user given all but one of the capabilities a configuration needs is refused before any
/// interface is touched (these do not exist), with the missing one named and what needs it.
#[test]
fn a_switch_missing_a_capability_is_refused_naming_it() {
    if !wirespeed_lab::available_for_test() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("wirespeed-privileges-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = dir.join("switch.toml");
    std::fs::write(
        &config,
        "[switch]\napp = \"xconnect\"\nfast_path = \"xdp\"\ncontrol_socket = \"\"\n\n\
         [[port]]\nname = \"p0\"\nbackend = \"afxdp\"\ninterface = \"wsnone0\"\n\n\
         [[port]]\nname = \"p1\"\nbackend = \"afpacket\"\ninterface = \"wsnone1\"\n\n\
         [xconnect]\npairs = [[\"p0\", \"p1\"]]\n",
    )
    .unwrap();
    for (missing, named) in [
        (
            "perfmon",
            "CAP_PERFMON (fast_path = \"xdp\": the verifier admits the program's packet \
             pointer arithmetic only with it)",
        ),
        (
            "net_raw",
            "CAP_NET_RAW (port p0: its AF_XDP sockets; port p1: its AF_PACKET sockets)",
        ),
    ] {
        let given: Vec<&str> = NON_ROOT_CAPABILITIES
            .into_iter()
            .filter(|capability| *capability != missing)
            .collect();
        let nobody = as_nobody_with(&given);
        let output = Command::new(&nobody[0])
            .args(&nobody[1..])
            .args(["switch", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{stderr}");
        assert!(
            stderr.contains("lacks capabilities the configuration needs")
                && stderr.contains(named)
                && stderr.contains("Privileges"),
            "{stderr}"
        );
        // Only the missing one is named, and nothing was opened.
        assert_eq!(stderr.matches("CAP_").count(), 1, "{stderr}");
        assert!(!stderr.contains("wsnone"), "{stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
