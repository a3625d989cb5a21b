//! The kernel's link state changes, as rtnetlink announces them: an interface set up or down,
//! its carrier gained or lost, the interface gone.
//!
//! A `NETLINK_ROUTE` socket joined to the `RTMGRP_LINK` group receives an `RTM_NEWLINK` for
//! every change of any interface of the namespace, and an `RTM_DELLINK` when one goes; on
//! opening, the watch also asks for a dump of every link, so that its first reading gives the
//! state it starts from. Readings are non-blocking, for a control-plane thread that polls it
//! between other work (the OpenFlow agent, for PORT_STATUS); nothing here is on a worker's
//! path. Joining the group needs no privilege.
//!
//! Should the socket's buffer overflow (`ENOBUFS`: changes were lost), the watch asks for a
//! dump again, so that the state it reports is right once more.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// One interface's state as a link message reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkState {
    pub name: String,
    /// Set up by its administrator (`IFF_UP`).
    pub admin_up: bool,
    /// Its carrier is there (`IFF_LOWER_UP`; false for an interface that went away).
    pub carrier: bool,
}

/// A subscription to link changes.
pub struct LinkWatch {
    socket: OwnedFd,
    buffer: Vec<u8>,
}

/// Bytes of `struct nlmsghdr` and of `struct ifinfomsg`.
const NLMSG_HEADER: usize = 16;
const IFINFOMSG: usize = 16;
/// What one read may take: the kernel's dump parts fit in a page or two.
const READ_BUFFER: usize = 32 * 1024;

impl LinkWatch {
    /// Opens the subscription and asks for the state of every link (the first
    /// [`LinkWatch::read`] reports it).
    pub fn open() -> io::Result<LinkWatch> {
        // SAFETY: socket(2) with constant arguments; the result is checked before use.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a socket just opened, owned by nothing else.
        let socket = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_nl is plain data, valid when zeroed.
        let mut address: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        address.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        address.nl_groups = libc::RTMGRP_LINK as u32;
        // SAFETY: `address` is a valid sockaddr_nl of the length given, alive for the call.
        let bound = unsafe {
            libc::bind(
                socket.as_raw_fd(),
                (&address as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if bound < 0 {
            return Err(io::Error::last_os_error());
        }
        let watch = LinkWatch {
            socket,
            buffer: vec![0; READ_BUFFER],
        };
        watch.ask_for_dump()?;
        Ok(watch)
    }

    /// Sends RTM_GETLINK with NLM_F_DUMP: the kernel answers one RTM_NEWLINK per link.
    fn ask_for_dump(&self) -> io::Result<()> {
        let request = dump_request();
        // SAFETY: sockaddr_nl is plain data, valid when zeroed (pid 0: the kernel).
        let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: the request's bytes and the kernel's address are valid for the call, with
        // the lengths given.
        let sent = unsafe {
            libc::sendto(
                self.socket.as_raw_fd(),
                request.as_ptr().cast(),
                request.len(),
                0,
                (&kernel as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The socket's descriptor, readable when a report is waiting.
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.socket.as_raw_fd()
    }

    /// Appends to `out` every link state reported since the last reading, oldest first;
    /// returns at once when there is none.
    pub fn read(&mut self, out: &mut Vec<LinkState>) -> io::Result<()> {
        loop {
            // SAFETY: the buffer is valid for writes of its length for the call.
            let got = unsafe {
                libc::recv(
                    self.socket.as_raw_fd(),
                    self.buffer.as_mut_ptr().cast(),
                    self.buffer.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if got < 0 {
                let error = io::Error::last_os_error();
                match error.raw_os_error() {
                    Some(libc::EAGAIN) => return Ok(()),
                    Some(libc::EINTR) => continue,
                    // Changes were lost: the state of every link again.
                    Some(libc::ENOBUFS) => self.ask_for_dump()?,
                    _ => return Err(error),
                }
                continue;
            }
            parse(&self.buffer[..got as usize], out);
        }
    }
}

/// An RTM_GETLINK dump request: a netlink header and an empty `ifinfomsg`.
fn dump_request() -> Vec<u8> {
    let mut request = Vec::with_capacity(NLMSG_HEADER + IFINFOMSG);
    request.extend_from_slice(&((NLMSG_HEADER + IFINFOMSG) as u32).to_ne_bytes());
    request.extend_from_slice(&libc::RTM_GETLINK.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    request.extend_from_slice(&flags.to_ne_bytes());
    request.extend_from_slice(&1u32.to_ne_bytes()); // sequence number
    request.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
    request.resize(NLMSG_HEADER + IFINFOMSG, 0); // family AF_UNSPEC: every link
    request
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// The link states in one datagram of netlink messages (RTM_NEWLINK and RTM_DELLINK; the
/// rest, such as a dump's NLMSG_DONE, are skipped). A message cut short ends the datagram:
/// nothing the kernel sends makes this panic.
pub fn parse(datagram: &[u8], out: &mut Vec<LinkState>) {
    let mut at = 0;
    while let (Some(len), Some(kind)) = (u32_at(datagram, at), u16_at(datagram, at + 4)) {
        let len = len as usize;
        let Some(message) = datagram.get(at..at + len).filter(|_| len >= NLMSG_HEADER) else {
            return;
        };
        if (kind == libc::RTM_NEWLINK || kind == libc::RTM_DELLINK)
            && let Some(state) = link(&message[NLMSG_HEADER..], kind == libc::RTM_DELLINK)
        {
            out.push(state);
        }
        // NLMSG_ALIGN: messages start on four-byte boundaries.
        at += (len + 3) & !3;
    }
}

/// One `ifinfomsg` and its attributes: the flags, and the name from IFLA_IFNAME.
fn link(body: &[u8], deleted: bool) -> Option<LinkState> {
    let flags = u32_at(body, 8)?;
    let mut at = IFINFOMSG;
    while let (Some(len), Some(kind)) = (u16_at(body, at), u16_at(body, at + 2)) {
        let len = usize::from(len);
        if len < 4 {
            return None;
        }
        let value = body.get(at + 4..at + len)?;
        if kind == libc::IFLA_IFNAME {
            let end = value.iter().position(|&b| b == 0).unwrap_or(value.len());
            return Some(LinkState {
                name: String::from_utf8_lossy(&value[..end]).into_owned(),
                admin_up: !deleted && flags & libc::IFF_UP as u32 != 0,
                carrier: !deleted && flags & libc::IFF_LOWER_UP as u32 != 0,
            });
        }
        at += (len + 3) & !3;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link message as the kernel writes it: header, ifinfomsg with `flags`, an IFLA_MTU
    /// and an IFLA_IFNAME attribute.
    fn message(kind: u16, flags: u32, name: &str) -> Vec<u8> {
        let mut body = vec![0u8; IFINFOMSG];
        body[8..12].copy_from_slice(&flags.to_ne_bytes());
        body.extend_from_slice(&8u16.to_ne_bytes());
        body.extend_from_slice(&libc::IFLA_MTU.to_ne_bytes());
        body.extend_from_slice(&1500u32.to_ne_bytes());
        let attribute = 4 + name.len() + 1;
        body.extend_from_slice(&(attribute as u16).to_ne_bytes());
        body.extend_from_slice(&libc::IFLA_IFNAME.to_ne_bytes());
        body.extend_from_slice(name.as_bytes());
        body.push(0);
        body.resize((body.len() + 3) & !3, 0);
        let mut bytes = ((NLMSG_HEADER + body.len()) as u32).to_ne_bytes().to_vec();
        bytes.extend_from_slice(&kind.to_ne_bytes());
        bytes.extend_from_slice(&[0; 10]);
        bytes.extend_from_slice(&body);
        bytes
    }

    #[test]
    fn link_messages_give_name_flags_and_carrier() {
        let up = (libc::IFF_UP | libc::IFF_LOWER_UP) as u32;
        let mut datagram = message(libc::RTM_NEWLINK, up, "veth0");
        datagram.extend(message(libc::RTM_NEWLINK, libc::IFF_UP as u32, "eth12"));
        datagram.extend(message(libc::RTM_DELLINK, up, "gone"));
        // A dump's end, which carries no link.
        datagram.extend_from_slice(&20u32.to_ne_bytes());
        datagram.extend_from_slice(&(libc::NLMSG_DONE as u16).to_ne_bytes());
        datagram.extend_from_slice(&[0; 14]);
        let mut out = Vec::new();
        parse(&datagram, &mut out);
        let state = |name: &str, admin_up, carrier| LinkState {
            name: name.into(),
            admin_up,
            carrier,
        };
        assert_eq!(
            out,
            vec![
                state("veth0", true, true),
                state("eth12", true, false),
                state("gone", false, false)
            ]
        );
    }

    #[test]
    fn every_truncation_is_parsed_without_panic() {
        let datagram = message(libc::RTM_NEWLINK, 1, "veth0");
        for cut in 0..datagram.len() {
            let mut out = Vec::new();
            parse(&datagram[..cut], &mut out);
            assert!(out.is_empty(), "{cut}");
        }
        let mut bad = datagram.clone();
        bad[16 + IFINFOMSG..16 + IFINFOMSG + 2].copy_from_slice(&0u16.to_ne_bytes());
        let mut out = Vec::new();
        parse(&bad, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn the_first_reading_reports_the_loopback() {
        let mut watch = LinkWatch::open().expect("NETLINK_ROUTE needs no privilege");
        let mut out = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !out.iter().any(|s: &LinkState| s.name == "lo") {
            assert!(std::time::Instant::now() < deadline, "{out:?}");
            watch.read(&mut out).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}
