//! Test identities: a key made here, its CSR signed by the real agent over the server's shell,
//! and the files the real clients read (PEM, PKCS#12, a Java `client.properties`).

use std::path::{Path, PathBuf};

use shiqi_ca::key::{KeyType, PrivateKey};
use shiqi_ca::keystore::{self, P12Format};
use shiqi_ca::protocol::SignResponse;
use shiqi_ca::{ProfileName, Secret};

use crate::stack::Stack;

/// One client identity's files.
pub(crate) struct Identity {
    pub(crate) dir: PathBuf,
    pub(crate) serial: String,
}

impl Identity {
    pub(crate) fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    pub(crate) fn path_str(&self, file: &str) -> String {
        self.path(file).display().to_string()
    }
}

/// Signs a fresh P-256 key for `name` through the agent and writes its files into `dir`.
pub(crate) fn signed(stack: &Stack, name: &str, dir: &Path) -> Identity {
    let key = PrivateKey::generate(KeyType::EcdsaP256).expect("key");
    let profile: ProfileName = name.parse().expect("valid test name");
    let csr = shiqi_ca::csr::build(&key, &profile).expect("csr");
    let out = stack
        .agent(&["sign", "--name", name], Some(csr.as_bytes()))
        .ok();
    let response: SignResponse = serde_json::from_str(&out.stdout).expect("sign answers JSON");
    let chain = format!(
        "{}{}",
        response.certificate_pem,
        response
            .chain_pem
            .iter()
            .map(|c| c.as_str())
            .collect::<String>()
    );
    write_files(name, dir, &key, &chain, response.ca_pem.as_str());
    Identity {
        dir: dir.to_owned(),
        serial: response.serial.to_hex(),
    }
}

/// An identity from a CA of its own: the brokers and MariaDB must refuse it.
pub(crate) fn foreign(name: &str, dir: &Path, server_ca_pem: &str) -> Identity {
    use shiqi_ca::issue::{Ca, Validity};
    let now = time::OffsetDateTime::now_utc();
    let other = Ca::create(
        KeyType::EcdsaP256,
        "shiqi-connect CA",
        Validity::starting_now(now, time::Duration::days(1)),
    )
    .expect("other CA");
    let key = PrivateKey::generate(KeyType::EcdsaP256).expect("key");
    let profile: ProfileName = name.parse().expect("valid test name");
    let csr = shiqi_ca::csr::build(&key, &profile).expect("csr");
    let checked = shiqi_ca::policy::check_csr(csr.as_bytes(), &profile).expect("policy");
    let cert = other
        .issue_client(
            &checked,
            &shiqi_ca::Serial::random(),
            Validity::starting_now(now, time::Duration::days(1)),
        )
        .expect("issue");
    let chain = format!("{}{}", cert.pem(), other.cert().pem());
    // Trust the real server CA so that only the client side is wrong.
    write_files(name, dir, &key, &chain, server_ca_pem);
    Identity {
        dir: dir.to_owned(),
        serial: cert.serial().to_hex(),
    }
}

fn write_files(name: &str, dir: &Path, key: &PrivateKey, chain: &str, ca_pem: &str) {
    let password = Secret::random_password();
    let write = |file: &str, bytes: &[u8]| std::fs::write(dir.join(file), bytes).expect("write");
    write("client.key", key.to_pkcs8_pem().expose().as_bytes());
    write("client.crt", chain.as_bytes());
    write("ca.crt", ca_pem.as_bytes());
    write(
        "keystore.p12",
        &keystore::keystore(key, chain, "client", &password, P12Format::Modern).expect("keystore"),
    );
    write(
        "truststore.p12",
        &keystore::truststore(ca_pem, "shiqi-ca", &password, P12Format::Modern)
            .expect("truststore"),
    );
    let d = dir.display();
    let pw = password.expose();
    let common = format!(
        "security.protocol=SSL\nssl.truststore.type=PKCS12\nssl.truststore.location={d}/truststore.p12\n\
         ssl.truststore.password={pw}\nrequest.timeout.ms=5000\ndefault.api.timeout.ms=10000\n"
    );
    write(
        "client.properties",
        format!(
            "# {name}\n{common}ssl.keystore.type=PKCS12\nssl.keystore.location={d}/keystore.p12\n\
             ssl.keystore.password={pw}\nssl.key.password={pw}\n"
        )
        .as_bytes(),
    );
    write("nocert.properties", common.as_bytes());
    write("password", pw.as_bytes());
}
