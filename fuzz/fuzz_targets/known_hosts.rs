//! known_hosts parsing and matching on arbitrary files and host names: no panic, and a verdict
//! that agrees with the entries found.
#![no_main]

use libfuzzer_sys::fuzz_target;
use russh::keys::ssh_key::PublicKey;
use shiqi_connect::ssh::hostfile::{self, Verdict};

const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (name, file) = text.split_once('\n').unwrap_or(("host", &text));
    let Ok(key) = PublicKey::from_openssh(KEY) else {
        return;
    };
    let entries = hostfile::entries(file, name);
    match hostfile::verdict(file, name, &key) {
        Verdict::Unknown => assert!(
            entries
                .iter()
                .all(|e| e.key.is_none() || e.marker.is_some())
        ),
        Verdict::Known { line }
        | Verdict::Revoked { line }
        | Verdict::Changed { line }
        | Verdict::CertAuthority { line } => assert!(entries.iter().any(|e| e.line == line)),
    }
});
