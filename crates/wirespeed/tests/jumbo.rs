//! Jumbo frames end to end: 9000 bytes of MTU forwarded byte for byte by `wirespeed switch`
//! over AF_XDP and AF_PACKET between the lab's namespaces, and by `wirespeed pcap` between
//! captures.

use std::process::Command;
use std::time::Duration;

use wirespeed_io::afpacket::{AfPacketConfig, AfPacketPort};
use wirespeed_lab::Testbed;
use wirespeed_packet::FramePool;
use wirespeed_packet::pool::MAX_FRAME_SIZE;
use wirespeed_tester::generator::{Template, TemplateConfig};

mod common;
use common::*;

/// The jumbo MTU of data centres.
const MTU: u32 = 9000;

/// `count` IPv4/UDP frames to [`TEST_PORT`] whose sizes (with FCS) run from 64 to the largest
/// the MTU allows, 9018.
fn jumbo_frames(count: u32) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| {
            let size = if i % 2 == 0 {
                9018
            } else {
                64 + (i * 977) % 8954
            };
            let template = Template::new(&TemplateConfig {
                frame_size: size as u16,
                flows: 8,
                dst_port: TEST_PORT,
                ..TemplateConfig::default()
            })
            .unwrap();
            template.frame(i)
        })
        .collect()
}

/// Sets the MTU of both ends of every pair of `lab`.
fn set_mtu(lab: &Testbed, mtu: u32) {
    for pair in &lab.pairs {
        for (ns, interface) in [
            (&lab.tester_ns, &pair.tester_if),
            (&lab.dut_ns, &pair.dut_if),
        ] {
            wirespeed_lab::run(
                "ip",
                &[
                    "-n",
                    ns,
                    "link",
                    "set",
                    "dev",
                    interface,
                    "mtu",
                    &mtu.to_string(),
                ],
            )
            .unwrap();
        }
    }
}

/// The tester's AF_PACKET port on pair `pair`, with frames large enough for jumbo frames.
fn jumbo_tester_port(lab: &Testbed, pair: usize) -> AfPacketPort {
    let _inside = wirespeed_lab::enter(&lab.tester_ns).unwrap();
    let config = AfPacketConfig {
        frame_size: MAX_FRAME_SIZE,
        ..AfPacketConfig::default()
    };
    AfPacketPort::open(&format!("t{pair}"), &lab.pairs[pair].tester_if, &config).unwrap()
}

/// Runs a cross-connect with `backend_lines` and 16384-byte frames on a lab whose interfaces
/// have a 9000-byte MTU, and checks that jumbo frames cross both ways byte for byte.
fn switch_forwards_jumbo_frames(prefix: &str, backend_lines: &str) {
    let Some((lab, dir)) = lab(prefix, 1) else {
        return;
    };
    set_mtu(&lab, MTU);
    let ports = [&lab.pairs[0].dut_if, &lab.pairs[1].dut_if].map(|interface| {
        format!("[[port]]\nname = \"{interface}\"\ninterface = \"{interface}\"\n{backend_lines}\n")
    });
    let config = format!(
        "[switch]\napp = \"xconnect\"\nframe_size = 16384\nframes = 8192\n\n{}\n{}\n\
         [xconnect]\npairs = [[\"{}\", \"{}\"]]\n",
        ports[0], ports[1], lab.pairs[0].dut_if, lab.pairs[1].dut_if
    );
    let mut switch = Switch::start(&lab, &config, &dir);
    let mut pool = FramePool::new(1024, MAX_FRAME_SIZE).unwrap();
    let (mut t0, mut t1) = (jumbo_tester_port(&lab, 0), jumbo_tester_port(&lab, 1));
    wait_until_forwarding(&mut t0, &mut t1, &mut pool);

    let mut ports = [t0, t1];
    for from in [0, 1] {
        let frames = jumbo_frames(40);
        let [sender, receiver] = ports.each_mut();
        let (from, to) = if from == 0 {
            (sender, receiver)
        } else {
            (receiver, sender)
        };
        for chunk in frames.chunks(8) {
            wirespeed_testkit::ports::send(from, &mut pool, chunk);
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_same(
            &receive_all(to, &mut pool, frames.len(), TEST_PORT),
            &frames,
        );
    }
    let (success, out) = switch.interrupt();
    assert!(success, "switch failed:\n{out}");
    assert!(out.contains("conservation holds"), "{out}");
    drop(lab);
    wirespeed_lab::assert_gone_for_test(prefix);
}

#[test]
fn jumbo_frames_cross_afpacket() {
    switch_forwards_jumbo_frames("wstjp", "backend = \"afpacket\"");
}

#[test]
fn jumbo_frames_cross_afxdp_in_several_buffers() {
    switch_forwards_jumbo_frames("wstjx", "backend = \"afxdp\"");
}

#[test]
fn jumbo_frames_cross_a_capture() {
    let dir = std::env::temp_dir().join("wirespeed-jumbo-pcap");
    std::fs::create_dir_all(&dir).unwrap();
    let (input, output) = (dir.join("in.pcap"), dir.join("out.pcap"));
    let frames = jumbo_frames(200);
    write_capture(&input, &frames);

    let out = Command::new(env!("CARGO_BIN_EXE_wirespeed"))
        .arg("pcap")
        .arg("--in")
        .arg(&input)
        .arg("--out")
        .arg(&output)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Same frames, same timestamps, same writer: the files are the same bytes.
    assert_eq!(
        std::fs::read(&output).unwrap(),
        std::fs::read(&input).unwrap()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_rfc2544_search_runs_at_9018_bytes() {
    let _cores = common::shared();
    // At most 6 characters: NAPI thread names must keep the interface whole (see the CLI).
    let prefix = "wstjr";
    let Some((stdout, _, out)) = common::bench_out(
        prefix,
        &[
            "rfc2544",
            "--dut",
            "wirespeed-xconnect-afxdp",
            "--tests",
            "throughput",
            "--latency-loads",
            "",
            "--frame-sizes",
            "9018",
            "--trial-seconds",
            "0.2",
            "--calibration-seconds",
            "0.2",
            "--resolution",
            "60%",
        ],
    ) else {
        return;
    };
    let text = std::fs::read_to_string(out.join("report.json")).unwrap();
    let report = wirespeed_tester::report::json::from_json(&text).unwrap();
    let result = &report.results[0];
    assert_eq!(result.frame_size, 9018);
    assert!(result.ndr().expect("an NDR") > 0.0, "{stdout}");
    let counters = result.counters.expect("counter check");
    assert!(counters.transmitted > 0);
    assert!(counters.agrees_within(0.001), "{counters:?}");
    // The lab carried the frames at MTU 9000 and the DuT held them in 16 KiB frames.
    assert!(text.contains("link set wstjr-d0 mtu 9000"), "{text}");
    assert!(
        report
            .setup
            .dut
            .commands
            .iter()
            .any(|c| c.contains("frame_size = 16384")),
        "{:?}",
        report.setup.dut.commands
    );
    assert!(stdout.contains("| 9018 B |"), "{stdout}");
    wirespeed_lab::assert_gone_for_test(prefix);
    let _ = std::fs::remove_dir_all(&out);
}
