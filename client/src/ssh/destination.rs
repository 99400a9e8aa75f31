//! What the user typed after `--server`, parsed as OpenSSH reads a destination.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, InputError};

/// What the user typed after `--server`: `user@host`, `ssh://user@host:port` or a Host alias.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Destination {
    /// `user@` part, if given.
    pub(crate) user: Option<String>,
    /// Host name, address (IPv6 without brackets) or `Host` alias.
    pub(crate) host: String,
    /// `:port` part (URI form only), if given.
    pub(crate) port: Option<u16>,
}

impl Destination {
    /// One hop of `ProxyJump` / `--jump`: `[user@]host[:port]` (a port without `ssh://`, as
    /// `ssh -J` takes it) or an `ssh://` URI.
    ///
    /// # Errors
    /// As [`Destination::from_str`].
    pub(crate) fn parse_jump(s: &str) -> Result<Self, Error> {
        if s.starts_with("ssh://") {
            return s.parse();
        }
        let host = s.rsplit_once('@').map_or(s, |(_, h)| h);
        if host.starts_with('[') || host.matches(':').count() == 1 {
            format!("ssh://{s}").parse()
        } else {
            s.parse()
        }
    }
}

impl FromStr for Destination {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = |why: &'static str| {
            Error::Input(InputError::InvalidDestination {
                given: s.chars().take(100).collect(),
                why,
            })
        };
        if s.is_empty() {
            return Err(bad("it is empty"));
        }
        if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("it contains spaces or control characters"));
        }
        let (rest, uri) = match s.strip_prefix("ssh://") {
            Some(rest) => (rest.strip_suffix('/').unwrap_or(rest), true),
            None => (s, false),
        };
        let (user, hostport) = match rest.rsplit_once('@') {
            Some(("", _)) => return Err(bad("the user before `@` is empty")),
            Some((u, h)) => (Some(u.to_owned()), h),
            None => (None, rest),
        };
        let (host, port) = if let Some(inner) = hostport.strip_prefix('[') {
            // `[::1]` or `[::1]:2222` (the port only in the URI form, as in OpenSSH).
            let (h, after) = inner
                .split_once(']')
                .ok_or_else(|| bad("`[` without a closing `]`"))?;
            let port = match after {
                "" => None,
                p => match p.strip_prefix(':') {
                    Some(p) if uri => Some(parse_port(p).ok_or_else(|| bad("invalid port"))?),
                    _ => return Err(bad("only `ssh://` destinations may carry a `:port`")),
                },
            };
            (h.to_owned(), port)
        } else if uri {
            match hostport.rsplit_once(':') {
                Some((h, p)) if !h.contains(':') => (
                    h.to_owned(),
                    Some(parse_port(p).ok_or_else(|| bad("invalid port"))?),
                ),
                Some(_) => return Err(bad("write IPv6 addresses in brackets: `[::1]`")),
                None => (hostport.to_owned(), None),
            }
        } else {
            (hostport.to_owned(), None)
        };
        if host.is_empty() {
            return Err(bad("the host is empty"));
        }
        if host.starts_with('-') {
            // ssh would read it as an option.
            return Err(bad("the host may not start with `-`"));
        }
        if host.contains(['/', '\'', '"', '\\', '`', '$', ';', '&', '|']) {
            return Err(bad("the host contains characters no host name has"));
        }
        if user
            .as_deref()
            .is_some_and(|u| u.starts_with('-') || u.contains(['/', ':']))
        {
            return Err(bad("the user contains characters ssh does not accept"));
        }
        Ok(Self { user, host, port })
    }
}

fn parse_port(p: &str) -> Option<u16> {
    p.parse::<u16>().ok().filter(|p| *p != 0)
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let user = self
            .user
            .as_deref()
            .map(|u| format!("{u}@"))
            .unwrap_or_default();
        match self.port {
            Some(p) => write!(f, "ssh://{user}{host}:{p}"),
            None => write!(f, "{user}{host}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest(s: &str) -> Destination {
        s.parse().expect("valid destination")
    }

    #[test]
    fn parses_the_openssh_destination_forms() {
        assert_eq!(
            dest("shiqi-dev@10.231.0.1"),
            Destination {
                user: Some("shiqi-dev".into()),
                host: "10.231.0.1".into(),
                port: None
            }
        );
        assert_eq!(
            dest("ssh://bob@example.org:2222"),
            Destination {
                user: Some("bob".into()),
                host: "example.org".into(),
                port: Some(2222)
            }
        );
        assert_eq!(
            dest("ssh://[::1]:2222/"),
            Destination {
                user: None,
                host: "::1".into(),
                port: Some(2222)
            }
        );
        assert_eq!(dest("root@[::1]").host, "::1");
        assert_eq!(dest("vm").host, "vm");
        assert_eq!(dest("ssh://host").port, None);
        // The last `@` separates the user, as in OpenSSH.
        assert_eq!(dest("a@b@host").user.as_deref(), Some("a@b"));
    }

    #[test]
    fn refuses_what_ssh_would_misread() {
        for bad in [
            "",
            "@host",
            "user@",
            "-oProxyCommand=x",
            "ssh://h:0",
            "ssh://h:99999",
            "[::1",
            "[::1]:22",
            "a b",
            "host;rm",
            "ssh://::1:22",
            "u@h\n",
        ] {
            assert!(bad.parse::<Destination>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn displays_round_trip() {
        for s in ["bob@host", "ssh://bob@[::1]:2222", "vm"] {
            assert_eq!(dest(s).to_string(), s);
        }
    }

    #[test]
    fn reads_jump_hops_as_ssh_j_does() {
        let hop = |s: &str| Destination::parse_jump(s).expect("valid hop");
        assert_eq!(hop("bob@bastion:2222").port, Some(2222));
        assert_eq!(hop("bob@bastion:2222").user.as_deref(), Some("bob"));
        assert_eq!(hop("bastion").port, None);
        assert_eq!(hop("[::1]:22").host, "::1");
        assert_eq!(hop("ssh://b@h:7").port, Some(7));
        assert!(Destination::parse_jump("a b").is_err());
    }
}
