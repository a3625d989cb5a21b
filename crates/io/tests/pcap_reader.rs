//! The capture reader and writer on byte fixtures: classic pcap in both byte orders and both
//! timestamp resolutions, pcapng with several interfaces, resolutions, block kinds and sections,
//! and every kind of corruption, each checked for the exact error and byte offset. Truncating
//! good files at every offset and feeding arbitrary bytes must never panic.

use std::io::{self, Cursor, Write};

use proptest::prelude::*;
use wirespeed_io::pcap::{
    FileFormat, MAX_RECORD, PcapError, PcapReader, PcapWriter, Problem, Record,
};

/// Reads every record of `bytes`; the records with their bytes, or the first error.
fn read_all(bytes: &[u8]) -> Result<Vec<(Record, Vec<u8>)>, PcapError> {
    let mut reader = PcapReader::new(Cursor::new(bytes), "fixture")?;
    let mut buf = vec![0u8; 4096];
    let mut records = Vec::new();
    while let Some(record) = reader.next_record(&mut buf)? {
        let data = if record.in_buffer {
            buf[..record.captured_len as usize].to_vec()
        } else {
            Vec::new()
        };
        records.push((record, data));
    }
    Ok(records)
}

fn corrupt(error: PcapError) -> (u64, Problem) {
    match error {
        PcapError::Corrupt {
            offset, problem, ..
        } => (offset, problem),
        other => panic!("expected a corruption error, got {other}"),
    }
}

// --- classic pcap, written out byte by byte ---

/// Little-endian, microseconds, link type 1, one record of 4 bytes at 1 s + 2 us.
const CLASSIC_LE_MICROS: [u8; 44] = [
    0xd4, 0xc3, 0xb2, 0xa1, 0x02, 0x00, 0x04, 0x00, // magic, version 2.4
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // thiszone, sigfigs
    0xff, 0xff, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, // snaplen 65535, Ethernet
    0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, // 1 s, 2 us
    0x04, 0x00, 0x00, 0x00, 0x3c, 0x00, 0x00, 0x00, // 4 captured, 60 on the wire
    0xde, 0xad, 0xbe, 0xef,
];

/// Big-endian, nanoseconds, link type 1, one record of 3 bytes at 1 s + 5 ns.
const CLASSIC_BE_NANOS: [u8; 43] = [
    0xa1, 0xb2, 0x3c, 0x4d, 0x00, 0x02, 0x00, 0x04, // magic, version 2.4
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // thiszone, sigfigs
    0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, // snaplen 262144, Ethernet
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x05, // 1 s, 5 ns
    0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x03, // 3 captured, 3 on the wire
    0xaa, 0xbb, 0xcc,
];

#[test]
fn classic_little_endian_microseconds() {
    let reader = PcapReader::new(Cursor::new(&CLASSIC_LE_MICROS[..]), "fixture").unwrap();
    assert_eq!(reader.format(), FileFormat::Pcap);
    assert_eq!(reader.link_types().collect::<Vec<_>>(), [(1, 20)]);
    let records = read_all(&CLASSIC_LE_MICROS).unwrap();
    assert_eq!(records.len(), 1);
    let (record, data) = &records[0];
    assert_eq!(record.time_ns, 1_000_002_000);
    assert_eq!(record.captured_len, 4);
    assert_eq!(record.original_len, 60);
    assert_eq!(record.offset, 24);
    assert_eq!(data, &[0xde, 0xad, 0xbe, 0xef]);
}

#[test]
fn classic_big_endian_nanoseconds() {
    let records = read_all(&CLASSIC_BE_NANOS).unwrap();
    assert_eq!(records.len(), 1);
    let (record, data) = &records[0];
    assert_eq!(record.time_ns, 1_000_000_005);
    assert_eq!((record.captured_len, record.original_len), (3, 3));
    assert_eq!(record.link_type, 1);
    assert_eq!(data, &[0xaa, 0xbb, 0xcc]);
}

/// A classic capture built field by field, in either byte order and resolution.
fn classic(
    big_endian: bool,
    nanos: bool,
    link_type: u32,
    records: &[(u32, u32, &[u8])],
) -> Vec<u8> {
    let u32b = |v: u32| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let u16b = |v: u16| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut out = Vec::new();
    out.extend(u32b(if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 }));
    out.extend(u16b(2));
    out.extend(u16b(4));
    out.extend([0; 8]);
    out.extend(u32b(65535));
    out.extend(u32b(link_type));
    for (seconds, fraction, data) in records {
        out.extend(u32b(*seconds));
        out.extend(u32b(*fraction));
        out.extend(u32b(data.len() as u32));
        out.extend(u32b(data.len() as u32));
        out.extend(*data);
    }
    out
}

#[test]
fn classic_in_all_four_variants_reads_the_same_frames() {
    let frames: [&[u8]; 3] = [&[1; 60], &[2; 1514], &[]];
    for big_endian in [false, true] {
        for nanos in [false, true] {
            let records: Vec<_> = frames
                .iter()
                .enumerate()
                .map(|(i, frame)| (1_700_000_000 + i as u32, 999_999, *frame))
                .collect();
            let got = read_all(&classic(big_endian, nanos, 1, &records)).unwrap();
            assert_eq!(got.len(), 3);
            for (i, (record, data)) in got.iter().enumerate() {
                let fraction_ns = if nanos { 999_999 } else { 999_999_000 };
                assert_eq!(
                    record.time_ns,
                    (1_700_000_000 + i as u64) * 1_000_000_000 + fraction_ns
                );
                assert_eq!(data.as_slice(), frames[i]);
            }
        }
    }
}

#[test]
fn record_longer_than_the_buffer_is_skipped_not_truncated() {
    let bytes = classic(false, true, 1, &[(1, 0, &[7; 3000]), (2, 0, &[8; 60])]);
    let mut reader = PcapReader::new(Cursor::new(&bytes), "fixture").unwrap();
    let mut buf = [0u8; 1500];
    let first = reader.next_record(&mut buf).unwrap().unwrap();
    assert!(!first.in_buffer);
    assert_eq!(first.captured_len, 3000);
    let second = reader.next_record(&mut buf).unwrap().unwrap();
    assert!(second.in_buffer);
    assert_eq!(&buf[..60], &[8; 60]);
    assert!(reader.next_record(&mut buf).unwrap().is_none());
}

#[test]
fn classic_errors_name_the_problem_and_offset() {
    let mut bad_magic = CLASSIC_LE_MICROS;
    bad_magic[0] = 0;
    let error = read_all(&bad_magic).unwrap_err();
    let message = error.to_string();
    assert_eq!(corrupt(error), (0, Problem::BadMagic(0x00c3_b2a1)));
    assert!(
        message.contains("fixture") && message.contains("editcap"),
        "{message}"
    );

    let mut version = CLASSIC_LE_MICROS;
    version[4] = 1;
    assert_eq!(
        corrupt(read_all(&version).unwrap_err()),
        (4, Problem::Version { major: 1, minor: 4 })
    );

    // A second record announcing more than MAX_RECORD bytes.
    let mut too_long = CLASSIC_LE_MICROS.to_vec();
    too_long.extend([0; 8]);
    too_long.extend((MAX_RECORD + 1).to_le_bytes());
    too_long.extend(60u32.to_le_bytes());
    let error = read_all(&too_long).unwrap_err();
    assert!(error.to_string().contains("byte offset 52"), "{error}");
    assert_eq!(
        corrupt(error),
        (
            52,
            Problem::RecordTooLong {
                len: MAX_RECORD + 1,
                limit: MAX_RECORD
            }
        )
    );
}

#[test]
fn reading_after_an_error_says_it_stopped() {
    let mut bytes = CLASSIC_LE_MICROS.to_vec();
    bytes.extend([1, 2, 3]);
    let mut reader = PcapReader::new(Cursor::new(&bytes), "fixture").unwrap();
    let mut buf = [0u8; 64];
    assert!(reader.next_record(&mut buf).unwrap().is_some());
    assert!(matches!(
        reader.next_record(&mut buf),
        Err(PcapError::Truncated {
            starts_at: 44,
            ends_at: 47,
            ..
        })
    ));
    assert!(matches!(
        reader.next_record(&mut buf),
        Err(PcapError::Stopped { offset: 47, .. })
    ));
}

// --- pcapng ---

/// Builds pcapng blocks in one byte order.
struct Ng {
    big_endian: bool,
    out: Vec<u8>,
}

impl Ng {
    fn new(big_endian: bool) -> Self {
        Ng {
            big_endian,
            out: Vec::new(),
        }
    }
    fn u16(&self, v: u16) -> [u8; 2] {
        if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn u32(&self, v: u32) -> [u8; 4] {
        if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    /// Appends a block of `kind` with `body` (padded to 4); returns its start offset.
    fn block(&mut self, kind: u32, body: &[u8]) -> usize {
        let start = self.out.len();
        let padded = body.len().div_ceil(4) * 4;
        let total = (12 + padded) as u32;
        self.out.extend(self.u32(kind));
        self.out.extend(self.u32(total));
        self.out.extend(body);
        self.out.resize(start + 8 + padded, 0);
        self.out.extend(self.u32(total));
        start
    }
    fn section(&mut self, big_endian: bool) -> usize {
        self.big_endian = big_endian;
        let mut body = self.u32(0x1a2b_3c4d).to_vec();
        body.extend(self.u16(1));
        body.extend(self.u16(0));
        body.extend((-1i64).to_le_bytes());
        // An shb_userappl option, to be skipped.
        body.extend(self.u16(4));
        body.extend(self.u16(5));
        body.extend(b"test\0\0\0\0");
        body.extend([0; 4]);
        self.block(0x0a0d_0d0a, &body)
    }
    /// An interface description with optional `if_tsresol` and `if_tsoffset`.
    fn interface(
        &mut self,
        link_type: u16,
        resolution: Option<u8>,
        offset_s: Option<i64>,
    ) -> usize {
        let mut body = self.u16(link_type).to_vec();
        body.extend(self.u16(0));
        body.extend(self.u32(0));
        // An if_name option before the ones that matter.
        body.extend(self.u16(2));
        body.extend(self.u16(3));
        body.extend(b"et0\0");
        if let Some(resolution) = resolution {
            body.extend(self.u16(9));
            body.extend(self.u16(1));
            body.extend([resolution, 0, 0, 0]);
        }
        if let Some(offset_s) = offset_s {
            body.extend(self.u16(14));
            body.extend(self.u16(8));
            body.extend(if self.big_endian {
                offset_s.to_be_bytes()
            } else {
                offset_s.to_le_bytes()
            });
        }
        body.extend([0; 4]);
        self.block(1, &body)
    }
    fn enhanced(&mut self, interface: u32, ticks: u64, data: &[u8]) -> usize {
        let mut body = self.u32(interface).to_vec();
        body.extend(self.u32((ticks >> 32) as u32));
        body.extend(self.u32(ticks as u32));
        body.extend(self.u32(data.len() as u32));
        body.extend(self.u32(data.len() as u32 + 4));
        body.extend(data);
        body.resize(20 + data.len().div_ceil(4) * 4, 0);
        // An epb_flags option, to be skipped.
        body.extend(self.u16(2));
        body.extend(self.u16(4));
        body.extend(self.u32(1));
        body.extend([0; 4]);
        self.block(6, &body)
    }
    fn simple(&mut self, data: &[u8]) -> usize {
        let mut body = self.u32(data.len() as u32).to_vec();
        body.extend(data);
        self.block(3, &body)
    }
}

/// Two sections (little- then big-endian); the first has two interfaces with different
/// resolutions, an unknown block, enhanced and simple packet blocks.
fn pcapng_fixture() -> (Vec<u8>, Vec<usize>) {
    let mut ng = Ng::new(false);
    let mut starts = Vec::new();
    ng.section(false);
    ng.interface(1, Some(9), None); // nanoseconds
    ng.interface(1, Some(0x80 | 10), Some(100)); // 1/1024 s, +100 s
    ng.block(0x0000_0bad, &[1, 2, 3, 4, 5, 6, 7, 8]);
    starts.push(ng.enhanced(1, 2048 + 512, &[0x11; 61]));
    starts.push(ng.simple(&[0x22; 62]));
    starts.push(ng.enhanced(0, 1_700_000_000_123_456_789, &[0x33; 64]));
    ng.section(true);
    ng.interface(1, None, None); // default: microseconds
    starts.push(ng.enhanced(0, 5_000_001, &[0x44; 1]));
    (ng.out, starts)
}

#[test]
fn pcapng_interfaces_resolutions_block_kinds_and_sections() {
    let (bytes, starts) = pcapng_fixture();
    let reader = PcapReader::new(Cursor::new(&bytes), "fixture").unwrap();
    assert_eq!(reader.format(), FileFormat::PcapNg);
    assert_eq!(
        reader.link_types().count(),
        2,
        "leading interfaces are read at open"
    );
    let records = read_all(&bytes).unwrap();
    let summary: Vec<(u64, u32, u32, u32, u8, u64)> = records
        .iter()
        .map(|(r, d)| {
            (
                r.time_ns,
                r.interface,
                r.captured_len,
                r.original_len,
                d[0],
                r.offset,
            )
        })
        .collect();
    let starts: Vec<u64> = starts.iter().map(|&s| s as u64).collect();
    assert_eq!(
        summary,
        [
            // 2560/1024 s = 2.5 s, plus the interface's 100 s offset.
            (102_500_000_000, 1, 61, 65, 0x11, starts[0]),
            // Simple packet blocks have no timestamp and belong to interface 0.
            (0, 0, 62, 62, 0x22, starts[1]),
            (1_700_000_000_123_456_789, 0, 64, 68, 0x33, starts[2]),
            // Second section, big-endian, microseconds.
            (5_000_001_000, 0, 1, 5, 0x44, starts[3]),
        ]
    );
    assert!(
        records
            .iter()
            .all(|(r, d)| d.len() == r.captured_len as usize)
    );
}

#[test]
fn pcapng_decimal_and_binary_resolutions() {
    for (resolution, ticks, expected_ns) in [
        (0u8, 3u64, 3_000_000_000u64),
        (3, 1_500, 1_500_000_000),
        (12, 1_500_000_000_000, 1_500_000_000),
        (0x80, 7, 7_000_000_000),
        (0x80 | 1, 3, 1_500_000_000),
        (0x80 | 30, 1 << 30, 1_000_000_000),
        (60, u64::MAX, 0),
    ] {
        let mut ng = Ng::new(false);
        ng.section(false);
        ng.interface(1, Some(resolution), None);
        ng.enhanced(0, ticks, &[0; 14]);
        let records = read_all(&ng.out).unwrap();
        assert_eq!(
            records[0].0.time_ns, expected_ns,
            "resolution {resolution:#x}"
        );
    }
}

#[test]
fn pcapng_errors_name_the_problem_and_offset() {
    // Block length not a multiple of 4, in the block after the section header.
    let mut ng = Ng::new(false);
    ng.section(false);
    let at = ng.interface(1, None, None);
    let mut bytes = ng.out.clone();
    bytes[at + 4] += 1;
    assert_eq!(
        corrupt(read_all(&bytes).unwrap_err()),
        (at as u64 + 4, Problem::BlockLengthUnaligned(33))
    );

    // Trailing length differs from the leading one.
    let mut bytes = ng.out.clone();
    let trailer = bytes.len() - 4;
    bytes[trailer] = 36;
    let error = read_all(&bytes).unwrap_err();
    assert!(
        error
            .to_string()
            .contains(&format!("byte offset {trailer}")),
        "{error}"
    );
    assert_eq!(
        corrupt(error),
        (
            trailer as u64,
            Problem::TrailerMismatch {
                leading: 32,
                trailing: 36
            }
        )
    );

    // A packet on an interface the section never described.
    let mut unknown = Ng::new(false);
    unknown.section(false);
    unknown.interface(1, None, None);
    let at = unknown.enhanced(3, 0, &[0; 20]);
    assert_eq!(
        corrupt(read_all(&unknown.out).unwrap_err()),
        (at as u64 + 8, Problem::UnknownInterface { id: 3, known: 1 })
    );

    // Captured length beyond the block.
    let mut beyond = Ng::new(false);
    beyond.section(false);
    beyond.interface(1, None, None);
    let at = beyond.enhanced(0, 0, &[0; 20]);
    beyond.out[at + 20] = 200;
    assert_eq!(
        corrupt(read_all(&beyond.out).unwrap_err()),
        (
            at as u64 + 20,
            Problem::CapturedBeyondBlock {
                captured: 200,
                block_len: 64
            }
        )
    );

    // Captured length beyond the record limit.
    beyond.out[at + 20..at + 24].copy_from_slice(&(MAX_RECORD + 4).to_le_bytes());
    assert!(matches!(
        corrupt(read_all(&beyond.out).unwrap_err()),
        (_, Problem::RecordTooLong { .. })
    ));

    // A block too short for its type.
    let mut short = Ng::new(false);
    short.section(false);
    let at = short.block(6, &[0; 8]);
    assert_eq!(
        corrupt(read_all(&short.out).unwrap_err()),
        (at as u64 + 4, Problem::BlockTooShort { len: 20, min: 32 })
    );

    // A byte-order magic that is neither order.
    let mut magic = Ng::new(false);
    magic.section(false);
    magic.out[8] = 0x99;
    assert_eq!(
        corrupt(read_all(&magic.out).unwrap_err()),
        (8, Problem::BadByteOrderMagic(0x993c_2b1a))
    );

    // An option running past the end of its block.
    let mut option = Ng::new(false);
    option.section(false);
    let at = option.interface(1, Some(6), None);
    option.out[at + 16 + 2] = 0xf0; // if_name's length
    assert_eq!(
        corrupt(read_all(&option.out).unwrap_err()),
        (
            at as u64 + 16,
            Problem::OptionOverrun { code: 2, len: 0xf0 }
        )
    );
}

/// Cuts `bytes` at every offset. `pieces` are the offsets where the file header, each record
/// and (pcapng) each block start; `packets` those of the records. A cut where a piece starts
/// (other than 0) or at the end reads the records before it without error; any other cut is a
/// `Truncated` error that ends at the cut and names the start of the piece it falls in.
fn check_every_cut(bytes: &[u8], pieces: &[usize], packets: &[usize]) {
    for cut in 0..=bytes.len() {
        let clean = cut == bytes.len() || (cut > 0 && pieces.contains(&cut));
        match read_all(&bytes[..cut]) {
            Ok(records) => {
                assert!(clean, "cut {cut}: read without error");
                let expected = packets.iter().filter(|&&s| s < cut).count();
                assert_eq!(records.len(), expected, "cut {cut}");
            }
            Err(PcapError::Truncated {
                starts_at, ends_at, ..
            }) => {
                assert!(!clean, "cut {cut}: a clean cut gave an error");
                assert_eq!(ends_at, cut as u64, "cut {cut}");
                let containing = pieces.iter().rev().find(|&&s| s < cut).copied();
                assert_eq!(starts_at, containing.unwrap_or(0) as u64, "cut {cut}");
            }
            Err(other) => panic!("cut {cut}: unexpected error {other}"),
        }
    }
}

#[test]
fn classic_truncated_at_every_offset() {
    let bytes = classic(
        false,
        false,
        1,
        &[(1, 1, &[1; 60]), (2, 2, &[]), (3, 3, &[3; 17])],
    );
    let records = [24, 100, 116];
    assert_eq!(bytes.len(), 116 + 16 + 17);
    check_every_cut(&bytes, &[0, 24, 100, 116], &records);
}

#[test]
fn pcapng_truncated_at_every_offset() {
    let (bytes, packets) = pcapng_fixture();
    // Walk the blocks to find where each starts.
    let mut blocks = Vec::new();
    let mut at = 0usize;
    let mut big_endian = false;
    while at < bytes.len() {
        if bytes[at..at + 4] == [0x0a, 0x0d, 0x0d, 0x0a] {
            big_endian = bytes[at + 8] == 0x1a;
        }
        let len: [u8; 4] = bytes[at + 4..at + 8].try_into().unwrap();
        let len = if big_endian {
            u32::from_be_bytes(len)
        } else {
            u32::from_le_bytes(len)
        };
        blocks.push(at);
        at += len as usize;
    }
    assert_eq!(blocks.len(), 10);
    check_every_cut(&bytes, &blocks, &packets);
}

// --- the writer ---

#[test]
fn writer_output_reads_back_byte_for_byte() {
    let mut writer = PcapWriter::new(Vec::new(), "memory").unwrap();
    let frames: Vec<Vec<u8>> = (0..20u32)
        .map(|i| (0..(i * 97 % 1600)).map(|b| (b ^ i) as u8).collect())
        .collect();
    for (i, frame) in frames.iter().enumerate() {
        writer
            .write_record(
                1_700_000_000_000_000_000 + i as u64 * 1_234_567,
                frame,
                frame.len() as u32,
            )
            .unwrap();
    }
    assert_eq!(writer.records(), 20);
    let bytes = writer.into_inner().unwrap();
    assert_eq!(&bytes[..4], &[0x4d, 0x3c, 0xb2, 0xa1], "nanosecond magic");
    assert_eq!(
        &bytes[16..24],
        &[0, 0, 4, 0, 1, 0, 0, 0],
        "snaplen 262144, Ethernet"
    );
    let records = read_all(&bytes).unwrap();
    assert_eq!(records.len(), 20);
    for (i, (record, data)) in records.iter().enumerate() {
        assert_eq!(
            record.time_ns,
            1_700_000_000_000_000_000 + i as u64 * 1_234_567
        );
        assert_eq!(data, &frames[i]);
    }
}

#[test]
fn writer_rejects_bad_records_without_breaking() {
    let mut writer = PcapWriter::new(Vec::new(), "memory").unwrap();
    assert!(matches!(
        writer.write_record(0, &vec![0; MAX_RECORD as usize + 1], 0),
        Err(PcapError::WriteTooLong { .. })
    ));
    assert!(matches!(
        writer.write_record(u64::MAX, &[0; 60], 60),
        Err(PcapError::WriteTime { .. })
    ));
    writer.write_record(5, &[9; 60], 60).unwrap();
    let records = read_all(&writer.into_inner().unwrap()).unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].0.time_ns, 5);
}

/// A destination that accepts `room` bytes and then fails.
struct FullDisk {
    room: usize,
}

impl Write for FullDisk {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.room == 0 {
            return Err(io::Error::new(io::ErrorKind::StorageFull, "disk full"));
        }
        let n = buf.len().min(self.room);
        self.room -= n;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn writer_failure_is_reported_then_the_writer_stays_closed() {
    let mut writer = PcapWriter::new(FullDisk { room: 50 }, "full").unwrap();
    let error = writer.write_record(1, &[0; 60], 60).unwrap_err();
    assert!(matches!(error, PcapError::Write { .. }));
    assert!(error.to_string().contains("full"), "{error}");
    assert!(matches!(
        writer.write_record(1, &[0; 10], 10),
        Err(PcapError::WriterBroken { .. })
    ));
    assert!(writer.flush().is_err());
}

// --- hostile input ---

/// Reads until the end or an error, with a bounded number of steps: a record consumes at least
/// 12 bytes, so more steps than bytes would mean a loop that makes no progress.
fn drain(bytes: &[u8]) {
    let Ok(mut reader) = PcapReader::new(Cursor::new(bytes), "arbitrary") else {
        return;
    };
    let mut buf = [0u8; 2048];
    for _ in 0..=bytes.len() {
        match reader.next_record(&mut buf) {
            Ok(Some(record)) => assert!(!record.in_buffer || record.captured_len <= 2048),
            Ok(None) | Err(_) => return,
        }
    }
    panic!("the reader made no progress");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        drain(&bytes);
    }

    #[test]
    fn arbitrary_bytes_after_a_classic_header_never_panic(
        nanos in any::<bool>(),
        big_endian in any::<bool>(),
        tail in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        let mut bytes = classic(big_endian, nanos, 1, &[]);
        bytes.extend(tail);
        drain(&bytes);
    }

    #[test]
    fn arbitrary_blocks_after_a_section_header_never_panic(
        big_endian in any::<bool>(),
        blocks in proptest::collection::vec(
            (0u32..8, 0u32..200, proptest::collection::vec(any::<u8>(), 0..120)), 0..6),
    ) {
        let mut ng = Ng::new(big_endian);
        ng.section(big_endian);
        ng.interface(1, Some(9), None);
        for (kind, declared_len, body) in blocks {
            // A header with an arbitrary (often wrong) length, then arbitrary bytes.
            ng.out.extend(ng.u32(kind));
            ng.out.extend(ng.u32(declared_len));
            ng.out.extend(body);
        }
        drain(&ng.out);
    }

    #[test]
    fn mutated_good_files_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        pcapng in any::<bool>(),
    ) {
        let mut bytes = if pcapng {
            pcapng_fixture().0
        } else {
            classic(false, true, 1, &[(1, 1, &[1; 60]), (2, 2, &[2; 9])])
        };
        for (index, value) in flips {
            let at = index.index(bytes.len());
            bytes[at] = value;
        }
        drain(&bytes);
    }
}
