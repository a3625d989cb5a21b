//! `wirespeed pcap` never destroys its input and never reports success for an output it could
//! not write.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use wirespeed_io::Port;
use wirespeed_io::pcap::PcapPort;
use wirespeed_packet::{Batch, FramePool};
use wirespeed_testkit::frames::FrameBuilder;

mod common;
use common::write_capture;

/// A capture of `count` test frames at `path`; returns its bytes.
fn capture(path: &Path, count: u32) -> Vec<u8> {
    let frames: Vec<Vec<u8>> = (0..count)
        .map(|i| {
            FrameBuilder::ipv4_udp()
                .frame_len(64 + (i as usize % 64) * 16)
                .build()
        })
        .collect();
    write_capture(path, &frames);
    std::fs::read(path).unwrap()
}

fn pcap(input: &Path, output: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wirespeed"))
        .arg("pcap")
        .arg("--in")
        .arg(input)
        .arg("--out")
        .arg(output)
        .output()
        .unwrap()
}

/// Runs `wirespeed switch` cross-connecting capture `input` to `output` (configuration in
/// `dir`) for `millis` ms, then stops it with SIGINT.
fn switch(dir: &Path, input: &Path, output: &Path, millis: u64) -> Output {
    let config = dir.join("switch.toml");
    std::fs::write(
        &config,
        format!(
            "[switch]\napp = \"xconnect\"\ncontrol_socket = \"\"\n\n\
             [[port]]\nname = \"in\"\nbackend = \"pcap\"\nrx = \"{}\"\n\n\
             [[port]]\nname = \"out\"\nbackend = \"pcap\"\ntx = \"{}\"\n\n\
             [xconnect]\npairs = [[\"in\", \"out\"]]\n",
            input.display(),
            output.display()
        ),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_wirespeed"))
        .args(["switch", "--config"])
        .arg(&config)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(millis));
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    child.wait_with_output().unwrap()
}

fn dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_same_file_as_input_and_output_is_refused_and_left_whole() {
    let dir = dir("wirespeed-wstpc1");
    let input = dir.join("in.pcap");
    let bytes = capture(&input, 500);
    // The very path, and another path to the same file.
    for output in [input.clone(), dir.join(".").join("in.pcap")] {
        let out = pcap(&input, &output);
        assert!(!out.status.success(), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("the same file"), "{stderr}");
        assert_eq!(std::fs::read(&input).unwrap(), bytes, "the input changed");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_output_that_cannot_be_written_fails_the_command() {
    let dir = dir("wirespeed-wstpc2");
    let input = dir.join("in.pcap");
    capture(&input, 500);
    let out = pcap(&input, Path::new("/dev/full"));
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/dev/full is incomplete"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_truncated_capture_ends_the_run_with_an_error_and_keeps_what_came_before() {
    let dir = dir("wirespeed-wstpc3");
    let input = dir.join("in.pcap");
    let bytes = capture(&input, 500);
    // Cut the file in the middle of a record, as a capture still being written is.
    let cut = dir.join("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() / 2 + 7]).unwrap();
    let output = dir.join("out.pcap");
    let started = std::time::Instant::now();
    let out = pcap(&cut, &output);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "it hung"
    );
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("stopped early"), "{stderr}");
    // The records before the cut were forwarded and written.
    let mut reader = PcapPort::open("check", Some(&output), None).unwrap();
    let mut pool = FramePool::new(1024, 2048).unwrap();
    let mut batch = Batch::new(256);
    let mut records = 0;
    loop {
        let got = reader.rx(0, &mut pool, &mut batch);
        if got == 0 {
            break;
        }
        records += got;
        for desc in batch.descs() {
            pool.release(desc.frame);
        }
        batch.clear();
    }
    assert!(records > 100, "{records} records written");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_switch_whose_capture_has_ended_sleeps_instead_of_spinning() {
    let dir = dir("wirespeed-wstpc4");
    let input = dir.join("in.pcap");
    capture(&input, 200);
    let out = switch(&dir, &input, &dir.join("out.pcap"), 1500);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    // "(E empty polls, S sleeps)": about one sleep per 10 ms once the input ended, and not
    // the millions of empty polls of a spinning core.
    let counts = text
        .split("idle ")
        .nth(1)
        .and_then(|rest| rest.split('(').nth(1))
        .unwrap_or_else(|| panic!("no idle figures:\n{text}"));
    let numbers: Vec<u64> = counts
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|word| word.parse().ok())
        .collect();
    let (empty_polls, sleeps) = (numbers[0], numbers[1]);
    assert!(sleeps >= 20, "{sleeps} sleeps:\n{text}");
    assert!(empty_polls < 100_000, "{empty_polls} empty polls:\n{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_switch_whose_capture_could_not_be_written_fails() {
    let dir = dir("wirespeed-wstpc5");
    let input = dir.join("in.pcap");
    capture(&input, 200);
    let out = switch(&dir, &input, Path::new("/dev/full"), 800);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it reported success:\n{stderr}");
    assert!(stderr.contains("stopped early: port out"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
