//! The one validator of every number on the command line: clap value parsers that refuse what
//! is not finite or not in range, naming the range, while the arguments are parsed, so that no
//! subcommand starts (builds a lab, opens a socket, sends a frame) with a value it cannot use.
//!
//! Before it, each subcommand checked its own numbers after parsing, in its own words, and some
//! not at all: `gen --duration NaN` panicked in `Duration::from_secs_f64`, `--rate-mpps 0` sent
//! a batch and exited 0, `--size 1519` sent frames the interface dropped. A parser here is also
//! run on the default values, so a default out of its own range fails every run at once.
//!
//! ```ignore
//! #[arg(long, default_value_t = 5.0, value_parser = numbers::real(0.001, 86_400.0))]
//! duration: f64,
//! ```

use std::fmt::Display;
use std::str::FromStr;

/// Frame sizes with FCS the generators and the suites send: Ethernet's 64 bytes to jumbo
/// frames of 9018 (an MTU of 9000). A frame above 1518 bytes needs an interface whose MTU
/// holds it ([`mtu_for_frame`]): the suites build their lab with it, `gen` checks it.
pub const FRAME_SIZES: (u16, u16) = (64, 9018);

/// The MTU an untagged frame of `size` bytes with FCS needs (its Ethernet header and FCS are
/// not part of the MTU), at least Ethernet's 1500.
pub fn mtu_for_frame(size: u16) -> u32 {
    (u32::from(size).saturating_sub(18)).max(wirespeed_lab::DEFAULT_MTU)
}

/// Seconds of any trial, blast or interval: a millisecond to a day.
pub const SECONDS: (f64, f64) = (0.001, 86_400.0);

/// Flow counts: UDP source ports, so at most 2^16 distinct ones.
pub const FLOWS: (u32, u32) = (1, 65_536);

/// Frames per batch: a [`wirespeed_packet::Batch`] holds 1 to 256.
pub const BATCH: (usize, usize) = (1, 256);

/// Repeats of a trial, a run or a search: enough for any spread, few enough to end.
pub const REPEATS: (u16, u16) = (1, 1000);

/// Nice values Linux accepts.
pub const NICE: (i32, i32) = (-20, 19);

/// A value parser for a finite real number in `min..=max`.
pub fn real(
    min: f64,
    max: f64,
) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
    move |text| {
        text.trim()
            .parse::<f64>()
            .ok()
            .filter(|value| value.is_finite() && (min..=max).contains(value))
            .ok_or_else(|| format!("give a number in {min}..={max}"))
    }
}

/// A value parser for a whole number in `min..=max`.
pub fn whole<T>(
    min: T,
    max: T,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: FromStr + PartialOrd + Display + Copy + Send + Sync + 'static,
{
    move |text| {
        text.trim()
            .parse::<T>()
            .ok()
            .filter(|value| (min..=max).contains(value))
            .ok_or_else(|| format!("give a whole number in {min}..={max}"))
    }
}

/// [`real`] over [`SECONDS`].
pub fn seconds() -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
    real(SECONDS.0, SECONDS.1)
}

/// [`whole`] over [`FRAME_SIZES`].
pub fn frame_size() -> impl Fn(&str) -> Result<u16, String> + Clone + Send + Sync + 'static {
    whole(FRAME_SIZES.0, FRAME_SIZES.1)
}

/// [`whole`] over [`FLOWS`].
pub fn flows() -> impl Fn(&str) -> Result<u32, String> + Clone + Send + Sync + 'static {
    whole(FLOWS.0, FLOWS.1)
}

/// [`whole`] over [`BATCH`].
pub fn batch() -> impl Fn(&str) -> Result<usize, String> + Clone + Send + Sync + 'static {
    whole(BATCH.0, BATCH.1)
}

/// [`whole`] over [`REPEATS`].
pub fn repeats<T>() -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: FromStr + PartialOrd + Display + Copy + Send + Sync + From<u16> + 'static,
{
    whole(T::from(REPEATS.0), T::from(REPEATS.1))
}

/// `--nice N|off`, the one priority option of every `bench` command: the nice value of the
/// benchmark's threads, or `off` to leave their priorities alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nice(pub Option<i32>);

/// A value parser for [`Nice`]: a whole number in [`NICE`] or `off`.
pub fn nice_or_off() -> impl Fn(&str) -> Result<Nice, String> + Clone + Send + Sync + 'static {
    |text| match text.trim() {
        "off" => Ok(Nice(None)),
        number => whole(NICE.0, NICE.1)(number)
            .map(|nice| Nice(Some(nice)))
            .map_err(|error| format!("{error}, or off")),
    }
}

/// Says on stderr that `old` is an old spelling, kept for one release, and what to write.
/// The value of an option given by its old name `old`, with the deprecation note that names
/// `new`; `None` when the old name was not used.
pub fn renamed<T>(value: Option<T>, old: &str, new: &str) -> Option<T> {
    if value.is_some() {
        deprecated(old, new);
    }
    value
}

pub fn deprecated(old: &str, new: &str) {
    eprintln!("note: {old} is deprecated and goes in the next release; write {new}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_is_a_value_or_off() {
        assert_eq!(nice_or_off()("-20"), Ok(Nice(Some(-20))));
        assert_eq!(nice_or_off()("off"), Ok(Nice(None)));
        assert_eq!(
            nice_or_off()("-21").unwrap_err(),
            "give a whole number in -20..=19, or off"
        );
    }

    #[test]
    fn reals_outside_the_range_or_not_finite_are_refused_naming_the_range() {
        let parse = real(0.001, 86_400.0);
        assert_eq!(parse("5"), Ok(5.0));
        assert_eq!(parse(" 0.001 "), Ok(0.001));
        assert_eq!(parse("86400"), Ok(86_400.0));
        for bad in [
            "NaN", "nan", "inf", "-inf", "0", "-1", "86400.5", "1e999", "five", "",
        ] {
            assert_eq!(
                parse(bad),
                Err("give a number in 0.001..=86400".to_string()),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_frame_above_1518_bytes_needs_an_mtu_that_holds_it() {
        assert_eq!(
            [64, 1518, 1519, 9018].map(mtu_for_frame),
            [1500, 1500, 1501, 9000]
        );
    }

    #[test]
    fn whole_numbers_outside_the_range_are_refused_naming_the_range() {
        let parse = frame_size();
        assert_eq!(parse("64"), Ok(64));
        assert_eq!(parse("9018"), Ok(9018));
        for bad in ["63", "9019", "65536", "-1", "64.0", "x"] {
            assert_eq!(
                parse(bad),
                Err("give a whole number in 64..=9018".to_string()),
                "{bad:?}"
            );
        }
        assert_eq!(
            repeats::<u32>()("0"),
            Err("give a whole number in 1..=1000".into())
        );
        assert_eq!(repeats::<usize>()("1000"), Ok(1000));
    }
}
