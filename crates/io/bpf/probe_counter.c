// The probe counter (XdpProbeCounter, src/afxdp/probe_counter.rs): counts the frames that carry
// one trial's probes and drops them; foreign frames are counted and passed to the stack; with
// sampling, one probe in `sample_mask + 1` is also redirected to its queue's AF_XDP socket.
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
	if (!sampling || unsampled)
		return count_and_return(ctx, PROBES, XDP_DROP);
	// XDP_REDIRECT, or XDP_DROP when the queue has no socket: counted either way.
	return count_and_return(ctx, PROBES, bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_DROP));
}
