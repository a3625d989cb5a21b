//! Compiles the fast path's XDP program (bpf/fast_path.c) into `$OUT_DIR/fast_path.o`, which
//! the crate embeds (see wirespeed-bpf-build for the compiler and its flags).

fn main() {
    wirespeed_bpf_build::compile(&["fast_path"], &["fast_path.h"]);
}
