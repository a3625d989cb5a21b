// The counting both counting programs end with (sink.c, probe_counter.c): a per-CPU array of
// packet and byte counts, one entry per class of frame. User space sums the CPUs' values when it
// reads them (XdpSink::class_counts); a CPU's entry is only written by that CPU, with preemption
// off, so no atomics are needed.
//
// Define COUNTING_CLASSES (the entries) before including this.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

// One CPU's counts of one class, as XdpSink reads them (COUNTERS_LEN bytes).
struct counts {
	__u64 packets;
	// Frame bytes without FCS: bpf_xdp_get_buff_len, fragments of a multi-buffer frame
	// included.
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COUNTING_CLASSES);
	__type(key, __u32);
	__type(value, struct counts);
} counters SEC(".maps");

// Counts the frame in entry `class` and returns `action`.
static __always_inline int count_and_return(struct xdp_md *ctx, __u32 class, int action)
{
	struct counts *counts = bpf_map_lookup_elem(&counters, &class);

	// A lookup of an entry the map has cannot fail; the verifier wants the check all the same.
	if (counts) {
		counts->packets += 1;
		counts->bytes += bpf_xdp_get_buff_len(ctx);
	}
	return action;
}
