//! Kafka: the brokers' server certificate and stores (from the CA, as the account), and every
//! setting the SSL listener needs — client auth, the CN-to-principal mapping, the
//! StandardAuthorizer, super users — as a `server.properties` fragment, as `volumes:` and
//! `environment:` for the `apache/kafka` and `confluentinc/cp-kafka` images, or applied to a `server.properties` given (with a backup). It
//! never restarts a broker: it says which to restart, and the JVM flags for revocation.

use std::path::Path;

use super::folder::{Folder, Trust};
use super::{Install, Outcome};
use crate::error::AgentError;

/// The brokers' certificate name (their principal, `User:kafka-broker`, a super user).
const CERT_NAME: &str = "kafka-broker";
/// The JVM flags that make a broker check the CRL its clients' certificates name.
pub(super) const REVOCATION_OPTS: &str =
    "-Dcom.sun.net.ssl.checkRevocation=true -Dcom.sun.security.enableCRLDP=true";

pub(super) fn ensure(i: &mut Install) -> Result<(), AgentError> {
    let Some(bootstrap) = i.args.kafka_bootstrap.clone() else {
        i.report(Outcome::Already, "kafka", "skipped (no --kafka-bootstrap)");
        return Ok(());
    };
    let parsed: shiqi_ca::Bootstrap = bootstrap.parse().map_err(|why| AgentError::Argument {
        flag: "--kafka-bootstrap",
        why,
    })?;
    let mut sans: Vec<String> = if i.args.kafka_san.is_empty() {
        parsed
            .addresses()
            .iter()
            .map(|a| a.host.to_string())
            .collect()
    } else {
        i.args.kafka_san.clone()
    };
    for san in &sans {
        san.parse::<shiqi_ca::Host>()
            .map_err(|why| AgentError::Argument {
                flag: "--kafka-san",
                why,
            })?;
    }
    if !sans.iter().any(|s| s == "localhost") {
        sans.push("localhost".to_owned());
    }
    sans.dedup();
    let tls = i.args.kafka_tls_dir.clone();
    certificate(i, &tls, &sans)?;

    let settings = broker_settings(i, &tls)?;
    let properties = tls.join("shiqi.properties");
    let mut text = format!(
        "# Written by `shiqi-ca-agent install`: the SSL listener's settings for every broker.\n\
         # Start each broker's JVM with KAFKA_OPTS=\"{REVOCATION_OPTS}\".\n"
    );
    for (k, v) in &settings {
        text.push_str(&format!("{k}={v}\n"));
    }
    let environment = image_environment(&tls, &settings);
    let env_path = tls.join("kafka-environment.yml");
    // The brokers' account when named, else the agent's (as the certificate's files).
    let owner = kafka_owner(i)?;
    let files_owner = owner.or_else(|| super::account::ids(i.account()));
    let trust = tls_trust(i, owner);
    let a = i.file(&properties, &text, 0o600, files_owner, &trust)?;
    let b = i.file(&env_path, &environment, 0o600, files_owner, &trust)?;
    let changed = a || b;
    i.report(
        Outcome::of(changed),
        "kafka.config",
        format!(
            "{} (server.properties lines) and {} (apache/kafka and cp-kafka services)",
            properties.display(),
            env_path.display()
        ),
    );
    match i.args.kafka_properties.clone() {
        Some(target) => apply(i, &target, &settings)?,
        None => i.report(
            Outcome::NeedsYou,
            "kafka.brokers",
            format!(
                "add {} to each broker's server.properties (or {} to its compose service), start \
                 its JVM with KAFKA_OPTS=\"{REVOCATION_OPTS}\", then restart each broker",
                properties.display(),
                env_path.display()
            ),
        ),
    }
    if owner.is_none() {
        i.report(
            Outcome::NeedsYou,
            "kafka.owner",
            format!(
                "{} belongs to `{}`: make it readable by the brokers' user (--kafka-owner USER)",
                tls.display(),
                i.account()
            ),
        );
    }
    Ok(())
}

/// The settings every broker gets: the TLS lines `server-cert` wrote into `tls`, then the
/// authorizer and the super users (the brokers' own name and the agent's admin name).
fn broker_settings(i: &Install, tls: &Path) -> Result<Vec<(String, String)>, AgentError> {
    // The brokers' super user is the agent's admin name, from the config the agent will read
    // (the account's file: parsed into a name before it reaches a broker's config).
    let admin_name: shiqi_ca::ProfileName =
        match crate::config::Config::load(&i.state_dir.join("agent.toml"), false) {
            Ok(c) => c.kafka.admin_name.parse()?,
            Err(_) if i.dry_run() => "shiqi-admin".parse()?,
            Err(e) => return Err(e),
        };
    // The account wrote it: read through a handle, never through a link it left there.
    let fragment = match Folder::open(tls, &tls_trust(i, kafka_owner(i)?)) {
        Ok(dir) => dir
            .read("server.properties", super::MAX_FILE)?
            .map(|(bytes, _)| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default(),
        Err(_) if i.dry_run() => String::new(),
        Err(e) => return Err(e),
    };
    let mut settings: Vec<(String, String)> = fragment
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (k, v) = l.split_once('=')?;
            Some((k.trim().to_owned(), v.trim().to_owned()))
        })
        // Only TLS settings come from `server-cert`'s file; the rest is install's own.
        .filter(|(k, _)| k.starts_with("ssl."))
        .collect();
    for (k, v) in [
        (
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer".to_owned(),
        ),
        ("allow.everyone.if.no.acl.found", "false".to_owned()),
        ("super.users", format!("User:{CERT_NAME};User:{admin_name}")),
    ] {
        settings.push((k.to_owned(), v));
    }
    Ok(settings)
}

/// Where both images look for the stores and their passwords (their `configure` scripts).
const IMAGE_SECRETS: &str = "/etc/kafka/secrets";

/// `volumes:` and `environment:` for a broker service of the `apache/kafka` or
/// `confluentinc/cp-kafka` image. Both images' `configure` scripts, once an advertised listener
/// is `SSL://`, insist on `KAFKA_SSL_{KEYSTORE,TRUSTSTORE}_FILENAME` and the
/// `*_CREDENTIALS` files under `/etc/kafka/secrets` and overwrite any `*_LOCATION` given, so the
/// stores are mounted there and every password is read from `server.password`: none appears in
/// the environment (`docker inspect` would show it).
fn image_environment(tls: &Path, settings: &[(String, String)]) -> String {
    let mut out = format!(
        "# Written by `shiqi-ca-agent install`: for each broker service of the apache/kafka or\n\
         # confluentinc/cp-kafka image, beside its own KAFKA_NODE_ID, listeners and advertised\n\
         # listeners. The client listener must be advertised as SSL://… (the images read the\n\
         # stores below only then), and {dir} must be readable by the image's user (uid 1000).\n\
         volumes:\n  - \"{dir}:{IMAGE_SECRETS}:ro\"\n\
         environment:\n  KAFKA_OPTS: \"{REVOCATION_OPTS}\"\n",
        dir = tls.display()
    );
    let mut put = |k: &str, v: &str| {
        let v = v.replace('\\', "\\\\").replace('"', "\\\"");
        out.push_str(&format!("  {k}: \"{v}\"\n"));
    };
    for (file, store) in [
        ("server.keystore.p12", "KEYSTORE"),
        ("server.truststore.p12", "TRUSTSTORE"),
    ] {
        put(&format!("KAFKA_SSL_{store}_FILENAME"), file);
        put(&format!("KAFKA_SSL_{store}_CREDENTIALS"), "server.password");
        put(
            &format!("KAFKA_SSL_{store}_LOCATION"),
            &format!("{IMAGE_SECRETS}/{file}"),
        );
    }
    put("KAFKA_SSL_KEY_CREDENTIALS", "server.password");
    for (k, v) in settings {
        // Paths and passwords are the host's: the lines above say where the image finds them.
        if k.ends_with(".location") || k.ends_with(".password") {
            continue;
        }
        put(&env_name(k), v);
    }
    out
}

/// The apache/kafka image's environment name for a property: `KAFKA_` and the name upper-cased,
/// `.` as `_`, `_` as `__`, `-` as `___`.
fn env_name(property: &str) -> String {
    let mut out = String::from("KAFKA_");
    for c in property.chars() {
        match c {
            '.' => out.push('_'),
            '_' => out.push_str("__"),
            '-' => out.push_str("___"),
            c => out.push(c.to_ascii_uppercase()),
        }
    }
    out
}

/// Who may change the brokers' TLS folder: root, the agent's account (it writes there) and
/// the brokers' account when named.
fn tls_trust(i: &Install, owner: Option<(u32, u32)>) -> Trust {
    let trust = i.trust_account();
    match (owner, &i.args.kafka_owner) {
        (Some(ids), Some(name)) => trust.and(name, ids),
        _ => trust,
    }
}

fn kafka_owner(i: &Install) -> Result<Option<(u32, u32)>, AgentError> {
    match &i.args.kafka_owner {
        None => Ok(None),
        Some(user) => super::account::ids(user)
            .map(Some)
            .ok_or_else(|| AgentError::Local {
                why: format!("--kafka-owner: no account `{user}` on this machine"),
            }),
    }
}

/// The certificate, issued when missing, older than the CA or for other names.
fn certificate(i: &mut Install, tls: &Path, sans: &[String]) -> Result<(), AgentError> {
    let names = tls.join("sans");
    let current = i.issued_since_ca(&tls.join("server.properties"))
        && std::fs::read_to_string(&names).is_ok_and(|s| s == sans.join(" "));
    if current {
        i.report(
            Outcome::Already,
            "kafka.cert",
            format!("{} holds the brokers' certificate", tls.display()),
        );
        return Ok(());
    }
    if !i.dry_run() {
        let owner = kafka_owner(i)?;
        let service = i.args.kafka_owner.clone().unwrap_or_default();
        i.server_cert(
            CERT_NAME,
            "kafka",
            sans,
            tls,
            owner.map(|ids| (service.as_str(), ids)),
        )?;
        // The names it was issued for, so that a change of names reissues it.
        Folder::open(tls, &tls_trust(i, owner))?.write(
            "sans",
            sans.join(" ").as_bytes(),
            0o644,
            None,
        )?;
    }
    i.report(
        Outcome::Done,
        "kafka.cert",
        format!(
            "issued the brokers' certificate ({}) into {}",
            sans.join(", "),
            tls.display()
        ),
    );
    Ok(())
}

/// Sets each of `settings` in the `server.properties` at `target` (replacing a key's line, or
/// appending), keeping the original once as `FILE.shiqi-backup`.
///
/// The brokers' account usually owns the file's folder and could plant a link where the backup
/// goes (`server.properties.shiqi-backup -> /etc/ld.so.preload`), or make the file a hard link
/// to one of root's. So the folder is opened through handles that only root and the brokers'
/// account may change, the file is read without following a link and only with one link, the
/// backup is made with `O_EXCL` from the bytes already read, and the new file replaces the old
/// by a rename within the same handle.
fn apply(i: &mut Install, target: &Path, settings: &[(String, String)]) -> Result<(), AgentError> {
    let (dir, name) = super::folder::split(target)?;
    let trust = properties_trust(i, dir)?;
    let folder = Folder::open(dir, &trust)?;
    let (old, meta) = folder
        .read(name, super::MAX_FILE)?
        .ok_or_else(|| AgentError::Local {
            why: format!("--kafka-properties: {} is not a file", target.display()),
        })?;
    if !trust.owner(meta.st_uid) {
        return Err(AgentError::Planted {
            path: target.to_owned(),
            why: format!("owned by {}", super::folder::user(meta.st_uid)),
            fix: "give the file to root or to the brokers' account (--kafka-owner), then run \
                  install again"
                .into(),
        });
    }
    let old = String::from_utf8(old).map_err(|_| AgentError::Local {
        why: format!("--kafka-properties: {} is not UTF-8 text", target.display()),
    })?;
    let mut lines: Vec<String> = old.lines().map(str::to_owned).collect();
    for (k, v) in settings {
        let line = format!("{k}={v}");
        let at = lines.iter().position(|l| {
            l.split_once('=')
                .is_some_and(|(key, _)| key.trim() == k && !l.trim_start().starts_with('#'))
        });
        match at {
            Some(n) => lines[n] = line,
            None => lines.push(line),
        }
    }
    let new = format!("{}\n", lines.join("\n"));
    if new == old {
        i.report(
            Outcome::Already,
            "kafka.brokers",
            format!("{} has every setting", target.display()),
        );
        return Ok(());
    }
    let backup = format!("{name}.shiqi-backup");
    let mut note = "backup beside it".to_owned();
    if !i.dry_run() {
        let owner = Some((meta.st_uid, meta.st_gid));
        // It now holds the stores' password: nobody but its owner and group reads it.
        let mode = meta.st_mode & 0o7770;
        if !folder.create_new(&backup, old.as_bytes(), mode, owner)? {
            let kept = folder.entry(&backup)?;
            if kept.is_some_and(|st| {
                rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile
            }) {
                note = format!(
                    "{} is not a regular file (a link?): left alone, no new backup made",
                    folder.join(&backup).display()
                );
            }
        }
        folder.write(name, new.as_bytes(), mode, owner)?;
    }
    i.report(
        Outcome::NeedsYou,
        "kafka.brokers",
        format!(
            "updated {} ({note}): restart the broker that reads it, with \
             KAFKA_OPTS=\"{REVOCATION_OPTS}\"",
            target.display()
        ),
    );
    Ok(())
}

/// Who may change the folder of `--kafka-properties`: root, and the brokers' account
/// (`--kafka-owner`), which owns that folder on most servers. A folder another account owns is
/// refused, naming the flag that would trust it.
fn properties_trust(i: &Install, dir: &Path) -> Result<Trust, AgentError> {
    let trust = match (&i.args.kafka_owner, kafka_owner(i)?) {
        (Some(name), Some(ids)) => Trust::root().and(name, ids),
        _ => Trust::root(),
    };
    if let Ok(meta) = std::fs::symlink_metadata(dir) {
        use std::os::unix::fs::MetadataExt as _;
        if meta.is_dir() && !trust.owner(meta.uid()) {
            let who = super::folder::user(meta.uid());
            return Err(AgentError::Planted {
                path: dir.to_owned(),
                why: format!("owned by {who}"),
                fix: format!(
                    "if {who} is the brokers' account, say so with --kafka-owner (install then \
                     trusts it with this folder); else make the folder root's"
                ),
            });
        }
    }
    Ok(trust)
}

#[cfg(test)]
mod tests {
    use super::{env_name, image_environment};

    #[test]
    fn environment_names_follow_the_apache_kafka_image() {
        assert_eq!(
            env_name("ssl.principal.mapping.rules"),
            "KAFKA_SSL_PRINCIPAL_MAPPING_RULES"
        );
        assert_eq!(env_name("a_b-c.d"), "KAFKA_A__B___C_D");
    }

    #[test]
    fn the_images_get_their_stores_as_mounted_files_and_no_password() {
        let settings = [
            ("ssl.keystore.location", "/srv/tls/server.keystore.p12"),
            ("ssl.keystore.password", "hunter2"),
            ("ssl.key.password", "hunter2"),
            ("ssl.client.auth", "required"),
            ("super.users", "User:kafka-broker;User:shiqi-admin"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let text = image_environment(std::path::Path::new("/srv/tls"), &settings);
        assert!(!text.contains("hunter2"), "{text}");
        assert!(!text.contains("/srv/tls/server.keystore.p12"), "{text}");
        // What both images' `configure` scripts `ensure` once a listener is SSL://.
        for name in [
            "KAFKA_SSL_KEYSTORE_FILENAME",
            "KAFKA_SSL_KEYSTORE_CREDENTIALS",
            "KAFKA_SSL_KEY_CREDENTIALS",
            "KAFKA_SSL_TRUSTSTORE_FILENAME",
            "KAFKA_SSL_TRUSTSTORE_CREDENTIALS",
        ] {
            assert!(text.contains(&format!("  {name}: \"")), "{name}\n{text}");
        }
        assert!(
            text.contains("\"/srv/tls:/etc/kafka/secrets:ro\""),
            "{text}"
        );
        assert!(
            text.contains("  KAFKA_SSL_CLIENT_AUTH: \"required\"\n"),
            "{text}"
        );
        assert!(text.contains("  KAFKA_SUPER_USERS: \"User:kafka-broker;User:shiqi-admin\"\n"));
    }
}
