//! Inputs the binary must refuse or report truthfully (issue 19): every number on the command
//! line is checked while the arguments are parsed, naming its range, before a lab, socket or
//! frame exists; and `gen` counts as sent only what the TX interface transmitted.

use std::process::{Command, Output};

fn wirespeed(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wirespeed"))
        .args(args)
        .output()
        .expect("run wirespeed")
}

#[test]
fn every_cli_number_out_of_range_or_not_finite_is_refused_naming_its_range() {
    // (arguments, what the error must say). Each of these used to start (and send, panic or
    // build a lab) before this check existed.
    let cases: &[(&[&str], &str)] = &[
        (
            &["gen", "--tx", "lo", "--size", "9019"],
            "'9019' for '--size <SIZE>': give a whole number in 64..=9018",
        ),
        (
            &["gen", "--tx", "lo", "--duration", "NaN"],
            "'NaN' for '--duration <DURATION>': give a number in 0.001..=86400",
        ),
        (
            &["gen", "--tx", "lo", "--rate-mpps", "0"],
            "'0' for '--rate-mpps <RATE_MPPS>': give a number in 0.000001..=1000",
        ),
        (
            &["gen", "--tx", "lo", "--rate-mpps", "NaN"],
            "give a number in 0.000001..=1000",
        ),
        (
            &["gen", "--tx", "lo", "--trial-seconds", "inf"],
            "give a number in 0.001..=86400",
        ),
        (
            &["gen", "--tx", "lo", "--rate-percent", "10,NaN"],
            "'NaN' for '--rate-percent <RATE_PERCENT>': give a number in 0.001..=100",
        ),
        (
            &["gen", "--tx", "lo", "--batch", "0"],
            "give a whole number in 1..=256",
        ),
        (
            &["gen", "--tx", "lo", "--flows", "0"],
            "give a whole number in 1..=65536",
        ),
        (
            &["switch", "--config", "x.toml", "--stats-interval", "NaN"],
            "give a number in 0.1..=86400",
        ),
        (
            &["bench", "rfc2544", "--frame-sizes", "64,9019"],
            "'9019' for '--frame-sizes <FRAME_SIZES>': give a whole number in 64..=9018",
        ),
        (
            &["bench", "rfc2544", "--trial-seconds", "inf"],
            "give a number in 0.001..=86400",
        ),
        (
            &["bench", "rfc2544", "--overload-seconds", "1e999"],
            "give a number in 0.001..=86400",
        ),
        (
            &["bench", "rfc2544", "--ndr-runs", "0"],
            "give a whole number in 1..=1000",
        ),
        (
            &["bench", "rfc2544", "--repeats", "5000"],
            "give a whole number in 0..=1000",
        ),
        (
            &["bench", "rfc2544", "--latency-rates", "inf"],
            "give a number in 0.000001..=1000",
        ),
        (
            &["bench", "rfc2544", "--latency-loads", "10,NaN"],
            "--latency-loads \"NaN\": give a number in 0.001..=100",
        ),
        (
            &["bench", "rfc2544", "--link-speed", "0"],
            "give a number in 0.001..=1000",
        ),
        (
            &["bench", "compare", "--link-speed", "inf"],
            "give a number in 0.001..=1000",
        ),
        (
            &["bench", "compare", "--calibration-seconds", "NaN"],
            "give a number in 0.001..=86400",
        ),
        (
            &["bench", "compare", "--runs", "0"],
            "give a whole number in 1..=1000",
        ),
        (
            &["bench", "forwarding", "--trial-seconds", "inf"],
            "give a number in 0.001..=86400",
        ),
        (
            &["bench", "forwarding", "--nice", "-21"],
            "give a whole number in -20..=19, or off",
        ),
        (
            &["bench", "forwarding", "--batch", "257"],
            "give a whole number in 1..=256",
        ),
        (
            &["bench", "forwarding", "--nice", "high"],
            "give a whole number in -20..=19, or off",
        ),
        (
            &["bench", "rfc2544", "--ip", "6", "--frame-sizes", "64,128"],
            "--frame-sizes 64: an IPv6/UDP frame with the tester's probe needs at least 84 bytes",
        ),
        (
            &["bench", "compare", "--ip", "6"],
            "give sizes from 84 with --ip 6",
        ),
        (
            &["bench", "forwarding", "--ip", "5"],
            "invalid value '5' for '--ip",
        ),
        (
            &["bench", "batch", "--sizes", "8,0"],
            "give a whole number in 1..=256",
        ),
        (
            &["bench", "batch", "--latency-seconds", "NaN"],
            "give a number in 0.001..=86400",
        ),
        (
            &["bench", "model", "--seconds=-1"],
            "give a number in 0.001..=86400",
        ),
        (
            &["bench", "generator", "--warm-up", "NaN"],
            "give a number in 0..=86400",
        ),
        (
            &["demo", "--frames", "4000000000"],
            "give a whole number in 1..=1000000",
        ),
        (
            &["lab", "up", "--pairs", "0"],
            "give a whole number in 1..=64",
        ),
        (
            &["pcap", "--in", "a", "--out", "b", "--batch", "0"],
            "0 is not in 1..=256",
        ),
    ];
    for (args, expected) in cases {
        let out = wirespeed(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        // Nothing ran: no line of output, no panic.
        assert!(out.stdout.is_empty(), "{args:?} printed {:?}", out.stdout);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

/// Arguments that are not numbers, and combinations that cannot work: each `bench` command
/// refuses them naming the option and the fix, before it builds any namespace (each case runs
/// with a lab prefix of its own, which must not exist afterwards), and without needing the
/// rights to build one. Old spellings say what to write instead.
#[test]
fn every_bench_argument_that_cannot_work_is_refused_before_any_lab_exists() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["rfc2544", "--dut", "linux-brdge"],
            "unknown DuT \"linux-brdge\"; choose from",
        ),
        (
            &["rfc2544", "--dut", "linux-router-nft:many"],
            "give the rule count as linux-router-nft:N",
        ),
        (
            &["rfc2544", "--tests", "throughput,speed"],
            "unknown test \"speed\"",
        ),
        (&["rfc2544", "--search", "fast"], "use binary or mlr"),
        (
            &["rfc2544", "--pattern", "burst:0"],
            "--pattern burst:0: the burst size",
        ),
        (
            &["rfc2544", "--pattern", "bursty"],
            "use cbr, poisson, burst:SIZE",
        ),
        (
            &["rfc2544", "--pattern", "cbr,burst:24"],
            "bursts of a power of two up to 65536; give such a size, or --generator afxdp",
        ),
        (
            &[
                "rfc2544",
                "--tests",
                "reset",
                "--reset-seconds",
                "1",
                "--reset-after",
                "2",
            ],
            "--reset-after 2 must come before the end of the trial",
        ),
        (
            &["rfc2544", "--resolution", "0%"],
            "a resolution percentage",
        ),
        (&["rfc2544", "--dut-cpu", "4096"], "core(s)"),
        (
            &["rfc2544", "--prefix", "toolong"],
            "longer than 6 characters",
        ),
        (
            &["rfc2544", "--shield-dut-core", "--nice", "off"],
            "--shield-dut-core: the DuT core is kept for the DuT's real-time threads: drop `--nice off`",
        ),
        (
            &["compare", "--shield-dut-core", "--receiver-cpu", "1"],
            "--shield-dut-core: the tester's receive runs on the DuT core",
        ),
        (
            &["compare", "--duts", "linux-bridge,nonsense"],
            "unknown DuT \"nonsense\"",
        ),
        (
            &["compare", "--flows", "1,many"],
            "flows \"many\": give a count",
        ),
        (
            &["forwarding", "--duts", "wirespeed-xconnect-afxdp,nonsense"],
            "unknown DuT \"nonsense\"",
        ),
        (
            &["forwarding", "--out", "a", "--json", "b"],
            "give --out DIR alone",
        ),
        (
            &["fib", "--duts", "linux-bridge"],
            "unknown router DuT \"linux-bridge\"",
        ),
        (
            &["fib", "--routes", "0"],
            "routing-table sizes must be 1 to 4M",
        ),
        (&["fib", "--routes", "lots"], "is not a count"),
        (&["model", "--spin", "0"], "at least two --spin values"),
        (
            &["batch", "--prefix", "toolong"],
            "must be 1 to 6 characters",
        ),
    ];
    for (index, (args, expected)) in cases.iter().enumerate() {
        let prefix = format!("wsia{index}");
        let mut line = vec!["bench"];
        line.extend_from_slice(args);
        line.extend(["--prefix", &prefix]);
        if args.contains(&"--prefix") {
            line.truncate(line.len() - 2);
        }
        let out = wirespeed(&line);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{line:?} was accepted");
        assert!(stderr.contains(expected), "{line:?}: {stderr}");
        assert!(!stderr.contains("builds a lab"), "{line:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{line:?} printed {:?}", out.stdout);
        wirespeed_lab::assert_gone_for_test(&prefix);
    }
    // An old spelling still works, and says what to write instead.
    let out = wirespeed(&[
        "bench",
        "compare",
        "--repeats",
        "2",
        "--duts",
        "nonsense",
        "--prefix",
        "wsiad",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("note: --repeats is deprecated and goes in the next release; write --runs"),
        "{stderr}"
    );
    assert!(stderr.contains("unknown DuT \"nonsense\""), "{stderr}");
    wirespeed_lab::assert_gone_for_test("wsiad");
}

/// The first number after `label` in `text`.
fn number_after(text: &str, label: &str) -> u64 {
    let at = text
        .find(label)
        .unwrap_or_else(|| panic!("{label:?} in {text}"))
        + label.len();
    text[at..]
        .split(|c: char| !c.is_ascii_digit())
        .find(|part| !part.is_empty())
        .and_then(|digits| digits.parse().ok())
        .unwrap_or_else(|| panic!("a number after {label:?} in {text}"))
}

#[test]
fn gen_counts_as_sent_only_what_the_interface_transmitted() {
    let prefix = "wstin";
    let Some(lab) = wirespeed_lab::calibration_for_test(prefix) else {
        return;
    };
    let pair = lab.calibration.clone().expect("a calibration pair");
    let ns = lab.tester_ns.clone();
    let generate = |backend: &str| {
        let out = Command::new("ip")
            .args(["netns", "exec", &ns, env!("CARGO_BIN_EXE_wirespeed")])
            .args(["gen", "--backend", backend, "--size", "1518"])
            .args(["--tx", &pair.sender_if, "--rx", &pair.receiver_if])
            .args(["--duration", "0.3"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    // 1518-byte frames pass an interface of the default MTU: sent is what the kernel counted.
    let stdout = generate("afpacket");
    let sent = number_after(&stdout, "sent ");
    let transmitted = number_after(&stdout, " says ");
    assert!(sent > 0 && sent <= transmitted, "{stdout}");
    assert_eq!(number_after(&stdout, "the kernel dropped "), 0, "{stdout}");
    // Below 1518 - 4 - 14 bytes of MTU, AF_PACKET's ring would take the frames and the kernel
    // drop every one without a word (PACKET_LOSS); they used to count as sent. Now the
    // generator refuses before it sends, naming the MTU the frames need.
    wirespeed_lab::run(
        "ip",
        &["-n", &ns, "link", "set", &pair.sender_if, "mtu", "1000"],
    )
    .unwrap();
    let out = Command::new("ip")
        .args(["netns", "exec", &ns, env!("CARGO_BIN_EXE_wirespeed")])
        .args(["gen", "--backend", "afpacket", "--size", "1518"])
        .args(["--tx", &pair.sender_if, "--duration", "0.3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("--size 1518 needs an MTU of 1500") && stderr.contains("which has 1000"),
        "{stderr}"
    );
    drop(lab);
    wirespeed_lab::assert_gone_for_test(prefix);
}

#[test]
fn afxdp_under_a_memlock_limit_it_cannot_raise_names_the_limit() {
    let prefix = "wstim";
    if !wirespeed_lab::installed_for_test("setpriv")
        || !wirespeed_lab::installed_for_test("prlimit")
    {
        return;
    }
    let Some(lab) = wirespeed_lab::calibration_for_test(prefix) else {
        return;
    };
    let pair = lab.calibration.clone().expect("a calibration pair");
    // 64 KiB, soft and hard, and without CAP_IPC_LOCK (which root has and which lifts the
    // limit): the frame pool cannot be locked and the limit cannot be raised.
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.tester_ns,
            "prlimit",
            "--memlock=65536:65536",
        ])
        .args([
            "setpriv",
            "--bounding-set=-ipc_lock",
            "--inh-caps=-ipc_lock",
        ])
        .arg(env!("CARGO_BIN_EXE_wirespeed"))
        .args(["gen", "--backend", "afxdp", "--tx", &pair.sender_if])
        .args(["--duration", "0.1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("RLIMIT_MEMLOCK is 64 KiB (hard limit 64 KiB)")
            && stderr.contains("lacks CAP_IPC_LOCK")
            && stderr.contains("`ulimit -l unlimited`")
            && stderr.contains("LimitMEMLOCK=infinity"),
        "{stderr}"
    );
    // It used to blame the kernel's configuration.
    assert!(!stderr.contains("CONFIG_XDP_SOCKETS"), "{stderr}");
    drop(lab);
    wirespeed_lab::assert_gone_for_test(prefix);
}

#[test]
fn a_long_start_up_says_what_it_does_and_ctrl_c_ends_it_at_once() {
    use std::io::{BufRead, BufReader};
    use std::time::{Duration, Instant};

    let dir = std::env::temp_dir().join(format!("wirespeed-startup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.pcap");
    // An empty capture: a pcap header alone.
    let mut header = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    header.extend([0; 8]);
    header.extend(65535u32.to_le_bytes());
    header.extend(1u32.to_le_bytes());
    std::fs::write(&input, header).unwrap();
    let config = dir.join("big.toml");
    // The largest pool (8 GiB to map and touch) and a 1 GiB walk: seconds to minutes of
    // start-up, which Ctrl-C must cut short.
    std::fs::write(
        &config,
        format!(
            "[switch]\napp = \"xconnect\"\nframes = 4194304\ncontrol_socket = \"\"\n\n\
             [[port]]\nname = \"in\"\nbackend = \"pcap\"\nrx = \"{}\"\n\n\
             [[port]]\nname = \"out\"\nbackend = \"pcap\"\ntx = \"{}\"\n\n\
             [xconnect]\npairs = [[\"in\", \"out\"]]\n\n[task]\nwalk_bytes = 1073741824\n",
            input.display(),
            dir.join("out.pcap").display()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_wirespeed"))
        .args(["switch", "--config"])
        .arg(&config)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(
        first.trim_end(),
        "starting 1 worker(s), each with a pool of 4194304 frames of 2048 B (8192 MiB) and a \
         walk over 1024 MiB; Ctrl-C stops"
    );
    let interrupted = Instant::now();
    wirespeed_lab::run("kill", &["-INT", &child.id().to_string()]).unwrap();
    // Taken at once means the process starts exiting within 5 s (PF_EXITING set, or gone);
    // handing back GiBs of touched memory may take longer on a loaded machine, and is the
    // kernel's time, not an ignored Ctrl-C.
    let stat = format!("/proc/{}/stat", child.id());
    let exiting = || {
        std::fs::read_to_string(&stat).map_or(true, |text| {
            let fields: Vec<&str> = text
                .rsplit_once(')')
                .map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
            let flags: u64 = fields.get(6).and_then(|f| f.parse().ok()).unwrap_or(0);
            // 0x4: PF_EXITING (include/linux/sched.h).
            fields.first() == Some(&"Z") || flags & 0x4 != 0
        })
    };
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        let waited = interrupted.elapsed();
        if (waited > Duration::from_secs(5) && !exiting()) || waited > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("Ctrl-C during start-up was ignored for {waited:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success(), "{status}");
    std::fs::remove_dir_all(&dir).unwrap();
}
