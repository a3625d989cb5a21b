//! DuTs the tester does not set up in its own lab namespace (issue 18): an external DuT, which
//! the test builds by hand and `bench rfc2544 --dut external` measures on the tester's own
//! interfaces without touching it, and the Linux bridge set up over ssh by an OpenSSH server
//! that the test runs in the lab's DuT namespace with throwaway keys.
//!
//! Both runs are short (one frame size, 0.2-second trials, a coarse search): they check that
//! the path works and the NDR is plausible. How closely these NDRs agree with the local
//! driver's is a benchmark (docs/benchmarks.md), not an assertion on a shared machine.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use wirespeed_lab::{Testbed, TestbedConfig, run};
use wirespeed_tester::bench::placement::{Plan, napi_threads, place_napi};
use wirespeed_tester::dut::{Dut, Host, LinuxBridge, Wiring};
use wirespeed_tester::report::json::from_json;
use wirespeed_tester::suite::{Resolution, SuiteConfig};

mod common;

/// The short search both tests run.
const TINY_SEARCH: &[&str] = &[
    "--frame-sizes",
    "64",
    "--trial-seconds",
    "0.2",
    "--resolution",
    "60%",
    "--latency-loads",
    "",
];

/// The bridge forwarded at a rate the search measured. It does 0.3 to 0.7 Mpps on an idle
/// 2-core VM, but with a load of 10 on that VM the generator itself fell behind at 0.25 Mpps
/// and the NDR came out at 5 kframes/s: the floor says the path works, not how fast.
const PLAUSIBLE_NDR: f64 = 1_000.0;

#[test]
fn an_external_bridge_built_by_hand_is_measured_on_the_testers_own_interfaces() {
    let _cores = common::alone();
    let prefix = "wsxt";
    let Some(mut lab) = wirespeed_lab::up_for_test(&TestbedConfig {
        prefix: prefix.into(),
        pairs: 2,
        ..TestbedConfig::default()
    }) else {
        return;
    };
    // Veths that push back, as in the lab `bench rfc2544` builds for its own DuTs.
    lab.backpressure().unwrap();
    // The DuT, by hand: a bridge of d0 and d1 in the lab's DuT namespace.
    let dut = &lab.dut_ns;
    for words in [
        vec![
            "link",
            "add",
            "name",
            "wsxt-br",
            "type",
            "bridge",
            "stp_state",
            "0",
        ],
        vec!["link", "set", "wsxt-d0", "master", "wsxt-br"],
        vec!["link", "set", "wsxt-d1", "master", "wsxt-br"],
        vec!["link", "set", "wsxt-br", "up"],
    ] {
        wirespeed_lab::ip_in(dut, &words).expect("configure the bridge by hand");
    }
    // And its placement, as its owner would tune it: d0's receive (the bridge's whole
    // forwarding path) in a NAPI thread on core 1, away from the generator's core.
    place_napi(dut, "wsxt-d0", 1, &mut Vec::new()).expect("place d0's NAPI thread");
    for (pid, _) in napi_threads("wsxt-d0") {
        run("chrt", &["-f", "-p", "1", &pid.to_string()]).expect("make d0's NAPI real-time");
    }
    let before = links(&wirespeed_lab::ip_in(dut, &["-o", "link", "show"]).unwrap());
    let out = std::env::temp_dir().join(format!("wirespeed-{prefix}"));
    let _ = std::fs::remove_dir_all(&out);
    let bench = |extra: &[&str]| {
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &lab.tester_ns,
                env!("CARGO_BIN_EXE_wirespeed"),
            ])
            .args(["bench", "rfc2544", "--dut", "external"])
            .args(extra)
            .arg("--out")
            .arg(&out)
            .output()
            .expect("run wirespeed bench")
    };
    // A wrong interface is named with the fix, and nothing runs.
    let wrong = bench(&["--tx", "wsxt-t0", "--rx", "wsxt-t9"]);
    let text = String::from_utf8_lossy(&wrong.stderr);
    assert!(!wrong.status.success());
    assert!(
        text.contains("interface wsxt-t9 does not exist") && text.contains("ip netns exec"),
        "{text}"
    );
    assert!(!out.exists(), "nothing was written");
    // Behind a gigabit link, say: the search starts at that line rate and never goes above.
    let run = bench(
        &[
            &["--tx", "wsxt-t0", "--rx", "wsxt-t1", "--link-speed", "1"],
            TINY_SEARCH,
        ]
        .concat(),
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    assert!(run.status.success(), "{stdout}\n{stderr}");
    let report = from_json(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let dut_setup = &report.setup.dut;
    assert_eq!(dut_setup.name, "external");
    assert!(
        dut_setup.host.starts_with("external")
            && dut_setup
                .host
                .contains("sends on wsxt-t0 and receives on wsxt-t1"),
        "{}",
        dut_setup.host
    );
    assert!(
        dut_setup.commands.iter().all(|c| c.starts_with('#')),
        "{:?}",
        dut_setup.commands
    );
    assert_eq!(report.setup.link_bits_per_second, 1e9);
    let gigabit_line = wirespeed_tester::rfc2544::line_rate(1e9, 64);
    let rates: Vec<f64> = report.results[0]
        .searches()
        .flatten()
        .map(|trial| trial.spec.load.rate())
        .collect();
    assert!(
        rates.first().is_some_and(|&first| first == gigabit_line)
            && rates.iter().all(|&rate| rate <= gigabit_line),
        "the search's rates {rates:?} against the gigabit line rate {gigabit_line}"
    );
    let ndr = report.results[0].ndr().expect("an NDR");
    assert!(
        ndr > PLAUSIBLE_NDR,
        "NDR {ndr} frames/s: {stdout}\n{stderr}"
    );
    let after = links(&wirespeed_lab::ip_in(dut, &["-o", "link", "show"]).unwrap());
    assert_eq!(before, after, "the DuT's namespace was left as it was");
    assert_eq!(before.len(), 4, "{before:?}");
    drop(lab);
    wirespeed_lab::assert_gone_for_test(prefix);
    let _ = std::fs::remove_dir_all(&out);
}

/// What the tester could have changed of each link in `ip -o link show` output: its name,
/// MTU, qdisc and master (carrier and timers change by themselves).
fn links(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let after = |key: &str| {
                let at = words.iter().position(|word| *word == key);
                at.and_then(|at| words.get(at + 1)).copied().unwrap_or("-")
            };
            let name = words.get(1).copied().unwrap_or("-");
            [name, after("mtu"), after("qdisc"), after("master")].join(" ")
        })
        .collect()
}

#[test]
fn a_linux_bridge_set_up_over_ssh_forwards_and_its_steps_went_through_ssh() {
    let _cores = common::alone();
    let prefix = "wsst";
    if !wirespeed_lab::installed_for_test("sshd") || !wirespeed_lab::installed_for_test("ssh") {
        return;
    }
    // Pairs 0 and 1 carry the frames; pair 2 is the management link the ssh client reaches
    // the server over (the bridge takes d0's address away from the host).
    let Some(mut lab) = wirespeed_lab::up_for_test(&TestbedConfig {
        prefix: prefix.into(),
        pairs: 3,
        calibration: true,
        ..TestbedConfig::default()
    }) else {
        return;
    };
    lab.backpressure().unwrap();
    let keys = SshKeys::new(prefix);
    let server_address = lab.pairs[2].dut_ipv4.to_string();
    let _server = Sshd::start(&lab, &keys, &server_address);
    let destination = format!("root@{server_address}");
    let host = Host::Ssh {
        destination: destination.clone(),
        config: Some(keys.client_config.clone()),
    };
    // The client runs where the tester does: in the tester namespace, which reaches pair 2.
    let _inside = wirespeed_lab::enter(&lab.tester_ns).unwrap();
    wait_for_ssh(&host);
    let mut bridge = LinuxBridge::new();
    bridge.set_host(host.clone()).unwrap();
    let local_release = run("uname", &["-r"]).unwrap();
    assert_eq!(
        bridge.version(),
        Some(format!("Linux {}", local_release.trim())),
        "asked over ssh"
    );
    let wiring = Wiring {
        dut_host: Some(host.clone()),
        ..Wiring::of(&lab).unwrap()
    };
    let config = SuiteConfig {
        frame_sizes: vec![64],
        trial_seconds: 0.2,
        calibration_seconds: 0.2,
        resolution: Resolution::Relative(0.6),
        latency_loads: Vec::new(),
        plan: Plan {
            receiver_cpu: 0,
            ..Plan::default()
        },
        ..SuiteConfig::default()
    };
    let report = wirespeed_tester::suite::run(
        &wiring,
        Some(&lab),
        &mut bridge,
        &config,
        Default::default(),
        &AtomicBool::new(false),
        &mut |_| {},
    );
    let dut = &report.setup.dut;
    assert!(
        dut.host
            .starts_with(&format!("{destination}, set up over ssh")),
        "{}",
        dut.host
    );
    let ssh = format!(
        "ssh -o BatchMode=yes -F {} {destination} -- ",
        keys.client_config.display()
    );
    let bridge_name = format!("{prefix}-br");
    assert!(
        dut.commands.iter().any(|c| *c
            == format!(
                "{ssh}ip link add name {bridge_name} type bridge stp_state 0 forward_delay 0"
            )),
        "{:#?}",
        dut.commands
    );
    assert!(
        dut.commands.iter().all(|c| c.starts_with(&ssh)),
        "{:#?}",
        dut.commands
    );
    let ndr = report.results.first().and_then(|r| r.ndr());
    assert!(
        ndr.is_some_and(|ndr| ndr > PLAUSIBLE_NDR),
        "NDR {ndr:?}: {:?}",
        report.notes
    );
    // The DuT's NAPI thread was placed on the DuT core over ssh, as the lab's would be here.
    assert!(
        report.setup.core_pinning.iter().any(|pin| pin.core == 1
            && pin.thread.starts_with(&format!("napi/{prefix}-d0-"))
            && pin.thread.ends_with(&format!("on ssh {destination})"))),
        "{:?}",
        report.setup.core_pinning
    );
    // The teardown ran over ssh too: the bridge is gone from the DuT namespace.
    assert!(wirespeed_lab::ip_in(&lab.dut_ns, &["link", "show", &bridge_name]).is_err());
    drop(_inside);
    drop(_server);
    drop(lab);
    wirespeed_lab::assert_gone_for_test(prefix);
}

/// Waits until the server takes connections (it starts in the background).
fn wait_for_ssh(host: &Host) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match host.run(&["true"], None) {
            Ok(_) => return,
            Err(error) if Instant::now() > deadline => panic!("ssh never connected: {error}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// A throwaway host key, user key, authorized_keys, known_hosts and client configuration in a
/// directory of their own, removed when dropped.
struct SshKeys {
    dir: PathBuf,
    client_config: PathBuf,
}

impl SshKeys {
    fn new(prefix: &str) -> SshKeys {
        let dir = std::env::temp_dir().join(format!("wirespeed-{prefix}-ssh"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let keys = SshKeys {
            client_config: dir.join("ssh_config"),
            dir,
        };
        for name in ["host_key", "user_key"] {
            let path = keys.dir.join(name);
            run(
                "ssh-keygen",
                &[
                    "-q",
                    "-t",
                    "ed25519",
                    "-N",
                    "",
                    "-f",
                    &path.to_string_lossy(),
                ],
            )
            .expect("ssh-keygen");
        }
        let public = |name: &str| std::fs::read_to_string(keys.dir.join(name)).unwrap();
        std::fs::write(keys.dir.join("authorized_keys"), public("user_key.pub")).unwrap();
        keys
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }

    /// The known_hosts line and client configuration for a server at `address`.
    fn for_server(&self, address: &str) {
        let host_key = std::fs::read_to_string(self.dir.join("host_key.pub")).unwrap();
        let key: Vec<&str> = host_key.split_whitespace().take(2).collect();
        std::fs::write(
            self.dir.join("known_hosts"),
            format!("{address} {}\n", key.join(" ")),
        )
        .unwrap();
        std::fs::write(
            &self.client_config,
            format!(
                "Host {address}\n  IdentityFile {}\n  IdentitiesOnly yes\n  UserKnownHostsFile {}\n  \
                 StrictHostKeyChecking yes\n  ConnectTimeout 5\n",
                self.path("user_key"),
                self.path("known_hosts")
            ),
        )
        .unwrap();
    }
}

impl Drop for SshKeys {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// sshd in the foreground in the lab's DuT namespace, killed when dropped (also when the test
/// fails).
struct Sshd(Child);

impl Sshd {
    fn start(lab: &Testbed, keys: &SshKeys, address: &str) -> Sshd {
        keys.for_server(address);
        // sshd's privilege separation directory, which the package's service would make.
        std::fs::create_dir_all("/run/sshd").unwrap();
        let config = keys.dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "ListenAddress {address}\nHostKey {}\nAuthorizedKeysFile {}\n\
                 PermitRootLogin prohibit-password\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPidFile none\n",
                keys.path("host_key"),
                keys.path("authorized_keys")
            ),
        )
        .unwrap();
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &lab.dut_ns,
                "/usr/sbin/sshd",
                "-D",
                "-e",
                "-f",
            ])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start sshd");
        Sshd(child)
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
