//! The XDP fast path against the user-space pipeline, frame for frame: the same random mix of
//! frames goes through a three-port bridge once with `fast_path = "off"` and once with
//! `fast_path = "xdp"`, and every tester port must receive the same bytes both times.
//!
//! The mix has what the kernel forwards (known unicast, with VLAN tags pushed, popped or
//! kept) and every case it must leave to user space: unknown and moved sources, unknown
//! destinations, broadcast and multicast, priority tags, tags an access port refuses, VLANs a
//! trunk does not carry, a frame back to its own port, a multicast source. Frames are sent
//! one at a time, each once the switch has taken the one before (its counters say so), so
//! learning happens in the same order both times, however slow a loaded machine makes user
//! space; the kernel's decisions must then be exactly those the pipeline would have made.

use std::time::Duration;

use wirespeed_io::afpacket::AfPacketPort;
use wirespeed_packet::FramePool;
use wirespeed_testkit::ports::{receive, send};

mod common;
use common::*;

/// The hosts' MACs; host *i* is first seen on port `HOME[i]`.
const HOSTS: [[u8; 6]; 6] = [
    [2, 0x57, 0x53, 0xbb, 0, 1],
    [2, 0x57, 0x53, 0xbb, 0, 2],
    [2, 0x57, 0x53, 0xbb, 0, 3],
    [2, 0x57, 0x53, 0xbb, 0, 4],
    [2, 0x57, 0x53, 0xbb, 0, 5],
    [2, 0x57, 0x53, 0xbb, 0, 6],
];
const HOME: [usize; 6] = [0, 0, 1, 1, 2, 2];
const BROADCAST: [u8; 6] = [0xff; 6];
const MULTICAST: [u8; 6] = [0x01, 0, 0x5e, 0, 0, 0x42];

/// One frame of the mix: the port it enters by and its bytes (a UDP frame to [`TEST_PORT`]
/// with its sequence number in the IPv4 identification, so every frame is distinct).
fn mix(count: u32, seed: u64) -> Vec<(usize, Vec<u8>)> {
    let mut random = Random(seed);
    let template = frames(1).remove(0);
    let mut mix = Vec::new();
    for seq in 0..count {
        let src = random.below(HOSTS.len() as u64) as usize;
        // Mostly from the source's home port; sometimes from elsewhere (a move).
        let port = if random.below(8) == 0 {
            random.below(3) as usize
        } else {
            HOME[src]
        };
        let dst = match random.below(10) {
            0 => BROADCAST,
            1 => MULTICAST,
            _ => HOSTS[random.below(HOSTS.len() as u64) as usize],
        };
        let src = if random.below(40) == 0 {
            MULTICAST
        } else {
            HOSTS[src]
        };
        let mut frame = template.clone();
        frame[0..6].copy_from_slice(&dst);
        frame[6..12].copy_from_slice(&src);
        // The IPv4 identification carries the sequence number (checksum left as it is: the
        // bridge does not look at it).
        frame[18..20].copy_from_slice(&(seq as u16).to_be_bytes());
        // The port's usual tagging, sometimes another: VLANs 10 and 20 tagged, priority tags
        // (VLAN 0) and an unknown VLAN.
        let vid = match (port, random.below(6)) {
            (0, 0) => Some(10),
            (0, 1) => Some(0),
            (0, _) => None,
            (_, 0) => None,
            (_, 1) => Some(0),
            (_, 2) => Some(30),
            (_, 3) => Some(20),
            _ => Some(10),
        };
        let frame = match vid {
            Some(vid) => {
                let mut tagged = frame[..12].to_vec();
                tagged.extend_from_slice(&[0x81, 0x00]);
                tagged.extend_from_slice(&((random.below(8) as u16) << 13 | vid).to_be_bytes());
                tagged.extend_from_slice(&frame[12..]);
                tagged
            }
            None => frame,
        };
        mix.push((port, frame));
    }
    mix
}

/// Whether `frame` is one of the mix's (untagged or with one tag), not the kernel's own.
fn is_test_frame(frame: &[u8]) -> bool {
    let offset = if frame.len() >= 18 && frame[12..14] == [0x81, 0x00] {
        4
    } else {
        0
    };
    frame.len() >= 38 + offset
        && frame[12 + offset..14 + offset] == [0x08, 0x00]
        && frame[23 + offset] == 17
        && frame[36 + offset..38 + offset] == TEST_PORT.to_be_bytes()
}

/// Sends the mix through a bridge with `fast_path` and returns what each tester port
/// received (sorted: the two paths may interleave different ports' frames differently) and
/// the switch's output; `None` without a lab.
fn run(
    prefix: &str,
    fast_path: &str,
    mix: &[(usize, Vec<u8>)],
) -> Option<(Vec<Vec<Vec<u8>>>, String)> {
    let (lab, dir) = lab_with(prefix, 3, 1)?;
    // The tester's ends receive with GRO, as the fast path on veth needs; both runs alike.
    for pair in 0..3 {
        receive_with_napi(&lab, pair);
    }
    let socket = dir.join("ctl.sock");
    let config = format!(
        "[switch]\napp = \"bridge\"\nfast_path = \"{fast_path}\"\ncontrol_socket = \"{}\"\n\n\
         [[port]]\nname = \"p0\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[port]]\nname = \"p1\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[port]]\nname = \"p2\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[bridge.port]]\nname = \"p0\"\naccess = 10\n\n\
         [[bridge.port]]\nname = \"p1\"\ntrunk = [10, 20]\n\n\
         [[bridge.port]]\nname = \"p2\"\ntrunk = [10, 20]\nnative = 10\n",
        socket.display(),
        lab.pairs[0].dut_if,
        lab.pairs[1].dut_if,
        lab.pairs[2].dut_if,
    );
    let mut switch = Switch::start(&lab, &config, &dir);
    let mut pool = FramePool::new(8192, 2048).unwrap();
    let mut ports: Vec<AfPacketPort> = (0..3).map(|pair| tester_port(&lab, pair)).collect();
    // Let the switch come up: its first frames must not be lost to a port not yet open.
    wait_for_control(&socket);
    let mut got: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 3];
    let mut taken = frames_taken(&socket);
    for (port, frame) in mix {
        send(&mut ports[*port], &mut pool, std::slice::from_ref(frame));
        // The pipeline must have learned from it before the next one: two frames in the
        // worker's hands at once could be taken in another order than they were sent, and a
        // frame the kernel forwards could overtake one user space has not learned from yet.
        // The worker answers `show counters` between batches, so once they count the frame,
        // its batch is done (the lab kernels' own frames may count too: then the wait ends
        // early, as the fixed pause this replaces always could).
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let now = frames_taken(&socket);
            if now > taken || std::time::Instant::now() > deadline {
                taken = now;
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        for (index, tester) in ports.iter_mut().enumerate() {
            got[index].extend(
                receive(tester, &mut pool)
                    .into_iter()
                    .filter(|f| is_test_frame(f)),
            );
        }
    }
    for (index, tester) in ports.iter_mut().enumerate() {
        got[index].extend(receive_during(
            tester,
            &mut pool,
            Duration::from_millis(300),
            is_test_frame,
        ));
    }
    let (success, out) = switch.interrupt();
    assert!(success && out.contains("conservation holds"), "{out}");
    for frames in &mut got {
        frames.sort();
    }
    Some((got, out))
}

#[test]
fn the_fast_path_gives_the_same_bytes_out_of_the_same_ports_as_the_pipeline() {
    let mix = mix(300, 0x5eed_f00d);
    let Some((pipeline, _)) = run("wsfpu", "off", &mix) else {
        return;
    };
    let Some((fast, out)) = run("wsfpx", "xdp", &mix) else {
        return;
    };
    for port in 0..3 {
        assert_eq!(
            fast[port].len(),
            pipeline[port].len(),
            "port p{port}: frames received, fast path against pipeline\n{out}"
        );
        if let Some(i) = (0..fast[port].len()).find(|&i| fast[port][i] != pipeline[port][i]) {
            panic!(
                "port p{port}, frame {i} differs:\n fast path {:02x?}\n pipeline  {:02x?}",
                fast[port][i], pipeline[port][i]
            );
        }
    }
    // The mix was worth running: the kernel forwarded a good share of it, and handed the
    // rest to user space.
    let forwarded: u64 = ["p0", "p1", "p2"]
        .iter()
        .map(|port| fast_path_row(&out, port)[0])
        .sum();
    let total: usize = pipeline.iter().map(Vec::len).sum();
    eprintln!("{total} frames received in all; {forwarded} forwarded by the kernel");
    assert!(forwarded >= 40, "{out}");
    assert!(total >= 150, "{total} frames received in all");
}
