//! What hour-long certificates do to the CRL: a day of renewals for 20 people (a certificate of
//! 1 h each, renewed at two thirds and the old one revoked as superseded) leaves on the CRL only
//! the revoked certificates that have not expired, so its size is set by the team, not by the
//! days it has run. Times are simulated (the inventory takes them as arguments); the CRL is the
//! real one the agent builds.
#![forbid(unsafe_code)]

use shiqi_ca::crl::{DEFAULT_CRL_VALIDITY, build_crl};
use shiqi_ca::inventory::{CertKind, Inventory, NewCert};
use shiqi_ca::issue::{BACKDATE, Ca, Validity};
use shiqi_ca::key::KeyType;
use shiqi_ca::{Serial, Span};
use time::{Duration, OffsetDateTime};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const PEOPLE: usize = 20;

#[test]
fn a_day_of_hourly_certificates_for_twenty_people_leaves_a_crl_of_the_live_revoked_only()
-> TestResult {
    let dir = tempfile::tempdir()?;
    let start = OffsetDateTime::now_utc() - Duration::days(1);
    let ca = Ca::create(
        KeyType::EcdsaP256,
        "shiqi-connect CA",
        Validity::starting_now(start, Duration::days(30)),
    )?;
    let mut inventory = Inventory::open(&dir.path().join("inventory.sqlite"))?;
    let lifetime = "1h".parse::<Span>()?.duration();
    let renew_every: Duration = lifetime * 2i32 / 3i32;
    let mut current: Vec<Option<Serial>> = vec![None; PEOPLE];
    let mut signed = 0;
    let mut most = Vec::new();
    let mut t = start;
    let end = start + Duration::days(1);
    while t < end {
        for (i, slot) in current.iter_mut().enumerate() {
            // Each person renews at a different minute (the daemon's jitter, and laptops that
            // woke at different times).
            let at = t + Duration::minutes(i as i64);
            let record = inventory.issue(|_serial| {
                Ok(NewCert {
                    name: format!("person{i}"),
                    kind: CertKind::Client,
                    subject: format!("CN=person{i}"),
                    not_before: at - BACKDATE,
                    not_after: at + lifetime,
                    der: vec![0x30, 0x00],
                })
            })?;
            signed += 1;
            if let Some(old) = slot.replace(record.serial) {
                inventory.revoke(&old, Some("superseded"), at)?;
            }
        }
        // Just after the round: every person's previous certificate is revoked and has up to a
        // third of its lifetime left. The CRL is largest here.
        let listed = inventory.revoked_unexpired(t + Duration::minutes(PEOPLE as i64))?;
        if listed.len() >= most.len() {
            most = listed;
        }
        t += renew_every;
    }
    let everything = inventory.revoked()?;
    let on_crl = most;
    let size = |records| -> Result<usize, shiqi_ca::Error> {
        let crl = build_crl(&ca.issuer()?, records, 1, end, DEFAULT_CRL_VALIDITY)?;
        Ok(crl.der.len())
    };
    let (pruned, unpruned) = (size(&on_crl)?, size(&everything)?);
    println!(
        "{PEOPLE} people, 1h certificates renewed every {} min for a day: {signed} signed, {} \
         revoked; the CRL lists at most {} ({pruned} bytes DER); listing every revocation it \
         would be {unpruned} bytes",
        renew_every.whole_minutes(),
        everything.len(),
        on_crl.len(),
    );
    assert!(everything.len() >= PEOPLE * 30, "{}", everything.len());
    // At most one superseded certificate per person outlives its replacement's first third.
    assert!(on_crl.len() <= PEOPLE, "{} on the CRL", on_crl.len());
    assert!(on_crl.len() >= PEOPLE / 2, "{} on the CRL", on_crl.len());
    assert!(pruned * 10 < unpruned, "{pruned} vs {unpruned}");
    Ok(())
}
