//! Before the tunnel listens: the server's current broker list ([`crate::agent::brokers`]), so a broker added to the cluster gets its forward with no file edited, and the
//! profile's `ssh_config` and `profile.json` rewritten to match (each atomically, through
//! `fsutil`). The forward list itself is `steps::render::forwards`, the same as setup's.

use std::path::Path;

use shiqi_ca::Secret;
use shiqi_ca::protocol::Broker;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::error::Error;
use crate::fsutil;
use crate::profile::{ForwardRecord, Profile, files};
use crate::steps::render::{self, Forward, RenderInput};

/// The profile as the current broker list makes it.
#[derive(Clone, Debug)]
pub struct Plan {
    /// `profile.json` with the new brokers and forwards.
    pub profile: Profile,
    /// The forwards, for rendering `ssh_config`.
    pub forwards: Vec<Forward>,
    /// Forwards that are new (or whose target changed).
    pub added: Vec<ForwardRecord>,
    /// Forwards that are gone (or whose target changed).
    pub removed: Vec<ForwardRecord>,
    /// Brokers the laptop would not reach through the tunnel (see `render::forwards`).
    pub warnings: Vec<String>,
}

impl Plan {
    /// Whether anything differs from the profile on disk.
    pub fn changed(&self, old: &Profile) -> bool {
        self.profile.brokers != old.brokers || self.profile.forwards != old.forwards
    }
}

/// Plans the profile for `brokers` (pure).
///
/// # Errors
/// [`Error::DuplicatePort`] when the cluster now has two brokers on one port.
pub fn plan(old: &Profile, mut brokers: Vec<Broker>) -> Result<Plan, Error> {
    brokers.sort_by_key(|b| b.id);
    let (forwards, warnings) = render::forwards(&brokers, old.mysql.as_ref())?;
    let records: Vec<ForwardRecord> = forwards.iter().map(Forward::record).collect();
    let added = records
        .iter()
        .filter(|f| !old.forwards.contains(f))
        .cloned()
        .collect();
    let removed = old
        .forwards
        .iter()
        .filter(|f| !records.contains(f))
        .cloned()
        .collect();
    let mut profile = old.clone();
    profile.brokers = brokers;
    profile.forwards = records;
    Ok(Plan {
        profile,
        forwards,
        added,
        removed,
        warnings,
    })
}

/// Writes `ssh_config`, then `profile.json` (last, as setup does), into the profile folder.
///
/// # Errors
/// [`Error::Template`] on a template bug; [`Error::Io`] when a file cannot be written (each
/// file is replaced atomically, so a reader sees the old one or the new one).
pub fn write(plan: &Plan, dir: &Path, host_key_alias: Option<&str>) -> Result<(), Error> {
    let ssh_config = render_ssh_config(&plan.profile, &plan.forwards, dir, host_key_alias)?;
    fsutil::write_private(&dir.join(files::SSH_CONFIG), ssh_config.as_bytes())?;
    fsutil::write_private(
        &dir.join(files::PROFILE_JSON),
        plan.profile.to_json().as_bytes(),
    )
}

fn render_ssh_config(
    p: &Profile,
    forwards: &[Forward],
    dir: &Path,
    host_key_alias: Option<&str>,
) -> Result<String, Error> {
    let rfc = |t: OffsetDateTime| t.format(&Rfc3339).unwrap_or_else(|_| t.to_string());
    // Only `ssh_config` is kept from this render, and it never contains the keystore password
    // (checked below), so the other files' password need not be read from disk here.
    let no_password = Secret::new(String::new());
    let created = rfc(p.created);
    let not_after = rfc(p.certificate.not_after);
    let serial = p.certificate.serial.to_string();
    let p12 = p.p12_format.to_string();
    let rendered = render::render(&RenderInput {
        name: &p.name,
        dir,
        destination: &p.server.destination,
        ssh_host: &p.server.host,
        ssh_port: p.server.port,
        ssh_user: &p.server.user,
        host_key_alias,
        known_hosts: &p.server.known_hosts,
        key_used: &p.server.ssh_key,
        jumps: &p.server.jumps,
        tunnel_host: &p.tunnel_host,
        brokers: &p.brokers,
        mysql: p.mysql.as_ref(),
        forwards,
        keystore_password: &no_password,
        p12_format: &p12,
        created: &created,
        not_after: &not_after,
        serial: &serial,
    })?;
    Ok(rendered.ssh_config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::tests::sample;

    fn with_forwards(mut p: Profile) -> Profile {
        let (f, _) = render::forwards(&p.brokers, p.mysql.as_ref()).expect("forwards");
        p.forwards = f.iter().map(Forward::record).collect();
        p
    }

    #[test]
    fn a_new_broker_gets_its_forward_and_nothing_else_changes() {
        let old = with_forwards(sample());
        let same = plan(&old, old.brokers.iter().rev().cloned().collect()).expect("plan");
        assert!(!same.changed(&old));
        assert!(same.added.is_empty() && same.removed.is_empty());

        let mut four = old.brokers.clone();
        four.push(Broker {
            id: 4,
            host: "localhost".parse().expect("host"),
            port: shiqi_ca::Port::try_from(49094).expect("port"),
        });
        let p = plan(&old, four).expect("plan");
        assert!(p.changed(&old));
        assert_eq!(p.removed, []);
        assert_eq!(p.added.len(), 1);
        assert_eq!(
            (p.added[0].local_port, p.added[0].remote_host.as_str()),
            (49094, "localhost")
        );
        // Brokers first (by id), MySQL last, as setup orders them.
        let ports: Vec<u16> = p.profile.forwards.iter().map(|f| f.local_port).collect();
        assert_eq!(ports, [19094, 29094, 39094, 49094, 3306]);

        let gone = plan(&old, old.brokers[..2].to_vec()).expect("plan");
        assert_eq!(gone.removed.len(), 1);
        assert_eq!(gone.removed[0].local_port, 39094);
    }

    #[test]
    fn rewrites_ssh_config_and_profile_json() {
        let dir = tempfile::tempdir().expect("tempdir");
        let old = with_forwards(sample());
        let mut brokers = old.brokers.clone();
        brokers.push(Broker {
            id: 4,
            host: "localhost".parse().expect("host"),
            port: shiqi_ca::Port::try_from(49094).expect("port"),
        });
        let p = plan(&old, brokers).expect("plan");
        write(&p, dir.path(), Some("vm-alias")).expect("write");
        let cfg = std::fs::read_to_string(dir.path().join(files::SSH_CONFIG)).expect("read");
        assert!(
            cfg.lines()
                .any(|l| l == "    LocalForward 127.0.0.1:49094 localhost:49094"),
            "{cfg}"
        );
        assert!(cfg.contains("    HostKeyAlias vm-alias\n"));
        assert!(cfg.contains("    LocalForward 127.0.0.1:3306 127.0.0.1:3306\n"));
        let back = Profile::load(dir.path()).expect("load");
        assert_eq!(back, p.profile);
        assert_eq!(back.brokers.len(), 4);
    }

    #[test]
    fn ssh_config_does_not_depend_on_the_keystore_password() {
        // The reason `render_ssh_config` may pass an empty password.
        let p = with_forwards(sample());
        let (f, _) = render::forwards(&p.brokers, p.mysql.as_ref()).expect("forwards");
        let dir = Path::new("/home/saige/.shiqi/saige");
        let a = render_ssh_config(&p, &f, dir, None).expect("render");
        let pw = Secret::new("s3cret-pw".to_owned());
        let created = "2026-10-10T08:00:00Z";
        let b = render::render(&RenderInput {
            name: &p.name,
            dir,
            destination: &p.server.destination,
            ssh_host: &p.server.host,
            ssh_port: p.server.port,
            ssh_user: &p.server.user,
            host_key_alias: None,
            known_hosts: &p.server.known_hosts,
            key_used: &p.server.ssh_key,
            jumps: &p.server.jumps,
            tunnel_host: &p.tunnel_host,
            brokers: &p.brokers,
            mysql: p.mysql.as_ref(),
            forwards: &f,
            keystore_password: &pw,
            p12_format: &p.p12_format.to_string(),
            created,
            not_after: "2026-11-09T07:59:00Z",
            serial: &p.certificate.serial.to_string(),
        })
        .expect("render")
        .ssh_config;
        assert_eq!(a, b);
        assert!(!a.contains("s3cret-pw"));
    }
}
