//! Network names that cross the wire: the hosts and ports the agent reports and the laptop writes
//! into `ssh_config`, `client.properties`, `librdkafka.conf` and `my.cnf`.
//!
//! A [`Host`] is a DNS name made of RFC 1123 labels or an IP literal, nothing else: no
//! whitespace, quotes, `#`, control characters or path separators can be inside one, so a host
//! is a safe word in every config format we write and on a command line. Parsed once, here.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::Error;

/// The longest DNS name (RFC 1035 §2.3.4, without the root's trailing dot).
pub const MAX_HOST_LEN: usize = 253;
/// The longest DNS label.
const MAX_LABEL_LEN: usize = 63;

/// A DNS name (RFC 1123 labels, at most 253 characters) or an IP literal.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Host(String);

impl Host {
    /// The host as written; a safe token in config files and shell words.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The IP address, when the host is an IP literal.
    pub fn ip(&self) -> Option<IpAddr> {
        self.0.parse().ok()
    }

    /// True for `localhost`, `*.localhost` (RFC 6761) and loopback IP literals.
    pub fn is_loopback(&self) -> bool {
        let lower = self.0.to_ascii_lowercase();
        lower == "localhost"
            || lower.ends_with(".localhost")
            || self.ip().is_some_and(|ip| ip.is_loopback())
    }
}

impl FromStr for Host {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let invalid = |why: &'static str| Error::InvalidHost {
            host: s.chars().take(64).collect(),
            why,
        };
        if s.parse::<IpAddr>().is_ok() {
            return Ok(Self(s.to_owned()));
        }
        if s.is_empty() {
            return Err(invalid("it is empty"));
        }
        if s.len() > MAX_HOST_LEN {
            return Err(invalid("it is longer than 253 characters"));
        }
        for label in s.split('.') {
            if label.is_empty() {
                return Err(invalid(
                    "it has an empty label (two dots, or a dot at an end)",
                ));
            }
            if label.len() > MAX_LABEL_LEN {
                return Err(invalid("a label is longer than 63 characters"));
            }
            if !label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            {
                return Err(invalid(
                    "only letters, digits, `-` and `.` are allowed in a DNS name",
                ));
            }
            if label.starts_with('-') || label.ends_with('-') {
                return Err(invalid("a label starts or ends with `-`"));
            }
        }
        Ok(Self(s.to_owned()))
    }
}

/// A TCP port, 1–65535.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Port(u16);

impl Port {
    /// The port number (never 0).
    pub fn get(self) -> u16 {
        self.0
    }
}

impl TryFrom<u16> for Port {
    type Error = Error;

    fn try_from(n: u16) -> Result<Self, Error> {
        if n == 0 {
            return Err(Error::InvalidPort { port: n.into() });
        }
        Ok(Self(n))
    }
}

impl FromStr for Port {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let n: i64 = s.parse().map_err(|_| Error::InvalidPort { port: -1 })?;
        u16::try_from(n)
            .map_err(|_| Error::InvalidPort { port: n })
            .and_then(Self::try_from)
    }
}

impl fmt::Display for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Serialize for Port {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u16(self.0)
    }
}

impl<'de> Deserialize<'de> for Port {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = i64::deserialize(d)?;
        u16::try_from(n)
            .map_err(|_| Error::InvalidPort { port: n })
            .and_then(Self::try_from)
            .map_err(serde::de::Error::custom)
    }
}

/// `host:port`, with IPv6 literals in brackets (`[::1]:9094`), as Kafka's `bootstrap.servers`
/// spells an address.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    /// The host.
    pub host: Host,
    /// The port.
    pub port: Port,
}

impl FromStr for HostPort {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let invalid = || Error::InvalidHostPort {
            given: s.chars().take(64).collect(),
        };
        let (host, port) = match s.strip_prefix('[') {
            Some(rest) => {
                let (h, p) = rest.split_once("]:").ok_or_else(invalid)?;
                if h.parse::<std::net::Ipv6Addr>().is_err() {
                    return Err(invalid());
                }
                (h, p)
            }
            None => {
                let (h, p) = s.rsplit_once(':').ok_or_else(invalid)?;
                // An IPv6 literal needs its brackets, or the port is ambiguous.
                if h.contains(':') {
                    return Err(invalid());
                }
                (h, p)
            }
        };
        if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        Ok(Self {
            host: host.parse()?,
            port: port.parse()?,
        })
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.host.ip() {
            Some(IpAddr::V6(_)) => write!(f, "[{}]:{}", self.host, self.port),
            _ => write!(f, "{}:{}", self.host, self.port),
        }
    }
}

/// Kafka's `bootstrap.servers`: one or more [`HostPort`]s separated by commas.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Bootstrap(Vec<HostPort>);

impl Bootstrap {
    /// The addresses, in the order given.
    pub fn addresses(&self) -> &[HostPort] {
        &self.0
    }
}

impl FromStr for Bootstrap {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let list = s
            .split(',')
            .map(|a| a.trim().parse())
            .collect::<Result<Vec<HostPort>, Error>>()?;
        Ok(Self(list))
    }
}

impl fmt::Display for Bootstrap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, a) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{a}")?;
        }
        Ok(())
    }
}

crate::name::string_type!(Host, display);
crate::name::string_type!(HostPort);
crate::name::string_type!(Bootstrap);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_dns_names_and_ip_literals() {
        for ok in [
            "localhost",
            "kafka-1.example.com",
            "10.0.0.1",
            "::1",
            "fe80::1",
            "a",
            "x1.y2",
        ] {
            assert_eq!(ok.parse::<Host>().expect(ok).as_str(), ok);
        }
        let long = vec!["a".repeat(63); 3].join(".") + "." + &"b".repeat(61);
        assert_eq!(long.len(), 253);
        assert!(long.parse::<Host>().is_ok());
    }

    #[test]
    fn refuses_anything_that_could_break_a_config_line() {
        let long = "a".repeat(254);
        let label = "a".repeat(64);
        for bad in [
            "",
            "localhost\nMatch exec \"touch /tmp/x\"",
            "local host",
            "host\"",
            "host#x",
            "host'",
            "a..b",
            ".a",
            "a.",
            "-a",
            "a-",
            "a_b",
            "a/b",
            "h\u{1b}[31m",
            "h\0",
            "h\r",
            "ünï",
            long.as_str(),
            label.as_str(),
        ] {
            assert!(bad.parse::<Host>().is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn ports_are_1_to_65535() {
        assert!(serde_json::from_str::<Port>("0").is_err());
        assert!(serde_json::from_str::<Port>("65536").is_err());
        assert!(serde_json::from_str::<Port>("-1").is_err());
        assert_eq!(
            serde_json::from_str::<Port>("9094").expect("port").get(),
            9094
        );
        assert!("0".parse::<Port>().is_err() && "x".parse::<Port>().is_err());
    }

    #[test]
    fn host_port_round_trips_with_brackets_for_ipv6() {
        for s in ["localhost:9094", "10.0.0.1:1", "[::1]:9094"] {
            assert_eq!(s.parse::<HostPort>().expect(s).to_string(), s);
        }
        for bad in [
            "localhost",
            "::1:9094",
            "[x]:1",
            "h:0",
            "h:p",
            "h o:1",
            "h:1\n",
        ] {
            assert!(bad.parse::<HostPort>().is_err(), "accepted {bad:?}");
        }
    }
}
