//! JDBC URLs for a profile's MySQL/MariaDB through the tunnel, in each Java driver's own option
//! names. Pure: the caller reads the profile and the password; nothing here touches a file.
//!
//! - MySQL Connector/J 8/9 takes the certificate only from Java keystores, named by URL
//!   (`clientCertificateKeyStoreUrl=file:…`), and percent-decodes every option value.
//!   <https://dev.mysql.com/doc/connector-j/en/connector-j-connp-props-security.html>
//! - MariaDB Connector/J 3.x has its own names (`sslMode=verify-full`, `serverSslCert`,
//!   `keyStore` as a plain path), takes values verbatim (no percent-decoding: checked against
//!   3.5.11's `Configuration.parse`) and silently ignores names it does not know, so a
//!   Connector/J name on it would send no certificate and report nothing.
//!   <https://mariadb.com/docs/connectors/mariadb-connector-j/about-mariadb-connector-j/connection-parameters>
//!
//! Neither driver can read a password from a file, so both URLs hold the keystore password
//! (PKCS#12 needs one). The URL is a [`Secret`]: printed on stdout when asked for, never logged.

use std::fmt;
use std::path::Path;

use shiqi_ca::{ProfileName, Secret};

use crate::error::{DataGripError, Error};

/// Which Java driver the URL is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Driver {
    /// MySQL Connector/J (`com.mysql.cj.jdbc.Driver`, `jdbc:mysql:`), DataGrip's MySQL driver.
    Mysql,
    /// MariaDB Connector/J 3.x (`org.mariadb.jdbc.Driver`, `jdbc:mariadb:`).
    Mariadb,
}

impl Driver {
    /// The driver's class.
    pub(crate) fn class(self) -> &'static str {
        match self {
            Self::Mysql => "com.mysql.cj.jdbc.Driver",
            Self::Mariadb => "org.mariadb.jdbc.Driver",
        }
    }

    /// The driver's name, as the docs call it.
    pub(crate) fn title(self) -> &'static str {
        match self {
            Self::Mysql => "MySQL Connector/J",
            Self::Mariadb => "MariaDB Connector/J",
        }
    }

    /// The driver a server's greeting version asks for (`10.11.6-MariaDB-0+deb12u1`).
    pub(crate) fn for_server_version(version: &str) -> Self {
        if version.to_ascii_lowercase().contains("mariadb") {
            Self::Mariadb
        } else {
            Self::Mysql
        }
    }
}

impl fmt::Display for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Mysql => "mysql",
            Self::Mariadb => "mariadb",
        })
    }
}

/// How much of the server's certificate the client checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Verification {
    /// The CA and the name: the certificate must name `127.0.0.1`, where the tunnel listens.
    Full,
    /// The CA only, for a server certificate that does not name `127.0.0.1`.
    Ca,
}

impl Verification {
    /// From the names in the server's certificate: full when it covers the address clients
    /// dial (the tunnel's `127.0.0.1`).
    pub(crate) fn for_names(covers_tunnel_address: bool) -> Self {
        if covers_tunnel_address {
            Self::Full
        } else {
            Self::Ca
        }
    }
}

impl fmt::Display for Verification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Full => "full",
            Self::Ca => "ca",
        })
    }
}

/// The address clients dial: the tunnel's local end.
pub(crate) const TUNNEL_HOST: &str = "127.0.0.1";

/// What a JDBC URL needs from a profile; all paths absolute.
pub(crate) struct Endpoint<'a> {
    /// The tunnel's local port for MySQL.
    pub(crate) port: u16,
    /// The MySQL user (the profile name).
    pub(crate) user: &'a ProfileName,
    /// `ca.crt` (PEM).
    pub(crate) ca_crt: &'a Path,
    /// `keystore.p12`.
    pub(crate) keystore: &'a Path,
    /// `truststore.p12`.
    pub(crate) truststore: &'a Path,
    /// The password of both PKCS#12 files.
    pub(crate) password: &'a Secret<String>,
}

/// The URL for `driver`.
///
/// # Errors
/// [`DataGripError::UrlValue`] when a path or the password cannot be written in that driver's URL.
pub(crate) fn url(
    driver: Driver,
    verify: Verification,
    e: &Endpoint<'_>,
) -> Result<Secret<String>, Error> {
    match driver {
        Driver::Mysql => Ok(connector_j(verify, e)),
        Driver::Mariadb => mariadb(verify, e),
    }
}

fn connector_j(verify: Verification, e: &Endpoint<'_>) -> Secret<String> {
    let mode = match verify {
        Verification::Full => "VERIFY_IDENTITY",
        Verification::Ca => "VERIFY_CA",
    };
    let pw = e.password.expose();
    let options: [(&str, String); 8] = [
        ("user", e.user.to_string()),
        ("sslMode", mode.to_owned()),
        ("trustCertificateKeyStoreUrl", file_url(e.truststore)),
        ("trustCertificateKeyStoreType", "PKCS12".to_owned()),
        ("trustCertificateKeyStorePassword", pw.clone()),
        ("clientCertificateKeyStoreUrl", file_url(e.keystore)),
        ("clientCertificateKeyStoreType", "PKCS12".to_owned()),
        ("clientCertificateKeyStorePassword", pw.clone()),
    ];
    let query: Vec<String> = options
        .iter()
        .map(|(k, v)| format!("{k}={}", query_escape(v)))
        .collect();
    Secret::new(format!(
        "jdbc:mysql://{TUNNEL_HOST}:{}/?{}",
        e.port,
        query.join("&")
    ))
}

fn mariadb(verify: Verification, e: &Endpoint<'_>) -> Result<Secret<String>, Error> {
    let mode = match verify {
        Verification::Full => "verify-full",
        Verification::Ca => "verify-ca",
    };
    // Verbatim values: the driver splits the query at `&` and does not decode `%XX`.
    let verbatim = |field: &'static str, value: String| {
        if value.contains('&') || value.chars().any(char::is_control) {
            return Err(Error::DataGrip(DataGripError::UrlValue {
                driver: Driver::Mariadb.title(),
                field,
                // The password is never shown.
                value: if field == "keyStorePassword" {
                    "***".to_owned()
                } else {
                    shiqi_ca::text::one_line(&value, 80)
                },
            }));
        }
        Ok(format!("{field}={value}"))
    };
    let query = [
        verbatim("user", e.user.to_string())?,
        verbatim("sslMode", mode.to_owned())?,
        // The CA's PEM: no truststore password needed.
        verbatim("serverSslCert", path_text(e.ca_crt))?,
        verbatim("keyStore", path_text(e.keystore))?,
        verbatim("keyStoreType", "PKCS12".to_owned())?,
        verbatim("keyStorePassword", e.password.expose().clone())?,
    ];
    Ok(Secret::new(format!(
        "jdbc:mariadb://{TUNNEL_HOST}:{}/?{}",
        e.port,
        query.join("&")
    )))
}

/// The URL for `driver` through the tunnel's local endpoint, which does TLS with the
/// certificate itself: the user (no SSL option, no keystore, no password), and unless
/// `allow_local_infile` the driver's switch for `LOAD DATA LOCAL` off: a server, or a process
/// posing as the endpoint while the tunnel is down, could ask for any file the JVM can read
/// (MariaDB Connector/J allows it by default; Connector/J does not, said anyway).
/// Connector/J's default `sslMode=PREFERRED` goes without TLS when the endpoint offers none, and
/// MariaDB Connector/J's default is no TLS.
pub(crate) fn plain_url(
    driver: Driver,
    port: u16,
    user: &ProfileName,
    allow_local_infile: bool,
) -> String {
    let (scheme, infile) = match driver {
        Driver::Mysql => ("mysql", "allowLoadLocalInfile"),
        Driver::Mariadb => ("mariadb", "allowLocalInfile"),
    };
    let mut url = format!("jdbc:{scheme}://{TUNNEL_HOST}:{port}/?user={user}");
    if !allow_local_infile {
        url.push_str(&format!("&{infile}=false"));
    }
    url
}

/// A path as the drivers read it: `/` separators (Java accepts them on Windows too).
fn path_text(p: &Path) -> String {
    p.to_string_lossy().replace('\\', "/")
}

/// `file:/abs/path` (RFC 8089) with each byte outside a path segment's safe set as `%XX`;
/// Java's `file:` handler decodes them. A Windows path becomes `file:/C:/…`.
pub(crate) fn file_url(p: &Path) -> String {
    let text = path_text(p);
    let text = if text.starts_with('/') {
        text
    } else {
        format!("/{text}")
    };
    let mut out = String::from("file:");
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~:".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A query value for Connector/J, which percent-decodes values (`URLDecoder`, so `+` would
/// become a space): everything but unreserved characters, `/` and `:` as `%XX`.
fn query_escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~:".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    struct Paths {
        ca: PathBuf,
        ks: PathBuf,
        ts: PathBuf,
    }

    fn paths(dir: &str) -> Paths {
        let d = PathBuf::from(dir);
        Paths {
            ca: d.join("ca.crt"),
            ks: d.join("keystore.p12"),
            ts: d.join("truststore.p12"),
        }
    }

    fn url_for(driver: Driver, verify: Verification, dir: &str, pw: &str) -> Result<String, Error> {
        let p = paths(dir);
        let name: ProfileName = "saige".parse().expect("name");
        let pw = Secret::new(pw.to_owned());
        let e = Endpoint {
            port: 3306,
            user: &name,
            ca_crt: &p.ca,
            keystore: &p.ks,
            truststore: &p.ts,
            password: &pw,
        };
        url(driver, verify, &e).map(|s| s.expose().clone())
    }

    #[test]
    fn connector_j_urls_name_keystores_as_file_urls() {
        let u = url_for(
            Driver::Mysql,
            Verification::Full,
            "/home/saige/.shiqi/saige",
            "Pw23",
        )
        .expect("url");
        assert_eq!(
            u,
            "jdbc:mysql://127.0.0.1:3306/?user=saige&sslMode=VERIFY_IDENTITY\
             &trustCertificateKeyStoreUrl=file:/home/saige/.shiqi/saige/truststore.p12\
             &trustCertificateKeyStoreType=PKCS12&trustCertificateKeyStorePassword=Pw23\
             &clientCertificateKeyStoreUrl=file:/home/saige/.shiqi/saige/keystore.p12\
             &clientCertificateKeyStoreType=PKCS12&clientCertificateKeyStorePassword=Pw23"
        );
        let ca = url_for(Driver::Mysql, Verification::Ca, "/h/s", "p").expect("url");
        assert!(ca.contains("&sslMode=VERIFY_CA&"), "{ca}");
    }

    #[test]
    fn connector_j_values_are_escaped_twice_where_a_file_url_needs_it() {
        // Connector/J decodes the query value once (`%2520` → `%20`), then Java's `file:`
        // handler decodes the path (`%20` → ` `); `+` and `&` never reach it raw.
        let u = url_for(Driver::Mysql, Verification::Full, "/a b/c+d", "p&q+r").expect("url");
        assert!(
            u.contains("clientCertificateKeyStoreUrl=file:/a%2520b/c%252Bd/keystore.p12&"),
            "{u}"
        );
        assert!(
            u.contains("clientCertificateKeyStorePassword=p%26q%2Br"),
            "{u}"
        );
    }

    #[test]
    fn mariadb_urls_use_its_own_names_and_plain_paths() {
        let u = url_for(
            Driver::Mariadb,
            Verification::Full,
            "/home/saige/.shiqi/saige",
            "Pw23",
        )
        .expect("url");
        assert_eq!(
            u,
            "jdbc:mariadb://127.0.0.1:3306/?user=saige&sslMode=verify-full\
             &serverSslCert=/home/saige/.shiqi/saige/ca.crt\
             &keyStore=/home/saige/.shiqi/saige/keystore.p12&keyStoreType=PKCS12\
             &keyStorePassword=Pw23"
        );
        let ca = url_for(Driver::Mariadb, Verification::Ca, "/h/s", "p").expect("url");
        assert!(ca.contains("&sslMode=verify-ca&"), "{ca}");
        // Spaces pass verbatim (the driver does not decode); `&` would start a new option.
        let spaced = url_for(Driver::Mariadb, Verification::Full, "/a b", "p").expect("url");
        assert!(spaced.contains("keyStore=/a b/keystore.p12&"), "{spaced}");
        let e = url_for(Driver::Mariadb, Verification::Full, "/a&b", "p").expect_err("&");
        assert!(
            e.to_string().contains("`serverSslCert` = `/a&b/ca.crt`"),
            "{e}"
        );
        let e = url_for(Driver::Mariadb, Verification::Full, "/a", "p&w").expect_err("&");
        assert!(
            !e.to_string().contains("p&w"),
            "the password never shows: {e}"
        );
    }

    #[test]
    fn picks_driver_and_mode_from_what_the_server_shows() {
        assert_eq!(
            Driver::for_server_version("10.11.6-MariaDB-0+deb12u1"),
            Driver::Mariadb
        );
        assert_eq!(Driver::for_server_version("8.4.3"), Driver::Mysql);
        assert_eq!(Verification::for_names(true), Verification::Full);
        assert_eq!(Verification::for_names(false), Verification::Ca);
        assert_eq!(
            file_url(Path::new(r"C:\Users\s\k.p12")),
            "file:/C:/Users/s/k.p12"
        );
    }
}
