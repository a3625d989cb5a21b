// The programs that attach to any interface (xsk_redirect.c, redirect.c) only redirect and
// never read past a frame's first buffer, so they are frags-aware (section xdp.frags): the
// kernel then attaches them to an interface whose MTU is larger than a page, a jumbo frame
// being one buffer and its fragments. Kernels before 5.18 refuse that flag, so each is there
// twice: NAME (xdp.frags) and NAME_single (plain xdp), which the loader falls back to
// (src/afxdp/object.rs, load_twin).

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

// Defines XDP programs NAME and NAME_single, both returning BODY(ctx).
#define XDP_TWINS(name, body)                        \
	SEC("xdp.frags")                             \
	int name(struct xdp_md *ctx)                 \
	{                                            \
		return body(ctx);                    \
	}                                            \
	SEC("xdp")                                   \
	int name##_single(struct xdp_md *ctx)        \
	{                                            \
		return body(ctx);                    \
	}
