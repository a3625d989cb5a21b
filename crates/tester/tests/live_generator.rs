//! The in-kernel live generator sends the tester's templates byte for byte: over the lab's
//! looped-back calibration pair, IPv4 and IPv6 UDP templates with several flows leave `c0` from
//! inside the kernel and arrive on an AF_XDP port on `c1` exactly as `Template::write` makes
//! each flow's frame, in turn, with valid IPv4 header and UDP checksums.

use std::time::{Duration, Instant};

use wirespeed_io::Port;
use wirespeed_io::afxdp::DEFAULT_RING_SIZE;
use wirespeed_lab::enter;
use wirespeed_packet::wire::{ethernet, ipv4, ipv6};
use wirespeed_packet::{Batch, checksum};
use wirespeed_tester::dut::probe::TesterPorts;
use wirespeed_tester::generator::live::{self, LiveConfig};
use wirespeed_tester::generator::{Template, TemplateConfig};

const UDP: u8 = 17;

fn udp_checksum_valid(frame: &[u8]) -> bool {
    let l3 = &frame[ethernet::HEADER_LEN..];
    match l3[0] >> 4 {
        4 => {
            let ip = ipv4::Packet::new_checked(l3).unwrap();
            ip.verify_checksum()
                && checksum::verify_transport_v4(
                    ip.src_addr(),
                    ip.dst_addr(),
                    UDP,
                    &l3[ipv4::HEADER_LEN..],
                )
        }
        _ => {
            let ip = ipv6::Packet::new_checked(l3).unwrap();
            checksum::verify_transport_v6(
                ip.src_addr(),
                ip.dst_addr(),
                UDP,
                &l3[ipv6::HEADER_LEN..],
            )
        }
    }
}

#[test]
fn live_frames_are_the_templates_frames_in_turn_with_valid_checksums() {
    let prefix = "wstlg";
    let Some(lab) = wirespeed_lab::calibration_for_test(prefix) else {
        return;
    };
    let pair = lab.calibration.clone().expect("a calibration pair");
    // Round robin is per CPU: the sending thread stays on one.
    wirespeed_io::thread::pin_to_core(0).expect("pin");
    let mut ports = TesterPorts::open_interfaces(
        &lab.tester_ns,
        &pair.sender_if,
        &pair.receiver_if,
        8192,
        DEFAULT_RING_SIZE,
    )
    .expect("AF_XDP ports on c0 and c1");
    let ipv4 = TemplateConfig {
        src_mac: pair.sender_mac,
        dst_mac: pair.receiver_mac,
        flows: 7,
        ..TemplateConfig::default()
    };
    let ipv6 = TemplateConfig {
        frame_size: 128,
        src_ip: "2001:2::1".parse().unwrap(),
        dst_ip: "2001:2:0:1::1".parse().unwrap(),
        flows: 300,
        ..ipv4.clone()
    };
    for config in [ipv4, ipv6] {
        let template = Template::new(&config).unwrap();
        let frames = 600;
        {
            let _tester = enter(&lab.tester_ns).expect("enter the tester namespace");
            let live_config = LiveConfig {
                // Small, spaced calls: c1's ring (and the socket's) never fills.
                batch: 64,
                ..LiveConfig::default()
            };
            let generator = live::open(&pair.sender_if, &template, &live_config).unwrap();
            for _ in 0..frames / 60 {
                generator.send(60).unwrap();
                std::thread::sleep(Duration::from_millis(3));
            }
        }
        let mut arrived = Vec::new();
        let mut batch = Batch::new(64);
        let deadline = Instant::now() + Duration::from_secs(3);
        while arrived.len() < frames && Instant::now() < deadline {
            let TesterPorts { t1, pool, .. } = &mut ports;
            if t1.rx(0, pool, &mut batch) == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            for desc in batch.descs() {
                let start = desc.offset as usize;
                let bytes = &pool.frame(desc.frame)[start..start + desc.len as usize];
                // The lab's own chatter (IPv6 neighbour discovery) is not the template's.
                if bytes.len() == template.len() && bytes[..12] == template.bytes()[..12] {
                    arrived.push(bytes.to_vec());
                }
                pool.release(desc.frame);
            }
            batch.clear();
        }
        assert_eq!(arrived.len(), frames, "frames lost");
        let mut want = vec![0u8; template.len()];
        for (index, frame) in arrived.iter().enumerate() {
            template.write(&mut want, index as u32);
            assert_eq!(frame, &want, "frame {index} of {} flows", config.flows);
            assert!(udp_checksum_valid(frame), "frame {index}");
        }
    }
    ports.release_all();
    drop(lab);
}
