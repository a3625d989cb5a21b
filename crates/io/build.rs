//! Compiles the XDP programs of the AF_XDP ports and the tester (bpf/*.c) into
//! `$OUT_DIR/NAME.o`, which the crate embeds (see wirespeed-bpf-build for the compiler and its
//! flags).

fn main() {
    wirespeed_bpf_build::compile(
        &["xsk_redirect", "redirect", "sink", "probe_counter", "live"],
        &["xdp_twins.h", "counting.h", "xsks.h"],
    );
}
