// The layout shared by the fast path program and its loader (crates/fastpath/src/maps.rs
// mirrors every struct and constant here; a test there checks the sizes against this file).

#ifndef WIRESPEED_FAST_PATH_H
#define WIRESPEED_FAST_PATH_H

#include <linux/types.h>

#define FP_MAX_PORTS 64
#define FP_QUEUES_PER_PORT 64
#define FP_NO_VLAN 0xffff

// What the port's app is; FP_APP_USER sends every frame to user space, FP_APP_NONE marks an
// interface that is not a port.
#define FP_APP_NONE 0
#define FP_APP_USER 1
#define FP_APP_XCONNECT 2
#define FP_APP_BRIDGE 3
#define FP_APP_ROUTER 4
#define FP_APP_OPENFLOW 5

#define FP_VLAN_ACCESS 0
#define FP_VLAN_TRUNK 1

// Interface indexes the `ports` array covers; an interface with a larger index cannot be on
// the fast path.
#define FP_MAX_IFINDEX 65536

// Why a frame went to user space: counters per slot.
#define FP_TO_USER_LEARN 0 // unknown or moved source: learning is user space's
#define FP_TO_USER_FLOOD 1 // unknown destination, broadcast, multicast
#define FP_TO_USER_VLAN 2 // a VLAN case the kernel leaves to user space
#define FP_TO_USER_OTHER 3 // everything else (short frames, same-port destination, ...)
#define FP_TO_USER_LOCAL 4 // router: to one of the router's own addresses
#define FP_TO_USER_TTL 5 // router: TTL or hop limit <= 1 (user space sends Time Exceeded)
#define FP_TO_USER_NO_ROUTE 6 // router: no route (user space sends Unreachable)
#define FP_TO_USER_NEXT_HOP 7 // router: unresolved neighbour, connected subnet or ECMP
#define FP_TO_USER_SYNC 8 // router: a route load is being mirrored into the kernel
#define FP_TO_USER_FLOW_MISS 9 // openflow: the flow is not (or no longer) in the kernel's cache
#define FP_TO_USER_REASONS 10

// Router: the most routes the kernel's table holds by default and the most adjacencies (one
// per gateway in use).
#define FP_MAX_ADJACENCIES 65536

// Router: what a route of `routes4` designates besides a hop id (an adjacency's key).
#define FP_ROUTE_LOCAL 0xfffffffe // the router's own address
#define FP_ROUTE_ECMP 0xffffffff // several gateways: user space picks by the flow hash

// Router: the IPv4 FIB's DIR-24-8 arrays, in blocks of 256 entries (a tbl8 group is one
// block; tbl24 is 65536 of them). An entry as crates/dataplane/src/table/fib/ipv4.rs lays it out.
#define FP_DIR24_BLOCK 256
#define FP_DIR24_TBL24_BLOCKS 65536
#define FP_DIR24_VALID 0x80000000 // a route
#define FP_DIR24_GROUP 0x40000000 // tbl24 only: bits 0..24 are a tbl8 group
#define FP_DIR24_GROUP_INDEX 0x00ffffff
#define FP_DIR24_ECMP 0x00800000 // the route's next hop is an ECMP group
#define FP_DIR24_ID 0x007fffff // the hop id (or ECMP group id)
#define FP_DIR24_LOCAL 0x007fffff // the hop id that stands for the router's own address

struct fp_port {
	__u32 slot;
	__u32 app;
	__u32 peer; // xconnect: the peer's slot
	__u16 vlan_mode; // bridge: FP_VLAN_ACCESS or FP_VLAN_TRUNK
	__u16 untagged_vlan; // bridge: the access VLAN, or the trunk's native VLAN, or FP_NO_VLAN
};

struct fp_mac_key {
	__u8 mac[6];
	__u16 vlan;
};

struct fp_mac_entry {
	__u32 slot;
	__u32 ifindex;
};

// Router: a key of the IPv6 LPM trie (prefix length, then the address in network order).
struct fp_route6_key {
	__u32 prefixlen;
	__u8 addr[16];
};

// Router: a block of DIR-24-8 entries (a value of `tbl24` and `tbl8`).
struct fp_dir24_block {
	__u32 entry[FP_DIR24_BLOCK];
};

// Router: a resolved gateway's rewrite, keyed by its hop id.
struct fp_adjacency {
	__u32 slot; // the output port
	__u8 dst[6]; // the neighbour's MAC
	__u8 src[6]; // the output port's MAC
};

// OpenFlow: a flow key, byte for byte user space's `FlowKey` (crates/packet/src/flow_key.rs):
// IPv4 addresses IPv4-mapped, the 16-bit fields in host order.
struct fp_flow_key {
	__u8 ip_src[16];
	__u8 ip_dst[16];
	__u8 dst_mac[6];
	__u8 src_mac[6];
	__u8 in_port; // the port's index (at most 255 ports)
	__u8 ip_tos; // IPv4 TOS / IPv6 traffic class: DSCP << 2 | ECN
	__u16 vlan; // the outer tag's priority (PCP, top 3 bits) and id (low 12), DEI 0
	__u16 ethertype;
	__u16 l4_src;
	__u16 l4_dst;
	__u8 ip_proto;
	__u8 flags;
};

// OpenFlow: what the kernel does with a cached flow's frames (`ops` bits), then the output.
// The rewrites are user space's (crates/dataplane/src/app/openflow/action.rs) for the frames
// the kernel takes (plain UDP or TCP over IPv4 or IPv6, untagged or behind one 802.1Q tag),
// with the same RFC 1624 checksum updates; kernel.rs there decides which flows qualify.
#define FP_FLOW_SET_DST 1 // the destination MAC becomes `dst`
#define FP_FLOW_SET_SRC 2 // the source MAC becomes `src`
#define FP_FLOW_DEC_TTL 4 // the TTL or hop limit goes down by one (at most 1: user space)
#define FP_FLOW_DROP 8 // no output: the frame is dropped (counted), nothing else applies
#define FP_FLOW_SET_IP_SRC 16 // the source address becomes `ip_src` (IPv4: its first 4 bytes)
#define FP_FLOW_SET_IP_DST 32 // the destination address becomes `ip_dst`
#define FP_FLOW_SET_L4_SRC 64 // the TCP/UDP source port becomes `l4_src`
#define FP_FLOW_SET_L4_DST 128 // the TCP/UDP destination port becomes `l4_dst`
#define FP_FLOW_PUSH_VLAN 256 // untagged: an 802.1Q tag with TCI `vlan_tci` goes after the MACs
#define FP_FLOW_POP_VLAN 512 // tagged: the tag goes
#define FP_FLOW_SET_TCI 1024 // tagged: the TCI becomes (TCI & `vlan_keep`) | `vlan_tci`

// OpenFlow: `fp_flow_key.flags` of a frame with a VLAN tag (user space's FlowKey::FLAG_VLAN).
#define FP_KEY_VLAN 1

// OpenFlow: a value of `flows`. `generation` must equal `flow_generation`'s, or the entry is
// stale (the tables changed since); `result` is user space's stored result the flow resolved
// to, the index of its counts in `flow_counts`. The 16-bit fields are in host order.
struct fp_flow {
	__u32 generation;
	__u32 result;
	__u16 out_slot;
	__u16 ops;
	__u8 dst[6];
	__u8 src[6];
	__u16 l4_src;
	__u16 l4_dst;
	__u8 ip_src[16];
	__u8 ip_dst[16];
	__u16 vlan_tci;
	__u16 vlan_keep;
};

struct fp_count {
	__u64 packets;
	__u64 bytes;
};

// One ingress port's counters (per CPU): frames it sent to user space by reason, frames the
// kernel forwarded from it, per output slot, and frames the kernel dropped (an OpenFlow flow
// without an output). One lookup per frame counts everything.
struct fp_counts {
	struct fp_count to_user[FP_TO_USER_REASONS];
	struct fp_count forwarded[FP_MAX_PORTS];
	struct fp_count dropped;
};

#endif
