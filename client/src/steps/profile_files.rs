//! Step 4: every file of a profile, in memory — key, certificates, PKCS#12 stores, the rendered
//! configs and `profile.json` (last) — ready for [`crate::steps::write`]. `setup` builds them
//! for a new profile; `rotate` and `renew` for the same profile with a new key and certificate.

use std::path::Path;

use shiqi_ca::Secret;
use shiqi_ca::key::PrivateKey;

use crate::agent::Signed;
use crate::error::Error;
use crate::profile::Profile;
use crate::profile::files::{self, Source};
use crate::profile::render;
use crate::ssh::config::Target;
use crate::steps::keystore;
use crate::steps::write::ProfileFile;

/// What the files are made from.
pub(crate) struct Inputs<'a> {
    /// The profile folder the files will live in (they name their own paths).
    pub(crate) dir: &'a Path,
    /// Where and as whom SSH logs in (for `ssh_config`).
    pub(crate) target: &'a Target,
    /// The private key.
    pub(crate) key: &'a PrivateKey,
    /// The certificate the server issued for it.
    pub(crate) signed: &'a Signed,
    /// `profile.json` as it will be written (name, server, certificate, brokers, MySQL).
    pub(crate) profile: &'a Profile,
    /// The tunnel's forwards.
    pub(crate) forwards: &'a [crate::profile::ForwardRecord],
    /// The password of both PKCS#12 files (kept across rotations: DataGrip and Java client
    /// configs store it).
    pub(crate) password: &'a Secret<String>,
}

/// Builds every file of the profile.
///
/// # Errors
/// [`Error::Ca`] when a keystore cannot be built, [`ProfileError::Template`](crate::error::ProfileError::Template) on a template bug.
pub(crate) fn build(i: &Inputs<'_>) -> Result<Vec<ProfileFile>, Error> {
    let p = i.profile;
    let stores = keystore::stores(
        i.key,
        &i.signed.chain_pem,
        i.signed.response.ca_pem.as_str(),
        i.password,
        p.p12_format,
    )?;
    // `profile.json`'s server is where and as whom `target` logged in.
    let rendered = render::render(
        p,
        i.forwards,
        i.dir,
        i.target.host_key_alias.as_deref(),
        i.password,
    )?;
    let mut ca = i.signed.response.ca_pem.as_str().trim_end().to_owned();
    ca.push('\n');
    let mut stores = Some(stores);
    let mut out = Vec::new();
    for kind in files::CATALOGUE.iter().filter(|k| k.present(p)) {
        let bytes = match kind.source {
            Source::Key => i.key.to_pkcs8_pem().expose().clone().into_bytes(),
            Source::Chain => i.signed.chain_pem.clone().into_bytes(),
            Source::Ca => ca.clone().into_bytes(),
            Source::Keystore => stores
                .as_mut()
                .map(|s| std::mem::take(&mut s.keystore))
                .unwrap_or_default(),
            Source::Truststore => stores
                .as_mut()
                .map(|s| std::mem::take(&mut s.truststore))
                .unwrap_or_default(),
            Source::Password => format!("{}\n", i.password.expose()).into_bytes(),
            Source::Template(_) => match rendered.get(kind.name) {
                Some(text) => text.as_bytes().to_vec(),
                None => continue,
            },
            Source::Facts => p.to_json().into_bytes(),
        };
        out.push(ProfileFile {
            name: kind.name,
            bytes,
        });
    }
    Ok(out)
}
