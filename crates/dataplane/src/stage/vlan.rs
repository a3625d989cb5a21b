//! The 802.1Q port model of the bridge: which VLAN a received frame belongs to, and which tag
//! it must carry when it leaves by a given port.
//!
//! A port is either an **access** port (untagged frames belong to its VLAN and leave untagged)
//! or a **trunk** (tagged frames of an allowed list of VLANs; optionally a native VLAN whose
//! frames travel untagged). Both directions live in this file because one setting of the port
//! decides both, and the compiled form ([`Vlans`]) is shared by them:
//! * **ingress** ([`Vlans::classify`]): one pass over the batch gives every packet its VLAN or
//!   drops it with [`DropReason::VlanFiltered`]. Only an outer 802.1Q tag (TPID 0x8100) counts:
//!   an 802.1ad service tag is payload to a customer bridge. A priority tag (VLAN id 0) belongs
//!   to the port's untagged VLAN, as 802.1Q says.
//! * **egress** ([`Vlans::tag`]): push, pop or rewrite the tag in place for the output port.
//!   The frame moves by 4 bytes inside its buffer (into the headroom when pushing) and every
//!   other byte stays as it was; priority bits of a kept tag are kept. Popping does not pad a
//!   short frame to 60 bytes: that is the transmitting NIC's job. The packet's `Meta` keeps
//!   describing the frame as it was received (its offsets and tags are not shifted).
//!
//! The membership of every VLAN is precomputed at construction: a 4096-bit set per port and,
//! per VLAN, the list of member ports to flood to, so the hot path only indexes arrays.

use std::fmt;

use wirespeed_packet::{Batch, Desc, DropReason, FramePool};

/// 802.1Q customer tag protocol identifier.
pub const TPID: u16 = 0x8100;

/// Highest usable VLAN id (4095 is reserved).
pub const MAX_VLAN: u16 = 4094;

/// Number of VLAN ids, the size of per-VLAN arrays.
const VLAN_IDS: usize = 4096;

/// "No VLAN" in per-port settings.
const NONE: u16 = u16::MAX;

/// How a port treats VLANs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VlanMode {
    /// Untagged frames belong to this VLAN and leave untagged; tagged frames are dropped
    /// unless the tag is a priority tag or carries this very VLAN.
    Access(u16),
    /// Tagged frames of the `allowed` VLANs; untagged frames belong to `native` (and frames of
    /// `native` leave untagged) or, without one, are dropped.
    Trunk {
        allowed: Vec<u16>,
        native: Option<u16>,
    },
}

/// What [`Vlans::new`] refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VlanError {
    #[error("port {port}: VLAN {vlan} is out of range: use VLAN ids 1 to {MAX_VLAN}")]
    VlanOutOfRange { port: u16, vlan: u16 },
    #[error("port {port} is configured twice: list each port once")]
    DuplicatePort { port: u16 },
    #[error("port index {port} is out of range: port indexes go up to {}", u16::MAX - 1)]
    PortOutOfRange { port: u16 },
}

/// The tag a frame must carry on its way out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Egress {
    Untagged,
    Tagged(u16),
}

/// Counters of the VLAN stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VlanCounters {
    /// Frames that arrived tagged (with a VLAN id other than 0).
    pub tagged_in: u64,
    /// Frames that arrived untagged or priority-tagged.
    pub untagged_in: u64,
    /// Frames of a VLAN the port does not carry (or from a port outside the bridge).
    pub filtered: u64,
    /// Tags pushed on egress.
    pub pushed: u64,
    /// Tags popped on egress.
    pub popped: u64,
    /// Tags whose VLAN id was rewritten on egress (priority tags leaving by a trunk).
    pub rewritten: u64,
    /// Frames that had no room to grow by a tag.
    pub no_room: u64,
}

/// One port's compiled VLAN settings.
#[derive(Clone, Debug)]
struct PortVlans {
    /// VLAN of untagged and priority-tagged frames, or `NONE`.
    untagged: u16,
    /// VLANs the port carries (4096 bits).
    members: Box<[u64; VLAN_IDS / 64]>,
}

impl PortVlans {
    #[inline]
    fn carries(&self, vlan: u16) -> bool {
        let vlan = usize::from(vlan);
        self.members
            .get(vlan / 64)
            .is_some_and(|word| word & (1 << (vlan % 64)) != 0)
    }
}

/// The VLAN classification for a batch: packet *i*'s VLAN.
pub type BatchVlans = [u16; wirespeed_packet::MAX_BATCH];

/// The ports' VLAN settings, compiled, and the stage that applies them.
#[derive(Debug)]
pub struct Vlans {
    /// Indexed by port; `None` for ports outside the bridge.
    ports: Vec<Option<PortVlans>>,
    /// Per VLAN: (start, count) in `flood_ports`.
    flood_index: Box<[(u32, u16); VLAN_IDS]>,
    flood_ports: Box<[u16]>,
    /// What `classify::<true>` decided for each packet of the last batch.
    trace: [Classified; wirespeed_packet::MAX_BATCH],
    counters: VlanCounters,
}

/// What [`Vlans::classify`] decided for one packet; its `Display` is the stage's trace line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Classified {
    /// Dropped by an earlier stage.
    Skipped,
    Vlan {
        vlan: u16,
        tagged: bool,
    },
    Filtered,
}

impl fmt::Display for Classified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Classified::Vlan { vlan, tagged: true } => write!(f, "vlan {vlan} (tagged)"),
            Classified::Vlan {
                vlan,
                tagged: false,
            } => write!(f, "vlan {vlan} (untagged)"),
            Classified::Filtered => write!(f, "vlan filtered"),
            Classified::Skipped => write!(f, "-"),
        }
    }
}

impl Vlans {
    /// Compiles `(port index, mode)` settings.
    pub fn new(ports: &[(u16, VlanMode)]) -> Result<Vlans, VlanError> {
        let count = ports
            .iter()
            .map(|(p, _)| usize::from(*p) + 1)
            .max()
            .unwrap_or(0);
        let mut compiled: Vec<Option<PortVlans>> = vec![None; count];
        for (port, mode) in ports {
            let port = *port;
            if port == u16::MAX {
                return Err(VlanError::PortOutOfRange { port });
            }
            let check = |vlan: u16| {
                if (1..=MAX_VLAN).contains(&vlan) {
                    Ok(vlan)
                } else {
                    Err(VlanError::VlanOutOfRange { port, vlan })
                }
            };
            let mut members = Box::new([0u64; VLAN_IDS / 64]);
            let mut add = |vlan: u16| members[usize::from(vlan) / 64] |= 1 << (vlan % 64);
            let untagged = match mode {
                VlanMode::Access(vlan) => {
                    add(check(*vlan)?);
                    *vlan
                }
                VlanMode::Trunk { allowed, native } => {
                    for &vlan in allowed {
                        add(check(vlan)?);
                    }
                    match native {
                        Some(vlan) => {
                            add(check(*vlan)?);
                            *vlan
                        }
                        None => NONE,
                    }
                }
            };
            let slot = &mut compiled[usize::from(port)];
            if slot.is_some() {
                return Err(VlanError::DuplicatePort { port });
            }
            *slot = Some(PortVlans { untagged, members });
        }
        let mut flood_index = Box::new([(0u32, 0u16); VLAN_IDS]);
        let mut flood_ports = Vec::new();
        let mut configured: Vec<u16> = ports.iter().map(|(port, _)| *port).collect();
        configured.sort_unstable();
        for (vlan, entry) in flood_index.iter_mut().enumerate() {
            let start = flood_ports.len() as u32;
            for &port in &configured {
                let settings = compiled.get(usize::from(port)).and_then(Option::as_ref);
                if settings.is_some_and(|s| s.carries(vlan as u16)) {
                    flood_ports.push(port);
                }
            }
            *entry = (start, (flood_ports.len() as u32 - start) as u16);
        }
        Ok(Vlans {
            ports: compiled,
            flood_index,
            flood_ports: flood_ports.into_boxed_slice(),
            trace: [Classified::Skipped; wirespeed_packet::MAX_BATCH],
            counters: VlanCounters::default(),
        })
    }

    pub fn counters(&self) -> VlanCounters {
        self.counters
    }

    /// Whether `port` carries `vlan`.
    #[inline]
    pub fn carries(&self, port: u16, vlan: u16) -> bool {
        self.port(port).is_some_and(|p| p.carries(vlan))
    }

    #[inline]
    fn port(&self, port: u16) -> Option<&PortVlans> {
        self.ports.get(usize::from(port)).and_then(Option::as_ref)
    }

    /// The ports that carry `vlan`, in index order.
    #[inline]
    pub fn members(&self, vlan: u16) -> &[u16] {
        let Some(&(start, count)) = self.flood_index.get(usize::from(vlan)) else {
            return &[];
        };
        let start = start as usize;
        self.flood_ports
            .get(start..start + usize::from(count))
            .unwrap_or_default()
    }

    /// The tag a frame of `vlan` carries when it leaves by `port`.
    #[inline]
    pub fn egress(&self, port: u16, vlan: u16) -> Egress {
        match self.port(port) {
            Some(p) if p.untagged == vlan => Egress::Untagged,
            _ => Egress::Tagged(vlan),
        }
    }

    /// Ingress: for every packet of `batch` not yet dropped, its VLAN in `vlans[i]`, or
    /// [`DropReason::VlanFiltered`]. With `TRACE`, each decision is kept for
    /// [`Vlans::trace`].
    pub fn classify<const TRACE: bool>(
        &mut self,
        pool: &FramePool,
        batch: &mut Batch,
        vlans: &mut BatchVlans,
    ) {
        let (descs, metas) = batch.split_mut();
        for (i, (desc, meta)) in descs.iter().zip(metas.iter_mut()).enumerate() {
            let classified = if meta.drop.is_some() {
                Classified::Skipped
            } else {
                self.classify_one(pool, desc)
            };
            match classified {
                Classified::Vlan { vlan, .. } => vlans[i] = vlan,
                Classified::Filtered => meta.drop = Some(DropReason::VlanFiltered),
                Classified::Skipped => {}
            }
            if TRACE {
                self.trace[i] = classified;
            }
        }
    }

    /// The decisions of the last batch classified with tracing on, packet by packet.
    pub fn trace(&self, len: usize) -> &[Classified] {
        self.trace.get(..len).unwrap_or(&self.trace)
    }

    fn classify_one(&mut self, pool: &FramePool, desc: &Desc) -> Classified {
        let tci = outer_tci(packet(pool.frame(desc.frame), desc));
        let Some(port) = self.port(desc.port) else {
            self.counters.filtered += 1;
            return Classified::Filtered;
        };
        let (vlan, tagged) = match tci {
            Some(tci) if tci & 0x0fff != 0 => (tci & 0x0fff, true),
            _ => (port.untagged, false),
        };
        if vlan == NONE || !port.carries(vlan) {
            self.counters.filtered += 1;
            return Classified::Filtered;
        }
        if tagged {
            self.counters.tagged_in += 1;
        } else {
            self.counters.untagged_in += 1;
        }
        Classified::Vlan { vlan, tagged }
    }

    /// Egress: gives the packet in `frame` at `desc` the tag `egress` asks for, in place;
    /// `desc.offset` and `desc.len` follow the packet. Fails with `Oversize` when a tag must
    /// be pushed and the buffer has no room before or after the packet.
    pub fn tag(
        &mut self,
        frame: &mut [u8],
        desc: &mut Desc,
        egress: Egress,
    ) -> Result<(), DropReason> {
        let start = usize::from(desc.offset);
        let len = usize::from(desc.len);
        let tci = outer_tci(frame.get(start..start + len).unwrap_or_default());
        match (tci, egress) {
            (None, Egress::Untagged) => Ok(()),
            (Some(tci), Egress::Tagged(vlan)) => {
                if tci & 0x0fff != vlan {
                    let tci = (tci & 0xf000) | (vlan & 0x0fff);
                    let field = frame
                        .get_mut(start + 14..start + 16)
                        .ok_or(DropReason::Truncated)?;
                    field.copy_from_slice(&tci.to_be_bytes());
                    self.counters.rewritten += 1;
                }
                Ok(())
            }
            (Some(_), Egress::Untagged) => {
                // The MACs move 4 bytes towards the payload, over the tag.
                if len < 18 || frame.len() < start + 16 {
                    return Err(DropReason::Truncated);
                }
                frame.copy_within(start..start + 12, start + 4);
                desc.offset += 4;
                desc.len -= 4;
                self.counters.popped += 1;
                Ok(())
            }
            (None, Egress::Tagged(vlan)) => {
                let new_len = u16::try_from(len + 4).map_err(|_| DropReason::Oversize)?;
                let new_start = if start >= 4 && frame.len() >= start + len {
                    // The MACs move 4 bytes into the headroom.
                    frame.copy_within(start..start + 12, start - 4);
                    start - 4
                } else if frame.len() >= start + len + 4 && len >= 12 {
                    // No headroom: everything after the MACs moves 4 bytes towards the end.
                    frame.copy_within(start + 12..start + len, start + 16);
                    start
                } else {
                    self.counters.no_room += 1;
                    return Err(DropReason::Oversize);
                };
                let mut tag = [0u8; 4];
                tag[..2].copy_from_slice(&TPID.to_be_bytes());
                tag[2..].copy_from_slice(&(vlan & 0x0fff).to_be_bytes());
                let field = frame
                    .get_mut(new_start + 12..new_start + 16)
                    .ok_or(DropReason::Oversize)?;
                field.copy_from_slice(&tag);
                desc.offset = new_start as u16;
                desc.len = new_len;
                self.counters.pushed += 1;
                Ok(())
            }
        }
    }
}

/// The packet's bytes inside its frame (empty when the descriptor points outside).
#[inline]
fn packet<'a>(frame: &'a [u8], desc: &Desc) -> &'a [u8] {
    let start = usize::from(desc.offset);
    frame
        .get(start..start + usize::from(desc.len))
        .unwrap_or_default()
}

/// The TCI of an outer 802.1Q tag, if the packet starts with one.
#[inline]
fn outer_tci(packet: &[u8]) -> Option<u16> {
    let header = packet.first_chunk::<18>()?;
    (u16::from_be_bytes([header[12], header[13]]) == TPID)
        .then(|| u16::from_be_bytes([header[14], header[15]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn untagged() -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        for (i, b) in f[14..].iter_mut().enumerate() {
            *b = i as u8;
        }
        f
    }

    fn tagged(tci: u16) -> Vec<u8> {
        let f = untagged();
        let mut t = f[..12].to_vec();
        t.extend_from_slice(&TPID.to_be_bytes());
        t.extend_from_slice(&tci.to_be_bytes());
        t.extend_from_slice(&f[12..]);
        t
    }

    fn run(vlans: &mut Vlans, bytes: &[u8], offset: usize, egress: Egress) -> Option<Vec<u8>> {
        let mut frame = vec![0xeeu8; 256];
        frame[offset..offset + bytes.len()].copy_from_slice(bytes);
        let mut desc = Desc {
            offset: offset as u16,
            len: bytes.len() as u16,
            ..Desc::default()
        };
        vlans.tag(&mut frame, &mut desc, egress).ok()?;
        let start = usize::from(desc.offset);
        Some(frame[start..start + usize::from(desc.len)].to_vec())
    }

    fn vlans() -> Vlans {
        Vlans::new(&[
            (0, VlanMode::Access(10)),
            (
                2,
                VlanMode::Trunk {
                    allowed: vec![10, 20],
                    native: Some(30),
                },
            ),
        ])
        .unwrap()
    }

    #[test]
    fn push_pop_and_rewrite_keep_every_other_byte() {
        let mut v = vlans();
        for offset in [0, 2, 64] {
            assert_eq!(
                run(&mut v, &untagged(), offset, Egress::Tagged(10)),
                Some(tagged(10))
            );
            assert_eq!(
                run(&mut v, &tagged(10), offset, Egress::Untagged),
                Some(untagged())
            );
            assert_eq!(
                run(&mut v, &tagged(0xa000), offset, Egress::Tagged(20)),
                Some(tagged(0xa014))
            );
            assert_eq!(
                run(&mut v, &tagged(20), offset, Egress::Tagged(20)),
                Some(tagged(20))
            );
        }
        // No room anywhere.
        let full = vec![0u8; 256];
        assert_eq!(run(&mut v, &full, 0, Egress::Tagged(10)), None);
        assert_eq!(v.counters().no_room, 1);
    }

    #[test]
    fn membership_and_egress() {
        let v = vlans();
        assert_eq!(v.members(10), &[0, 2]);
        assert_eq!(v.members(20), &[2]);
        assert_eq!(v.members(30), &[2]);
        assert!(v.members(40).is_empty());
        assert_eq!(v.egress(0, 10), Egress::Untagged);
        assert_eq!(v.egress(2, 10), Egress::Tagged(10));
        assert_eq!(v.egress(2, 30), Egress::Untagged);
        assert!(!v.carries(1, 10));
    }

    #[test]
    fn configuration_errors_name_the_port() {
        assert_eq!(
            Vlans::new(&[(3, VlanMode::Access(4095))]).unwrap_err(),
            VlanError::VlanOutOfRange {
                port: 3,
                vlan: 4095
            }
        );
        assert_eq!(
            Vlans::new(&[(1, VlanMode::Access(1)), (1, VlanMode::Access(2))]).unwrap_err(),
            VlanError::DuplicatePort { port: 1 }
        );
    }
}
