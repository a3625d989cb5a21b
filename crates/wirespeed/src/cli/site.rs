//! Where the DuT of a `bench` command is, and how the tester reaches it: in the lab's DuT
//! namespace (the default), an external device wired to two of the tester's own interfaces
//! (`--dut external --tx IF --rx IF`), or set up on another host over ssh (`--dut-host`).
//!
//! Every option is checked here, before a lab is built or a DuT touched: an interface that does
//! not exist, an external DuT beside others, an option that belongs to another kind of DuT are
//! errors that say what to give instead.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;
use wirespeed_lab::Testbed;
use wirespeed_packet::wire::EthernetAddress;
use wirespeed_tester::dut::{Dut, ExternalConfig, ExternalDut, Host, Wiring};

/// The options that say where the DuT is; every `bench` command with `--dut` or `--duts`
/// takes them.
#[derive(Args, Clone, Debug, Default)]
pub struct SiteArgs {
    /// With `--dut external`: the tester's interface that sends to the DuT (in the network
    /// namespace wirespeed runs in).
    #[arg(long, value_name = "IF")]
    pub tx: Option<String>,
    /// With `--dut external`: the tester's interface that receives what the DuT forwards.
    #[arg(long, value_name = "IF")]
    pub rx: Option<String>,
    /// With `--dut external`: the DuT's MAC on the `--tx` side, the frames' destination
    /// (without it they go to `--rx`'s MAC, as through a switch).
    #[arg(long, value_name = "MAC")]
    pub dut_mac: Option<EthernetAddress>,
    /// With `--dut external`, for a DuT that routes: its MAC on the `--rx` side; frames come
    /// back from it with their TTL one lower. The frames go from 198.18.0.1 (2001:2:0:0::1) to
    /// 198.19.0.1 (2001:2:0:ff::1), which the DuT must route towards `--rx`.
    #[arg(long, value_name = "MAC")]
    pub dut_egress_mac: Option<EthernetAddress>,
    /// Set the DuT up (and tear it down, and ask its version) on this host over ssh:
    /// `user@host`, key authentication and the user's ssh configuration. Its interfaces must be
    /// wired to the tester's ports (in the lab: an ssh server in the DuT namespace).
    #[arg(long, value_name = "USER@HOST")]
    pub dut_host: Option<String>,
    /// With `--dut-host`: the ssh configuration file to use instead of the user's (`ssh -F`).
    #[arg(long, value_name = "FILE")]
    pub ssh_config: Option<PathBuf>,
    /// With `--dut-host`: the DuT's ingress and egress interfaces on that host (default: the
    /// lab's names, `PREFIX-d0,PREFIX-d1`).
    #[arg(long, value_delimiter = ',', value_name = "IN,OUT")]
    pub dut_interfaces: Vec<String>,
}

/// Where the DuT is, checked.
#[derive(Clone, Debug, Default)]
pub struct Site {
    /// An external DuT and the tester's interfaces it is wired to.
    external: Option<ExternalConfig>,
    /// Where the drivers' steps run.
    host: Host,
    /// The DuT's interfaces on a remote host, when not the lab's names.
    interfaces: Option<(String, String)>,
}

impl SiteArgs {
    /// Checks the options against the DuTs named (`duts`) before anything runs.
    pub fn site(&self, duts: &[String]) -> Result<Site> {
        let external = duts.iter().any(|name| name == ExternalDut::NAME);
        let external_options = [
            ("--tx", self.tx.is_some()),
            ("--rx", self.rx.is_some()),
            ("--dut-mac", self.dut_mac.is_some()),
            ("--dut-egress-mac", self.dut_egress_mac.is_some()),
        ];
        let remote_options = [
            ("--ssh-config", self.ssh_config.is_some()),
            ("--dut-interfaces", !self.dut_interfaces.is_empty()),
        ];
        if external {
            if duts.len() > 1 {
                bail!(
                    "--dut external is measured alone (its wiring is not the lab's); give it \
                     without other DuTs"
                );
            }
            if self.dut_host.is_some() {
                bail!(
                    "--dut-host runs a driver's setup on a host; an external DuT has none (the \
                     tester configures nothing on it): leave --dut-host out"
                );
            }
            let (Some(tx), Some(rx)) = (&self.tx, &self.rx) else {
                bail!(
                    "--dut external needs --tx IF and --rx IF: the tester's interfaces wired to \
                     the DuT's ingress and egress"
                );
            };
            let config = ExternalConfig {
                tx: tx.clone(),
                rx: rx.clone(),
                dut_mac: self.dut_mac.map(|mac| mac.0),
                dut_egress_mac: self.dut_egress_mac.map(|mac| mac.0),
            };
            ExternalDut::wire(&config)?;
            return Ok(Site {
                external: Some(config),
                ..Site::default()
            });
        }
        if let Some((option, _)) = external_options.iter().find(|(_, given)| *given) {
            bail!("{option} is for --dut external (a DuT wired to the tester's own interfaces)");
        }
        let Some(destination) = &self.dut_host else {
            if let Some((option, _)) = remote_options.iter().find(|(_, given)| *given) {
                bail!("{option} is for --dut-host (a DuT set up over ssh)");
            }
            return Ok(Site::default());
        };
        // ssh would read a destination that starts with '-' as an option.
        if destination.is_empty() || destination.starts_with('-') || destination.contains(' ') {
            bail!(
                "--dut-host {destination:?} is not a host: give user@host or a Host of the ssh config"
            );
        }
        if let Some(config) = &self.ssh_config
            && !config.is_file()
        {
            bail!("--ssh-config {}: no such file", config.display());
        }
        let interfaces = match self.dut_interfaces.as_slice() {
            [] => None,
            [ingress, egress] if !ingress.is_empty() && !egress.is_empty() => {
                Some((ingress.clone(), egress.clone()))
            }
            _ => bail!("--dut-interfaces is the DuT's two interfaces on its host: IN,OUT"),
        };
        Ok(Site {
            external: None,
            host: Host::Ssh {
                destination: destination.clone(),
                config: self.ssh_config.clone(),
            },
            interfaces,
        })
    }
}

impl Site {
    /// Whether the DuT is external: no lab is built, the tester uses its own interfaces.
    pub fn is_external(&self) -> bool {
        self.external.is_some()
    }

    /// Where the DuT's steps run.
    pub fn host(&self) -> Host {
        self.host.clone()
    }

    /// The external DuT and its wiring; `None` when the DuT is not external.
    pub fn external(&self) -> Option<Result<(Box<dyn Dut>, Wiring)>> {
        let config = self.external.as_ref()?;
        Some(
            ExternalDut::wire(config)
                .map(|(dut, wiring)| (Box::new(dut) as Box<dyn Dut>, wiring))
                .map_err(anyhow::Error::from),
        )
    }

    /// `dut` set up where the options say (an error, before anything runs, for a driver that
    /// cannot run on a remote host).
    pub fn place(&self, mut dut: Box<dyn Dut>) -> Result<Box<dyn Dut>> {
        dut.set_host(self.host.clone())?;
        Ok(dut)
    }

    /// The wiring of the DuT in `lab`: the lab's, with a remote DuT's interfaces as named and
    /// its threads left to its host.
    pub fn wiring(&self, lab: &Testbed) -> Result<Wiring> {
        let Some(wiring) = Wiring::of(lab) else {
            bail!("the lab has fewer than two pairs");
        };
        Ok(self.remote(wiring))
    }

    /// `wiring`, a lab's, with a remote DuT's host and interfaces.
    pub fn remote(&self, mut wiring: Wiring) -> Wiring {
        if self.host.is_remote() {
            wiring.dut_host = Some(self.host.clone());
            if let Some((ingress, egress)) = &self.interfaces {
                wiring.ingress.dut_if = ingress.clone();
                wiring.egress.dut_if = egress.clone();
            }
        }
        wiring
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn options_of_another_kind_of_dut_are_refused_before_anything_runs() {
        let args = |edit: fn(&mut SiteArgs)| {
            let mut args = SiteArgs::default();
            edit(&mut args);
            args
        };
        let error =
            |args: SiteArgs, duts: &[&str]| args.site(&names(duts)).unwrap_err().to_string();
        assert!(SiteArgs::default().site(&names(&["linux-bridge"])).is_ok());
        assert!(
            error(args(|a| a.tx = Some("x".into())), &["linux-bridge"])
                .contains("--tx is for --dut external")
        );
        assert!(error(SiteArgs::default(), &["external"]).contains("needs --tx IF and --rx IF"));
        let both = args(|a| {
            a.tx = Some("lo".into());
            a.rx = Some("wsx-no-such0".into());
        });
        assert!(error(both.clone(), &["external", "linux-bridge"]).contains("measured alone"));
        assert!(error(both, &["external"]).contains("interface wsx-no-such0 does not exist"));
        assert!(
            error(
                args(|a| a.dut_host = Some("-oProxyCommand=x".into())),
                &["linux-bridge"]
            )
            .contains("is not a host")
        );
        assert!(
            error(
                args(|a| a.dut_interfaces = names(&["a"])),
                &["linux-bridge"]
            )
            .contains("--dut-interfaces is for --dut-host")
        );
        let remote = args(|a| {
            a.dut_host = Some("root@198.18.0.254".into());
            a.dut_interfaces = names(&["eth1", "eth2"]);
        })
        .site(&names(&["linux-bridge"]))
        .unwrap();
        assert_eq!(remote.host.label(), "ssh root@198.18.0.254");
        assert_eq!(remote.interfaces, Some(("eth1".into(), "eth2".into())));
        let refused = remote
            .place(Box::new(wirespeed_tester::dut::XdpRedirectDut::new()))
            .err()
            .unwrap()
            .to_string();
        assert!(refused.contains("runs only here"), "{refused}");
    }
}
