//! Step 4: every file of a profile, in memory — key, certificates, PKCS#12 stores, the rendered
//! configs and `profile.json` (last) — ready for [`crate::steps::write`]. `setup` builds them
//! for a new profile; `rotate` and `renew` for the same profile with a new key and certificate.

use std::path::Path;

use shiqi_ca::Secret;
use shiqi_ca::key::PrivateKey;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::agent::Signed;
use crate::error::Error;
use crate::profile::{Profile, files};
use crate::ssh::config::Target;
use crate::steps::write::ProfileFile;
use crate::steps::{keystore, render};

/// What the files are made from.
pub struct Inputs<'a> {
    /// The profile folder the files will live in (they name their own paths).
    pub dir: &'a Path,
    /// Where and as whom SSH logs in (for `ssh_config`).
    pub target: &'a Target,
    /// The private key.
    pub key: &'a PrivateKey,
    /// The certificate the server issued for it.
    pub signed: &'a Signed,
    /// `profile.json` as it will be written (name, server, certificate, brokers, MySQL).
    pub profile: &'a Profile,
    /// The tunnel's forwards.
    pub forwards: &'a [render::Forward],
    /// The password of both PKCS#12 files (kept across rotations: DataGrip and Java client
    /// configs store it).
    pub password: &'a Secret<String>,
}

/// Builds every file of the profile.
///
/// # Errors
/// [`Error::Ca`] when a keystore cannot be built, [`Error::Template`] on a template bug.
pub fn build(i: &Inputs<'_>) -> Result<Vec<ProfileFile>, Error> {
    let p = i.profile;
    let stores = keystore::stores(
        i.key,
        &i.signed.chain_pem,
        i.signed.response.ca_pem.as_str(),
        i.password,
        p.p12_format,
    )?;
    let created = rfc3339(p.created);
    let not_after = rfc3339(p.certificate.not_after);
    let serial = p.certificate.serial.to_string();
    let rendered = render::render(&render::RenderInput {
        name: &p.name,
        dir: i.dir,
        destination: &p.server.destination,
        ssh_host: &i.target.host,
        ssh_port: i.target.port,
        ssh_user: &i.target.user,
        host_key_alias: i.target.host_key_alias.as_deref(),
        known_hosts: &p.server.known_hosts,
        key_used: &p.server.ssh_key,
        certificate_file: p.server.certificate_file.as_deref(),
        jumps: &p.server.jumps,
        tunnel_host: &p.tunnel_host,
        brokers: &p.brokers,
        mysql: p.mysql.as_ref(),
        forwards: i.forwards,
        endpoint: &p.endpoint,
        keystore_password: i.password,
        p12_format: &p.p12_format.to_string(),
        created: &created,
        not_after: &not_after,
        serial: &serial,
    })?;
    let mut ca = i.signed.response.ca_pem.as_str().trim_end().to_owned();
    ca.push('\n');
    let mut out = vec![
        ProfileFile {
            name: files::CLIENT_KEY,
            bytes: i.key.to_pkcs8_pem().expose().clone().into_bytes(),
        },
        ProfileFile {
            name: files::CLIENT_CRT,
            bytes: i.signed.chain_pem.clone().into_bytes(),
        },
        ProfileFile {
            name: files::CA_CRT,
            bytes: ca.into_bytes(),
        },
        ProfileFile {
            name: files::KEYSTORE,
            bytes: stores.keystore,
        },
        ProfileFile {
            name: files::TRUSTSTORE,
            bytes: stores.truststore,
        },
        ProfileFile {
            name: files::KEYSTORE_PASSWORD,
            bytes: format!("{}\n", i.password.expose()).into_bytes(),
        },
        ProfileFile {
            name: files::SSH_CONFIG,
            bytes: rendered.ssh_config.into_bytes(),
        },
        ProfileFile {
            name: files::DATAGRIP_MD,
            bytes: rendered.datagrip_md.into_bytes(),
        },
    ];
    if let Some(c) = rendered.client_properties {
        out.push(ProfileFile {
            name: files::CLIENT_PROPERTIES,
            bytes: c.expose().clone().into_bytes(),
        });
    }
    if let Some(c) = rendered.librdkafka_conf {
        out.push(ProfileFile {
            name: files::LIBRDKAFKA_CONF,
            bytes: c.into_bytes(),
        });
    }
    if let Some(c) = rendered.my_cnf {
        out.push(ProfileFile {
            name: files::MY_CNF,
            bytes: c.into_bytes(),
        });
    }
    // Last, so a reader that finds profile.json finds every file it lists.
    out.push(ProfileFile {
        name: files::PROFILE_JSON,
        bytes: p.to_json().into_bytes(),
    });
    Ok(out)
}

/// The password in an existing profile's `keystore.password`, if it holds one.
pub fn read_password(dir: &Path) -> Option<Secret<String>> {
    let text = std::fs::read_to_string(dir.join(files::KEYSTORE_PASSWORD)).ok()?;
    let pw = text.trim_end_matches(['\n', '\r']);
    (!pw.is_empty()).then(|| Secret::new(pw.to_owned()))
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_else(|_| t.to_string())
}
