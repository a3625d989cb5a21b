// The XDP redirect DuT (XdpRedirect, src/afxdp/redirect.rs): every frame arriving on the
// interface leaves by another, `target_ifindex`, which user space sets when it loads the
// program (a read-only global). bpf_redirect with no flags returns XDP_REDIRECT; the frame
// leaves when the driver flushes after the program (BPF_F_INGRESS would inject it into the
// target's own receive path instead).
//
// Built by crates/io/build.rs with `clang -target bpf`; loaded with aya.

#include "xdp_twins.h"

const volatile __u32 target_ifindex = 0;

static __always_inline int to_target(struct xdp_md *ctx)
{
	return bpf_redirect(target_ifindex, 0);
}

XDP_TWINS(redirect, to_target)
