//! What the port tests share: their lab, the test frames (told apart from the lab's own IPv6
//! chatter by a magic and numbered so losses and changes are named), the tester's independent
//! view through a plain raw packet socket, and moving frames between byte strings and the pool.
//! On two shared cores delivery takes time, so receiving polls with a deadline.
#![allow(dead_code)] // each test file uses its own part of this module

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use wirespeed_io::Port;
use wirespeed_io::wait::wait_readable;
use wirespeed_lab::{PortPair, Testbed, TestbedConfig, enter, run, run_in};
use wirespeed_packet::batch::HEADROOM;
use wirespeed_packet::{Batch, Desc, FramePool};

/// IEEE 802 local experimental ethertype: the hosts' kernels ignore it.
pub const TEST_ETHERTYPE: u16 = 0x88b5;
/// Marks a test frame; the sequence number follows it.
pub const MAGIC: &[u8; 8] = b"WSAFPKT!";
/// How long a receiver waits for the frames it expects.
pub const DEADLINE: Duration = Duration::from_secs(2);

/// A fresh lab of `pairs` port pairs with `queues` queues each, named `prefix` (see
/// [`wirespeed_lab::up_for_test`]: `None`, after printing why, where it cannot be built).
pub fn lab(prefix: &str, pairs: u16, queues: u16) -> Option<Testbed> {
    wirespeed_lab::up_for_test(&TestbedConfig {
        prefix: prefix.into(),
        pairs,
        queues,
        calibration: false,
        mtu: wirespeed_lab::DEFAULT_MTU,
    })
}

/// A test frame: Ethernet header, optionally one 802.1Q tag, magic, sequence number, pattern.
pub fn test_frame(dst: [u8; 6], src: [u8; 6], seq: u32, len: usize, vlan: Option<u16>) -> Vec<u8> {
    let mut frame = Vec::with_capacity(len);
    frame.extend_from_slice(&dst);
    frame.extend_from_slice(&src);
    if let Some(tci) = vlan {
        frame.extend_from_slice(&0x8100u16.to_be_bytes());
        frame.extend_from_slice(&tci.to_be_bytes());
    }
    frame.extend_from_slice(&TEST_ETHERTYPE.to_be_bytes());
    frame.extend_from_slice(MAGIC);
    frame.extend_from_slice(&seq.to_be_bytes());
    let mut byte = seq as u8;
    while frame.len() < len {
        frame.push(byte);
        byte = byte.wrapping_mul(31).wrapping_add(7);
    }
    frame
}

/// The sequence number of a test frame (found after its magic, wherever a tag put it); `None`
/// for anything else.
pub fn seq_of(frame: &[u8]) -> Option<u32> {
    let at = frame
        .windows(MAGIC.len())
        .take(64)
        .position(|w| w == MAGIC)?;
    let seq = frame.get(at + MAGIC.len()..at + MAGIC.len() + 4)?;
    Some(u32::from_be_bytes([seq[0], seq[1], seq[2], seq[3]]))
}

/// Whether `frame` is one of ours (and not the hosts' IPv6 chatter).
pub fn is_test_frame(frame: &[u8]) -> bool {
    seq_of(frame).is_some()
}

/// Asserts that `got` is `want`, frame for frame and byte for byte, without printing frames.
pub fn assert_same_frames(got: &[Vec<u8>], want: &[Vec<u8>]) {
    for (index, (got, want)) in got.iter().zip(want).enumerate() {
        assert!(
            got == want,
            "frame {index} differs: got seq {:?} of {} bytes, want seq {:?} of {} bytes",
            seq_of(got),
            got.len(),
            seq_of(want),
            want.len()
        );
    }
    assert_eq!(got.len(), want.len(), "frames lost (or extra)");
}

/// The bytes `desc` describes in `pool`.
pub fn bytes_of(pool: &FramePool, desc: &Desc) -> Vec<u8> {
    let start = desc.offset as usize;
    pool.frame(desc.frame)[start..start + desc.len as usize].to_vec()
}

/// Puts `frames` into pool frames at HEADROOM and appends them to `batch` for `queue`.
pub fn fill(pool: &mut FramePool, batch: &mut Batch, frames: &[Vec<u8>], queue: u16) {
    for bytes in frames {
        let frame = pool.alloc().expect("free frame");
        let start = HEADROOM as usize;
        pool.frame_mut(frame)[start..start + bytes.len()].copy_from_slice(bytes);
        assert!(batch.push(Desc {
            frame,
            offset: HEADROOM,
            len: bytes.len() as u16,
            port: 0,
            queue,
        }));
    }
}

/// The test frames in `batch`, copied out in order; every frame of the batch goes back to
/// `pool` (the hosts' chatter too) and the batch is left empty.
pub fn take_test_frames(pool: &mut FramePool, batch: &mut Batch) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    for desc in batch.descs() {
        let bytes = bytes_of(pool, desc);
        if is_test_frame(&bytes) {
            frames.push(bytes);
        }
        pool.release(desc.frame);
    }
    batch.clear();
    frames
}

/// Sets the MTU of `interface` in namespace `netns`.
pub fn set_mtu(netns: &str, interface: &str, mtu: u32) {
    let mtu = mtu.to_string();
    run("ip", &["-n", netns, "link", "set", interface, "mtu", &mtu]).expect("set mtu");
}

/// Whether `ip -d link show` reports an XDP program on `interface` of namespace `netns`.
pub fn xdp_attached(netns: &str, interface: &str) -> bool {
    let out = run("ip", &["-n", netns, "-d", "link", "show", "dev", interface]).expect("ip link");
    out.contains("prog/xdp") || out.contains(" xdp")
}

/// The oracle: a plain raw packet socket on one interface of one namespace, independent of the
/// code under test. It does not see what it sends itself.
pub struct RawSocket {
    fd: OwnedFd,
}

impl RawSocket {
    pub fn open(netns: &str, interface: &str) -> RawSocket {
        let _inside = enter(netns).expect("enter namespace");
        let protocol = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: socket has no memory preconditions; the result is checked.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                protocol as i32,
            )
        };
        assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
        // SAFETY: `fd` was just created and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let name = std::ffi::CString::new(interface).unwrap();
        // SAFETY: `name` is a valid NUL-terminated string.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        assert!(index > 0, "no interface {interface} in {netns}");
        let raw = RawSocket { fd };
        raw.option(libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1);
        // Room for every frame a test sends before it reads (the default holds ~90 large ones).
        raw.option(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 16 << 20);
        // SAFETY: sockaddr_ll is plain old data; all-zero is valid.
        let mut address: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        address.sll_family = libc::AF_PACKET as u16;
        address.sll_protocol = protocol;
        address.sll_ifindex = index as i32;
        // SAFETY: `address` is a valid sockaddr_ll of the given length.
        let rc = unsafe {
            libc::bind(
                raw.fd.as_raw_fd(),
                (&address as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
        raw
    }

    fn option(&self, level: i32, name: i32, value: i32) {
        // SAFETY: `value` is a live i32 of the length passed.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                level,
                name,
                (&value as *const i32).cast(),
                4,
            )
        };
        assert_eq!(rc, 0, "setsockopt: {}", std::io::Error::last_os_error());
    }

    /// Sends `frame`, waiting while the device queue is full (veth peer busy), for 2 s at most.
    pub fn send(&self, frame: &[u8]) {
        let (fd, flags) = (self.fd.as_raw_fd(), libc::MSG_DONTWAIT);
        for _ in 0..2000 {
            // SAFETY: `frame` is a live buffer of the length passed.
            let rc = unsafe { libc::send(fd, frame.as_ptr().cast(), frame.len(), flags) };
            if rc == frame.len() as isize {
                return;
            }
            let error = std::io::Error::last_os_error();
            assert!(
                matches!(
                    error.raw_os_error(),
                    Some(libc::ENOBUFS) | Some(libc::EAGAIN)
                ),
                "send: {error}"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("send: the interface stayed busy for 2 s");
    }

    /// Test frames received, in arrival order, until `count` arrived or [`DEADLINE`] passed.
    pub fn receive(&self, count: usize) -> Vec<Vec<u8>> {
        self.receive_until(count, DEADLINE)
    }

    /// Test frames received within `time`.
    pub fn receive_for(&self, time: Duration) -> Vec<Vec<u8>> {
        self.receive_until(usize::MAX, time)
    }

    fn receive_until(&self, count: usize, time: Duration) -> Vec<Vec<u8>> {
        let mut frames = Vec::new();
        let mut buffer = vec![0u8; 65536];
        let deadline = Instant::now() + time;
        while frames.len() < count && Instant::now() < deadline {
            if wait_readable(&[self.fd.as_raw_fd()], Duration::from_millis(20)).unwrap() == 0 {
                continue;
            }
            // SAFETY: `buffer` is a live, writable buffer of the length passed.
            let rc = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if rc > 0 && is_test_frame(&buffer[..rc as usize]) {
                frames.push(buffer[..rc as usize].to_vec());
            }
        }
        frames
    }
}

/// Frames in the 64-slot TX ring of queue 0 of `port`, opened on `pair`'s DuT interface in
/// namespace `dut_ns`, checked against `tx_room` (the test frames it sent are returned, for
/// the caller to find on the tester side): an empty ring says its size; with the link down a
/// kick fails (ENETDOWN) and the kernel takes nothing, so after 40 frames 24 slots are left,
/// after 64 none, and `tx` agrees; once the link is up, kicks send the frames and the room
/// comes back.
pub fn check_tx_room_with_the_link_down_then_up(
    port: &mut dyn Port,
    pool: &mut FramePool,
    dut_ns: &str,
    pair: &PortPair,
) -> Vec<Vec<u8>> {
    assert_eq!(port.tx_room(0, pool, 1000), 64, "an empty ring");
    assert_eq!(port.tx_room(0, pool, 10), 10, "at most what was asked for");
    assert_eq!(
        port.tx_room(1, pool, 10),
        0,
        "a queue the port did not open"
    );
    let link = |state: &str| {
        run_in(dut_ns, "ip", &["link", "set", "dev", &pair.dut_if, state]).expect("ip link");
    };
    link("down");
    let outgoing: Vec<Vec<u8>> = (0..64)
        .map(|seq| test_frame(pair.tester_mac, pair.dut_mac, seq, 60, None))
        .collect();
    let mut batch = Batch::new(64);
    fill(pool, &mut batch, &outgoing[..40], 0);
    assert_eq!(port.tx(0, pool, &mut batch), 40);
    assert_eq!(port.tx_room(0, pool, 64), 24);
    fill(pool, &mut batch, &outgoing[40..], 0);
    assert_eq!(port.tx(0, pool, &mut batch), 24);
    port.poll(pool);
    assert_eq!(port.tx_room(0, pool, 64), 0, "a full ring has no room");
    fill(pool, &mut batch, &outgoing[..1], 0);
    assert_eq!(port.tx(0, pool, &mut batch), 0, "and tx agrees");
    pool.release(batch.descs()[0].frame);
    link("up");
    let deadline = Instant::now() + DEADLINE;
    while port.tx_room(0, pool, 64) < 64 && Instant::now() < deadline {
        port.poll(pool);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(port.tx_room(0, pool, 64), 64, "the room came back");
    outgoing
}
