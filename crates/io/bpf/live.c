// The in-kernel live-frames generator (XdpLiveGenerator, src/afxdp/live.rs), run by
// BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES: each run writes one flow's head over the
// frame and redirects it out of the target interface. A paced generator first waits until the
// frame is due (src/afxdp/live_pacing.rs says why and how).
//
// What varies per generator (the target, the flows, the head's length, the pacing) is set by
// user space as read-only globals when it loads the program. The verifier reads them as
// constants: the head is copied with fixed offsets and the branches a generator does not take
// (random or round robin, paced or not, the words of a shorter head) are removed before it runs.
//
// Built by crates/io/build.rs with `clang -target bpf`; loaded with aya.

#include <linux/bpf.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

// MAX_LIVE_HEAD of live.rs: the longest head a flow writes.
#define MAX_HEAD 128
// GAP_FRACTION_BITS of live_pacing.rs: gaps and the schedule are nanoseconds x 2^16.
#define GAP_FRACTION_BITS 16
// The longest a frame waits in one bpf_loop: its limit of 2^23 iterations, each a helper call
// that reads the clock (measured: gaps of 0.5 s kept; MAX_PACING_GAP is well inside it).
#define SPIN_ITERATIONS (1 << 23)

// The interface frames leave by.
const volatile __u32 target_ifindex = 0;
// Flows in `heads` (1..=65536), and whether a frame's flow is drawn at random (else the next in
// turn per CPU).
const volatile __u32 flow_count = 1;
const volatile __u32 random_order = 0;
// Bytes of each head: even, 2..=MAX_HEAD, at most the frame's.
const volatile __u32 head_len = 2;
// Whether frames are paced, and the gaps' count - 1 (a power of two - 1).
const volatile __u32 paced = 0;
const volatile __u32 gap_mask = 0;
// The longest a run spins for its frame (ns); a frame due later ends the run without one (a
// yield), so that the kernel may run other work on this core between runs. 0: spin the whole
// gap. (See `yield_ns` in live_pacing.rs.)
const volatile __u64 max_spin_ns = 0;
// Offset of the probe's TX timestamp (a big-endian u64) that each frame gets the kernel's
// clock (bpf_ktime_get_ns) written into as it leaves, for the probe counter to bin its latency
// on arrival; 0: frames are not stamped (the Ethernet header is never a probe's place).
const volatile __u32 stamp_at = 0;

// In 8-byte words, so that the copy loads whole words (of bytes, clang would assemble each word
// from eight byte loads: 27 instructions a word instead of 2).
struct head {
	__u64 words[MAX_HEAD / 8];
};

// Per flow, the frame's first head_len bytes (the rest of the entry is unused).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct head);
} heads SEC(".maps");

// Round robin: the next flow of this CPU.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} next_flow SEC(".maps");

// The pacing's state, as live_pacing.rs reads and resets it (STATE_SIZE bytes, these offsets).
struct pace_state {
	__u64 start;        // when the first frame was due (0: when the program first runs)
	__u64 next;         // the next frame's due time after start, ns x 2^16
	__u64 index;        // the next gap's index
	__u64 tolerance;    // lateness (ns) beyond which a frame is late
	__u64 late;         // frames handed out late
	__u64 streak;       // late frames since the last one on time
	__u64 last;         // when the last frame was handed out
	__u64 max_lateness; // ns
	__u64 deadline;     // ns after start: frames due later are not sent
	__u64 unsent;       // frames not sent for the deadline
	__u64 frames;       // frames of this send (0: every run is one), the rest of the runs spare
	__u64 handled;      // frames sent or not sent for the deadline so far
	__u64 yields;       // runs that spun max_spin_ns and ended without a frame
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pace_state);
} pacing SEC(".maps");

// Gaps between consecutive frames, ns x 2^16, used in turn (sized when loaded).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} gaps SEC(".maps");

// bpf_loop's callback: stop (1) once the clock has reached the due time `ctx` points at.
static long spin(__u32 iteration, void *ctx)
{
	__u64 *due = ctx;

	return bpf_ktime_get_ns() >= *due;
}

// Waits until the frame is due and moves the schedule on by the next gap. Returns XDP_DROP
// for a frame past the send's deadline (not sent, counted), for a yield and for a spare run
// after the send's frames, else 0. Without its state (never: the maps are arrays with the key
// in range) the frame is sent unpaced.
static __always_inline int pace(void)
{
	__u32 key = 0;
	struct pace_state *state = bpf_map_lookup_elem(&pacing, &key);

	if (!state)
		return 0;
	if (state->frames && state->handled >= state->frames)
		return XDP_DROP;
	// A start of 0: the schedule starts with this frame (the kernel's set-up of the call
	// before the first run takes milliseconds, which would make the first frames late).
	if (state->start == 0)
		state->start = bpf_ktime_get_ns();
	__u64 due = state->start + (state->next >> GAP_FRACTION_BITS);
	__u64 now = bpf_ktime_get_ns();
	// Past the deadline: not sent, counted, and the run ends at once.
	if (now - state->start > state->deadline) {
		state->unsent += 1;
		state->handled += 1;
		return XDP_DROP;
	}
	if (max_spin_ns && now < due && due - now > max_spin_ns) {
		// Due later than one spin: spin that long and end the run without a frame.
		__u64 until = now + max_spin_ns;
		bpf_loop(SPIN_ITERATIONS, spin, &until, 0);
		state->yields += 1;
		return XDP_DROP;
	}
	state->handled += 1;
	__u64 streak = 0;
	if (now < due) {
		// Early: spin until due; the frame leaves at its due time, on time.
		state->last = due;
		bpf_loop(SPIN_ITERATIONS, spin, &due, 0);
	} else {
		// Due or late: the largest lateness is kept.
		state->last = now;
		__u64 lateness = now - due;
		if (lateness > state->max_lateness)
			state->max_lateness = lateness;
		if (lateness > state->tolerance) {
			// Late: counted, the run of late frames grows, and the schedule starts
			// again from now, so the frames after it keep their gaps.
			state->late += 1;
			state->next = (now - state->start) << GAP_FRACTION_BITS;
			streak = state->streak + 1;
		}
	}
	state->streak = streak;
	__u32 index = state->index;
	state->index = (index + 1) & gap_mask;
	__u64 *gap = bpf_map_lookup_elem(&gaps, &index);
	if (gap)
		state->next += *gap;
	return 0;
}

SEC("xdp.frags")
int live(struct xdp_md *ctx)
{
	__u32 flow;

	if (paced && pace() == XDP_DROP)
		return XDP_DROP;
	if (random_order) {
		flow = bpf_get_prandom_u32() % flow_count;
	} else {
		__u32 key = 0;
		__u64 *next = bpf_map_lookup_elem(&next_flow, &key);

		if (!next)
			goto send;
		flow = *next;
		*next = flow + 1 < flow_count ? flow + 1 : 0;
	}
	struct head *head = bpf_map_lookup_elem(&heads, &flow);
	if (!head)
		goto send;
	void *data = (void *)(long)ctx->data;
	// Read once: a volatile global is loaded again at every use, and the copy's branches on it
	// are the ones the verifier removes.
	__u32 len = head_len;
	// The verifier (and a program that shortened the frame) needs the bounds check.
	if (data + len > (void *)(long)ctx->data_end)
		goto send;
	// The head in 8-byte words, then 2-byte ones (its length is even).
#pragma unroll
	for (__u32 word = 0; word < MAX_HEAD / 8; word++) {
		if (len < 8 * word + 8)
			break;
		((__u64 *)data)[word] = head->words[word];
	}
#pragma unroll
	for (__u32 half = 0; half < 3; half++) {
		__u32 at = (len & ~7) + 2 * half;
		if (len < at + 2)
			break;
		*(__u16 *)(data + at) = *(__u16 *)((__u8 *)head->words + at);
	}
send:
	if (stamp_at) {
		__u32 at = stamp_at;
		void *frame = (void *)(long)ctx->data;
		// Bounded for the verifier (user space checks it lies inside the frame).
		if (at <= 4096 - 8 && frame + at + 8 <= (void *)(long)ctx->data_end)
			*(__u64 *)(frame + at) = bpf_cpu_to_be64(bpf_ktime_get_ns());
	}
	return bpf_redirect(target_ifindex, 0);
}
