//! Fuzz target for the configuration loader: any text (valid UTF-8 or not) must give a config
//! or an error that names a place in the file, never a panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(error) = wirespeed_control::config::parse("fuzz.toml", text) {
        // The place named must exist in the text (line 1 for an empty file).
        assert!(
            error.line >= 1 && error.line <= text.lines().count().max(1) + 1,
            "{error}"
        );
    }
});
