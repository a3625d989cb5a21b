// wirespeed's XDP fast path: the kernel forwards the frames whose fate user space has already
// decided, and hands every other frame to the port's AF_XDP socket, where the full pipeline runs.
//
// One program serves every port of a switch. User space owns every table and writes the maps
// below; this program only reads them (and counts). A port is a "slot": the port's index in the
// switch configuration, the key of `tx_ports` (its interface), of `ports` (its settings) and,
// times QUEUES_PER_PORT plus the receive queue, of `xsks` (its sockets).
//
// Built by crates/fastpath/build.rs with `clang -target bpf`; loaded with aya.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "fast_path.h"

char LICENSE[] SEC("license") = "MIT OR Apache-2.0";

// Interface index -> the port's settings: an array, so one lookup without hashing. Entries of
// interfaces that are not ports stay all zero (FP_APP_NONE).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FP_MAX_IFINDEX);
	__type(key, __u32);
	__type(value, struct fp_port);
} ports SEC(".maps");

// Slot -> interface, for bpf_redirect_map.
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, FP_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} tx_ports SEC(".maps");

// slot * FP_QUEUES_PER_PORT + receive queue -> the AF_XDP socket of the slow path.
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, FP_MAX_PORTS * FP_QUEUES_PER_PORT);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

// Bridge: VLANs a trunk port carries tagged, one bit per VLAN id:
// key slot * 64 + vid / 64, bit vid % 64.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FP_MAX_PORTS * 64);
	__type(key, __u32);
	__type(value, __u64);
} trunk_vlans SEC(".maps");

// Bridge: the MAC table user space learned, (MAC, VLAN) -> slot. Its size is set at load time
// to the bridge's MAC capacity.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct fp_mac_key);
	__type(value, struct fp_mac_entry);
} macs SEC(".maps");

// Router: the IPv4 FIB as user space has it, in user space's own layout (DIR-24-8, see
// crates/dataplane/src/table/fib/ipv4.rs): destination bits 31..16 pick a tbl24 block and
// 15..8 its entry, which is a route or a tbl8 group whose entry bits 7..0 pick. One or two
// array reads, where an LPM trie of a million routes walked dozens of nodes (0.23x the XDP
// redirect at 1M routes against 1.0x at one route; docs/benchmarks.md). User space writes
// both arrays through mmap; tbl8's size is set at load time, and both are one block for a
// switch that does not route.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, FP_DIR24_TBL24_BLOCKS);
	__type(key, __u32);
	__type(value, struct fp_dir24_block);
} tbl24 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_dir24_block);
} tbl8 SEC(".maps");

// Router: the IPv6 FIB as user space has it, prefix -> hop id (an `adjacencies` key) or
// FP_ROUTE_LOCAL / FP_ROUTE_ECMP. Every route is here, also those the kernel cannot forward by,
// so that a longest match never falls through to a shorter prefix user space would not pick.
// Its size is set at load time.
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fp_route6_key);
	__type(value, __u32);
} routes6 SEC(".maps");

// Router: hop id -> the rewrite of a gateway whose neighbour is resolved. A hop without an
// entry (unresolved, a connected subnet, the router itself) goes to user space.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FP_MAX_ADJACENCIES);
	__type(key, __u32);
	__type(value, struct fp_adjacency);
} adjacencies SEC(".maps");

// Router: 1 while `tbl24`, `tbl8` and `routes6` equal user space's FIBs; 0 while a route load is being mirrored,
// when every routed frame goes to user space (never a stale decision, never a stall).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} routes_ready SEC(".maps");

// OpenFlow: the flows user space's exact-match cache holds whose actions the kernel can apply,
// its flow key -> what to do. Written by user space as its cache fills; an LRU map, so that a
// full one drops its least used entries (those flows go back to user space) instead of
// refusing new ones. Its size is set at load time to the cache's.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1);
	__type(key, struct fp_flow_key);
	__type(value, struct fp_flow);
} flows SEC(".maps");

// OpenFlow: the generation of `flows`' valid entries. User space bumps it when its tables
// change, which makes every entry stale at once (as its own cache's generation does).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} flow_generation SEC(".maps");

// OpenFlow: packets and bytes per stored result (`fp_flow.result`), added atomically; user
// space reads them through mmap and credits them to the flows behind each result. Its size is
// set at load time to the number of stored results (megaflows).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_count);
} flow_counts SEC(".maps");

// Counters: ingress slot -> its counters, per CPU.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FP_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct fp_counts);
} counters SEC(".maps");

struct vlan_tag {
	__be16 tci;
	__be16 proto;
};

static __always_inline struct fp_counts *counts_of(__u32 slot)
{
	return bpf_map_lookup_elem(&counters, &slot);
}

// The frame goes to user space, counted under why.
static __always_inline int to_user(struct xdp_md *ctx, __u32 slot, __u32 why, __u64 bytes)
{
	struct fp_counts *c = counts_of(slot);

	if (c && why < FP_TO_USER_REASONS) {
		c->to_user[why].packets++;
		c->to_user[why].bytes += bytes;
	}
	return bpf_redirect_map(&xsks, slot * FP_QUEUES_PER_PORT + ctx->rx_queue_index, XDP_PASS);
}

static __always_inline int forward(__u32 in, __u32 out, __u64 bytes)
{
	struct fp_counts *c = counts_of(in);

	if (c && out < FP_MAX_PORTS) {
		c->forwarded[out].packets++;
		c->forwarded[out].bytes += bytes;
	}
	return bpf_redirect_map(&tx_ports, out, 0);
}

// The kernel drops the frame (an OpenFlow flow without an output), counted as the ingress
// port's.
static __always_inline int dropped(__u32 in, __u64 bytes)
{
	struct fp_counts *c = counts_of(in);

	if (c) {
		c->dropped.packets++;
		c->dropped.bytes += bytes;
	}
	return XDP_DROP;
}

// Pushes an 802.1Q tag with `tci` after the MACs: the addresses move 4 bytes into the
// headroom and the tag follows them, so nothing after it is copied. Returns 0 when pushed, -1
// when the headroom refused (the frame is unchanged), -2 when the grown frame is shorter than
// its new header (cannot happen for a frame that held its MACs; the caller aborts).
static __always_inline int push_tag(struct xdp_md *ctx, __u16 tci)
{
	void *data, *end;
	__u8 macs_copy[12];

	if (bpf_xdp_adjust_head(ctx, -4))
		return -1;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	if (data + 18 > end)
		return -2;
	__builtin_memcpy(macs_copy, data + 4, 12);
	__builtin_memcpy(data, macs_copy, 12);
	*(__be16 *)(data + 12) = bpf_htons(ETH_P_8021Q);
	*(__be16 *)(data + 14) = bpf_htons(tci);
	return 0;
}

// Pops the 802.1Q tag after the MACs: the addresses move 4 bytes towards the payload over
// it. Returns as push_tag does.
static __always_inline int pop_tag(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 macs_copy[12];

	if (data + 18 > end)
		return -1;
	__builtin_memcpy(macs_copy, data, 12);
	if (bpf_xdp_adjust_head(ctx, 4))
		return -1;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	if (data + 12 > end)
		return -2;
	__builtin_memcpy(data, macs_copy, 12);
	return 0;
}

static __always_inline int trunk_carries(__u32 slot, __u32 vid)
{
	__u32 key = slot * 64 + vid / 64;
	__u64 *word = bpf_map_lookup_elem(&trunk_vlans, &key);

	return word && (*word >> (vid % 64)) & 1;
}

// The tag a frame of `vid` carries out of `port`: 0 untagged, 1 tagged, -1 not a member.
static __always_inline int egress_tag(const struct fp_port *port, __u32 slot, __u32 vid)
{
	if (port->vlan_mode == FP_VLAN_ACCESS)
		return port->untagged_vlan == vid ? 0 : -1;
	if (port->untagged_vlan == vid)
		return 0;
	return trunk_carries(slot, vid) ? 1 : -1;
}

static __always_inline int bridge(struct xdp_md *ctx, const struct fp_port *in, __u64 bytes)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct fp_mac_key key = {};
	struct fp_mac_entry *entry;
	struct fp_port *out;
	__u32 vid, out_slot, out_ifindex;
	int tagged = 0, out_tagged;

	if ((void *)(eth + 1) > end)
		return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
	if (eth->h_dest[0] & 1)
		return to_user(ctx, in->slot, FP_TO_USER_FLOOD, bytes);
	if (eth->h_proto == bpf_htons(ETH_P_8021Q)) {
		struct vlan_tag *tag = (void *)(eth + 1);

		if ((void *)(tag + 1) > end)
			return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
		vid = bpf_ntohs(tag->tci) & 0xfff;
		// Priority tags, tags on access ports and the native VLAN sent tagged: user space.
		if (vid == 0 || in->vlan_mode != FP_VLAN_TRUNK || vid == in->untagged_vlan ||
		    !trunk_carries(in->slot, vid))
			return to_user(ctx, in->slot, FP_TO_USER_VLAN, bytes);
		tagged = 1;
	} else {
		if (in->untagged_vlan == FP_NO_VLAN)
			return to_user(ctx, in->slot, FP_TO_USER_VLAN, bytes);
		vid = in->untagged_vlan;
	}

	// The source must be known on this very port: learning and moves are user space's.
	__builtin_memcpy(key.mac, eth->h_source, 6);
	key.vlan = vid;
	entry = bpf_map_lookup_elem(&macs, &key);
	if (!entry || entry->slot != in->slot)
		return to_user(ctx, in->slot, FP_TO_USER_LEARN, bytes);
	__builtin_memcpy(key.mac, eth->h_dest, 6);
	entry = bpf_map_lookup_elem(&macs, &key);
	if (!entry)
		return to_user(ctx, in->slot, FP_TO_USER_FLOOD, bytes);
	out_slot = entry->slot;
	if (out_slot == in->slot)
		return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
	out_ifindex = entry->ifindex;
	out = bpf_map_lookup_elem(&ports, &out_ifindex);
	if (!out || out->slot != out_slot)
		return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
	out_tagged = egress_tag(out, out_slot, vid);
	if (out_tagged < 0)
		return to_user(ctx, in->slot, FP_TO_USER_VLAN, bytes);

	if (tagged && !out_tagged) {
		int popped = pop_tag(ctx);

		if (popped == -1)
			return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
		if (popped)
			return XDP_ABORTED;
		bytes -= 4;
	} else if (!tagged && out_tagged) {
		int pushed = push_tag(ctx, vid);

		if (pushed == -1)
			return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
		if (pushed)
			return XDP_ABORTED;
		bytes += 4;
	}
	return forward(in->slot, out_slot, bytes);
}

// Whether the frame is the common IPv4 case every fast path takes, as user space's parser
// defines it (crates/packet/src/parse/mod.rs, `plain_ipv4_transport`): untagged Ethernet, IPv4
// with a 20-byte header whose total length fits the frame, not a fragment, UDP with a length
// that fits the IP payload or TCP with a header that does. With `shift` 4, the same behind
// one VLAN tag (the frame read from its 5th byte, the EtherType after the tag where an
// untagged frame has its own), which user space's general parser takes to the same key but
// for the tag's fields.
static __always_inline int plain_ipv4(struct xdp_md *ctx, __u32 shift)
{
	void *data = (void *)(long)ctx->data + shift;
	void *end = (void *)(long)ctx->data_end;
	__u8 *h = data;
	__u32 frame_len, segment;

	if (data + 42 > end || h[12] != 0x08 || h[13] != 0x00 || h[14] != 0x45)
		return 0;
	frame_len = end - data;
	// A total length under 20 wraps past any frame.
	segment = ((__u32)h[16] << 8 | h[17]) - 20;
	if (frame_len > 0xffff || segment > frame_len - 34 || ((h[20] & 0x3f) | h[21]))
		return 0;
	if (h[23] == 17) {
		__u32 length = (__u32)h[38] << 8 | h[39];

		return length >= 8 && length <= segment;
	}
	if (h[23] == 6) {
		__u32 header_len;

		if (data + 54 > end)
			return 0;
		header_len = (__u32)(h[46] >> 4) * 4;
		return header_len >= 20 && header_len <= segment;
	}
	return 0;
}

// The IPv6 common case (`plain_ipv6_transport`): untagged Ethernet, IPv6 whose payload length
// fits the frame, no extension header, UDP or TCP whose length fits the payload. `shift` as
// for plain_ipv4.
static __always_inline int plain_ipv6(struct xdp_md *ctx, __u32 shift)
{
	void *data = (void *)(long)ctx->data + shift;
	void *end = (void *)(long)ctx->data_end;
	__u8 *h = data;
	__u32 frame_len, segment;

	if (data + 54 > end || h[12] != 0x86 || h[13] != 0xdd || (h[14] >> 4) != 6)
		return 0;
	frame_len = end - data;
	segment = (__u32)h[18] << 8 | h[19];
	if (frame_len > 0xffff || 54 + segment > frame_len)
		return 0;
	if (h[20] == 17) {
		__u32 length;

		if (data + 62 > end || segment < 8)
			return 0;
		length = (__u32)h[58] << 8 | h[59];
		return length >= 8 && length <= segment;
	}
	if (h[20] == 6) {
		__u32 header_len;

		if (data + 74 > end || segment < 20)
			return 0;
		header_len = (__u32)(h[66] >> 4) * 4;
		return header_len >= 20 && header_len <= segment;
	}
	return 0;
}

// TTL down by one in the IPv4 header at `ip`: the checksum's high byte word gains 0x0100,
// the carry folded back (RFC 1624 for this one change, as Linux's ip_decrease_ttl does; the
// same bytes as user space's word update).
static __always_inline void decrement_ttl4(__u8 *ip)
{
	__u32 sum;

	ip[8] -= 1;
	sum = ((__u32)ip[10] << 8 | ip[11]) + 0x0100;
	sum += sum >= 0xffff;
	ip[10] = sum >> 8;
	ip[11] = sum;
}

// Whether a 20-byte IPv4 header (no options) carries a valid checksum: its 16-bit words sum,
// with the carries folded back, to 0xffff (RFC 1071).
static __always_inline int header_checksum_valid(const __u16 *words)
{
	__u32 sum = 0;

#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += words[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff;
}

// What user space's route stage calls a martian (crates/dataplane/src/stage/route.rs,
// martian_v4): 0/8, 127/8, multicast and above.
static __always_inline int martian(__u8 first)
{
	return first == 0 || first == 127 || first >= 224;
}

// What user space's route stage calls an IPv6 martian (martian_v6): unspecified, loopback,
// multicast, IPv4-mapped and link-local.
static __always_inline int martian6(const __u8 *a)
{
	__u8 high = 0;

#pragma unroll
	for (int i = 0; i < 10; i++)
		high |= a[i];
	if (a[0] == 0xff || (a[0] == 0xfe && (a[1] & 0xc0) == 0x80))
		return 1;
	if (high)
		return 0;
	if (a[10] == 0xff && a[11] == 0xff)
		return 1;
	return (a[10] | a[11] | a[12] | a[13] | a[14]) == 0 && a[15] <= 1;
}

// The rewrite of the hop a route names, if it is a gateway whose neighbour is resolved.
static __always_inline struct fp_adjacency *next_hop(__u32 *hop)
{
	if (!hop || *hop == FP_ROUTE_LOCAL)
		return 0;
	return bpf_map_lookup_elem(&adjacencies, hop);
}

// The reason a routed frame whose hop gave no adjacency goes to user space.
static __always_inline __u32 no_adjacency(__u32 *hop)
{
	if (!hop)
		return FP_TO_USER_NO_ROUTE;
	return *hop == FP_ROUTE_LOCAL ? FP_TO_USER_LOCAL : FP_TO_USER_NEXT_HOP;
}

// The IPv4 route entry for the destination at `addr` (network order), 0 for none.
static __always_inline __u32 route4(const __u8 *addr)
{
	__u32 dst = (__u32)addr[0] << 24 | (__u32)addr[1] << 16 | (__u32)addr[2] << 8 | addr[3];
	__u32 key = dst >> 16;
	struct fp_dir24_block *block = bpf_map_lookup_elem(&tbl24, &key);
	__u32 entry;

	if (!block)
		return 0;
	entry = block->entry[(dst >> 8) & 0xff];
	if (entry & FP_DIR24_GROUP) {
		key = entry & FP_DIR24_GROUP_INDEX;
		block = bpf_map_lookup_elem(&tbl8, &key);
		if (!block)
			return 0;
		entry = block->entry[dst & 0xff];
	}
	return entry;
}

// A route entry as a hop value (an `adjacencies` key, FP_ROUTE_LOCAL or FP_ROUTE_ECMP) in
// `*hop`; returns `hop`, or 0 when the entry is no route.
static __always_inline __u32 *hop_of(__u32 entry, __u32 *hop)
{
	if (!(entry & FP_DIR24_VALID))
		return 0;
	if (entry & FP_DIR24_ECMP)
		*hop = FP_ROUTE_ECMP;
	else if ((entry & FP_DIR24_ID) == FP_DIR24_LOCAL)
		*hop = FP_ROUTE_LOCAL;
	else
		*hop = entry & FP_DIR24_ID;
	return hop;
}

static __always_inline int routes_are_ready(void)
{
	__u32 zero = 0;
	__u32 *ready = bpf_map_lookup_elem(&routes_ready, &zero);

	return ready && *ready;
}

// IPv6 as the user-space loop forwards it (`check_ipv6`, with `plain_ipv6_transport`): no
// extension header, UDP or TCP whose length fits the payload, which fits the frame; hop limit
// above 1; neither address a martian; a route to one resolved gateway. The hop limit is
// decremented (IPv6 has no header checksum).
static __always_inline int router6(struct xdp_md *ctx, const struct fp_port *in, __u64 bytes)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 *h = data;
	struct fp_route6_key key = { .prefixlen = 128 };
	struct fp_adjacency *adjacency;
	__u32 *hop;

	if (!plain_ipv6(ctx, 0) || data + 54 > end)
		return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
	if (martian6(h + 22) || martian6(h + 38))
		return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
	if (h[21] <= 1)
		return to_user(ctx, in->slot, FP_TO_USER_TTL, bytes);
	if (!routes_are_ready())
		return to_user(ctx, in->slot, FP_TO_USER_SYNC, bytes);
	__builtin_memcpy(key.addr, h + 38, 16);
	hop = bpf_map_lookup_elem(&routes6, &key);
	adjacency = next_hop(hop);
	if (!adjacency || adjacency->slot >= FP_MAX_PORTS)
		return to_user(ctx, in->slot, no_adjacency(hop), bytes);

	__builtin_memcpy(h, adjacency->dst, 6);
	__builtin_memcpy(h + 6, adjacency->src, 6);
	h[21] -= 1;
	return forward(in->slot, adjacency->slot, bytes);
}

// The router forwards exactly the frames its user-space forwarding loop would forward through
// a current adjacency (crates/dataplane/src/stage/fast_path.rs, `check` and `forward`, with
// the parser's `plain_ipv4_transport`): untagged Ethernet to a unicast MAC; IPv4 with a 20-byte
// header whose total length fits the frame, not a fragment; UDP or TCP whose length fits; a
// valid header checksum, TTL above 1, neither address a martian; a route to one gateway whose
// neighbour is resolved. The rewrite is the same: the adjacency's MACs, TTL down by one and
// the checksum updated as Linux's ip_decrease_ttl does (RFC 1624 for this one change). IPv6
// likewise (router6). Every other frame goes to user space, which decides it as before.
static __always_inline int router(struct xdp_md *ctx, const struct fp_port *in, __u64 bytes)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 *h = data;
	struct fp_adjacency *adjacency;
	__u32 *hop, hop_value;

	if (data + 14 > end || (h[0] & 1))
		return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
	if (h[12] == 0x81 && h[13] == 0x00)
		return to_user(ctx, in->slot, FP_TO_USER_VLAN, bytes);
	if (h[12] == 0x86 && h[13] == 0xdd)
		return router6(ctx, in, bytes);
	// The bound again, for the verifier, which may not carry it out of plain_ipv4.
	if (!plain_ipv4(ctx, 0) || data + 42 > end)
		return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
	if (!header_checksum_valid((const __u16 *)(h + 14)) || martian(h[26]) || martian(h[30]))
		return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
	if (h[22] <= 1)
		return to_user(ctx, in->slot, FP_TO_USER_TTL, bytes);
	if (!routes_are_ready())
		return to_user(ctx, in->slot, FP_TO_USER_SYNC, bytes);
	hop = hop_of(route4(h + 30), &hop_value);
	adjacency = next_hop(hop);
	if (!adjacency || adjacency->slot >= FP_MAX_PORTS)
		return to_user(ctx, in->slot, no_adjacency(hop), bytes);

	__builtin_memcpy(h, adjacency->dst, 6);
	__builtin_memcpy(h + 6, adjacency->src, 6);
	decrement_ttl4(h + 14);
	return forward(in->slot, adjacency->slot, bytes);
}

// One's complement checksums, RFC 1624 eqn. 3 for several changed 16-bit words at once:
// `acc` sums each old word's complement and each new word (csum_change), csum_apply adds the
// old checksum's complement, folds every carry back and complements. One's complement
// addition is associative and commutative, so the result is exactly what user space's word
// by word updates give in any order (crates/packet/src/checksum.rs, update_word).
static __always_inline __u32 csum_change(__u32 acc, __u16 old, __u16 new)
{
	return acc + (__u16)~old + new;
}

static __always_inline __u16 csum_apply(__u16 sum, __u32 acc)
{
	acc += (__u16)~sum;
	acc = (acc & 0xffff) + (acc >> 16);
	acc = (acc & 0xffff) + (acc >> 16);
	return ~acc;
}

static __always_inline __u16 read16(const __u8 *at)
{
	return (__u16)at[0] << 8 | at[1];
}

static __always_inline void write16(__u8 *at, __u16 value)
{
	at[0] = value >> 8;
	at[1] = value;
}

// Writes the first `words` 16-bit words of `new` over those at `at`; returns `acc` with
// their changes added (csum_change).
static __always_inline __u32 change_words(__u8 *at, const __u8 *new, int words, __u32 acc)
{
#pragma unroll
	for (int i = 0; i < words; i++) {
		acc = csum_change(acc, read16(at + 2 * i), read16(new + 2 * i));
		at[2 * i] = new[2 * i];
		at[2 * i + 1] = new[2 * i + 1];
	}
	return acc;
}

#define FP_FLOW_SET_IP (FP_FLOW_SET_IP_SRC | FP_FLOW_SET_IP_DST)
#define FP_FLOW_SET_L4 (FP_FLOW_SET_L4_SRC | FP_FLOW_SET_L4_DST)

// Applies a cached flow's rewrites (all but the tag, pushed already) to a plain frame whose IP
// header starts at `l2`, as user space's actions do (crates/dataplane/src/app/openflow/
// action.rs): new addresses update the IPv4 header checksum and the TCP or UDP checksum (whose
// pseudo-header covers them), new ports the latter; a UDP checksum of 0 (none) stays 0 and a
// computed 0 is sent as 0xffff (RFC 768), over IPv6 too, as user space does; the TTL or hop
// limit goes down by one (checked above 1 before). Returns 0, or -1 when a header is not
// within the frame (the plain parse has bounded them all: cannot happen).
static __always_inline int apply_flow(struct xdp_md *ctx, const struct fp_flow *flow, int ipv4,
				      __u32 l2)
{
	__u8 *h = (void *)(long)ctx->data;
	__u8 *end = (void *)(long)ctx->data_end;
	__u8 *l3 = h + l2, *l4, *sum_at;
	__u16 ops = flow->ops, sum;
	__u32 addresses = 0, ports = 0;
	int udp;

	if (ipv4) {
		if (l3 + 20 > end)
			return -1;
		l4 = l3 + 20;
		udp = l3[9] == 17;
		if (ops & FP_FLOW_SET_IP_SRC)
			addresses = change_words(l3 + 12, flow->ip_src, 2, addresses);
		if (ops & FP_FLOW_SET_IP_DST)
			addresses = change_words(l3 + 16, flow->ip_dst, 2, addresses);
		if (ops & FP_FLOW_SET_IP)
			write16(l3 + 10, csum_apply(read16(l3 + 10), addresses));
		if (ops & FP_FLOW_DEC_TTL)
			decrement_ttl4(l3);
	} else {
		if (l3 + 40 > end)
			return -1;
		l4 = l3 + 40;
		udp = l3[6] == 17;
		if (ops & FP_FLOW_SET_IP_SRC)
			addresses = change_words(l3 + 8, flow->ip_src, 8, addresses);
		if (ops & FP_FLOW_SET_IP_DST)
			addresses = change_words(l3 + 24, flow->ip_dst, 8, addresses);
		if (ops & FP_FLOW_DEC_TTL)
			l3[7] -= 1;
	}
	if (ops & (FP_FLOW_SET_IP | FP_FLOW_SET_L4)) {
		if (l4 + (udp ? 8 : 20) > end)
			return -1;
		sum_at = l4 + (udp ? 6 : 16);
		if (ops & FP_FLOW_SET_L4_SRC)
			ports = csum_change(ports, read16(l4), flow->l4_src);
		if (ops & FP_FLOW_SET_L4_DST)
			ports = csum_change(ports, read16(l4 + 2), flow->l4_dst);
		sum = read16(sum_at);
		if (!udp || sum) {
			sum = csum_apply(sum, addresses + ports);
			write16(sum_at, udp && !sum ? 0xffff : sum);
		}
		if (ops & FP_FLOW_SET_L4_SRC)
			write16(l4, flow->l4_src);
		if (ops & FP_FLOW_SET_L4_DST)
			write16(l4 + 2, flow->l4_dst);
	}
	if (ops & FP_FLOW_SET_DST)
		__builtin_memcpy(h, flow->dst, 6);
	if (ops & FP_FLOW_SET_SRC)
		__builtin_memcpy(h + 6, flow->src, 6);
	return 0;
}

static __always_inline void count_flow(const struct fp_flow *flow, __u64 bytes)
{
	struct fp_count *count = bpf_map_lookup_elem(&flow_counts, &flow->result);

	if (count) {
		__sync_fetch_and_add(&count->packets, 1);
		__sync_fetch_and_add(&count->bytes, bytes);
	}
}

// The key user space's parser makes of a plain frame (plain_ipv4 or plain_ipv6 with `shift`
// 0, or 4 behind one tag, whose fields the caller adds) in `key`; returns 1 for IPv4, 0 for
// IPv6, -1 for a frame that is not plain.
static __always_inline int plain_key(struct xdp_md *ctx, __u32 shift, struct fp_flow_key *key)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 *h = data + shift;

	if (data + 12 > end)
		return -1;
	__builtin_memcpy(key->dst_mac, data, 6);
	__builtin_memcpy(key->src_mac, data + 6, 6);
	if (plain_ipv4(ctx, shift) && (void *)(h + 42) <= end) {
		key->ip_src[10] = 0xff;
		key->ip_src[11] = 0xff;
		__builtin_memcpy(key->ip_src + 12, h + 26, 4);
		key->ip_dst[10] = 0xff;
		key->ip_dst[11] = 0xff;
		__builtin_memcpy(key->ip_dst + 12, h + 30, 4);
		key->ethertype = 0x0800;
		key->ip_tos = h[15];
		key->ip_proto = h[23];
		key->l4_src = (__u16)h[34] << 8 | h[35];
		key->l4_dst = (__u16)h[36] << 8 | h[37];
		return 1;
	}
	if (plain_ipv6(ctx, shift) && (void *)(h + 58) <= end) {
		__builtin_memcpy(key->ip_src, h + 22, 16);
		__builtin_memcpy(key->ip_dst, h + 38, 16);
		key->ethertype = 0x86dd;
		// The traffic class: the 8 bits after the version.
		key->ip_tos = (__u8)(h[14] << 4 | h[15] >> 4);
		key->ip_proto = h[20];
		key->l4_src = (__u16)h[54] << 8 | h[55];
		key->l4_dst = (__u16)h[56] << 8 | h[57];
		return 0;
	}
	return -1;
}

// OpenFlow: the frames of flows user space's exact-match cache holds and the kernel can carry
// out (crates/dataplane/src/app/openflow/kernel.rs decides which: one output or none, after
// MAC, address and port rewrites, a TTL decrement, and an 802.1Q tag pushed, popped or given
// a new TCI). The key is the one user space's parser makes, built here only for the frames
// whose parse is the plain one (IPv4 or IPv6 with UDP or TCP), untagged or behind one 802.1Q
// tag: for those the two agree field for field; every other frame, and every flow not in
// `flows` under the current generation, goes to user space. A hit, forwarded or dropped, is
// counted in its stored result's `flow_counts` (the bytes as they arrived, as user space
// counts them), which user space folds into the flows behind it.
static __always_inline int openflow(struct xdp_md *ctx, const struct fp_port *in, __u64 bytes)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 *h = data;
	struct fp_flow_key key = {};
	struct fp_flow *flow;
	__u32 zero = 0, *generation;
	int ipv4, tagged, done, failed;
	__u16 ops;

	if (data + 18 > end)
		return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
	tagged = h[12] == 0x81 && h[13] == 0x00;
	if (tagged) {
		ipv4 = plain_key(ctx, 4, &key);
		data = (void *)(long)ctx->data;
		end = (void *)(long)ctx->data_end;
		h = data;
		if (data + 18 > end)
			return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
		// The TCI without its DEI bit: priority and id, as user space's key has them.
		key.vlan = ((__u16)h[14] << 8 | h[15]) & 0xefff;
		key.flags = FP_KEY_VLAN;
	} else {
		ipv4 = plain_key(ctx, 0, &key);
	}
	if (ipv4 < 0) {
		int vlan = tagged || (h[12] == 0x88 && h[13] == 0xa8);

		return to_user(ctx, in->slot, vlan ? FP_TO_USER_VLAN : FP_TO_USER_OTHER, bytes);
	}
	key.in_port = in->slot;

	flow = bpf_map_lookup_elem(&flows, &key);
	generation = bpf_map_lookup_elem(&flow_generation, &zero);
	if (!flow || !generation || flow->generation != *generation)
		return to_user(ctx, in->slot, FP_TO_USER_FLOW_MISS, bytes);
	ops = flow->ops;
	if (ops & FP_FLOW_DROP) {
		count_flow(flow, bytes);
		return dropped(in->slot, bytes);
	}
	// The tag operations belong to the keys they were made for (FP_KEY_VLAN or not).
	if (flow->out_slot >= FP_MAX_PORTS ||
	    (ops & (tagged ? FP_FLOW_PUSH_VLAN : FP_FLOW_POP_VLAN | FP_FLOW_SET_TCI)))
		return to_user(ctx, in->slot, FP_TO_USER_FLOW_MISS, bytes);
	// User space drops what would leave with 0 and counts it.
	if (ops & FP_FLOW_DEC_TTL) {
		__u8 *ip = h + (tagged ? 18 : 14);

		if ((void *)(ip + 9) > end)
			return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
		if (ipv4 ? ip[8] <= 1 : ip[7] <= 1)
			return to_user(ctx, in->slot, FP_TO_USER_TTL, bytes);
	}
	// The tag first, while the frame is still unchanged for user space should it not fit;
	// the rewrites then find the IP header where the tag left it.
	if (ops & FP_FLOW_PUSH_VLAN) {
		done = push_tag(ctx, flow->vlan_tci);
		failed = done || apply_flow(ctx, flow, ipv4, 18);
	} else if (ops & FP_FLOW_POP_VLAN) {
		done = pop_tag(ctx);
		failed = done || apply_flow(ctx, flow, ipv4, 14);
	} else if (tagged) {
		done = 0;
		if (ops & FP_FLOW_SET_TCI) {
			__u16 tci = ((__u16)h[14] << 8 | h[15]) & flow->vlan_keep;

			write16(h + 14, tci | flow->vlan_tci);
		}
		failed = apply_flow(ctx, flow, ipv4, 18);
	} else {
		done = 0;
		failed = apply_flow(ctx, flow, ipv4, 14);
	}
	if (done == -1)
		return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
	if (failed)
		return XDP_ABORTED;
	count_flow(flow, bytes);
	return forward(in->slot, flow->out_slot, ctx->data_end - ctx->data);
}

SEC("xdp")
int fast_path(struct xdp_md *ctx)
{
	__u32 ifindex = ctx->ingress_ifindex;
	__u64 bytes = ctx->data_end - ctx->data;
	struct fp_port *in = bpf_map_lookup_elem(&ports, &ifindex);

	if (!in || in->app == FP_APP_NONE || in->slot >= FP_MAX_PORTS)
		return XDP_PASS;
	switch (in->app) {
	case FP_APP_XCONNECT:
		return forward(in->slot, in->peer, bytes);
	case FP_APP_BRIDGE:
		return bridge(ctx, in, bytes);
	case FP_APP_ROUTER:
		return router(ctx, in, bytes);
	case FP_APP_OPENFLOW:
		return openflow(ctx, in, bytes);
	default:
		return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
	}
}
