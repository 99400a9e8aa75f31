//! The agent's signing policy on arbitrary stdin bytes: a refusal, never a panic; anything it
//! accepts names the requested CN and a supported key.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shiqi_ca::ProfileName;

fuzz_target!(|data: &[u8]| {
    let Ok(name) = "saige".parse::<ProfileName>() else {
        return;
    };
    if let Ok(csr) = shiqi_ca::policy::check_csr(data, &name) {
        assert_eq!(csr.name(), &name);
        assert!(!csr.public_key_der().is_empty());
    }
});
