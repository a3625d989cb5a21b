//! `PcapPort` through the `Port` trait: frames transmitted into a capture come back byte for byte
//! with their timestamps; records too long for a frame are counted, not truncated; the end of the
//! file, a corrupt file, an empty pool and a foreign link type each behave as documented; and
//! every frame goes back to the pool.

use std::fs;
use std::path::PathBuf;

use wirespeed_io::pcap::{PCAP_PORT_MTU, PcapError, PcapPort, PcapWriter};
use wirespeed_io::{Backend, Port};
use wirespeed_packet::{Batch, Desc, FramePool, HEADROOM, Meta};

/// A fresh path under cargo's per-target temporary directory.
fn temp_path(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pcap_port");
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let _ = fs::remove_file(&path);
    path
}

/// Frame `i` of a test: its length varies from 14 to 1792 bytes and its bytes depend on `i`.
fn frame_bytes(i: usize) -> Vec<u8> {
    let len = [60, 14, 1514, 1792, 64, 333, 1000, 128][i % 8];
    (0..len).map(|b| (b * 7 + i * 13) as u8).collect()
}

/// Allocates a frame holding `bytes` at `HEADROOM` and pushes it with `rx_time`.
fn push_frame(pool: &mut FramePool, batch: &mut Batch, bytes: &[u8], rx_time: u64) {
    let frame = pool.alloc().unwrap();
    let start = HEADROOM as usize;
    pool.frame_mut(frame)[start..start + bytes.len()].copy_from_slice(bytes);
    let desc = Desc {
        frame,
        offset: HEADROOM,
        len: bytes.len() as u16,
        ..Desc::default()
    };
    batch.push_with_meta(
        desc,
        Meta {
            rx_time,
            ..Meta::EMPTY
        },
    );
}

/// Receives everything the port has, as (bytes, rx_time) pairs, releasing the frames.
fn receive_all(port: &mut PcapPort, pool: &mut FramePool) -> Vec<(Vec<u8>, u64)> {
    let mut batch = Batch::new(32);
    let mut got = Vec::new();
    for _ in 0..10_000 {
        let n = port.rx(0, pool, &mut batch);
        for (desc, meta) in batch.descs().iter().zip(batch.meta()) {
            assert_eq!(desc.offset, HEADROOM);
            let start = desc.offset as usize;
            got.push((
                pool.frame(desc.frame)[start..start + desc.len as usize].to_vec(),
                meta.rx_time,
            ));
            pool.release(desc.frame);
        }
        batch.clear();
        if n == 0 && (port.at_end() || port.error().is_some()) {
            return got;
        }
    }
    panic!("the port never reached its end");
}

#[test]
fn round_trip_through_tx_and_rx_keeps_bytes_and_timestamps() {
    let path = temp_path("round_trip.pcap");
    let mut pool = FramePool::new(64, 2048).unwrap();
    let mut out = PcapPort::open("out", None, Some(&path)).unwrap();
    let count = 100;
    let base = 1_700_000_000_000_000_000u64;
    let mut batch = Batch::new(16);
    let before = wirespeed_io_now();
    for i in 0..count {
        // Every tenth frame has no rx_time: the port stamps it with the current time.
        let rx_time = if i % 10 == 9 {
            0
        } else {
            base + i as u64 * 1_001
        };
        push_frame(&mut pool, &mut batch, &frame_bytes(i), rx_time);
        if batch.is_full() || i == count - 1 {
            let len = batch.len();
            assert_eq!(
                out.tx(0, &mut pool, &mut batch),
                len,
                "tx takes the whole batch"
            );
            assert!(batch.is_empty());
            assert_eq!(pool.free_count(), pool.total(), "tx releases at once");
        }
    }
    out.release_all(&mut pool);
    let after = wirespeed_io_now();
    assert!(out.error().is_none());
    assert_eq!(out.frames_held(), 0);
    assert_eq!(out.stats().tx_packets, count as u64);
    let total_bytes: usize = (0..count).map(|i| frame_bytes(i).len()).sum();
    assert_eq!(out.stats().tx_bytes, total_bytes as u64);

    let mut input = PcapPort::open("in", Some(&path), None).unwrap();
    let got = receive_all(&mut input, &mut pool);
    assert!(input.at_end() && input.error().is_none());
    assert_eq!(got.len(), count);
    for (i, (bytes, rx_time)) in got.iter().enumerate() {
        assert_eq!(bytes, &frame_bytes(i), "frame {i}");
        if i % 10 == 9 {
            assert!((before..=after).contains(rx_time), "frame {i} stamped now");
        } else {
            assert_eq!(*rx_time, base + i as u64 * 1_001, "frame {i}");
        }
    }
    assert_eq!(input.stats().rx_packets, count as u64);
    assert_eq!(input.stats().rx_bytes, total_bytes as u64);
    assert_eq!(input.stats().rx_errors, 0);
    // At the end, rx keeps returning 0.
    let mut batch = Batch::new(8);
    assert_eq!(input.rx(0, &mut pool, &mut batch), 0);
    assert_eq!(pool.free_count(), pool.total());
}

fn wirespeed_io_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

#[test]
fn records_longer_than_a_frame_are_counted_and_skipped() {
    let path = temp_path("too_long.pcap");
    let mut writer = PcapWriter::create(&path).unwrap();
    writer.write_record(1, &[1; 60], 60).unwrap();
    writer.write_record(2, &[2; 1793], 1793).unwrap(); // one byte more than 2048 - 256
    writer.write_record(3, &[3; 1792], 1792).unwrap();
    writer.write_record(4, &[4; 9000], 9000).unwrap();
    writer.flush().unwrap();
    drop(writer);

    let mut pool = FramePool::new(8, 2048).unwrap();
    let mut port = PcapPort::open("in", Some(&path), None).unwrap();
    let got = receive_all(&mut port, &mut pool);
    assert_eq!(
        got.iter()
            .map(|(b, t)| (b[0], b.len(), *t))
            .collect::<Vec<_>>(),
        [(1, 60, 1), (3, 1792, 3)]
    );
    assert_eq!(port.stats().rx_errors, 2);
    assert!(port.at_end() && port.error().is_none());

    // With 4096-byte frames only the 9000-byte record is too long.
    let mut pool = FramePool::new(8, 4096).unwrap();
    let mut port = PcapPort::open("in", Some(&path), None).unwrap();
    assert_eq!(receive_all(&mut port, &mut pool).len(), 3);
    assert_eq!(port.stats().rx_errors, 1);
    assert_eq!(pool.free_count(), pool.total());
}

#[test]
fn a_corrupt_record_stops_rx_and_keeps_the_error() {
    let path = temp_path("corrupt.pcap");
    let mut writer = PcapWriter::create(&path).unwrap();
    for i in 0..5u8 {
        writer.write_record(i as u64, &[i; 100], 100).unwrap();
    }
    writer.flush().unwrap();
    drop(writer);
    // Cut the file in the middle of the fourth record (24 + 3 * 116 = 372 is where it starts).
    let bytes = fs::read(&path).unwrap();
    fs::write(&path, &bytes[..372 + 50]).unwrap();

    let mut pool = FramePool::new(16, 2048).unwrap();
    let mut port = PcapPort::open("in", Some(&path), None).unwrap();
    let got = receive_all(&mut port, &mut pool);
    assert_eq!(got.len(), 3);
    assert!(!port.at_end());
    let error = port.error().unwrap();
    assert!(
        matches!(
            error,
            PcapError::Truncated {
                starts_at: 372,
                ends_at: 422,
                ..
            }
        ),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("corrupt.pcap") && message.contains("byte offset 422"),
        "{message}"
    );
    assert_eq!(
        port.fault(),
        Some(message),
        "the trait reports the same error"
    );
    assert_eq!(port.stats().rx_errors, 1);
    // Stopped for good, and every frame is back.
    let mut batch = Batch::new(8);
    assert_eq!(port.rx(0, &mut pool, &mut batch), 0);
    assert_eq!(pool.free_count(), pool.total());
}

#[test]
fn rx_returns_what_the_pool_allows() {
    let path = temp_path("pool.pcap");
    let mut writer = PcapWriter::create(&path).unwrap();
    for i in 0..10u8 {
        writer.write_record(1, &[i; 60], 60).unwrap();
    }
    drop(writer.into_inner().unwrap());
    let mut pool = FramePool::new(4, 2048).unwrap();
    let mut port = PcapPort::open("in", Some(&path), None).unwrap();
    let mut batch = Batch::new(32);
    assert_eq!(port.rx(0, &mut pool, &mut batch), 4);
    assert_eq!(
        port.rx(0, &mut pool, &mut batch),
        0,
        "no free frame: nothing, no error"
    );
    assert!(port.error().is_none() && !port.at_end());
    for desc in batch.descs() {
        pool.release(desc.frame);
    }
    batch.clear();
    assert_eq!(port.rx(0, &mut pool, &mut batch), 4);
    assert_eq!(
        pool.frame(batch.descs()[0].frame)[HEADROOM as usize],
        4,
        "no record lost"
    );
    for desc in batch.descs() {
        pool.release(desc.frame);
    }
    assert_eq!(pool.free_count(), pool.total());
}

#[test]
fn foreign_link_types_are_refused_at_open() {
    let path = temp_path("cooked.pcap");
    let mut bytes = fs::read(temp_header(&path)).unwrap();
    bytes[20] = 113; // Linux cooked capture
    fs::write(&path, &bytes).unwrap();
    let Err(error) = PcapPort::open("in", Some(&path), None) else {
        panic!("a Linux cooked capture was accepted");
    };
    assert!(matches!(error, PcapError::LinkType { link_type: 113, .. }));
    let message = error.to_string();
    assert!(
        message.contains("link type 113") && message.contains("cooked"),
        "{message}"
    );
}

/// Writes a capture with just a header at `path` and returns the path.
fn temp_header(path: &std::path::Path) -> &std::path::Path {
    drop(PcapWriter::create(path).unwrap().into_inner().unwrap());
    path
}

#[test]
fn a_missing_file_is_a_clear_error() {
    let path = temp_path("does_not_exist.pcap");
    let Err(error) = PcapPort::open("in", Some(&path), None) else {
        panic!("opened a file that does not exist");
    };
    assert!(error.to_string().contains("does_not_exist.pcap"), "{error}");
}

#[test]
fn without_a_tx_file_tx_refuses_and_leaves_the_batch() {
    let path = temp_path("empty.pcap");
    let mut port = PcapPort::open("in", Some(temp_header(&path)), None).unwrap();
    let mut pool = FramePool::new(8, 2048).unwrap();
    let mut batch = Batch::new(8);
    push_frame(&mut pool, &mut batch, &[1; 60], 0);
    push_frame(&mut pool, &mut batch, &[2; 60], 0);
    assert_eq!(port.tx(0, &mut pool, &mut batch), 0);
    assert_eq!(batch.len(), 2);
    assert_eq!(port.stats().tx_refused, 2);
    // An empty capture is at its end at once.
    let mut received = Batch::new(8);
    assert_eq!(port.rx(0, &mut pool, &mut received), 0);
    assert!(port.at_end());
    for desc in batch.descs() {
        pool.release(desc.frame);
    }
    assert_eq!(pool.free_count(), pool.total());
}

#[test]
fn info_describes_a_file_port() {
    let path = temp_path("info.pcap");
    let port = PcapPort::open("cap0", None, Some(&path)).unwrap();
    let info = port.info();
    assert_eq!(info.name, "cap0");
    assert_eq!(info.backend, Backend::Pcap);
    assert_eq!(info.mac, [0; 6]);
    assert_eq!(info.mtu, PCAP_PORT_MTU);
    assert_eq!(info.queues, 1);
    assert!(info.link_up);
    assert_eq!(info.mode, "file");
    assert!(port.at_end(), "no RX file: nothing to receive");
}

/// A pcapng block: type, total length, body (a multiple of 4 bytes), total length.
fn block(kind: u32, body: &[u8]) -> Vec<u8> {
    let total = (12 + body.len()) as u32;
    let mut out = kind.to_le_bytes().to_vec();
    out.extend(total.to_le_bytes());
    out.extend(body);
    out.extend(total.to_le_bytes());
    out
}

#[test]
fn a_later_foreign_interface_stops_rx_at_its_packet() {
    let mut section = 0x1a2b_3c4du32.to_le_bytes().to_vec();
    section.extend([1, 0, 0, 0]);
    section.extend((-1i64).to_le_bytes());
    let interface = |link_type: u16| {
        let mut body = link_type.to_le_bytes().to_vec();
        body.extend([0; 6]);
        block(1, &body)
    };
    let packet = |interface: u32| {
        let mut body = interface.to_le_bytes().to_vec();
        body.extend([0, 0, 0, 0, 7, 0, 0, 0]); // 7 us
        body.extend(60u32.to_le_bytes());
        body.extend(60u32.to_le_bytes());
        body.extend([0xab; 60]);
        block(6, &body)
    };
    let mut bytes = block(0x0a0d_0d0a, &section);
    bytes.extend(interface(1));
    bytes.extend(packet(0));
    bytes.extend(interface(113));
    let foreign_at = bytes.len() as u64;
    bytes.extend(packet(1));
    let path = temp_path("mixed.pcapng");
    fs::write(&path, &bytes).unwrap();

    let mut pool = FramePool::new(8, 2048).unwrap();
    let mut port = PcapPort::open("in", Some(&path), None).unwrap();
    let got = receive_all(&mut port, &mut pool);
    assert_eq!(got, [(vec![0xab; 60], 7_000)]);
    let error = port.error().unwrap();
    assert!(
        matches!(error, PcapError::LinkType { link_type: 113, offset, .. } if *offset == foreign_at),
        "{error}"
    );
    assert_eq!(pool.free_count(), pool.total());
}
