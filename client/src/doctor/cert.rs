//! The certificate: valid now (warning before it runs out), signed by `ca.crt`, the certificate
//! of `client.key`, and the keystore passwords open `keystore.p12` and `truststore.p12`. X.509
//! is `shiqi-ca`'s; this module only asks it.

use std::path::Path;

use shiqi_ca::Secret;
use shiqi_ca::cert::{self, Cert};
use shiqi_ca::key::PrivateKey;
use time::OffsetDateTime;

use crate::clock::{span, when};
use crate::doctor::configs::Kind;
use crate::doctor::{CheckId, Context, Finding, Findings, Status};
use crate::ops::renew;
use crate::profile::{KEYSTORE_ALIAS, files as pf};
use crate::steps::journal;
use crate::text::Escaped;

/// Reads a profile file, or says why a check that needs it is skipped.
pub(crate) fn read(ctx: &Context, file: &str) -> Result<String, String> {
    let path = ctx.path(file).ok_or_else(|| "no profile".to_owned())?;
    std::fs::read_to_string(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("`{file}` is missing (see `files`)"),
        _ => format!("cannot read `{}`: {e}", ctx.show(&path)),
    })
}

/// The verdict on a certificate's validity window at `now`.
pub(crate) fn validity(leaf: &Cert, now: OffsetDateTime, renew: &str) -> Finding {
    let (nb, na) = (leaf.not_before(), leaf.not_after());
    let who = format!("`{}` (serial {})", leaf.subject(), leaf.serial().to_hex());
    if now < nb {
        return Finding::fail(
            CheckId::CertValid,
            format!(
                "{who} is not valid before {} ({} from now)",
                when(nb),
                span(nb - now)
            ),
            "check this machine's clock (`date -u`); servers refuse certificates from the future",
        );
    }
    if now >= na {
        return Finding::fail(
            CheckId::CertValid,
            format!("{who} expired on {} ({} ago)", when(na), span(now - na)),
            format!("get a new certificate: `{renew}`"),
        );
    }
    let left = na - now;
    // Warned from when `renew` (and the tunnel) would renew it: the last third of its lifetime.
    if now >= renew::due_between(nb, na) {
        return Finding::warn(
            CheckId::CertValid,
            format!("{who} expires on {} (in {})", when(na), span(left)),
            format!("renew it before then: `{renew}`"),
        );
    }
    Finding::ok(
        CheckId::CertValid,
        format!("{who} is valid until {} ({} left)", when(na), span(left)),
    )
}

/// Why renewals of the profile in `dir` stopped signing ([`renew::MAX_SIGNED`] certificates
/// signed for its current one, none proven), when they did: `renew` from cron and `tunnel up`
/// stop there too, with no tunnel running to say so.
fn stopped_renewal(dir: &std::path::Path) -> Option<String> {
    let name: shiqi_ca::ProfileName = dir.file_name()?.to_str()?.parse().ok()?;
    let record = journal::renewal_of(dir.parent()?, &name)?;
    let current = journal::profile_key(dir)?;
    (record.replaces == current.to_string()
        && record.pending.is_none()
        && record.signed >= renew::MAX_SIGNED)
        .then(|| {
            format!(
                "renewals stopped: {} certificates were signed to replace this one and none \
                 logged in; fix what the server refuses, then `shiqi-connect rotate {name}`",
                record.signed
            )
        })
}

/// `cert.valid` with the renewal failure (the running tunnel's, or renewals that stopped
/// signing), if any: a note, and at least a warning (the certificate works now, but will not
/// be renewed by itself).
fn with_failing_renewal(mut valid: Finding, failing: Option<String>, renew: &str) -> Finding {
    let Some(why) = failing else {
        return valid;
    };
    valid = valid.note(format!("renewing this certificate fails: {why}"));
    if valid.status == Status::Ok {
        valid.status = Status::Warn;
        valid.fix = Some(Escaped::from(format!(
            "see `tunnel status`; renew by hand: `{renew}`"
        )));
    }
    valid
}

/// `cert.valid` with a note of when the certificate is renewed next, and by what: the running
/// tunnel (its own due time, jitter included) or `renew` from cron or by hand.
fn with_next_renewal(ctx: &Context, valid: Finding, leaf: &Cert, now: OffsetDateTime) -> Finding {
    if leaf.not_after() <= now {
        return valid;
    }
    let by_tunnel = crate::doctor::forwards::running_tunnel(ctx)
        .and_then(|t| t.renewal)
        .filter(|r| r.not_after == leaf.not_after());
    let note = match by_tunnel {
        Some(r) if r.due <= now => "the running tunnel renews it now".to_owned(),
        Some(r) => format!(
            "the running tunnel renews it at {} (in {})",
            when(r.due),
            span(r.due - now)
        ),
        None => {
            let due = renew::due_between(leaf.not_before(), leaf.not_after());
            let name = ctx
                .profile
                .as_ref()
                .map(|p| p.name.to_string())
                .unwrap_or_default();
            format!(
                "no tunnel of this profile runs to renew it: `shiqi-connect renew {name}` does from {}",
                when(due)
            )
        }
    };
    valid.note(format!(
        "it lives {}; {note}",
        crate::clock::lifetime(leaf.not_before(), leaf.not_after())
    ))
}

/// Whether `leaf` chains to `ca` through `chain` (the rest of `client.crt`).
pub(crate) fn chains_to(leaf: &Cert, chain: &[Cert], ca: &Cert) -> bool {
    if leaf.is_signed_by(ca) {
        return true;
    }
    let mut current = leaf.clone();
    for _ in 0..chain.len() {
        let Some(next) = chain
            .iter()
            .find(|c| c.der() != current.der() && current.is_signed_by(c))
        else {
            return false;
        };
        if next.is_signed_by(ca) {
            return true;
        }
        current = next.clone();
    }
    false
}

/// What the certificate checks tell later ones.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Certificate {
    /// The first of `cert.valid`, `cert.chain` and `cert.key` that failed.
    pub(crate) failed: Option<CheckId>,
    /// Whether `cert.valid` could not judge the certificate (neither `ok` nor `warn`).
    pub(crate) unreadable: bool,
}

impl Certificate {
    /// Reads the lines of the certificate checks.
    fn of(lines: &[Finding]) -> Self {
        let status = |id: CheckId| {
            lines
                .iter()
                .filter(|f| f.check == id)
                .map(|f| f.status)
                .max()
        };
        Self {
            failed: [CheckId::CertValid, CheckId::CertChain, CheckId::CertKey]
                .into_iter()
                .find(|id| status(*id) == Some(Status::Fail)),
            unreadable: !matches!(status(CheckId::CertValid), Some(Status::Ok | Status::Warn)),
        }
    }
}

/// `cert.*`.
pub(crate) fn check(ctx: &Context, st: &mut Findings) -> Certificate {
    let from = st.checks.len();
    certificate(ctx, st);
    keystores(ctx, st);
    Certificate::of(&st.checks[from..])
}

/// `cert.valid`, `cert.chain`, `cert.key`.
fn certificate(ctx: &Context, st: &mut Findings) {
    let renew = ctx.renew_command();
    let chain = read(ctx, pf::CLIENT_CRT).and_then(|pem| {
        cert::certs_from_pem(&pem)
            .map_err(|e| format!("`{}` is not a PEM certificate: {e}", pf::CLIENT_CRT))
            .and_then(|c| {
                if c.is_empty() {
                    Err(format!("`{}` holds no certificate", pf::CLIENT_CRT))
                } else {
                    Ok(c)
                }
            })
    });
    let chain = match chain {
        Ok(c) => c,
        Err(why) => {
            let missing = why.contains("(see `files`)");
            for id in [CheckId::CertValid, CheckId::CertChain, CheckId::CertKey] {
                st.push(if missing || id != CheckId::CertValid {
                    Finding::skip(id, why.clone())
                } else {
                    Finding::fail(
                        id,
                        why.clone(),
                        format!("rebuild the profile: `{}`", ctx.setup_again()),
                    )
                });
            }
            return;
        }
    };
    let leaf = &chain[0];
    // The running tunnel renews by itself; when that keeps failing, say so here, where the
    // time left is.
    let failing = ctx
        .dir
        .as_ref()
        .and_then(|d| crate::tunnel::State::read(&d.join(crate::tunnel::STATE)))
        .and_then(|st| st.renewal)
        .and_then(|r| r.error)
        .or_else(|| ctx.dir.as_deref().and_then(stopped_renewal));
    let now = OffsetDateTime::now_utc();
    let valid = validity(leaf, now, &renew);
    let valid = with_next_renewal(ctx, valid, leaf, now);
    st.push(with_failing_renewal(valid, failing, &renew));

    st.push(match read(ctx, pf::CA_CRT) {
        Err(why) => Finding::skip(CheckId::CertChain, why),
        Ok(pem) => match Cert::from_pem(&pem) {
            Err(e) => Finding::fail(
                CheckId::CertChain,
                format!("`{}` is not a PEM certificate: {e}", pf::CA_CRT),
                format!("rebuild the profile: `{}`", ctx.setup_again()),
            ),
            Ok(ca) => chain_check(leaf, &chain[1..], &ca, &ctx.setup_again()),
        },
    });

    st.push(key_check(ctx, leaf, &renew));
}

/// `cert.key`: `client.key` is the key of the certificate.
fn key_check(ctx: &Context, leaf: &Cert, renew: &str) -> Finding {
    match read(ctx, pf::CLIENT_KEY) {
        Err(why) => Finding::skip(CheckId::CertKey, why),
        Ok(pem) => match PrivateKey::from_pem(&pem) {
            Err(e) => Finding::fail(
                CheckId::CertKey,
                format!(
                    "`{}` is not a private key this tool reads: {e}",
                    pf::CLIENT_KEY
                ),
                format!(
                    "restore `{}` from a backup, or start over: `{renew}`",
                    pf::CLIENT_KEY
                ),
            ),
            Ok(key) if leaf.matches_key(&key) => Finding::ok(
                CheckId::CertKey,
                format!(
                    "`{}` ({}) is the key of `{}`",
                    pf::CLIENT_KEY,
                    key.key_type(),
                    pf::CLIENT_CRT
                ),
            ),
            Ok(key) => Finding::fail(
                CheckId::CertKey,
                format!(
                    "`{}` ({}) is not the key of `{}` ({}): TLS servers would reject every login",
                    pf::CLIENT_KEY,
                    key.key_type(),
                    pf::CLIENT_CRT,
                    leaf.subject()
                ),
                format!(
                    "put back the `{}` that setup made with this certificate (the key never left \
                     this machine), or get a new key and certificate: `{renew}`",
                    pf::CLIENT_KEY
                ),
            ),
        },
    }
}

fn chain_check(leaf: &Cert, rest: &[Cert], ca: &Cert, rebuild: &str) -> Finding {
    let now = OffsetDateTime::now_utc();
    if !ca.is_ca() {
        return Finding::fail(
            CheckId::CertChain,
            format!(
                "`{}` (`{}`) is not a CA certificate",
                pf::CA_CRT,
                ca.subject()
            ),
            format!("rebuild the profile: `{rebuild}`"),
        );
    }
    if now >= ca.not_after() {
        return Finding::fail(
            CheckId::CertChain,
            format!(
                "the CA `{}` in `{}` expired on {}",
                ca.subject(),
                pf::CA_CRT,
                when(ca.not_after())
            ),
            "the server's admin must renew the CA (`shiqi-ca-agent init` on a new state dir), \
             then everyone runs setup again",
        );
    }
    if chains_to(leaf, rest, ca) {
        Finding::ok(
            CheckId::CertChain,
            format!(
                "`{}` is signed by `{}` (`{}`)",
                pf::CLIENT_CRT,
                ca.subject(),
                pf::CA_CRT
            ),
        )
    } else {
        Finding::fail(
            CheckId::CertChain,
            format!(
                "`{}` (issuer `{}`) is not signed by the CA in `{}` (`{}`)",
                pf::CLIENT_CRT,
                leaf.issuer_oneline(),
                pf::CA_CRT,
                ca.subject()
            ),
            format!(
                "the two files come from different setups or CAs; rebuild the profile: `{rebuild}`"
            ),
        )
    }
}

/// Where a pair of passwords was read, and the keystore and truststore password it holds.
type PasswordSource = (String, Option<Secret<String>>, Option<Secret<String>>);

/// `cert.keystores`: `keystore.password`, and the passwords in `client.properties`, open the
/// PKCS#12 files (Java says "keystore password was incorrect" otherwise).
fn keystores(ctx: &Context, st: &mut Findings) {
    let (ks, ts) = match (ctx.path(pf::KEYSTORE), ctx.path(pf::TRUSTSTORE)) {
        (Some(k), Some(t)) => (k, t),
        _ => return,
    };
    let (Ok(ks_bytes), Ok(ts_bytes)) = (std::fs::read(&ks), std::fs::read(&ts)) else {
        st.push(Finding::skip(
            CheckId::Keystores,
            format!(
                "`{}` or `{}` is missing (see `files`)",
                pf::KEYSTORE,
                pf::TRUSTSTORE
            ),
        ));
        return;
    };
    // (where the passwords come from, keystore password, truststore password)
    let mut sources: Vec<PasswordSource> = Vec::new();
    match read(ctx, pf::KEYSTORE_PASSWORD) {
        Ok(pw) => {
            let pw = Secret::new(pw.trim_end_matches(['\n', '\r']).to_owned());
            sources.push((
                format!("`{}`", pf::KEYSTORE_PASSWORD),
                Some(pw.clone()),
                Some(pw),
            ));
        }
        Err(why) => {
            st.push(Finding::skip(CheckId::Keystores, why));
            return;
        }
    }
    sources.extend(config_passwords(ctx, &ks, &ts));
    let stores = Stores {
        keystore: &ks_bytes,
        truststore: &ts_bytes,
    };
    let mut tried = Tried::default();
    for source in &sources {
        tried.source(ctx, source, &stores);
    }
    if tried.problems.is_empty() {
        let names: Vec<&str> = sources.iter().map(|(s, _, _)| s.as_str()).collect();
        st.push(Finding::ok(
            CheckId::Keystores,
            format!(
                "the password in {} opens `{}` ({} key entry) and `{}`",
                names.join(" and "),
                pf::KEYSTORE,
                tried.opened.unwrap_or(1),
                pf::TRUSTSTORE
            ),
        ));
        return;
    }
    if tried.fixes.is_empty() {
        tried.fixes.push(password_fix(ctx, &sources, &stores));
    }
    st.push(Finding::fail(
        CheckId::Keystores,
        tried.problems.join("; "),
        tried.fixes.join("; "),
    ));
}

/// The passwords of the Java configs (the profile's `client.properties`, or a `--config` Java
/// file) that point at the stores `ks` and `ts`.
fn config_passwords(ctx: &Context, ks: &Path, ts: &Path) -> Vec<PasswordSource> {
    let mut sources = Vec::new();
    for f in ctx.configs.iter().filter(|c| c.kind == Kind::Java) {
        let points_at = |key: &str, target: &Path| {
            f.get(key)
                .and_then(|e| e.value.as_deref())
                .is_some_and(|v| Path::new(v) == target)
        };
        let pw = |key: &str| f.get(key).and_then(|e| e.value.clone()).map(Secret::new);
        let k = points_at("ssl.keystore.location", ks)
            .then(|| pw("ssl.keystore.password"))
            .flatten();
        let t = points_at("ssl.truststore.location", ts)
            .then(|| pw("ssl.truststore.password"))
            .flatten();
        if k.is_some() || t.is_some() {
            sources.push((format!("`{}`", f.name()), k, t));
        }
    }
    sources
}

/// The bytes of `keystore.p12` and `truststore.p12`.
struct Stores<'a> {
    keystore: &'a [u8],
    truststore: &'a [u8],
}

/// What opening the stores with each source's passwords found.
#[derive(Default)]
struct Tried {
    problems: Vec<String>,
    fixes: Vec<String>,
    /// The keystore's key entries, once a password opened it.
    opened: Option<usize>,
}

impl Tried {
    fn source(&mut self, ctx: &Context, (source, k, t): &PasswordSource, stores: &Stores) {
        let mut refused = Vec::new();
        for (pw, bytes, file, want_key) in [
            (k, stores.keystore, pf::KEYSTORE, true),
            (t, stores.truststore, pf::TRUSTSTORE, false),
        ] {
            let Some(pw) = pw else {
                continue;
            };
            let rebuild = || format!("rebuild the profile: `{}`", ctx.setup_again());
            match shiqi_ca::keystore::open(bytes, pw) {
                Ok(c)
                    if want_key
                        && !c
                            .key_entries
                            .iter()
                            .any(|(a, n)| a == KEYSTORE_ALIAS && *n > 0) =>
                {
                    self.problems.push(format!(
                        "`{file}` opens but has no key entry `{KEYSTORE_ALIAS}` (found {:?})",
                        c.key_entries
                    ));
                    self.fixes.push(rebuild());
                }
                Ok(c) if !want_key && c.trusted.is_empty() => {
                    self.problems
                        .push(format!("`{file}` opens but trusts no certificate"));
                    self.fixes.push(rebuild());
                }
                Ok(c) => {
                    if want_key {
                        self.opened = Some(c.key_entries.len());
                    }
                }
                Err(shiqi_ca::Error::KeystorePassword) => refused.push(file),
                Err(e) => {
                    self.problems.push(format!("`{file}` cannot be read: {e}"));
                    self.fixes.push(rebuild());
                }
            }
        }
        if !refused.is_empty() {
            self.problems.push(format!(
                "the password in {source} does not open `{}` (Java and DataGrip say \"keystore \
                 password was incorrect\")",
                refused.join("` or `")
            ));
        }
    }
}

/// Only passwords are wrong: which source still works, without showing it.
fn password_fix(ctx: &Context, sources: &[PasswordSource], stores: &Stores) -> String {
    let good: Vec<&str> = sources
        .iter()
        .filter(|(_, k, t)| {
            k.as_ref()
                .is_some_and(|p| shiqi_ca::keystore::open(stores.keystore, p).is_ok())
                && t.as_ref()
                    .is_none_or(|p| shiqi_ca::keystore::open(stores.truststore, p).is_ok())
        })
        .map(|(s, _, _)| s.as_str())
        .collect();
    match good.first() {
        Some(g) => format!(
            "the password in {g} is right: copy it over the wrong one (both stores share one \
             password)"
        ),
        None => format!(
            "no password here opens them; write new stores with a new password: `{}`",
            ctx.setup_again()
        ),
    }
}

#[cfg(test)]
mod tests {
    use shiqi_ca::issue::{Ca, Validity};
    use shiqi_ca::key::KeyType;
    use time::Duration;
    use time::macros::datetime;

    use super::*;
    use crate::doctor::Status;

    fn issue(ca: &Ca, name: &str, v: Validity) -> (Cert, PrivateKey) {
        let key = PrivateKey::generate(KeyType::EcdsaP256).expect("key");
        let n: shiqi_ca::ProfileName = name.parse().expect("name");
        let csr = shiqi_ca::csr::build(&key, &n).expect("csr");
        let checked = shiqi_ca::policy::check_csr(csr.as_bytes(), &n).expect("policy");
        let c = ca
            .issue_client(&checked, &shiqi_ca::Serial::random(), v)
            .expect("issue");
        (c, key)
    }

    fn window(from: OffsetDateTime, days: i64) -> Validity {
        Validity {
            not_before: from,
            not_after: from + Duration::days(days),
        }
    }

    #[test]
    fn validity_ok_warn_expired_and_future() {
        let t0 = datetime!(2026-10-10 08:00 UTC);
        let ca = Ca::create(KeyType::EcdsaP256, "t", window(t0, 3650)).expect("ca");
        let (c, _) = issue(&ca, "saige", window(t0, 30));
        let at = |d: i64| validity(&c, t0 + Duration::days(d), "renew").status;
        assert_eq!(at(1), Status::Ok);
        assert_eq!(at(19), Status::Ok);
        assert_eq!(at(21), Status::Warn, "the last third of 30 days");
        assert_eq!(at(31), Status::Fail);
        assert_eq!(at(-1), Status::Fail);
        let expired = validity(&c, t0 + Duration::days(33), "shiqi-connect setup x --force");
        assert!(
            expired
                .found
                .contains("expired on 2026-11-09 08:00 UTC (3 days ago)"),
            "{}",
            expired.found
        );
        assert!(
            expired
                .fix
                .as_deref()
                .is_some_and(|f| f.contains("setup x --force"))
        );
    }

    #[test]
    fn a_failing_renewal_of_the_running_tunnel_is_a_warning_with_the_time_left() {
        let ok = Finding::ok(CheckId::CertValid, "valid until 2026-11-09 (20 days left)");
        let same = with_failing_renewal(ok.clone(), None, "shiqi-connect renew x");
        assert_eq!(same.status, Status::Ok);
        let w = with_failing_renewal(
            ok,
            Some("agent: the name is blocked".to_owned()),
            "shiqi-connect renew x",
        );
        assert_eq!(w.status, Status::Warn);
        assert!(w.found.contains("20 days left"), "{}", w.found);
        assert!(w.notes[0].contains("the name is blocked"), "{:?}", w.notes);
        assert!(
            w.fix
                .as_deref()
                .is_some_and(|f| f.contains("shiqi-connect renew x"))
        );
        // An expired certificate stays a failure, with the note.
        let expired = Finding::fail(CheckId::CertValid, "expired", "setup again");
        let f = with_failing_renewal(expired, Some("down".to_owned()), "r");
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.notes.len(), 1);
    }

    #[test]
    fn chains_only_to_its_own_ca() {
        let t0 = OffsetDateTime::now_utc() - Duration::hours(1);
        let ca = Ca::create(KeyType::EcdsaP256, "one", window(t0, 10)).expect("ca");
        let other = Ca::create(KeyType::EcdsaP256, "two", window(t0, 10)).expect("ca");
        let (c, key) = issue(&ca, "saige", window(t0, 5));
        assert!(chains_to(&c, &[], ca.cert()));
        assert!(!chains_to(&c, &[], other.cert()));
        assert!(chains_to(&c, &[ca.cert().clone()], ca.cert()));
        assert_eq!(chain_check(&c, &[], other.cert(), "r").status, Status::Fail);
        assert_eq!(chain_check(&c, &[], ca.cert(), "r").status, Status::Ok);
        assert!(c.matches_key(&key));
    }
}
