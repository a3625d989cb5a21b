// The XSKMAP of the AF_XDP sockets a program redirects frames to: slot q is receive queue q's
// socket, and user space sizes it for the interface's queues when it loads the program.
// xsk_redirect.c sends every frame there, probe_counter.c the probes it samples.

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");
