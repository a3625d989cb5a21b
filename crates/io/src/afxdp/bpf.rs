//! The `bpf(2)` system call with nothing but `libc`: the instruction encoding, the attribute
//! layouts we use, the loader, and the few map operations the XDP programs of this crate need.
//!
//! Every XDP program wirespeed runs is a handful of instructions written in Rust (`program`,
//! `live`, `sink`) rather than an object file: no compiler, no BTF, no BPF library. This module
//! is the one place that knows how to encode them and talk to the kernel about them, so each
//! program's file holds only its instructions and the reasons for them.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::program::ProgramError;

// bpf(2) commands, map and program types, attach type and helper numbers (linux/bpf.h).
pub(crate) const BPF_MAP_CREATE: libc::c_long = 0;
pub(crate) const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
pub(crate) const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
pub(crate) const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
pub(crate) const BPF_PROG_LOAD: libc::c_long = 5;
pub(crate) const BPF_PROG_TEST_RUN: libc::c_long = 10;
pub(crate) const BPF_BTF_LOAD: libc::c_long = 18;
pub(crate) const BPF_LINK_CREATE: libc::c_long = 28;
pub(crate) const BPF_MAP_TYPE_ARRAY: u32 = 2;
pub(crate) const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
pub(crate) const BPF_PROG_TYPE_XDP: u32 = 6;
pub(crate) const BPF_XDP: u32 = 37;
pub(crate) const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
pub(crate) const BPF_FUNC_KTIME_GET_NS: i32 = 5;
pub(crate) const BPF_FUNC_GET_PRANDOM_U32: i32 = 7;
pub(crate) const BPF_FUNC_REDIRECT: i32 = 23;
pub(crate) const BPF_FUNC_LOOP: i32 = 181;
pub(crate) const BPF_PSEUDO_MAP_FD: u8 = 1;
/// `src_reg` of a 64-bit immediate load whose `imm` is the offset of a subprogram (a
/// `bpf_loop` callback) from the instruction after it.
pub(crate) const BPF_PSEUDO_FUNC: u8 = 4;
pub(crate) const BPF_ANY: u64 = 0;
// XDP attach flags (linux/if_link.h) and actions.
pub(crate) const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `prog_flags` of a program that handles multi-buffer frames (`BPF_F_XDP_HAS_FRAGS`).
pub(crate) const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;
pub(crate) const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
pub(crate) const XDP_DROP: i32 = 1;
/// Offsets in `struct xdp_md`: data, data_end (u32s).
pub(crate) const XDP_MD_DATA: i16 = 0;
pub(crate) const XDP_MD_DATA_END: i16 = 4;

/// One BPF instruction (`struct bpf_insn`): opcode, destination and source registers (4 bits
/// each, destination in the low nibble on little-endian), offset, immediate.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Insn {
    pub(crate) code: u8,
    pub(crate) regs: u8,
    pub(crate) off: i16,
    pub(crate) imm: i32,
}

pub(crate) const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0x0f),
        off,
        imm,
    }
}

/// `dst = map` (two slots: the 64-bit load of a map reference by descriptor).
pub(crate) const fn load_map(dst: u8, map: RawFd) -> [Insn; 2] {
    [
        insn(LD_IMM_DW, dst, BPF_PSEUDO_MAP_FD, 0, map),
        insn(0, 0, 0, 0, 0),
    ]
}

/// `r0 = bpf_map_lookup_elem(map, fp + key_offset)`, the key already on the stack there; r0 is
/// NULL or the value's address (the verifier wants NULL checked before any use).
pub(crate) const fn map_lookup(map: RawFd, key_offset: i16) -> [Insn; 5] {
    let [load_low, load_high] = load_map(1, map);
    [
        load_low,
        load_high,
        insn(ALU64_MOV_X, 2, 10, 0, 0),
        insn(ALU64_ADD_K, 2, 0, 0, key_offset as i32),
        insn(JMP_CALL, 0, 0, 0, BPF_FUNC_MAP_LOOKUP_ELEM),
    ]
}

/// A program in the making whose conditional jumps all go forward to one tail (a counting
/// tail, a final redirect): each jump's offset is set once the tail's place is known.
pub(crate) struct Assembler {
    code: Vec<Insn>,
    /// Indices of the jumps to the tail.
    to_tail: Vec<usize>,
}

impl Assembler {
    pub(crate) fn with_capacity(instructions: usize) -> Assembler {
        Assembler {
            code: Vec::with_capacity(instructions),
            to_tail: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, instructions: &[Insn]) {
        self.code.extend_from_slice(instructions);
    }

    /// A conditional jump to the tail (`jump`'s offset is set by `finish_with`).
    pub(crate) fn jump_to_tail(&mut self, jump: Insn) {
        self.to_tail.push(self.code.len());
        self.code.push(jump);
    }

    /// Appends `tail` and points every recorded jump at its first instruction.
    /// Where the next instruction goes (for [`Assembler::jump_here`]).
    pub(crate) fn here(&self) -> usize {
        self.code.len()
    }

    /// Points the jump at `from` (pushed earlier, with any offset) at the next instruction.
    pub(crate) fn jump_here(&mut self, from: usize) {
        self.code[from].off = (self.code.len() - from - 1) as i16;
    }

    pub(crate) fn finish_with(mut self, tail: &[Insn]) -> Vec<Insn> {
        let target = self.code.len();
        for &at in &self.to_tail {
            self.code[at].off = (target - at - 1) as i16;
        }
        self.code.extend_from_slice(tail);
        self.code
    }
}

// Opcode parts (linux/bpf_common.h, linux/bpf.h): instruction class, operand size, addressing
// mode, ALU/jump operation, source. BPF_W (32-bit), BPF_K (immediate) and BPF_ADD are
// 0 and left out.
const BPF_LD: u8 = 0x00;
const BPF_LDX: u8 = 0x01;
const BPF_ST: u8 = 0x02;
const BPF_STX: u8 = 0x03;
const BPF_JMP: u8 = 0x05;
const BPF_ALU64: u8 = 0x07;
const BPF_H: u8 = 0x08;
const BPF_DW: u8 = 0x18;
const BPF_MEM: u8 = 0x60;
const BPF_X: u8 = 0x08;
const BPF_SUB: u8 = 0x10;
const BPF_LSH: u8 = 0x60;
const BPF_RSH: u8 = 0x70;
const BPF_AND: u8 = 0x50;
const BPF_MOD: u8 = 0x90;
const BPF_MOV: u8 = 0xb0;
const BPF_JA: u8 = 0x00;
const BPF_JEQ: u8 = 0x10;
const BPF_JGE: u8 = 0x30;
const BPF_JLE: u8 = 0xb0;
const BPF_JGT: u8 = 0x20;
const BPF_JLT: u8 = 0xa0;
const BPF_JNE: u8 = 0x50;
const BPF_CALL: u8 = 0x80;
const BPF_EXIT: u8 = 0x90;
pub(crate) const LDX_MEM_W: u8 = BPF_LDX | BPF_MEM;
pub(crate) const LDX_MEM_H: u8 = BPF_LDX | BPF_MEM | BPF_H;
pub(crate) const LDX_MEM_DW: u8 = BPF_LDX | BPF_MEM | BPF_DW;
pub(crate) const ST_MEM_W: u8 = BPF_ST | BPF_MEM;
pub(crate) const STX_MEM_W: u8 = BPF_STX | BPF_MEM;
pub(crate) const STX_MEM_H: u8 = BPF_STX | BPF_MEM | BPF_H;
pub(crate) const STX_MEM_DW: u8 = BPF_STX | BPF_MEM | BPF_DW;
pub(crate) const LD_IMM_DW: u8 = BPF_LD | BPF_DW;
pub(crate) const ALU64_ADD_K: u8 = BPF_ALU64;
pub(crate) const ALU64_ADD_X: u8 = BPF_ALU64 | BPF_X;
pub(crate) const ALU64_AND_K: u8 = BPF_ALU64 | BPF_AND;
pub(crate) const ALU64_SUB_X: u8 = BPF_ALU64 | BPF_SUB | BPF_X;
pub(crate) const ALU64_RSH_K: u8 = BPF_ALU64 | BPF_RSH;
pub(crate) const ALU64_LSH_K: u8 = BPF_ALU64 | BPF_LSH;
pub(crate) const ALU64_MOD_K: u8 = BPF_ALU64 | BPF_MOD;
pub(crate) const ALU64_MOV_K: u8 = BPF_ALU64 | BPF_MOV;
pub(crate) const ALU64_MOV_X: u8 = BPF_ALU64 | BPF_MOV | BPF_X;
pub(crate) const JMP_JA: u8 = BPF_JMP | BPF_JA;
pub(crate) const JMP_JEQ_K: u8 = BPF_JMP | BPF_JEQ;
pub(crate) const JMP_JNE_K: u8 = BPF_JMP | BPF_JNE;
pub(crate) const JMP_JGE_X: u8 = BPF_JMP | BPF_JGE | BPF_X;
pub(crate) const JMP_JLE_X: u8 = BPF_JMP | BPF_JLE | BPF_X;
pub(crate) const JMP_JGT_X: u8 = BPF_JMP | BPF_JGT | BPF_X;
pub(crate) const JMP_JLT_K: u8 = BPF_JMP | BPF_JLT;
pub(crate) const JMP_CALL: u8 = BPF_JMP | BPF_CALL;
pub(crate) const JMP_EXIT: u8 = BPF_JMP | BPF_EXIT;

/// `union bpf_attr` for BPF_MAP_CREATE (the fields we set; the kernel zero-fills the rest).
#[repr(C)]
#[derive(Default)]
pub(crate) struct MapCreateAttr {
    pub(crate) map_type: u32,
    pub(crate) key_size: u32,
    pub(crate) value_size: u32,
    pub(crate) max_entries: u32,
    pub(crate) map_flags: u32,
    pub(crate) inner_map_fd: u32,
    pub(crate) numa_node: u32,
    pub(crate) map_name: [u8; 16],
}

/// `union bpf_attr` for BPF_MAP_LOOKUP_ELEM, BPF_MAP_UPDATE_ELEM and BPF_MAP_DELETE_ELEM
/// (which ignores `value`).
#[repr(C)]
pub(crate) struct MapUpdateAttr {
    pub(crate) map_fd: u32,
    pub(crate) _pad: u32,
    pub(crate) key: u64,
    pub(crate) value: u64,
    pub(crate) flags: u64,
}

/// `union bpf_attr` for BPF_PROG_LOAD, up to the function information.
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
    prog_btf_fd: u32,
    func_info_rec_size: u32,
    func_info: u64,
    func_info_cnt: u32,
}

/// `union bpf_attr` for BPF_BTF_LOAD.
#[repr(C)]
#[derive(Default)]
struct BtfLoadAttr {
    btf: u64,
    btf_log_buf: u64,
    btf_size: u32,
    btf_log_size: u32,
    btf_log_level: u32,
}

/// `union bpf_attr` for BPF_LINK_CREATE, without the per-type tail.
#[repr(C)]
#[derive(Default)]
pub(crate) struct LinkCreateAttr {
    pub(crate) prog_fd: u32,
    pub(crate) target_ifindex: u32,
    pub(crate) attach_type: u32,
    pub(crate) flags: u32,
}

/// Calls `bpf(cmd, attr, sizeof attr)`; returns the new descriptor (or 0) or the errno.
pub(crate) fn bpf<A>(cmd: libc::c_long, attr: &mut A) -> std::io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, initialised `#[repr(C)]` prefix of `union bpf_attr` matching
    // `cmd`, and its size is passed so the kernel reads no further (it treats the rest as zero);
    // every pointer inside it points at memory that outlives the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut A,
            std::mem::size_of::<A>() as libc::c_uint,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(rc)
}

/// Loads `program` as an XDP program; on failure loads it again with the verifier's log on, so
/// the error says why (the log is off the first time: a log that overflows its buffer fails the
/// load).
pub(crate) fn load(program: &[Insn]) -> Result<OwnedFd, ProgramError> {
    load_functions(program, &[])
}

/// [`load`] for a program of several functions (a `bpf_loop` callback after the main one):
/// the verifier wants BTF that names each, so a minimal BTF (one `int`, one prototype, one
/// static function per start) is loaded with it. `starts` are the instruction indices where
/// the functions after the first begin.
pub(crate) fn load_functions(program: &[Insn], starts: &[u32]) -> Result<OwnedFd, ProgramError> {
    let license = c"Dual MIT/GPL";
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: program.len() as u32,
        insns: program.as_ptr() as u64,
        license: license.as_ptr() as u64,
        expected_attach_type: BPF_XDP,
        ..ProgLoadAttr::default()
    };
    let mut functions = Vec::new();
    let _btf = if starts.is_empty() {
        None
    } else {
        let (btf, first_function) = function_btf(starts.len() + 1);
        let btf = load_btf(&btf)?;
        // bpf_func_info: instruction offset, type id of the function.
        for (index, start) in std::iter::once(0).chain(starts.iter().copied()).enumerate() {
            functions.extend_from_slice(&[start, first_function + index as u32]);
        }
        attr.prog_btf_fd = btf.as_raw_fd() as u32;
        attr.func_info_rec_size = 8;
        attr.func_info = functions.as_ptr() as u64;
        attr.func_info_cnt = starts.len() as u32 + 1;
        Some(btf)
    };
    attr.prog_name[..9].copy_from_slice(b"wirespeed");
    // Frags-aware, so that the kernel attaches it to an interface whose MTU is larger than a
    // page (a jumbo frame is then one buffer and its fragments: the programs here only
    // redirect, they never read past the first). Kernels before 5.18 do not know the flag.
    attr.prog_flags = BPF_F_XDP_HAS_FRAGS;
    let error = match bpf(BPF_PROG_LOAD, &mut attr) {
        Ok(fd) => return Ok(owned(fd)),
        Err(error) if error.raw_os_error() == Some(libc::EINVAL) => {
            attr.prog_flags = 0;
            match bpf(BPF_PROG_LOAD, &mut attr) {
                Ok(fd) => return Ok(owned(fd)),
                Err(error) => error,
            }
        }
        Err(error) => error,
    };
    let mut log = vec![0u8; 64 * 1024];
    attr.log_level = 1;
    attr.log_size = log.len() as u32;
    attr.log_buf = log.as_mut_ptr() as u64;
    let _ = bpf(BPF_PROG_LOAD, &mut attr).map(owned);
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    let text = String::from_utf8_lossy(&log[..end]).trim().to_string();
    Err(ProgramError::Load {
        program: "wirespeed",
        source: error,
        log: text,
    })
}

/// BTF for `count` functions, and the type id of the first: type 1 is a 32-bit `int`, type 2 a
/// prototype returning it with no parameters (the verifier checks no more for static
/// functions), types 3.. one static function `f` each. Layout per linux/btf.h: the header,
/// then the types, then the strings.
fn function_btf(count: usize) -> (Vec<u8>, u32) {
    const BTF_KIND_INT: u32 = 1;
    const BTF_KIND_FUNC: u32 = 12;
    const BTF_KIND_FUNC_PROTO: u32 = 13;
    const INT_SIGNED: u32 = 1 << 24;
    // Strings: "", "int", "f".
    let strings = b"\0int\0f\0";
    let (int_name, function_name) = (1u32, 5u32);
    let mut types: Vec<u32> = vec![
        int_name,
        BTF_KIND_INT << 24,
        4,
        INT_SIGNED | 32,
        0,
        BTF_KIND_FUNC_PROTO << 24,
        1,
    ];
    for _ in 0..count {
        // Linkage static (0) in the vlen bits; the type is the prototype.
        types.extend_from_slice(&[function_name, BTF_KIND_FUNC << 24, 2]);
    }
    let types: Vec<u8> = types.iter().flat_map(|word| word.to_ne_bytes()).collect();
    let mut btf = Vec::with_capacity(24 + types.len() + strings.len());
    btf.extend_from_slice(&0xeb9fu16.to_ne_bytes());
    btf.extend_from_slice(&[1, 0]);
    for word in [
        24,
        0,
        types.len() as u32,
        types.len() as u32,
        strings.len() as u32,
    ] {
        btf.extend_from_slice(&word.to_ne_bytes());
    }
    btf.extend_from_slice(&types);
    btf.extend_from_slice(strings);
    (btf, 3)
}

fn load_btf(btf: &[u8]) -> Result<OwnedFd, ProgramError> {
    let mut attr = BtfLoadAttr {
        btf: btf.as_ptr() as u64,
        btf_size: btf.len() as u32,
        ..BtfLoadAttr::default()
    };
    bpf(BPF_BTF_LOAD, &mut attr)
        .map(owned)
        .map_err(|source| ProgramError::Load {
            program: "wirespeed",
            source,
            log: "the kernel refused the BTF naming the functions".into(),
        })
}

pub(crate) fn owned(fd: libc::c_long) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful bpf() call that creates a descriptor, and
    // nothing else owns it.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

/// Creates a map named "wirespeed" of `map_type` with 4-byte keys.
pub(crate) fn create_map(
    map_type: u32,
    value_size: u32,
    max_entries: u32,
) -> Result<OwnedFd, ProgramError> {
    let mut attr = MapCreateAttr {
        map_type,
        key_size: 4,
        value_size,
        max_entries,
        ..MapCreateAttr::default()
    };
    attr.map_name[..9].copy_from_slice(b"wirespeed");
    bpf(BPF_MAP_CREATE, &mut attr)
        .map(owned)
        .map_err(ProgramError::Map)
}

/// Sets entry `key` of `map` to `value` (which must be the map's value size; for a per-CPU map,
/// one value per possible CPU).
pub(crate) fn update_map(map: &OwnedFd, key: u32, value: &[u8]) -> std::io::Result<()> {
    let mut attr = MapUpdateAttr {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        key: &key as *const u32 as u64,
        value: value.as_ptr() as u64,
        flags: BPF_ANY,
    };
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
}

/// Reads entry `key` of `map` into `value` (which must be the map's value size; for a per-CPU
/// map, one value per possible CPU, each rounded up to 8 bytes).
pub(crate) fn lookup_map(map: &OwnedFd, key: u32, value: &mut [u8]) -> std::io::Result<()> {
    let mut attr = MapUpdateAttr {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        key: &key as *const u32 as u64,
        value: value.as_mut_ptr() as u64,
        flags: 0,
    };
    bpf(BPF_MAP_LOOKUP_ELEM, &mut attr).map(drop)
}

/// How many CPUs the kernel may ever bring up (`/sys/devices/system/cpu/possible`, e.g.
/// `0-1`): the number of values a per-CPU map holds per key.
pub(crate) fn possible_cpus() -> std::io::Result<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    parse_cpu_list(&text).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("/sys/devices/system/cpu/possible holds {text:?}, not a CPU list"),
        )
    })
}

/// The count of a CPU list such as `0-3,8,10-11` (highest listed + 1: per-CPU maps are indexed
/// by CPU number, gaps included).
fn parse_cpu_list(text: &str) -> Option<usize> {
    let mut highest = None;
    for part in text.trim().split(',') {
        let last = part.rsplit('-').next()?;
        let cpu: usize = last.trim().parse().ok()?;
        highest = highest.max(Some(cpu));
    }
    highest.map(|cpu| cpu + 1)
}

/// For the tests that load a program: whether this process may (root). Elsewhere prints why
/// the test skips and returns `false`.
#[cfg(test)]
pub(crate) fn may_load_for_test() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: loading BPF needs root");
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_count_up_to_the_highest_cpu() {
        assert_eq!(parse_cpu_list("0-1\n"), Some(2));
        assert_eq!(parse_cpu_list("0"), Some(1));
        assert_eq!(parse_cpu_list("0-3,8,10-11"), Some(12));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("x"), None);
    }
}
