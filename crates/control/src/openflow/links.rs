//! PORT_STATUS: the ports' links as the kernel reports them.
//!
//! The agent's thread reads a [`LinkWatch`] (rtnetlink's link group) once per turn, never a
//! worker: a port whose interface is set down or up, or loses or regains its carrier, changes
//! its [`Link`], which PORT_DESC replies show, and the agent sends one PORT_STATUS (reason
//! MODIFY) to every connection that takes it. The watch's first reading, the kernel's dump of
//! every link, sets the state the ports start from without a message. Ports without an
//! interface (capture files, memory links) stay up; so does every port if the watch cannot be
//! opened (said once on stderr).

use std::cell::Cell;

use wirespeed_io::link_watch::{LinkState, LinkWatch};

/// A port's link, as PORT_DESC and PORT_STATUS describe it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    /// Set up (OFPPC_PORT_DOWN in `config` when not).
    pub admin_up: bool,
    /// Carrier present (OFPPS_LINK_DOWN in `state` when not, OFPPS_LIVE when it is and the
    /// port is up).
    pub carrier: bool,
}

impl Default for Link {
    fn default() -> Self {
        Link {
            admin_up: true,
            carrier: true,
        }
    }
}

/// `ofp_port_config` and `ofp_port_state` bits.
const OFPPC_PORT_DOWN: u32 = 1;
const OFPPS_LINK_DOWN: u32 = 1;
const OFPPS_LIVE: u32 = 4;
/// PORT_STATUS's reason for a port whose attributes changed (OFPPR_MODIFY).
pub const REASON_MODIFY: u8 = 2;

impl Link {
    /// The `config` field of the port's `ofp_port`.
    pub fn config(self) -> u32 {
        if self.admin_up { 0 } else { OFPPC_PORT_DOWN }
    }

    /// The `state` field of the port's `ofp_port`.
    pub fn state(self) -> u32 {
        if self.admin_up && self.carrier {
            OFPPS_LIVE
        } else {
            OFPPS_LINK_DOWN
        }
    }
}

/// The watch and which port each interface is.
pub struct Links {
    watch: Option<LinkWatch>,
    /// Port index -> the interface its link is, if any.
    interfaces: Vec<Option<String>>,
    /// Ports whose state the kernel has reported at least once (the first report sets it
    /// without a PORT_STATUS).
    reported: Vec<bool>,
    readings: Vec<LinkState>,
}

impl Links {
    /// Watches the links of `interfaces` (one per port, `None` for ports without one).
    pub fn new(interfaces: Vec<Option<String>>) -> Links {
        let watch = if interfaces.iter().any(Option::is_some) {
            LinkWatch::open()
                .map_err(|error| {
                    eprintln!(
                        "openflow agent: no link watch ({error}): ports are reported up and no \
                         PORT_STATUS is sent"
                    );
                })
                .ok()
        } else {
            None
        };
        Links {
            watch,
            reported: vec![false; interfaces.len()],
            interfaces,
            readings: Vec::new(),
        }
    }

    /// The watch's descriptor, readable when the kernel reported something.
    pub fn fd(&self) -> Option<std::os::fd::RawFd> {
        self.watch.as_ref().map(LinkWatch::fd)
    }

    /// Reads what the kernel reported since the last turn into `links` (one per port); the
    /// indices of the ports whose [`Link`] changed, in the order of the reports.
    pub fn changes(&mut self, links: &[Cell<Link>]) -> Vec<usize> {
        let Some(watch) = &mut self.watch else {
            return Vec::new();
        };
        self.readings.clear();
        if let Err(error) = watch.read(&mut self.readings) {
            eprintln!("openflow agent: link watch stopped ({error})");
            self.watch = None;
            return Vec::new();
        }
        let mut changed = Vec::new();
        for reading in &self.readings {
            for (index, interface) in self.interfaces.iter().enumerate() {
                if interface.as_deref() != Some(reading.name.as_str()) {
                    continue;
                }
                let Some(cell) = links.get(index) else {
                    continue;
                };
                let link = Link {
                    admin_up: reading.admin_up,
                    carrier: reading.carrier,
                };
                let first = !std::mem::replace(&mut self.reported[index], true);
                if cell.replace(link) != link && !first {
                    changed.push(index);
                }
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_and_state_follow_the_link() {
        let link = |admin_up, carrier| Link { admin_up, carrier };
        assert_eq!(
            (link(true, true).config(), link(true, true).state()),
            (0, 4)
        );
        assert_eq!(
            (link(true, false).config(), link(true, false).state()),
            (0, 1)
        );
        assert_eq!(
            (link(false, false).config(), link(false, false).state()),
            (1, 1)
        );
    }
}
