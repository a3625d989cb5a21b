//! Our captures against Wireshark's tools: `tshark` must read what `PcapPort` writes (the same
//! frame count, lengths and nanosecond timestamps), and our reader must read what `editcap`
//! writes when it converts that capture to pcapng and to microsecond pcap.
//!
//! The tools come from Debian's `tshark` and `wireshark-common` packages. Without them the
//! tests print "skipped: tshark not installed" and pass, except under CI (the `CI` variable
//! set), where a missing tool is a failure: CI must prove compatibility, not skip it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use wirespeed_io::Port;
use wirespeed_io::pcap::{FileFormat, PcapPort, PcapReader};
use wirespeed_packet::{Batch, Desc, FramePool, HEADROOM, Meta};

/// Whether `tool` is on the PATH; under CI its absence fails the test.
fn have(tool: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()));
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{tool} is not installed, and CI must run this test: \
             apt-get install -y tshark wireshark-common"
        );
        println!("skipped: {tool} not installed");
    }
    found
}

fn temp_path(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pcap_tshark");
    fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// The frames of the test capture: (bytes, timestamp in ns).
fn frames() -> Vec<(Vec<u8>, u64)> {
    (0..40usize)
        .map(|i| {
            let len = [60, 1514, 14, 1792, 64, 200, 999, 128][i % 8];
            let bytes = (0..len).map(|b| (b * 11 + i) as u8).collect();
            // Nanosecond digits that a microsecond format would lose.
            (bytes, 1_700_000_000_000_000_000 + i as u64 * 1_000_000_007)
        })
        .collect()
}

/// Writes `frames()` through a `PcapPort`'s TX side into `path`.
fn write_capture(path: &Path) {
    let mut pool = FramePool::new(64, 2048).unwrap();
    let mut port = PcapPort::open("out", None, Some(path)).unwrap();
    let mut batch = Batch::new(16);
    for (bytes, time) in frames() {
        let frame = pool.alloc().unwrap();
        let start = HEADROOM as usize;
        pool.frame_mut(frame)[start..start + bytes.len()].copy_from_slice(&bytes);
        let desc = Desc {
            frame,
            offset: HEADROOM,
            len: bytes.len() as u16,
            ..Desc::default()
        };
        batch.push_with_meta(
            desc,
            Meta {
                rx_time: time,
                ..Meta::EMPTY
            },
        );
        if batch.is_full() {
            port.tx(0, &mut pool, &mut batch);
        }
    }
    port.tx(0, &mut pool, &mut batch);
    port.release_all(&mut pool);
    assert!(port.error().is_none());
    assert_eq!(pool.free_count(), pool.total());
}

/// Every record of `path` through our reader: (bytes, timestamp in ns).
fn read_capture(path: &Path) -> (FileFormat, Vec<(Vec<u8>, u64)>) {
    let mut reader = PcapReader::open(path).unwrap();
    let mut buf = vec![0u8; 4096];
    let mut records = Vec::new();
    while let Some(record) = reader.next_record(&mut buf).unwrap() {
        assert!(record.in_buffer);
        records.push((buf[..record.captured_len as usize].to_vec(), record.time_ns));
    }
    (reader.format(), records)
}

fn run(command: &mut Command) -> String {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn tshark_reads_what_we_write() {
    if !have("tshark") {
        return;
    }
    let path = temp_path("ours.pcap");
    write_capture(&path);
    let out = run(Command::new("tshark").arg("-r").arg(&path).args([
        "-T",
        "fields",
        "-e",
        "frame.len",
        "-e",
        "frame.time_epoch",
    ]));
    let lines: Vec<&str> = out.lines().collect();
    let expected = frames();
    assert_eq!(lines.len(), expected.len(), "frame count:\n{out}");
    for (line, (bytes, time)) in lines.iter().zip(&expected) {
        let (len, epoch) = line.split_once('\t').unwrap();
        assert_eq!(len.parse::<usize>().unwrap(), bytes.len(), "{line}");
        // tshark prints seconds with nine decimals for a nanosecond capture.
        let expected_epoch = format!("{}.{:09}", time / 1_000_000_000, time % 1_000_000_000);
        assert_eq!(epoch, expected_epoch, "{line}");
    }
}

#[test]
fn we_read_what_editcap_writes() {
    if !have("editcap") {
        return;
    }
    let ours = temp_path("for_editcap.pcap");
    write_capture(&ours);
    let expected = frames();

    // pcapng: a section header, an interface with if_tsresol 9, enhanced packet blocks.
    let pcapng = temp_path("converted.pcapng");
    run(Command::new("editcap")
        .args(["-F", "pcapng"])
        .arg(&ours)
        .arg(&pcapng));
    let (format, records) = read_capture(&pcapng);
    assert_eq!(format, FileFormat::PcapNg);
    assert_eq!(records, expected);

    // Microsecond pcap: the same bytes, timestamps cut to microseconds.
    let micros = temp_path("converted_us.pcap");
    run(Command::new("editcap")
        .args(["-F", "pcap"])
        .arg(&ours)
        .arg(&micros));
    let (format, records) = read_capture(&micros);
    assert_eq!(format, FileFormat::Pcap);
    assert_eq!(records.len(), expected.len());
    for ((bytes, time), (expected_bytes, expected_time)) in records.iter().zip(&expected) {
        assert_eq!(bytes, expected_bytes);
        assert_eq!(*time, expected_time / 1_000 * 1_000);
    }

    // The pcapng conversion replays through a PcapPort like any capture.
    let mut pool = FramePool::new(64, 2048).unwrap();
    let mut port = PcapPort::open("in", Some(&pcapng), None).unwrap();
    let mut batch = Batch::new(32);
    let mut replayed = Vec::new();
    while !port.at_end() {
        port.rx(0, &mut pool, &mut batch);
        for (desc, meta) in batch.descs().iter().zip(batch.meta()) {
            let start = desc.offset as usize;
            replayed.push((
                pool.frame(desc.frame)[start..start + desc.len as usize].to_vec(),
                meta.rx_time,
            ));
            pool.release(desc.frame);
        }
        batch.clear();
        assert!(port.error().is_none(), "{:?}", port.error());
    }
    assert_eq!(replayed, expected);
    assert_eq!(pool.free_count(), pool.total());
}
