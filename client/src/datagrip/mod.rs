//! DataGrip's MySQL/MariaDB data source for a profile: the clipboard block ("Import from
//! Clipboard") and the project files `.idea/dataSources.xml` (shared) and
//! `.idea/dataSources.local.xml` (per user), written with quick-xml.
//!
//! Shapes (FIELD-NOTES "DataGrip import"; seen in DataGrip's own files and pastes, Border0's
//! CLI): the two files hold one `<data-source>` each per source, matched by `uuid`; a clipboard
//! block holds both halves in one element. The login is by certificate only: `no-auth` (no
//! password prompt) with the user in the JDBC URL, and the SSL tab's PEM files; through the
//! tunnel's local endpoint (which does TLS with the certificate itself) no SSL settings at all.
//! No SSH: the profile's own tunnel runs.
//!
//! [`DataSource`] and [`xml`] are pure; [`project`] reads and writes the two files (through
//! `fsutil`), [`launch`] starts DataGrip.

use std::path::PathBuf;

use sha1::{Digest as _, Sha1};
use shiqi_ca::ProfileName;

use crate::jdbc::{Driver, Verification};

pub(crate) mod launch;
pub(crate) mod project;
pub(crate) mod xml;

/// The SSL tab of a data source that does TLS itself (direct mode).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tls {
    /// How the server's certificate is checked.
    pub(crate) verification: Verification,
    /// The CA (PEM).
    pub(crate) ca_crt: PathBuf,
    /// The client certificate (PEM).
    pub(crate) client_crt: PathBuf,
    /// The private key (PKCS#8 PEM; DataGrip's drivers refuse PKCS#1).
    pub(crate) client_key: PathBuf,
}

impl Tls {
    /// The SSL tab's mode: "Full verification" or "Verify CA".
    pub(crate) fn ssl_mode(&self) -> &'static str {
        match self.verification {
            Verification::Full => "VERIFY_FULL",
            Verification::Ca => "VERIFY_CA",
        }
    }
}

/// One data source, as DataGrip stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DataSource {
    /// Stable across runs and rotations ([`uuid_for`]), so a later run replaces it.
    pub(crate) uuid: String,
    /// The name in Database Explorer.
    pub(crate) name: String,
    /// Which driver DataGrip uses.
    pub(crate) driver: Driver,
    /// The tunnel's local port.
    pub(crate) port: u16,
    /// The MySQL user.
    pub(crate) user: ProfileName,
    /// The TLS settings; `None` through the tunnel's local endpoint, which does TLS itself.
    pub(crate) tls: Option<Tls>,
    /// The command that starts the tunnel, for the data source's comment.
    pub(crate) tunnel_up: String,
    /// Whether the driver may send local files (`setup --allow-local-infile`).
    pub(crate) allow_local_infile: bool,
}

impl DataSource {
    /// `jdbc:mysql://127.0.0.1:PORT/?user=NAME`: the user in the URL, because with `no-auth`
    /// DataGrip passes none. No secret: the certificate comes from the SSL settings.
    pub(crate) fn jdbc_url(&self) -> String {
        // With TLS (direct mode) only the verified server could ask for files.
        crate::jdbc::plain_url(
            self.driver,
            self.port,
            &self.user,
            self.allow_local_infile || self.tls.is_some(),
        )
    }

    /// DataGrip's id of its bundled driver.
    pub(crate) fn driver_ref(&self) -> &'static str {
        match self.driver {
            Driver::Mysql => "mysql.8",
            Driver::Mariadb => "mariadb",
        }
    }

    /// The block DataGrip's "Import from Clipboard" reads.
    pub(crate) fn clipboard(&self) -> String {
        format!(
            "#DataSourceSettings#\n#LocalDataSource: {}\n#BEGIN#\n{}\n#END#\n",
            self.name,
            xml::clipboard_element(self)
        )
    }
}

/// The data source's name for profile `name`.
pub(crate) fn display_name(name: &ProfileName) -> String {
    format!("shiqi {name}")
}

/// A name-based UUID (RFC 9562 version 5, URL namespace) of the profile and its server: the
/// same profile gives the same uuid on every run, so `--project` replaces its own entry.
pub(crate) fn uuid_for(name: &ProfileName, server_host: &str, server_port: u16) -> String {
    uuid_v5(
        &URL_NAMESPACE,
        format!("shiqi-connect://{server_host}:{server_port}/{name}").as_bytes(),
    )
}

/// RFC 9562 §6.6, the URL namespace.
const URL_NAMESPACE: [u8; 16] = [
    0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8,
];

fn uuid_v5(namespace: &[u8; 16], name: &[u8]) -> String {
    let mut h = Sha1::new();
    h.update(namespace);
    h.update(name);
    let digest = h.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&digest[..16]);
    b[6] = (b[6] & 0x0f) | 0x50; // version 5
    b[8] = (b[8] & 0x3f) | 0x80; // RFC variant
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample(driver: Driver) -> DataSource {
        let name: ProfileName = "saige".parse().expect("name");
        DataSource {
            uuid: uuid_for(&name, "10.231.0.1", 22),
            name: display_name(&name),
            driver,
            port: 3306,
            user: name,
            tls: Some(Tls {
                verification: Verification::Full,
                ca_crt: "/home/saige/.shiqi/saige/ca.crt".into(),
                client_crt: "/home/saige/.shiqi/saige/client.crt".into(),
                client_key: "/home/saige/.shiqi/saige/client.key".into(),
            }),
            tunnel_up: "shiqi-connect tunnel up saige".into(),
            allow_local_infile: false,
        }
    }

    #[test]
    fn uuids_are_rfc_9562_version_5_and_stable() {
        // RFC 9562 appendix / Python's `uuid.uuid5(NAMESPACE_DNS, "python.org")`.
        let dns = [
            0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4,
            0x30, 0xc8,
        ];
        assert_eq!(
            uuid_v5(&dns, b"python.org"),
            "886313e1-3b8a-5372-9b90-0c9aee199e5d"
        );
        let name: ProfileName = "saige".parse().expect("name");
        let a = uuid_for(&name, "vm", 22);
        assert_eq!(a, uuid_for(&name, "vm", 22));
        assert_ne!(a, uuid_for(&name, "vm", 2222));
        assert_eq!(&a[14..15], "5");
    }

    #[test]
    fn urls_carry_the_user_and_no_secret() {
        assert_eq!(
            sample(Driver::Mysql).jdbc_url(),
            "jdbc:mysql://127.0.0.1:3306/?user=saige"
        );
        let m = sample(Driver::Mariadb);
        assert_eq!(m.jdbc_url(), "jdbc:mariadb://127.0.0.1:3306/?user=saige");
        assert_eq!(
            (m.driver_ref(), m.tls.as_ref().map(Tls::ssl_mode)),
            ("mariadb", Some("VERIFY_FULL"))
        );
        // Through the local endpoint (no TLS in the client): no `LOAD DATA LOCAL` unless the
        // profile allows it.
        let mut local = sample(Driver::Mariadb);
        local.tls = None;
        assert_eq!(
            local.jdbc_url(),
            "jdbc:mariadb://127.0.0.1:3306/?user=saige&allowLocalInfile=false"
        );
        local.driver = Driver::Mysql;
        assert_eq!(
            local.jdbc_url(),
            "jdbc:mysql://127.0.0.1:3306/?user=saige&allowLoadLocalInfile=false"
        );
        local.allow_local_infile = true;
        assert_eq!(local.jdbc_url(), "jdbc:mysql://127.0.0.1:3306/?user=saige");
    }
}
