//! The CA's output read back by the real consumers: OpenSSL verifies chains and parses CSRs,
//! keytool opens the PKCS#12 files. Fixtures are generated at run time, never committed.
#![forbid(unsafe_code)]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures, not profile files"
)]

use std::path::Path;
use std::process::Command;

use shiqi_ca::error::CsrRefusal;
use shiqi_ca::issue::{Ca, Validity};
use shiqi_ca::key::{KeyType, PrivateKey};
use shiqi_ca::keystore::{self, P12Format};
use shiqi_ca::policy::check_csr;
use shiqi_ca::{Error, ProfileName, Secret, Serial, csr};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn ca() -> Result<Ca, Error> {
    Ca::create(
        KeyType::EcdsaP256,
        "shiqi-connect CA",
        Validity::starting_now(time::OffsetDateTime::now_utc(), time::Duration::days(30)),
    )
}

fn name(s: &str) -> ProfileName {
    s.parse().expect("test names are valid")
}

fn run(cmd: &mut Command) -> Result<String, Box<dyn std::error::Error>> {
    let out = cmd.output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        return Err(format!("{cmd:?} failed: {text}").into());
    }
    Ok(text)
}

fn openssl(dir: &Path, args: &[&str]) -> Result<String, Box<dyn std::error::Error>> {
    run(Command::new("openssl").current_dir(dir).args(args))
}

fn issue(ca: &Ca, key: &PrivateKey, who: &str) -> Result<shiqi_ca::cert::Cert, Error> {
    let pem = csr::build(key, &name(who))?;
    let checked = check_csr(pem.as_bytes(), &name(who))?;
    ca.issue_client(
        &checked,
        &Serial::random(),
        Validity::starting_now(time::OffsetDateTime::now_utc(), time::Duration::days(1)),
    )
}

#[test]
fn openssl_verifies_client_certs_for_every_key_type() -> TestResult {
    let dir = tempfile::tempdir()?;
    let ca = ca()?;
    std::fs::write(dir.path().join("ca.crt"), ca.cert().pem())?;
    for kt in [
        KeyType::EcdsaP256,
        KeyType::EcdsaP384,
        KeyType::Ed25519,
        KeyType::Rsa2048,
    ] {
        let key = PrivateKey::generate(kt)?;
        let cert = issue(&ca, &key, "saige")?;
        assert!(cert.matches_key(&key));
        assert!(cert.is_signed_by(ca.cert()));
        std::fs::write(dir.path().join("leaf.crt"), cert.pem())?;
        let verify = openssl(
            dir.path(),
            &[
                "verify",
                "-CAfile",
                "ca.crt",
                "-purpose",
                "sslclient",
                "leaf.crt",
            ],
        )?;
        assert!(verify.contains("leaf.crt: OK"), "{kt}: {verify}");
        let text = openssl(dir.path(), &["x509", "-in", "leaf.crt", "-noout", "-text"])?;
        assert!(text.contains("CA:FALSE"), "{text}");
        assert!(text.contains("TLS Web Client Authentication"), "{text}");
        assert!(text.contains("Subject: CN = saige"), "{text}");
        assert!(text.contains("Version: 3"), "{text}");
    }
    Ok(())
}

#[test]
fn mysql_subject_strings_use_the_oneline_form_in_rdn_order() -> TestResult {
    let ca = ca()?;
    let cert = issue(&ca, &PrivateKey::generate(KeyType::EcdsaP256)?, "saige")?;
    assert_eq!(cert.subject_oneline(), "/CN=saige");
    assert_eq!(
        cert.issuer_oneline(),
        "/O=shiqi-connect/CN=shiqi-connect CA"
    );
    assert_eq!(ca.cert().subject_oneline(), cert.issuer_oneline());
    Ok(())
}

#[test]
fn server_certs_carry_the_names_clients_verify() -> TestResult {
    let ca = ca()?;
    let key = PrivateKey::generate(KeyType::EcdsaP256)?;
    let cert = ca.issue_server(
        "kafka-broker",
        &["localhost".to_owned(), "127.0.0.1".to_owned()],
        shiqi_ca::issue::ServerUsage::ServerAndClient,
        &key,
        &Serial::random(),
        Validity::starting_now(time::OffsetDateTime::now_utc(), time::Duration::days(1)),
    )?;
    assert!(cert.covers_host("localhost"));
    assert!(cert.covers_host("127.0.0.1"));
    assert!(!cert.covers_host("broker-0.example.com"));
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("ca.crt"), ca.cert().pem())?;
    std::fs::write(dir.path().join("srv.crt"), cert.pem())?;
    let out = openssl(
        dir.path(),
        &[
            "verify",
            "-CAfile",
            "ca.crt",
            "-purpose",
            "sslserver",
            "srv.crt",
        ],
    )?;
    assert!(out.contains("OK"), "{out}");
    Ok(())
}

/// Each policy rule, with a CSR made by OpenSSL (a foreign implementation) where rcgen would not
/// produce the violation.
#[test]
fn policy_refuses_each_violation_with_its_reason() -> TestResult {
    let dir = tempfile::tempdir()?;
    let d = dir.path();
    let refusal = |pem: &[u8], who: &str| match check_csr(pem, &name(who)) {
        Err(Error::CsrRefused { reason }) => Some(reason),
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => None,
    };
    let make = |key_args: &[&str],
                subj: &str,
                extra: &[&str]|
     -> Result<Vec<u8>, Box<dyn std::error::Error>> {
        openssl(d, &[&["genpkey", "-out", "k.pem"][..], key_args].concat())?;
        openssl(
            d,
            &[
                &[
                    "req", "-new", "-key", "k.pem", "-subj", subj, "-out", "r.csr",
                ][..],
                extra,
            ]
            .concat(),
        )?;
        Ok(std::fs::read(d.join("r.csr"))?)
    };
    let p256 = ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"];

    // Accepted: OpenSSL P-256 and Ed25519 CSRs with CN only.
    assert_eq!(refusal(&make(&p256, "/CN=saige", &[])?, "saige"), None);
    assert_eq!(
        refusal(
            &make(&["-algorithm", "ED25519"], "/CN=saige", &[])?,
            "saige"
        ),
        None
    );

    let wrong_cn = refusal(&make(&p256, "/CN=mallory", &[])?, "saige");
    assert!(
        matches!(wrong_cn, Some(CsrRefusal::Subject { .. })),
        "{wrong_cn:?}"
    );
    let extra_rdn = refusal(&make(&p256, "/O=x/CN=saige", &[])?, "saige");
    assert!(
        matches!(extra_rdn, Some(CsrRefusal::Subject { .. })),
        "{extra_rdn:?}"
    );
    let san = refusal(
        &make(
            &p256,
            "/CN=saige",
            &["-addext", "subjectAltName=DNS:evil.example"],
        )?,
        "saige",
    );
    assert_eq!(
        san,
        Some(CsrRefusal::Extension("subjectAltName".to_owned()))
    );
    let ca = refusal(
        &make(
            &p256,
            "/CN=saige",
            &["-addext", "basicConstraints=critical,CA:TRUE"],
        )?,
        "saige",
    );
    assert_eq!(ca, Some(CsrRefusal::AsksForCa));
    let ski = refusal(
        &make(
            &p256,
            "/CN=saige",
            &["-addext", "subjectKeyIdentifier=hash"],
        )?,
        "saige",
    );
    assert!(matches!(ski, Some(CsrRefusal::Extension(_))), "{ski:?}");
    let rsa1024 = refusal(
        &make(
            &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024"],
            "/CN=saige",
            &[],
        )?,
        "saige",
    );
    assert!(
        matches!(rsa1024, Some(CsrRefusal::Key(ref k)) if k == "RSA-1024"),
        "{rsa1024:?}"
    );
    let p521 = refusal(
        &make(
            &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-521"],
            "/CN=saige",
            &[],
        )?,
        "saige",
    );
    assert!(matches!(p521, Some(CsrRefusal::Key(_))), "{p521:?}");

    // A flipped byte in the signature.
    let good = make(&p256, "/CN=saige", &[])?;
    let der =
        shiqi_ca::cert::pem_blocks(std::str::from_utf8(&good)?, "CERTIFICATE REQUEST")?.remove(0);
    let mut bad = der.clone();
    let last = bad.len() - 3;
    bad[last] ^= 0x01;
    let bad_pem = shiqi_ca::cert::pem_encode("CERTIFICATE REQUEST", &bad);
    assert_eq!(
        refusal(bad_pem.as_bytes(), "saige"),
        Some(CsrRefusal::BadSignature)
    );

    let two = [good.clone(), good.clone()].concat();
    assert_eq!(refusal(&two, "saige"), Some(CsrRefusal::MoreThanOne));
    assert_eq!(refusal(b"hello", "saige"), Some(CsrRefusal::NotPem));
    assert_eq!(
        refusal(&vec![b'A'; 65 * 1024], "saige"),
        Some(CsrRefusal::TooLarge)
    );
    Ok(())
}

#[test]
fn keytool_reads_keystores_and_truststores_in_both_formats() -> TestResult {
    let dir = tempfile::tempdir()?;
    let ca = ca()?;
    let key = PrivateKey::generate(KeyType::EcdsaP256)?;
    let cert = issue(&ca, &key, "saige")?;
    let chain = format!("{}{}", cert.pem(), ca.cert().pem());
    let password = Secret::random_password();
    for format in [P12Format::Modern, P12Format::Legacy] {
        let ks = keystore::keystore(&key, &chain, "client", &password, format)?;
        let ts = keystore::truststore(&ca.cert().pem(), "shiqi-ca", &password, format)?;
        std::fs::write(dir.path().join("ks.p12"), &ks)?;
        std::fs::write(dir.path().join("ts.p12"), &ts)?;
        for (file, entry) in [
            ("ks.p12", "PrivateKeyEntry"),
            ("ts.p12", "trustedCertEntry"),
        ] {
            let out = run(Command::new("keytool").current_dir(dir.path()).args([
                "-list",
                "-v",
                "-storetype",
                "PKCS12",
                "-keystore",
                file,
                "-storepass",
                password.expose(),
            ]))?;
            assert!(
                out.contains(&format!("Entry type: {entry}")),
                "{format} {file}: {out}"
            );
        }
        let contents = keystore::open(&ks, &password)?;
        assert_eq!(contents.key_entries, vec![("client".to_owned(), 2)]);
        assert!(matches!(
            keystore::open(&ks, &Secret::new("wrong".to_owned())),
            Err(Error::KeystorePassword)
        ));
        assert_eq!(
            keystore::open(&ts, &password)?.trusted,
            vec!["shiqi-ca".to_owned()]
        );
    }
    // A key that is not the certificate's is refused before anything is written.
    let other = PrivateKey::generate(KeyType::EcdsaP256)?;
    assert!(matches!(
        keystore::keystore(&other, &chain, "client", &password, P12Format::Modern),
        Err(Error::KeyMismatch)
    ));
    Ok(())
}

#[test]
fn ca_reloads_from_pem_and_refuses_a_foreign_key() -> TestResult {
    let ca = ca()?;
    let again = Ca::from_pem(&ca.cert().pem(), ca.key_pem().expose())?;
    assert_eq!(again.cert().der(), ca.cert().der());
    let other = PrivateKey::generate(KeyType::EcdsaP256)?;
    assert!(matches!(
        Ca::from_pem(&ca.cert().pem(), other.to_pkcs8_pem().expose()),
        Err(Error::CaKeyMismatch)
    ));
    Ok(())
}
