// The XDP program of an AF_XDP port (XdpProgram, src/afxdp/program.rs): every frame goes to
// the AF_XDP socket of its receive queue, the slot of the queue in the XSKMAP; a queue without
// a socket makes bpf_redirect_map return its fallback, XDP_PASS: such frames go to the stack.
//
// Built by crates/io/build.rs with `clang -target bpf`; loaded with aya.

#include "xdp_twins.h"
#include "xsks.h"

static __always_inline int to_socket(struct xdp_md *ctx)
{
	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

XDP_TWINS(xsk_redirect, to_socket)
