//! The maps' keys and values as the program sees them: `#[repr(C)]` mirrors of the structs in
//! `bpf/fast_path.h`, with the same constants. The tests below check the sizes and read the
//! constants out of the header, so the two files cannot drift apart unnoticed.

/// Most ports one switch can have on the fast path (the maps' sizes).
pub const MAX_PORTS: usize = 64;
/// Slots of the XSKMAP per port: a port's interface may have at most this many queues.
pub const QUEUES_PER_PORT: u32 = 64;
/// "No VLAN" in [`PortEntry::untagged_vlan`].
pub const NO_VLAN: u16 = 0xffff;

pub const APP_USER: u32 = 1;
pub const APP_XCONNECT: u32 = 2;
pub const APP_BRIDGE: u32 = 3;
pub const APP_ROUTER: u32 = 4;
pub const APP_OPENFLOW: u32 = 5;

pub const VLAN_ACCESS: u16 = 0;
pub const VLAN_TRUNK: u16 = 1;

/// Interface indexes the `ports` array covers.
pub const MAX_IFINDEX: u32 = 65536;

/// Reasons a frame goes to user space (`Counts::to_user`).
pub const TO_USER_REASONS: usize = 10;

/// A route (of `routes6`; the program's reading of a `tbl24`/`tbl8` entry) to the router's
/// own address.
pub const ROUTE_LOCAL: u32 = 0xffff_fffe;
/// A route to several gateways (user space picks by the flow hash).
pub const ROUTE_ECMP: u32 = 0xffff_ffff;

/// Entries of a `tbl24` or `tbl8` block (a tbl8 group is one block).
pub const DIR24_BLOCK: usize = 256;
/// Blocks of `tbl24` in a router (2^24 entries).
pub const TBL24_BLOCKS: u32 = 1 << 16;
/// The hop id of a `tbl24`/`tbl8` entry that stands for the router's own address.
pub const DIR24_LOCAL: u32 = wirespeed_dataplane::table::fib::NextHop::MAX_ID;

/// A value of the `adjacencies` map (key: the hop id).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AdjacencyEntry {
    pub slot: u32,
    pub dst: [u8; 6],
    pub src: [u8; 6],
}

/// A value of the `ports` map (key: the interface's index).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortEntry {
    pub slot: u32,
    pub app: u32,
    pub peer: u32,
    pub vlan_mode: u16,
    pub untagged_vlan: u16,
}

/// A key of the `macs` map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MacKey {
    pub mac: [u8; 6],
    pub vlan: u16,
}

/// A value of the `macs` map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MacEntry {
    pub slot: u32,
    pub ifindex: u32,
}

/// A key of the `flows` map: user space's `FlowKey` itself, whose `repr(C)` layout of 56 bytes
/// without padding `struct fp_flow_key` mirrors.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowKey(pub wirespeed_packet::flow_key::FlowKey);

/// `FlowEntry::ops`: the destination MAC becomes `dst`.
pub const FLOW_SET_DST: u16 = 1;
/// `FlowEntry::ops`: the source MAC becomes `src`.
pub const FLOW_SET_SRC: u16 = 2;
/// `FlowEntry::ops`: the TTL or hop limit goes down by one.
pub const FLOW_DEC_TTL: u16 = 4;
/// `FlowEntry::ops`: no output, the frame is dropped (and counted).
pub const FLOW_DROP: u16 = 8;
/// `FlowEntry::ops`: the source address becomes `ip_src` (IPv4: its first 4 bytes).
pub const FLOW_SET_IP_SRC: u16 = 16;
/// `FlowEntry::ops`: the destination address becomes `ip_dst`.
pub const FLOW_SET_IP_DST: u16 = 32;
/// `FlowEntry::ops`: the TCP/UDP source port becomes `l4_src`.
pub const FLOW_SET_L4_SRC: u16 = 64;
/// `FlowEntry::ops`: the TCP/UDP destination port becomes `l4_dst`.
pub const FLOW_SET_L4_DST: u16 = 128;
/// `FlowEntry::ops`: an untagged frame gets an 802.1Q tag with TCI `vlan_tci`.
pub const FLOW_PUSH_VLAN: u16 = 256;
/// `FlowEntry::ops`: a tagged frame loses its tag.
pub const FLOW_POP_VLAN: u16 = 512;
/// `FlowEntry::ops`: a tagged frame's TCI becomes `(TCI & vlan_keep) | vlan_tci`.
pub const FLOW_SET_TCI: u16 = 1024;

/// A value of the `flows` map (16-bit fields in host order).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowEntry {
    pub generation: u32,
    pub result: u32,
    pub out_slot: u16,
    pub ops: u16,
    pub dst: [u8; 6],
    pub src: [u8; 6],
    pub l4_src: u16,
    pub l4_dst: u16,
    pub ip_src: [u8; 16],
    pub ip_dst: [u8; 16],
    pub vlan_tci: u16,
    pub vlan_keep: u16,
}

/// Packets and bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    pub packets: u64,
    pub bytes: u64,
}

impl Count {
    pub fn add(&mut self, other: Count) {
        self.packets += other.packets;
        self.bytes += other.bytes;
    }
}

/// A value of the `counters` map (key: the ingress slot; one per CPU).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    pub to_user: [Count; TO_USER_REASONS],
    pub forwarded: [Count; MAX_PORTS],
    pub dropped: Count,
}

// SAFETY: plain `#[repr(C)]` structs of integers with no padding (checked by the test below),
// so every bit pattern is a valid value and copying their bytes to the kernel leaks nothing.
unsafe impl aya::Pod for PortEntry {}
// SAFETY: as above.
unsafe impl aya::Pod for MacKey {}
// SAFETY: as above.
unsafe impl aya::Pod for MacEntry {}
// SAFETY: as above.
unsafe impl aya::Pod for Count {}
// SAFETY: as above.
unsafe impl aya::Pod for AdjacencyEntry {}
// SAFETY: a transparent wrapper of a `repr(C)` struct of integers and byte arrays whose fields
// add up to its size (asserted at compile time in crates/packet/src/flow_key.rs): no padding, and
// every bit pattern is a valid key.
unsafe impl aya::Pod for FlowKey {}
// SAFETY: a plain `#[repr(C)]` struct of integers and byte arrays with no padding (checked by
// the test below), as the others above.
unsafe impl aya::Pod for FlowEntry {}
// SAFETY: as above (arrays of `Count`).
unsafe impl aya::Pod for Counts {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};
    use wirespeed_dataplane::table::fib::{Ipv4Fib, NextHop};

    #[test]
    fn layouts_have_no_padding_and_match_the_header() {
        assert_eq!(size_of::<PortEntry>(), 16);
        assert_eq!(offset_of!(PortEntry, vlan_mode), 12);
        assert_eq!(offset_of!(PortEntry, untagged_vlan), 14);
        assert_eq!(size_of::<MacKey>(), 8);
        assert_eq!(offset_of!(MacKey, vlan), 6);
        assert_eq!(size_of::<MacEntry>(), 8);
        assert_eq!(size_of::<Count>(), 16);
        assert_eq!(size_of::<AdjacencyEntry>(), 16);
        assert_eq!(offset_of!(AdjacencyEntry, src), 10);
        assert_eq!(size_of::<Counts>(), 16 * (TO_USER_REASONS + MAX_PORTS + 1));
        assert_eq!(
            size_of::<FlowKey>(),
            wirespeed_packet::flow_key::FLOW_KEY_LEN
        );
        type Key = wirespeed_packet::flow_key::FlowKey;
        assert_eq!(offset_of!(Key, dst_mac), 32);
        assert_eq!(offset_of!(Key, in_port), 44);
        assert_eq!(offset_of!(Key, l4_dst), 52);
        assert_eq!(offset_of!(Key, flags), 55);
        assert_eq!(size_of::<FlowEntry>(), 64);
        assert_eq!(offset_of!(FlowEntry, dst), 12);
        assert_eq!(offset_of!(FlowEntry, l4_src), 24);
        assert_eq!(offset_of!(FlowEntry, ip_src), 28);
        assert_eq!(offset_of!(FlowEntry, ip_dst), 44);
        assert_eq!(offset_of!(FlowEntry, vlan_tci), 60);
    }

    #[test]
    fn constants_match_the_header() {
        let header = include_str!("../bpf/fast_path.h");
        let defined = |name: &str| -> u64 {
            let line = header
                .lines()
                .find(|line| line.starts_with(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("{name} is not in fast_path.h"));
            let value = line.split_whitespace().nth(2).expect("a value");
            match value.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).expect("hex"),
                None => value.parse().expect("decimal"),
            }
        };
        assert_eq!(defined("FP_MAX_PORTS"), MAX_PORTS as u64);
        assert_eq!(defined("FP_QUEUES_PER_PORT"), u64::from(QUEUES_PER_PORT));
        assert_eq!(defined("FP_NO_VLAN"), u64::from(NO_VLAN));
        assert_eq!(defined("FP_APP_NONE"), 0);
        assert_eq!(defined("FP_APP_USER"), u64::from(APP_USER));
        assert_eq!(defined("FP_APP_XCONNECT"), u64::from(APP_XCONNECT));
        assert_eq!(defined("FP_APP_BRIDGE"), u64::from(APP_BRIDGE));
        assert_eq!(defined("FP_APP_ROUTER"), u64::from(APP_ROUTER));
        assert_eq!(defined("FP_APP_OPENFLOW"), u64::from(APP_OPENFLOW));
        assert_eq!(defined("FP_FLOW_SET_DST"), u64::from(FLOW_SET_DST));
        assert_eq!(defined("FP_FLOW_SET_SRC"), u64::from(FLOW_SET_SRC));
        assert_eq!(defined("FP_FLOW_DEC_TTL"), u64::from(FLOW_DEC_TTL));
        assert_eq!(defined("FP_FLOW_DROP"), u64::from(FLOW_DROP));
        assert_eq!(defined("FP_FLOW_SET_IP_SRC"), u64::from(FLOW_SET_IP_SRC));
        assert_eq!(defined("FP_FLOW_SET_IP_DST"), u64::from(FLOW_SET_IP_DST));
        assert_eq!(defined("FP_FLOW_SET_L4_SRC"), u64::from(FLOW_SET_L4_SRC));
        assert_eq!(defined("FP_FLOW_SET_L4_DST"), u64::from(FLOW_SET_L4_DST));
        assert_eq!(defined("FP_FLOW_PUSH_VLAN"), u64::from(FLOW_PUSH_VLAN));
        assert_eq!(defined("FP_FLOW_POP_VLAN"), u64::from(FLOW_POP_VLAN));
        assert_eq!(defined("FP_FLOW_SET_TCI"), u64::from(FLOW_SET_TCI));
        assert_eq!(
            defined("FP_KEY_VLAN"),
            u64::from(wirespeed_packet::flow_key::FlowKey::FLAG_VLAN)
        );
        assert_eq!(defined("FP_ROUTE_LOCAL"), u64::from(ROUTE_LOCAL));
        assert_eq!(defined("FP_ROUTE_ECMP"), u64::from(ROUTE_ECMP));
        assert_eq!(defined("FP_DIR24_BLOCK"), DIR24_BLOCK as u64);
        assert_eq!(defined("FP_DIR24_TBL24_BLOCKS"), u64::from(TBL24_BLOCKS));
        assert_eq!(defined("FP_DIR24_LOCAL"), u64::from(DIR24_LOCAL));
        assert_eq!(defined("FP_DIR24_ID"), u64::from(NextHop::MAX_ID));
        assert_eq!(defined("FP_DIR24_VALID"), u64::from(Ipv4Fib::ENTRY_VALID));
        assert_eq!(defined("FP_DIR24_GROUP"), u64::from(Ipv4Fib::ENTRY_GROUP));
        assert_eq!(defined("FP_DIR24_ECMP"), u64::from(Ipv4Fib::ENTRY_ECMP));
        assert_eq!(defined("FP_DIR24_GROUP_INDEX"), (1 << 24) - 1);
        assert_eq!(DIR24_BLOCK, Ipv4Fib::GROUP_LEN);
        assert_eq!(defined("FP_VLAN_ACCESS"), u64::from(VLAN_ACCESS));
        assert_eq!(defined("FP_VLAN_TRUNK"), u64::from(VLAN_TRUNK));
        assert_eq!(defined("FP_MAX_IFINDEX"), u64::from(MAX_IFINDEX));
        assert_eq!(defined("FP_TO_USER_REASONS"), TO_USER_REASONS as u64);
        for reason in crate::ToUser::ALL {
            assert_eq!(defined(reason.c_name()), reason as u64, "{reason:?}");
        }
    }
}
