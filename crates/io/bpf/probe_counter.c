// The probe counter (XdpProbeCounter, src/afxdp/probe_counter.rs): counts the frames that carry
// one trial's probes and drops them; foreign frames are counted and passed to the stack; with
// sampling, one probe in `sample_mask + 1` is also redirected to its queue's AF_XDP socket;
// with binning, every probe's latency is counted in a histogram here, in the kernel.
//
// Where the probe sits is known when the trial's template is built, not when this is compiled:
// user space sets the read-only globals below before the program is loaded (aya's set_global).
// The map holding them is frozen, so the verifier reads them as constants: the offsets are
// fixed offsets of the bounds-checked packet pointer, and the branches of a program without
// sampling are removed before it runs.
//
// Built by crates/io/build.rs with `clang -target bpf`; loaded with aya.

#define COUNTING_CLASSES 3
#include "counting.h"
#include <bpf/bpf_endian.h>

// The classes (entries of `counters`), as XdpProbeCounter reads them.
#define PROBES 0
#define STALE 1
#define FOREIGN 2

// The 4 bytes every probe starts with, as the u32 they make in memory.
const volatile __u32 signature = 0;
// Offsets from the start of the Ethernet header: the signature; the TX timestamp (big-endian
// u64); the sequence number (big-endian u32, read when sampling).
const volatile __u32 signature_at = 0;
const volatile __u32 timestamp_at = 0;
const volatile __u32 sequence_at = 0;
// Bytes a frame needs for every field above that is read (at most 1518, checked by user space).
const volatile __u32 probe_end = 0;
// Whether chosen probes go to the sockets, and which: those whose sequence number has no bit
// of the mask set (one in mask + 1, a power of two).
const volatile __u32 sampling = 0;
const volatile __u32 sample_mask = 0;
// Whether every probe's latency (the kernel's clock now minus the probe's timestamp, which the
// in-kernel sender stamped with the same clock as the frame left) is counted in `latencies`.
const volatile __u32 binning = 0;

// The latency histogram's buckets (LATENCY_BUCKETS of probe_counter.rs): values below
// 2^SUB_BITS nanoseconds exactly, above that 2^SUB_BITS buckets per power of two, each 1/32
// of its power wide (HdrHistogram's log-linear layout; values up to 2^64 ns).
#define SUB_BITS 5
#define SUB (1 << SUB_BITS)
#define LATENCY_BUCKETS (SUB + (64 - SUB_BITS) * SUB)

// Per CPU, the probes counted per latency bucket.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LATENCY_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} latencies SEC(".maps");

// The bucket of `ns` (latency_bucket in probe_counter.rs is its twin): the highest bit set,
// found in six halving steps (BPF has no count-leading-zeros), then the next SUB_BITS bits.
static __always_inline __u32 bucket(__u64 ns)
{
	if (ns < SUB)
		return ns;
	__u64 v = ns;
	__u32 top = 0;
	if (v >> 32) { v >>= 32; top += 32; }
	if (v >> 16) { v >>= 16; top += 16; }
	if (v >> 8) { v >>= 8; top += 8; }
	if (v >> 4) { v >>= 4; top += 4; }
	if (v >> 2) { v >>= 2; top += 2; }
	if (v >> 1) { top += 1; }
	return SUB + (top - SUB_BITS) * SUB + ((ns >> (top - SUB_BITS)) & (SUB - 1));
}

// Counts the latency of a probe stamped at `stamp` (a clock that went backwards counts as 0).
static __always_inline void bin(__u64 stamp)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 index = bucket(now > stamp ? now - stamp : 0);
	__u64 *count = bpf_map_lookup_elem(&latencies, &index);

	if (count)
		*count += 1;
}

// One u64: the lowest timestamp of a probe of this trial (XdpProbeCounter::set_floor).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} floors SEC(".maps");

// The samples' sockets (one slot without sampling).
#include "xsks.h"

SEC("xdp.frags")
int probe_counter(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 key = 0;

	// Too short for the probe, or another signature: foreign, passed on as if no program were
	// there (the lab kernels' neighbour discovery).
	if (data + probe_end > data_end)
		return count_and_return(ctx, FOREIGN, XDP_PASS);
	if (*(__u32 *)(data + signature_at) != signature)
		return count_and_return(ctx, FOREIGN, XDP_PASS);
	__u64 stamp = bpf_be64_to_cpu(*(__u64 *)(data + timestamp_at));
	__u32 unsampled = 1;
	if (sampling)
		unsampled = bpf_ntohl(*(__u32 *)(data + sequence_at)) & sample_mask;
	// A probe stamped before the floor is a late frame of an earlier trial.
	__u64 *lowest = bpf_map_lookup_elem(&floors, &key);
	if (!lowest || stamp < *lowest)
		return count_and_return(ctx, STALE, XDP_DROP);
	if (binning)
		bin(stamp);
	if (!sampling || unsampled)
		return count_and_return(ctx, PROBES, XDP_DROP);
	// XDP_REDIRECT, or XDP_DROP when the queue has no socket: counted either way.
	return count_and_return(ctx, PROBES, bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_DROP));
}
