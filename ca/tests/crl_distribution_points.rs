//! Certificates that name where their CRL is, read back by OpenSSL: the URI is in the
//! certificate, and a CRL built from the inventory revokes exactly the revoked serial
//! (`openssl verify -crl_check`). Java's CRLDP fetching was checked by hand against the stack's
//! brokers (see docs/lifetimes.md, "Revocation").
#![forbid(unsafe_code)]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures, not profile files"
)]

use std::process::Command;

use shiqi_ca::crl::{DEFAULT_CRL_VALIDITY, build_crl, read_crl};
use shiqi_ca::inventory::{CertKind, Inventory, NewCert};
use shiqi_ca::issue::{Ca, ServerUsage, Validity};
use shiqi_ca::key::{KeyType, PrivateKey};
use shiqi_ca::policy::check_csr;
use shiqi_ca::{ProfileName, csr};
use time::{Duration, OffsetDateTime};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const URL: &str = "file:///var/lib/shiqi-ca/pub/crl.der";

fn openssl(dir: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn every_leaf_names_the_crl_and_the_crl_revokes_exactly_the_revoked() -> TestResult {
    let dir = tempfile::tempdir()?;
    let now = OffsetDateTime::now_utc();
    let ca = Ca::create(
        KeyType::EcdsaP256,
        "shiqi-connect CA",
        Validity::starting_now(now, Duration::days(30)),
    )?
    .with_crl_distribution_point(Some(URL));
    assert_eq!(ca.crl_distribution_points(), [URL]);
    let mut inventory = Inventory::open(&dir.path().join("inventory.sqlite"))?;
    let validity = Validity::starting_now(now, Duration::days(1));

    let mut issue_client = |who: &str| -> Result<shiqi_ca::cert::Cert, shiqi_ca::Error> {
        let name: ProfileName = who.parse()?;
        let key = PrivateKey::generate(KeyType::EcdsaP256)?;
        let pem = csr::build(&key, &name)?;
        let checked = check_csr(pem.as_bytes(), &name)?;
        let record = inventory.issue(|serial| {
            let cert = ca.issue_client(&checked, serial, validity)?;
            Ok(NewCert {
                name: who.to_owned(),
                kind: CertKind::Client,
                subject: cert.subject().to_owned(),
                not_before: cert.not_before(),
                not_after: cert.not_after(),
                der: cert.der().to_vec(),
            })
        })?;
        shiqi_ca::cert::Cert::from_der(&record.der)
    };
    let old = issue_client("saige")?;
    let new = issue_client("saige")?;
    let server_key = PrivateKey::generate(KeyType::EcdsaP256)?;
    let server = ca.issue_server(
        "kafka-broker",
        &["localhost".to_owned()],
        ServerUsage::ServerAndClient,
        &server_key,
        &shiqi_ca::Serial::random(),
        validity,
    )?;
    let admin = ca.issue_for_key(
        "shiqi-admin",
        &server_key,
        &shiqi_ca::Serial::random(),
        validity,
    )?;
    for cert in [&old, &new, &server, &admin] {
        assert_eq!(cert.crl_distribution_points(), [URL], "{}", cert.subject());
    }

    // OpenSSL sees the extension as written.
    std::fs::write(dir.path().join("ca.crt"), ca.cert().pem())?;
    std::fs::write(dir.path().join("old.crt"), old.pem())?;
    std::fs::write(dir.path().join("new.crt"), new.pem())?;
    let (ok, text) = openssl(dir.path(), &["x509", "-in", "old.crt", "-noout", "-text"]);
    assert!(ok, "{text}");
    assert!(
        text.contains("X509v3 CRL Distribution Points") && text.contains(&format!("URI:{URL}")),
        "{text}"
    );

    // Revoke the old one; the CRL built from the inventory lists it and only it.
    inventory.revoke(old.serial(), Some("superseded"), now)?;
    let number = inventory.next_crl_number()?;
    let crl = build_crl(
        &ca.issuer()?,
        &inventory.revoked()?,
        number,
        now,
        DEFAULT_CRL_VALIDITY,
    )?;
    std::fs::write(dir.path().join("crl.pem"), &crl.pem)?;
    assert_eq!(
        read_crl(&crl.der, ca.cert().der())?.serials,
        vec![old.serial().clone()]
    );
    let verify = |leaf: &str| {
        openssl(
            dir.path(),
            &[
                "verify",
                "-crl_check",
                "-CAfile",
                "ca.crt",
                "-CRLfile",
                "crl.pem",
                leaf,
            ],
        )
    };
    let (ok, text) = verify("old.crt");
    assert!(!ok && text.contains("certificate revoked"), "{text}");
    let (ok, text) = verify("new.crt");
    assert!(ok, "{text}");
    Ok(())
}

#[test]
fn no_distribution_point_unless_configured() -> TestResult {
    let now = OffsetDateTime::now_utc();
    let ca = Ca::create(
        KeyType::EcdsaP256,
        "shiqi-connect CA",
        Validity::starting_now(now, Duration::days(30)),
    )?
    .with_crl_distribution_point(Some("  "));
    let key = PrivateKey::generate(KeyType::EcdsaP256)?;
    let cert = ca.issue_for_key(
        "shiqi-admin",
        &key,
        &shiqi_ca::Serial::random(),
        Validity::starting_now(now, Duration::days(1)),
    )?;
    assert!(cert.crl_distribution_points().is_empty());
    Ok(())
}
