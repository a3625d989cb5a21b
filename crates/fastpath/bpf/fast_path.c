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

// Router: the IPv4 FIB as user space has it, prefix -> hop id (an `adjacencies` key) or
// FP_ROUTE_LOCAL / FP_ROUTE_ECMP. Every route is here, also those the kernel cannot forward
// by, so that a longest match never falls through to a shorter prefix user space would not
// pick. Its size is set at load time.
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fp_route_key);
	__type(value, __u32);
} routes4 SEC(".maps");

// Router: hop id -> the rewrite of a gateway whose neighbour is resolved. A hop without an
// entry (unresolved, a connected subnet, the router itself) goes to user space.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FP_MAX_ADJACENCIES);
	__type(key, __u32);
	__type(value, struct fp_adjacency);
} adjacencies SEC(".maps");

// Router: 1 while `routes4` equals user space's FIB; 0 while a route load is being mirrored,
// when every routed frame goes to user space (never a stale decision, never a stall).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} routes_ready SEC(".maps");

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
		// Pop: the addresses move 4 bytes towards the payload over the tag.
		__u8 macs_copy[12];

		__builtin_memcpy(macs_copy, eth, 12);
		if (bpf_xdp_adjust_head(ctx, 4))
			return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
		data = (void *)(long)ctx->data;
		end = (void *)(long)ctx->data_end;
		if (data + 12 > end)
			return XDP_ABORTED;
		__builtin_memcpy(data, macs_copy, 12);
		bytes -= 4;
	} else if (!tagged && out_tagged) {
		// Push: the addresses move 4 bytes into the headroom, the tag follows them.
		__u8 macs_copy[12];

		if (bpf_xdp_adjust_head(ctx, -4))
			return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
		data = (void *)(long)ctx->data;
		end = (void *)(long)ctx->data_end;
		if (data + 18 > end)
			return XDP_ABORTED;
		__builtin_memcpy(macs_copy, data + 4, 12);
		__builtin_memcpy(data, macs_copy, 12);
		*(__be16 *)(data + 12) = bpf_htons(ETH_P_8021Q);
		*(__be16 *)(data + 14) = bpf_htons(vid);
		bytes += 4;
	}
	return forward(in->slot, out_slot, bytes);
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

// The router forwards exactly the frames its user-space forwarding loop would forward through
// a current adjacency (crates/dataplane/src/stage/fast_path.rs, `check` and `forward`, with
// the parser's `plain_ipv4_transport`): untagged Ethernet to a unicast MAC; IPv4 with a 20-byte
// header whose total length fits the frame, not a fragment; UDP or TCP whose length fits; a
// valid header checksum, TTL above 1, neither address a martian; a route to one gateway whose
// neighbour is resolved. The rewrite is the same: the adjacency's MACs, TTL down by one and
// the checksum updated as Linux's ip_decrease_ttl does (RFC 1624 for this one change). Every
// other frame goes to user space, which decides it as before.
static __always_inline int router(struct xdp_md *ctx, const struct fp_port *in, __u64 bytes)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 *h = data;
	struct fp_route_key key = { .prefixlen = 32 };
	struct fp_adjacency *adjacency;
	__u32 *hop, *ready, zero = 0;
	__u32 total_len, segment, frame_len, sum;

	if (data + 42 > end)
		return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
	if (h[12] == 0x81 && h[13] == 0x00)
		return to_user(ctx, in->slot, FP_TO_USER_VLAN, bytes);
	if (h[12] != 0x08 || h[13] != 0x00 || h[14] != 0x45 || (h[0] & 1))
		return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
	frame_len = end - data;
	total_len = (__u32)h[16] << 8 | h[17];
	// A total length under 20 wraps past any frame.
	segment = total_len - 20;
	if (frame_len > 0xffff || segment > frame_len - 34 || ((h[20] & 0x3f) | h[21]))
		return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
	if (h[23] == 17) {
		__u32 length = (__u32)h[38] << 8 | h[39];

		if (length < 8 || length > segment)
			return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
	} else if (h[23] == 6) {
		__u32 header_len;

		if (data + 54 > end)
			return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
		header_len = (__u32)(h[46] >> 4) * 4;
		if (header_len < 20 || header_len > segment)
			return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
	} else {
		return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
	}
	if (!header_checksum_valid((const __u16 *)(h + 14)) || martian(h[26]) || martian(h[30]))
		return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
	if (h[22] <= 1)
		return to_user(ctx, in->slot, FP_TO_USER_TTL, bytes);
	ready = bpf_map_lookup_elem(&routes_ready, &zero);
	if (!ready || !*ready)
		return to_user(ctx, in->slot, FP_TO_USER_SYNC, bytes);
	__builtin_memcpy(key.addr, h + 30, 4);
	hop = bpf_map_lookup_elem(&routes4, &key);
	if (!hop)
		return to_user(ctx, in->slot, FP_TO_USER_NO_ROUTE, bytes);
	if (*hop == FP_ROUTE_LOCAL)
		return to_user(ctx, in->slot, FP_TO_USER_LOCAL, bytes);
	adjacency = bpf_map_lookup_elem(&adjacencies, hop);
	if (!adjacency || adjacency->slot >= FP_MAX_PORTS)
		return to_user(ctx, in->slot, FP_TO_USER_NEXT_HOP, bytes);

	__builtin_memcpy(h, adjacency->dst, 6);
	__builtin_memcpy(h + 6, adjacency->src, 6);
	// TTL down by one: the checksum's high byte word gains 0x0100, the carry folded back.
	h[22] -= 1;
	sum = ((__u32)h[24] << 8 | h[25]) + 0x0100;
	sum += sum >= 0xffff;
	h[24] = sum >> 8;
	h[25] = sum;
	return forward(in->slot, adjacency->slot, bytes);
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
	default:
		return to_user(ctx, in->slot, FP_TO_USER_OTHER, bytes);
	}
}
