//! What the kernel says about an interface: index, MTU, MAC, link state and queue count.
//!
//! These are read with ioctls on a socket rather than from `/sys/class/net/IF/...`, because sysfs
//! shows the network namespace it was *mounted* in, not the one of the calling thread: a process
//! that enters a lab's namespace with `setns` (as the tests and `wirespeed lab` do) would read
//! another namespace's interfaces, or none. A socket belongs to the namespace of the thread that
//! creates it, so its ioctls always describe the interfaces the AF_XDP sockets will bind to.
//! The link state is the driver's carrier (`ETHTOOL_GLINK`). The queue count comes from ethtool's channel query (`ETHTOOL_GCHANNELS`: RX-only plus
//! combined channels, which is what AF_XDP calls queues); a driver without it has one queue.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GLINK: u32 = 0x0a;
const ETHTOOL_GCHANNELS: u32 = 0x3c;

/// `struct ethtool_value` (linux/ethtool.h).
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// `struct ethtool_channels` (linux/ethtool.h).
#[repr(C)]
#[derive(Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

/// `struct ethtool_drvinfo` (linux/ethtool.h).
#[repr(C)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

/// An interface of the calling thread's network namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Interface {
    pub(crate) ifindex: u32,
    pub(crate) mtu: u32,
    pub(crate) mac: [u8; 6],
    pub(crate) link_up: bool,
    pub(crate) queues: u16,
    /// The driver's name (`ETHTOOL_GDRVINFO`: "veth", "mlx5_core", ...); empty where the
    /// driver does not say.
    pub(crate) driver: String,
}

/// Why an interface could not be described.
#[derive(Debug)]
pub(crate) enum InterfaceError {
    /// No interface of that name (or a name no interface can have).
    Missing,
    /// An ioctl failed; which one.
    Query(&'static str, std::io::Error),
}

struct Request {
    socket: OwnedFd,
    name: [libc::c_char; libc::IFNAMSIZ],
}

impl Request {
    /// Runs ioctl `request` with an `ifreq` for the interface whose union part `fill` prepares;
    /// returns the `ifreq` as the kernel left it.
    fn ioctl(
        &self,
        request: libc::c_ulong,
        fill: impl FnOnce(&mut libc::ifreq),
    ) -> std::io::Result<libc::ifreq> {
        // SAFETY: ifreq is a C struct of integers, arrays and a union of those and a pointer, for
        // which all-zero is a valid value.
        let mut ifreq: libc::ifreq = unsafe { std::mem::zeroed() };
        ifreq.ifr_name = self.name;
        fill(&mut ifreq);
        // SAFETY: `ifreq` is a valid ifreq for the request; where the request follows a pointer
        // in it (SIOCETHTOOL), `fill` set it to memory that outlives the call.
        let rc = unsafe { libc::ioctl(self.socket.as_raw_fd(), request, &mut ifreq) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(ifreq)
    }
}

impl Interface {
    /// Describes interface `name` of the calling thread's namespace.
    pub(crate) fn query(name: &str) -> Result<Interface, InterfaceError> {
        let bytes = name.as_bytes();
        if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
            return Err(InterfaceError::Missing);
        }
        let mut ifname = [0 as libc::c_char; libc::IFNAMSIZ];
        for (slot, &byte) in ifname.iter_mut().zip(bytes) {
            *slot = byte as libc::c_char;
        }
        // SAFETY: socket(2) has no memory preconditions; the result is checked before use.
        let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(InterfaceError::Query(
                "socket",
                std::io::Error::last_os_error(),
            ));
        }
        let request = Request {
            // SAFETY: `raw` is a fresh descriptor nothing else owns.
            socket: unsafe { OwnedFd::from_raw_fd(raw) },
            name: ifname,
        };
        let index = match request.ioctl(libc::SIOCGIFINDEX, |_| {}) {
            Ok(ifreq) => {
                // SAFETY: SIOCGIFINDEX succeeded, so the kernel wrote the index member.
                unsafe { ifreq.ifr_ifru.ifru_ifindex }
            }
            Err(error) if error.raw_os_error() == Some(libc::ENODEV) => {
                return Err(InterfaceError::Missing);
            }
            Err(error) => return Err(InterfaceError::Query("SIOCGIFINDEX", error)),
        };
        let ifreq = request
            .ioctl(libc::SIOCGIFMTU, |_| {})
            .map_err(|e| InterfaceError::Query("SIOCGIFMTU", e))?;
        // SAFETY: SIOCGIFMTU succeeded, so the kernel wrote the MTU member.
        let mtu = unsafe { ifreq.ifr_ifru.ifru_mtu };
        let ifreq = request
            .ioctl(libc::SIOCGIFHWADDR, |_| {})
            .map_err(|e| InterfaceError::Query("SIOCGIFHWADDR", e))?;
        // SAFETY: SIOCGIFHWADDR succeeded, so the kernel wrote the hardware address member.
        let hwaddr = unsafe { ifreq.ifr_ifru.ifru_hwaddr };
        let mut mac = [0u8; 6];
        for (byte, &data) in mac.iter_mut().zip(&hwaddr.sa_data) {
            *byte = data as u8;
        }
        let ifreq = request
            .ioctl(libc::SIOCGIFFLAGS, |_| {})
            .map_err(|e| InterfaceError::Query("SIOCGIFFLAGS", e))?;
        // SAFETY: SIOCGIFFLAGS succeeded, so the kernel wrote the flags member.
        let flags = unsafe { ifreq.ifr_ifru.ifru_flags } as libc::c_int;
        // The carrier as the driver reports it now; IFF_RUNNING follows it only after the
        // kernel's link-watch delay (up to a second after a veth comes up).
        let mut link = EthtoolValue {
            cmd: ETHTOOL_GLINK,
            data: 0,
        };
        let link_ptr = (&mut link as *mut EthtoolValue).cast::<libc::c_char>();
        let carrier = match request.ioctl(libc::SIOCETHTOOL, |ifreq| {
            ifreq.ifr_ifru.ifru_data = link_ptr;
        }) {
            Ok(_) => link.data != 0,
            Err(_) => flags & libc::IFF_RUNNING != 0,
        };
        let link_up = flags & libc::IFF_UP != 0 && carrier;

        let mut channels = EthtoolChannels {
            cmd: ETHTOOL_GCHANNELS,
            ..EthtoolChannels::default()
        };
        let channels_ptr = (&mut channels as *mut EthtoolChannels).cast::<libc::c_char>();
        let queues = match request.ioctl(libc::SIOCETHTOOL, |ifreq| {
            ifreq.ifr_ifru.ifru_data = channels_ptr;
        }) {
            Ok(_) => (channels.rx_count + channels.combined_count).clamp(1, u16::MAX as u32),
            // No channel query in this driver (loopback, some virtual devices): one queue.
            Err(error) if error.raw_os_error() == Some(libc::EOPNOTSUPP) => 1,
            Err(error) => return Err(InterfaceError::Query("ETHTOOL_GCHANNELS", error)),
        };
        let mut info = EthtoolDrvinfo {
            cmd: ETHTOOL_GDRVINFO,
            driver: [0; 32],
            version: [0; 32],
            fw_version: [0; 32],
            bus_info: [0; 32],
            erom_version: [0; 32],
            reserved2: [0; 12],
            n_priv_flags: 0,
            n_stats: 0,
            testinfo_len: 0,
            eedump_len: 0,
            regdump_len: 0,
        };
        let info_ptr = (&mut info as *mut EthtoolDrvinfo).cast::<libc::c_char>();
        let driver = match request.ioctl(libc::SIOCETHTOOL, |ifreq| {
            ifreq.ifr_ifru.ifru_data = info_ptr;
        }) {
            Ok(_) => {
                let end = info.driver.iter().position(|&b| b == 0).unwrap_or(32);
                String::from_utf8_lossy(&info.driver[..end]).into_owned()
            }
            Err(_) => String::new(),
        };
        Ok(Interface {
            ifindex: index as u32,
            mtu: mtu.max(0) as u32,
            mac,
            link_up,
            queues: queues as u16,
            driver,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_described_and_nonsense_is_missing() {
        let lo = Interface::query("lo").expect("lo exists in every namespace");
        assert_eq!(lo.ifindex, 1);
        assert_eq!(lo.mac, [0; 6]);
        assert!(lo.queues >= 1);
        assert!(matches!(
            Interface::query("wstnosuchif0"),
            Err(InterfaceError::Missing)
        ));
        assert!(matches!(
            Interface::query("much-too-long-interface-name"),
            Err(InterfaceError::Missing)
        ));
        assert!(matches!(
            Interface::query("a\0b"),
            Err(InterfaceError::Missing)
        ));
    }
}
