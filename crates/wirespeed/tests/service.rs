//! The systemd unit in `dist/` is one systemd accepts as it is: `systemd-analyze verify` (from
//! Debian's systemd) finds no error or warning in it, with its ExecStart pointed at this build.

use std::process::Command;

#[test]
fn the_service_unit_verifies_cleanly() {
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../dist/wirespeed@.service"
    ))
    .unwrap();
    assert!(
        unit.contains("ExecStart=/usr/local/bin/wirespeed switch"),
        "{unit}"
    );
    // `systemctl reload` is the switch's SIGHUP reload.
    assert!(
        unit.contains("ExecReload=/bin/kill -HUP $MAINPID"),
        "{unit}"
    );
    // An instance of the template, its binary the one this test was built with (verify checks
    // that the executable exists).
    let dir = std::env::temp_dir().join(format!("wirespeed-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("wirespeed@test.service");
    std::fs::write(
        &path,
        unit.replace("/usr/local/bin/wirespeed", env!("CARGO_BIN_EXE_wirespeed")),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .expect("systemd-analyze (Debian's systemd)");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(out.status.success(), "{said}");
    // systemd only warns about a value it cannot parse (and ignores it): any word about the
    // unit is a mistake in it.
    assert!(!said.contains("wirespeed@test.service"), "{said}");
}
