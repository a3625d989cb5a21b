//! `fail_mode = "standalone"`: frames for the controller that no connection takes are
//! switched by the agent's learning switch, until a controller takes them again.

use std::time::{Duration, Instant};

use wirespeed_dataplane::app::openflow::packet_in::{self, Origin};
use wirespeed_dataplane::command::{Injection, Output};
use wirespeed_openflow::Message;

use super::connection::Timers;
use super::tests::{OneWorker, Peer, start_switch};
use super::{AgentConfig, FailMode};

/// A frame from host `src` to host `dst`.
fn frame(src: u8, dst: u8) -> Vec<u8> {
    let mut frame = vec![0u8; 60];
    frame[..6].copy_from_slice(&[2, 0, 0, 0, 0, dst]);
    frame[6..12].copy_from_slice(&[2, 0, 0, 0, 0, src]);
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    frame
}

/// Waits (at most 5 s) for the handler to have `count` injections; returns them.
fn injected(handler: &OneWorker, count: usize) -> Vec<Injection> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let injected = handler.injected.lock().unwrap().clone();
        if injected.len() >= count || Instant::now() > deadline {
            return injected;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn without_a_controller_the_agent_switches_table_misses_as_a_learning_switch() {
    let config = AgentConfig {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        fail_mode: FailMode::Standalone,
        ..AgentConfig::default()
    };
    let (agent, handler, mut worker, _) = start_switch(Timers::default(), config);
    let miss = Origin::default();
    let (one_to_two, two_to_one) = (frame(1, 2), frame(2, 1));
    // Host 2 unknown: flooded; host 1 learned on port index 0: straight there. A frame cut
    // short for the controller cannot be forwarded whole.
    assert!(packet_in::send(&mut worker, miss, 0, &one_to_two, u16::MAX));
    assert!(packet_in::send(&mut worker, miss, 1, &two_to_one, u16::MAX));
    assert!(packet_in::send(&mut worker, miss, 0, &one_to_two, 20));
    assert!(packet_in::send(&mut worker, miss, 0, &one_to_two, u16::MAX));
    let injection = |in_port, frame: &Vec<u8>, output| Injection {
        in_port: Some(in_port),
        frame: frame.clone(),
        outputs: vec![output],
    };
    assert_eq!(
        injected(&handler, 3),
        [
            injection(0, &one_to_two, Output::Flood),
            injection(1, &two_to_one, Output::Port(0)),
            injection(0, &one_to_two, Output::Port(1)),
        ]
    );

    // A controller is back: the frames are its own again, nothing is switched.
    let mut controller = Peer::hello(agent.local_addr().unwrap());
    assert_eq!(
        controller.ask(&Message::EchoRequest(vec![1])),
        vec![Message::EchoReply(vec![1])]
    );
    assert!(packet_in::send(&mut worker, miss, 1, &two_to_one, u16::MAX));
    let Message::PacketIn(packet_in) = controller.receive().1 else {
        panic!("no PACKET_IN");
    };
    assert_eq!(packet_in.data, two_to_one);
    // Had the agent switched it, it would have done so before sending the PACKET_IN.
    assert_eq!(handler.injected.lock().unwrap().len(), 3);
}
