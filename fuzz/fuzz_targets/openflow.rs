//! Fuzz target for the OpenFlow 1.3 codec (`wirespeed_openflow`): any bytes a controller may
//! send. Decoding never panics; a refusal names a spec error type the switch can send back; a
//! message it accepts encodes to bytes that decode to the same message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirespeed_openflow::Message;

fuzz_target!(|data: &[u8]| {
    // The agent cuts its stream by the header's length; give the decoder a whole message.
    let mut bytes = data.to_vec();
    if bytes.len() >= 4 {
        let len = u16::try_from(bytes.len()).unwrap_or(u16::MAX);
        bytes.truncate(usize::from(len));
        bytes[2..4].copy_from_slice(&len.to_be_bytes());
    }
    match Message::decode(&bytes) {
        Ok((_, message)) => {
            let again = message.encode(1).expect("a decoded message fits again");
            let (_, back) = Message::decode(&again).expect("what we encode decodes");
            assert_eq!(back, message);
        }
        // A type the spec names (0 to 13, or the ONF's experimenter errors of bundles):
        // `Display` falls back to the bare number for any other.
        Err(refused) => assert!(
            !refused.error.to_string().starts_with("type "),
            "{refused:?}"
        ),
    }
});
