//! `wirespeed gen --backend xdp-live` end to end: the real binary in a lab's tester namespace
//! sends over the looped-back calibration pair from inside the kernel, the XDP sink counts every
//! frame on the other end, the TX interface's counters agree, and nothing stays attached. A
//! missing interface is an error that names it.

use std::process::Command;

use wirespeed_lab::run;

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
fn xdp_live_sends_what_the_sink_and_the_kernel_count_and_names_a_missing_interface() {
    let prefix = "wstgl";
    let Some(lab) = wirespeed_lab::calibration_for_test(prefix) else {
        return;
    };
    let pair = lab.calibration.clone().expect("a calibration pair");
    let mac = pair
        .receiver_mac
        .map(|byte| format!("{byte:02x}"))
        .join(":");
    let generate = |args: &[&str]| {
        Command::new("ip")
            .args(["netns", "exec", &lab.tester_ns])
            .arg(env!("CARGO_BIN_EXE_wirespeed"))
            .args(["gen", "--backend", "xdp-live", "--dst-mac", &mac])
            .args(args)
            .output()
            .unwrap()
    };
    let out = generate(&[
        "--tx",
        &pair.sender_if,
        "--rx",
        &pair.receiver_if,
        "--flows",
        "16",
        "--duration",
        "0.5",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sent = number_after(&stdout, "sent ");
    let transmitted = number_after(&stdout, " says ");
    let dropped = number_after(&stdout, "transmitted, ");
    let dropped_more = number_after(&stdout, "the kernel dropped ");
    let received = number_after(&stdout, "received ");
    assert!(sent > 0 && transmitted > 0, "{stdout}");
    // `sent` is what the interface transmitted; the rest of what the program ran is reported as
    // dropped by the kernel (at the peer's full ring: a sink that falls behind on a loaded
    // machine), and the interface counts those drops too. The lab's own chatter (a few IPv6
    // frames) passes the pair as well.
    assert!(sent <= transmitted && transmitted - sent < 100, "{stdout}");
    let run_by_program = sent + dropped_more;
    let accounted = transmitted + dropped;
    assert!(
        accounted >= run_by_program && accounted - run_by_program < 100,
        "{stdout}"
    );
    assert!(
        received.abs_diff(transmitted) < 100,
        "the sink and the kernel disagree: {stdout}"
    );
    let link = run(
        "ip",
        &[
            "-n",
            &lab.tester_ns,
            "-d",
            "link",
            "show",
            "dev",
            &pair.receiver_if,
        ],
    )
    .unwrap();
    assert!(!link.contains("prog/xdp"), "the sink stayed: {link}");

    // At a set rate the kernel paces: the frames of the duration, spread over it.
    let started = std::time::Instant::now();
    let paced = generate(&[
        "--tx",
        &pair.sender_if,
        "--rx",
        &pair.receiver_if,
        "--rate-mpps",
        "0.1",
        "--duration",
        "0.5",
    ]);
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&paced.stdout);
    assert!(paced.status.success(), "{stdout}");
    assert_eq!(number_after(&stdout, "sent "), 50_000, "{stdout}");
    assert!(
        took >= std::time::Duration::from_millis(450),
        "{took:?}: {stdout}"
    );

    let missing = generate(&["--tx", "wsnosuch0", "--duration", "0.1"]);
    assert!(!missing.status.success());
    let text = String::from_utf8_lossy(&missing.stderr);
    assert!(
        text.contains("wsnosuch0") && text.contains("no interface"),
        "{text}"
    );
    drop(lab);
}
