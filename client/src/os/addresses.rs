//! This machine's own IP addresses (every interface), through `if-addrs` (getifaddrs on Unix,
//! GetAdaptersAddresses on Windows): `doctor` needs them to recognise a broker name that points
//! back at this machine's own public address (a hairpin through the router).

use std::net::IpAddr;

/// Every address of every interface that is up, loopback included; empty if the OS will not
/// say.
pub(crate) fn local() -> Vec<IpAddr> {
    if_addrs::get_if_addrs()
        .map(|ifs| ifs.into_iter().map(|i| i.ip()).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_machine_has_a_loopback_address() {
        assert!(super::local().iter().any(std::net::IpAddr::is_loopback));
    }
}
