//! Fuzz target for the ACL file parser (`acl load`): any bytes give rules or one error that
//! names the file and a line the file has, never a panic. The result must not depend on how the
//! bytes arrive, every rule it returns converts to the ACL stage's rule, and rules written back
//! as text (`permit|deny FIELD=VALUE...`, one per line) parse to the same rules.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirespeed_control::tables::parse_acl;
use wirespeed_dataplane::app::fields;
use wirespeed_dataplane::command::AclAction;
use wirespeed_fuzz::OneByte;

fuzz_target!(|data: &[u8]| {
    let lines = wirespeed_fuzz::line_count(data);
    let whole = parse_acl("fuzz.acl", data);
    assert_eq!(whole, parse_acl("fuzz.acl", OneByte(data)));
    match whole {
        Ok(rules) => {
            assert!(rules.len() <= lines);
            fields::acl_rules(&rules).expect("a rule the file parser took converts");
            let mut text = String::new();
            for rule in rules.iter() {
                text.push_str(match rule.action {
                    AclAction::Permit => "permit",
                    AclAction::Deny => "deny",
                });
                for (name, value) in &rule.fields {
                    text.push_str(&format!(" {name}={value}"));
                }
                text.push('\n');
            }
            let again = parse_acl("fuzz.acl", text.as_bytes()).expect("written rules parse");
            assert_eq!(rules, again);
        }
        Err(error) => {
            assert_eq!(error.file, "fuzz.acl");
            assert!(error.line >= 1 && error.line <= lines, "{error}");
            assert!(
                !error.message.is_empty() && !error.fix.is_empty(),
                "{error:?}"
            );
        }
    }
});
