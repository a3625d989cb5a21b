//! Fuzz target for the configuration loader: any text must give a config or an error that
//! points into the file, never a panic or a hang. The error names a line the text has, its
//! excerpt is that line, and its column is on it, so that an editor can go to the place.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(error) = wirespeed_control::config::parse("fuzz.toml", text) {
        assert_eq!(error.file, "fuzz.toml");
        let named = error
            .line
            .checked_sub(1)
            .and_then(|index| text.split('\n').nth(index))
            .unwrap_or_else(|| panic!("no line {} in the text: {error}", error.line));
        assert_eq!(error.excerpt, named.trim_end(), "{error}");
        assert!(
            error.column >= 1 && error.column <= named.chars().count() + 1,
            "{error}"
        );
        assert!(
            !error.message.is_empty() && !error.fix.is_empty(),
            "{error:?}"
        );
    }
});
