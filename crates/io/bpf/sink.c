// The XDP counting sink (XdpSink, src/afxdp/sink.rs): every frame arriving on the interface is
// counted (packets and bytes, per CPU) and dropped, before any socket, skb or copy.
//
// Built by crates/io/build.rs with `clang -target bpf`; loaded with aya. Frags-aware
// (xdp.frags), so that it attaches to an interface whose MTU is larger than a page: a jumbo
// frame is then one buffer and its fragments, all counted.

#define COUNTING_CLASSES 1
#include "counting.h"

SEC("xdp.frags")
int sink(struct xdp_md *ctx)
{
	return count_and_return(ctx, 0, XDP_DROP);
}
