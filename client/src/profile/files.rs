//! The files of a profile folder: their names, and the catalogue that says of each what it is
//! made from, when a profile has it, and whether it holds a secret. Setup, rotate, renew, the
//! tunnel's refresh, the folder swap and doctor all learn what a profile holds here.

use super::Profile;

/// The private key, PKCS#8 PEM.
pub(crate) const CLIENT_KEY: &str = "client.key";
/// Leaf certificate then chain, PEM.
pub(crate) const CLIENT_CRT: &str = "client.crt";
/// The CA certificate, PEM.
pub(crate) const CA_CRT: &str = "ca.crt";
/// Key and chain, PKCS#12, alias `client`.
pub(crate) const KEYSTORE: &str = "keystore.p12";
/// The CA as a trusted entry, PKCS#12, alias `shiqi-ca`.
pub(crate) const TRUSTSTORE: &str = "truststore.p12";
/// The password of both PKCS#12 files.
pub(crate) const KEYSTORE_PASSWORD: &str = "keystore.password";
/// Java Kafka client settings.
pub(crate) const CLIENT_PROPERTIES: &str = "client.properties";
/// librdkafka (kcat) settings.
pub(crate) const LIBRDKAFKA_CONF: &str = "librdkafka.conf";
/// MySQL/MariaDB client option file.
pub(crate) const MY_CNF: &str = "my.cnf";
/// The tunnel's ssh config.
pub(crate) const SSH_CONFIG: &str = "ssh_config";
/// How to set up DataGrip.
pub(crate) const DATAGRIP_MD: &str = "DATAGRIP.md";
/// Environment variables for apps, scripts and Compose (`env_file:`).
pub(crate) const SHIQI_ENV: &str = "shiqi.env";
/// This profile's facts.
pub(crate) const PROFILE_JSON: &str = "profile.json";

/// What a profile file is made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The private key (PKCS#8 PEM).
    Key,
    /// The leaf certificate and its chain (PEM).
    Chain,
    /// The CA certificate (PEM).
    Ca,
    /// Key and chain as PKCS#12.
    Keystore,
    /// The CA as PKCS#12.
    Truststore,
    /// The PKCS#12 password.
    Password,
    /// `render/templates/NAME.j2`, rendered from the profile.
    Template(&'static str),
    /// `profile.json`: written last, so a reader that finds it finds every file it lists.
    Facts,
}

/// When a profile has the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum When {
    /// Every profile.
    Always,
    /// Profiles of a server with Kafka brokers.
    WithKafka,
    /// Profiles of a server with MySQL.
    WithMysql,
}

/// The client that reads a config file, whose rules doctor's lint applies to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reader {
    /// A Java Kafka client (`.properties`).
    Java,
    /// librdkafka (kcat).
    Librdkafka,
    /// The MySQL/MariaDB client (an option file).
    Mysql,
}

/// One kind of profile file: the one place setup, rotate, renew, the tunnel's refresh, the
/// folder swap and doctor learn what a profile holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Kind {
    /// The file's name in the profile folder.
    pub(crate) name: &'static str,
    /// Holds a secret (the key, the password, or a config with the password): doctor
    /// allows no group or other bits on it.
    pub(crate) secret: bool,
    /// When the profile has it.
    pub(crate) when: When,
    /// What it is made from.
    pub(crate) source: Source,
    /// The client that reads it, for a config file doctor lints.
    pub(crate) lint: Option<Reader>,
}

impl Kind {
    /// Whether `profile` has this file.
    pub(crate) fn present(&self, profile: &Profile) -> bool {
        match self.when {
            When::Always => true,
            When::WithKafka => !profile.brokers.is_empty(),
            When::WithMysql => profile.mysql.is_some(),
        }
    }
}

/// Every file of a profile, in the order they are written (`profile.json` last). A new
/// file is one entry here and, when rendered, its template.
pub(crate) const CATALOGUE: &[Kind] = &[
    Kind {
        name: CLIENT_KEY,
        secret: true,
        when: When::Always,
        source: Source::Key,
        lint: None,
    },
    Kind {
        name: CLIENT_CRT,
        secret: false,
        when: When::Always,
        source: Source::Chain,
        lint: None,
    },
    Kind {
        name: CA_CRT,
        secret: false,
        when: When::Always,
        source: Source::Ca,
        lint: None,
    },
    Kind {
        name: KEYSTORE,
        secret: true,
        when: When::Always,
        source: Source::Keystore,
        lint: None,
    },
    Kind {
        name: TRUSTSTORE,
        secret: false,
        when: When::Always,
        source: Source::Truststore,
        lint: None,
    },
    Kind {
        name: KEYSTORE_PASSWORD,
        secret: true,
        when: When::Always,
        source: Source::Password,
        lint: None,
    },
    Kind {
        name: SSH_CONFIG,
        secret: false,
        when: When::Always,
        source: Source::Template("ssh_config"),
        lint: None,
    },
    Kind {
        name: DATAGRIP_MD,
        secret: false,
        when: When::Always,
        source: Source::Template("DATAGRIP.md"),
        lint: None,
    },
    Kind {
        name: CLIENT_PROPERTIES,
        secret: true,
        when: When::WithKafka,
        source: Source::Template("client.properties"),
        lint: Some(Reader::Java),
    },
    Kind {
        name: LIBRDKAFKA_CONF,
        secret: false,
        when: When::WithKafka,
        source: Source::Template("librdkafka.conf"),
        lint: Some(Reader::Librdkafka),
    },
    Kind {
        name: MY_CNF,
        secret: false,
        when: When::WithMysql,
        source: Source::Template("my.cnf"),
        lint: Some(Reader::Mysql),
    },
    Kind {
        name: SHIQI_ENV,
        secret: false,
        when: When::Always,
        source: Source::Template("shiqi.env"),
        lint: None,
    },
    Kind {
        name: PROFILE_JSON,
        secret: false,
        when: When::Always,
        source: Source::Facts,
        lint: None,
    },
];

/// The password in an existing profile's `keystore.password`, if it holds one.
pub(crate) fn read_password(dir: &std::path::Path) -> Option<shiqi_ca::Secret<String>> {
    let text = std::fs::read_to_string(dir.join(KEYSTORE_PASSWORD)).ok()?;
    let pw = text.trim_end_matches(['\n', '\r']);
    (!pw.is_empty()).then(|| shiqi_ca::Secret::new(pw.to_owned()))
}

/// The certificate files of the profile in `dir`, as probes log in with them.
pub(crate) fn identity(dir: &std::path::Path) -> crate::probe::Identity {
    crate::probe::Identity {
        ca: dir.join(CA_CRT),
        cert: dir.join(CLIENT_CRT),
        key: dir.join(CLIENT_KEY),
    }
}

/// The kind of the file named `name`, if it is a profile file.
pub(crate) fn kind(name: &str) -> Option<&'static Kind> {
    CATALOGUE.iter().find(|k| k.name == name)
}
