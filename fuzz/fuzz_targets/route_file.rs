//! Fuzz target for the route file parser (`route load`): any bytes give a route list or one
//! error that names the file and a line the file has, never a panic. The result must not depend
//! on how the bytes arrive (one `read` of the whole file or one byte per `read`), and a list
//! holds at most one route per line and each gateway once.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::HashSet;
use wirespeed_control::tables::parse_routes;
use wirespeed_fuzz::OneByte;

fuzz_target!(|data: &[u8]| {
    let lines = wirespeed_fuzz::line_count(data);
    let whole = parse_routes("fuzz.routes", data);
    let trickled = parse_routes("fuzz.routes", OneByte(data));
    match (&whole, &trickled) {
        (Ok(list), Ok(again)) => {
            assert_eq!(
                (list.v4_len(), list.v6_len(), list.gateways()),
                (again.v4_len(), again.v6_len(), again.gateways())
            );
            assert!(list.v4_len() + list.v6_len() <= lines);
            let distinct: HashSet<_> = list.gateways().iter().collect();
            assert_eq!(distinct.len(), list.gateways().len(), "each gateway once");
            assert!(list.gateways().len() <= list.v4_len() + list.v6_len());
        }
        (Err(error), Err(again)) => {
            assert_eq!(error, again);
            assert_eq!(error.file, "fuzz.routes");
            assert!(error.line >= 1 && error.line <= lines, "{error}");
            assert!(
                !error.message.is_empty() && !error.fix.is_empty(),
                "{error:?}"
            );
        }
        _ => panic!("whole: {whole:?}, one byte at a time: {trickled:?}"),
    }
});
