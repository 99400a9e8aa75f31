//! `doctor`'s reading of a profile's ssh_config and the Include editing of ~/.ssh/config, on
//! arbitrary text.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = shiqi_connect::doctor::tunnel_config::parse(&text, "shiqi-tunnel", Path::new("/home/u"));
    let (edited, _) =
        shiqi_connect::ssh::include::add_include(&text, "/home/u/.shiqi/x/ssh_config", "# shiqi");
    if let Some(edited) = edited {
        // Idempotent: adding the same Include again changes nothing.
        let (again, _) = shiqi_connect::ssh::include::add_include(
            &edited,
            "/home/u/.shiqi/x/ssh_config",
            "# shiqi",
        );
        assert!(again.is_none(), "a second add_include changed the file");
    }
});
