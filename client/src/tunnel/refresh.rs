//! The cluster's current brokers, and the profile made to match: before the tunnel listens
//! (`tunnel up` asks the agent, [`crate::agent::brokers`]) and while it runs (the daemon asks
//! the cluster itself through its own forwards, [`crate::probe::kafka::registered`]), so a broker
//! that returns or joins gets its forward with no file edited. `ssh_config` and `profile.json`
//! are rewritten to match (each atomically, through `fsutil`), under the profile's lock
//! (`profile::store`), planned from the profile as it is then. The forward list itself is
//! `profile::plan::forwards`, the same as setup's.

use std::path::Path;
use std::time::Duration;

use shiqi_ca::Secret;
use shiqi_ca::protocol::Broker;

use crate::error::Error;
use crate::fsutil;
use crate::profile::plan;
use crate::profile::{Endpoint, ForwardRecord, Profile, files};
use crate::profile::{render, store};

/// The profile as the current broker list makes it.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// `profile.json` with the new brokers and forwards.
    pub(crate) profile: Profile,
    /// The forwards, for rendering `ssh_config`.
    pub(crate) forwards: Vec<ForwardRecord>,
    /// Forwards that are new (or whose target changed).
    pub(crate) added: Vec<ForwardRecord>,
    /// Forwards that are gone (or whose target changed).
    pub(crate) removed: Vec<ForwardRecord>,
    /// Brokers the laptop would not reach through the tunnel (see `plan::forwards`).
    pub(crate) warnings: Vec<String>,
}

impl Plan {
    /// Whether anything differs from the profile on disk (in any order).
    pub(crate) fn changed(&self, old: &Profile) -> bool {
        fn sorted<T: Clone + Ord>(v: &[T]) -> Vec<T> {
            let mut v = v.to_vec();
            v.sort();
            v
        }
        sorted(&self.profile.brokers) != sorted(&old.brokers)
            || sorted(&self.profile.forwards) != sorted(&old.forwards)
            || self.profile.endpoint != old.endpoint
    }
}

impl Plan {
    /// The forwards it adds and drops, in words (`; new forward 127.0.0.1:49094 (Kafka broker
    /// 4 …); dropped …`), empty when only the broker list changed.
    pub(crate) fn forward_changes(&self) -> String {
        let list = |v: &[ForwardRecord]| {
            v.iter()
                .map(|f| format!("127.0.0.1:{} ({})", f.local_port, f.purpose))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut out = String::new();
        if !self.added.is_empty() {
            out.push_str(&format!("; new forward {}", list(&self.added)));
        }
        if !self.removed.is_empty() {
            out.push_str(&format!("; dropped {}", list(&self.removed)));
        }
        out
    }
}

/// [`plan()`] for a running tunnel: forwards of brokers the cluster no longer lists stay, since
/// clients that fetched metadata a moment ago may still dial them (the next `tunnel up` drops
/// them); a port whose target changed gets the new target.
///
/// # Errors
/// As [`plan()`].
pub(crate) fn plan_keeping(old: &Profile, brokers: Vec<Broker>) -> Result<Plan, Error> {
    let mut p = plan(old, brokers)?;
    let kept: Vec<ForwardRecord> = p
        .removed
        .iter()
        .filter(|f| {
            !p.profile
                .forwards
                .iter()
                .any(|n| n.local_port == f.local_port)
        })
        .cloned()
        .collect();
    for f in &kept {
        p.forwards.push(ForwardRecord {
            local_port: f.local_port,
            remote_host: f.remote_host.clone(),
            remote_port: f.remote_port,
            purpose: f.purpose.clone(),
        });
        p.profile.forwards.push(f.clone());
    }
    p.removed.retain(|f| !kept.contains(f));
    Ok(p)
}

/// Plans the profile for `brokers` (pure).
///
/// # Errors
/// [`ProfileError::DuplicatePort`](crate::error::ProfileError::DuplicatePort) when the cluster now has two brokers on one port.
pub(crate) fn plan(old: &Profile, mut brokers: Vec<Broker>) -> Result<Plan, Error> {
    brokers.sort_by_key(|b| b.id);
    let (forwards, warnings) = plan::forwards(&brokers, old.mysql.as_ref(), &old.endpoint)?;
    let records: Vec<ForwardRecord> = forwards.iter().map(Clone::clone).collect();
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
    if let Endpoint::Local { bootstrap_port, .. } = old.endpoint {
        // A new broker gets the next port; known ones keep theirs.
        let avoid: Vec<u16> = old.mysql.iter().map(|m| m.port.get()).collect();
        profile.endpoint = old.endpoint.local(bootstrap_port, &brokers, &avoid);
    }
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

/// Plans the profile with `make` against `profile.json` as it is under the profile's lock
/// ([`store::update`]: a renewal may have replaced the certificate since the caller read it,
/// and a plan made from that read would write the old certificate back), and when the plan
/// changes anything, writes `ssh_config`, then `profile.json` (last, as setup does). The plan,
/// and whether it was written.
///
/// # Errors
/// As [`store::update`] and `make`; [`ProfileError::Template`](crate::error::ProfileError::Template) on a template bug; [`Error::Io`] when a
/// file cannot be written (each file is replaced atomically, so a reader sees the old one or
/// the new one).
pub(crate) fn apply(
    dir: &Path,
    host_key_alias: Option<&str>,
    patience: Duration,
    make: impl FnOnce(&Profile) -> Result<Plan, Error>,
) -> Result<(Plan, bool), Error> {
    store::update(dir, patience, |profile| {
        let plan = make(profile)?;
        if !plan.changed(profile) {
            return Ok((plan, false));
        }
        let ssh_config = render_ssh_config(&plan.profile, &plan.forwards, dir, host_key_alias)?;
        fsutil::write_private(&dir.join(files::SSH_CONFIG), ssh_config.as_bytes())?;
        *profile = plan.profile.clone();
        Ok((plan, true))
    })
}

/// Records what a running local endpoint learned: its ports and the brokers' advertised
/// addresses, into `profile.json` (the only file that names them in local mode). What changed,
/// in words. Through [`store::update`], without waiting: the daemon tries again at its next
/// look at the cluster.
///
/// # Errors
/// [`ProfileError::Busy`](crate::error::ProfileError::Busy) while a rotation holds the lock (the caller tries again later);
/// [`ProfileError::Read`](crate::error::ProfileError::Read) or [`Error::Io`].
pub(crate) fn write_endpoint(
    dir: &Path,
    endpoint: Endpoint,
    brokers: Vec<Broker>,
) -> Result<String, Error> {
    store::update(dir, Duration::ZERO, |profile| {
        let before: Vec<i32> = profile.brokers.iter().map(|b| b.id).collect();
        let mut brokers = brokers;
        brokers.sort_by_key(|b| b.id);
        let added: Vec<String> = brokers
            .iter()
            .filter(|b| !before.contains(&b.id))
            .map(|b| format!("broker {} ({}:{})", b.id, b.host, b.port))
            .collect();
        // Brokers the endpoint has not heard of since it started stay as recorded.
        for b in &profile.brokers {
            if !brokers.iter().any(|n| n.id == b.id) {
                brokers.push(b.clone());
            }
        }
        brokers.sort_by_key(|b| b.id);
        profile.brokers = brokers;
        profile.endpoint = endpoint;
        Ok(if added.is_empty() {
            "a broker moved".to_owned()
        } else {
            format!("new {}", added.join(", "))
        })
    })
}

/// Switches the profile in `dir` to `endpoint`: the forwards follow (direct: one per broker;
/// local: MySQL only, served by the endpoint), and every rendered file of the catalogue the
/// profile has, then `profile.json` (last), is rewritten to match. Through [`store::update`],
/// waiting up to `patience` for a run that holds the profile.
///
/// # Errors
/// As [`plan()`] (direct on a cluster with two brokers on one port) and [`store::update`];
/// [`Error::Io`] when a file cannot be written.
pub(crate) fn switch_endpoint(
    endpoint: Endpoint,
    dir: &Path,
    host_key_alias: Option<&str>,
    patience: Duration,
) -> Result<Plan, Error> {
    store::update(dir, patience, |profile| {
        let mut with = profile.clone();
        with.endpoint = endpoint;
        let plan = plan(&with, profile.brokers.clone())?;
        // The Java config holds the keystore password in direct mode; it is read from its file.
        let password =
            crate::profile::files::read_password(dir).unwrap_or_else(|| Secret::new(String::new()));
        let rendered = render::render(
            &plan.profile,
            &plan.forwards,
            dir,
            host_key_alias,
            &password,
        )?;
        for (name, text) in rendered.files() {
            fsutil::write_private(&dir.join(name), text.as_bytes())?;
        }
        *profile = plan.profile.clone();
        Ok(plan)
    })
}

fn render_ssh_config(
    p: &Profile,
    forwards: &[ForwardRecord],
    dir: &Path,
    host_key_alias: Option<&str>,
) -> Result<String, Error> {
    // Only `ssh_config` is kept from this render, and it never contains the keystore password
    // (checked by a test), so the other files' password need not be read from disk here.
    let no_password = Secret::new(String::new());
    Ok(
        render::render(p, forwards, dir, host_key_alias, &no_password)?
            .ssh_config()
            .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::tests::sample;

    fn with_forwards(mut p: Profile) -> Profile {
        let (f, _) = plan::forwards(&p.brokers, p.mysql.as_ref(), &p.endpoint).expect("forwards");
        p.forwards = f.iter().map(Clone::clone).collect();
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
    fn a_running_tunnel_keeps_forwards_of_brokers_that_left() {
        let old = with_forwards(sample());
        let two = plan_keeping(&old, old.brokers[..2].to_vec()).expect("plan");
        assert!(two.removed.is_empty() && two.added.is_empty());
        assert_eq!(two.profile.forwards.len(), old.forwards.len());
        assert_eq!(two.profile.brokers.len(), 2);
        // Forwards unchanged, in whatever order: only the broker list differs.
        assert!(two.changed(&old));
        let back = plan_keeping(&two.profile, old.brokers.clone()).expect("plan");
        assert!(!back.changed(&old), "{:?}", back.profile.forwards);
        // The same port, a new target: replaced, not kept.
        let mut moved = old.brokers.clone();
        moved[0].host = "broker-1.kafka.internal".parse().expect("host");
        let m = plan_keeping(&old, moved).expect("plan");
        assert_eq!(m.removed.len(), 1);
        assert_eq!(m.added.len(), 1);
        assert_eq!(m.profile.forwards.len(), old.forwards.len());
    }

    #[test]
    fn rewrites_ssh_config_and_profile_json() {
        let root = tempfile::tempdir().expect("tempdir");
        let old = with_forwards(sample());
        let dir = crate::profile::dir(root.path(), &old.name);
        crate::fsutil::create_private_dir(&dir).expect("dir");
        old.write_fixture(&dir);
        let mut brokers = old.brokers.clone();
        brokers.push(Broker {
            id: 4,
            host: "localhost".parse().expect("host"),
            port: shiqi_ca::Port::try_from(49094).expect("port"),
        });
        let (p, written) = apply(&dir, Some("vm-alias"), Duration::ZERO, |fresh| {
            plan(fresh, brokers)
        })
        .expect("apply");
        assert!(written);
        let dir = &dir;
        let cfg = std::fs::read_to_string(dir.join(files::SSH_CONFIG)).expect("read");
        assert!(
            cfg.lines()
                .any(|l| l == "    LocalForward 127.0.0.1:49094 localhost:49094"),
            "{cfg}"
        );
        assert!(cfg.contains("    HostKeyAlias vm-alias\n"));
        assert!(cfg.contains("    LocalForward 127.0.0.1:3306 127.0.0.1:3306\n"));
        let back = Profile::load(dir).expect("load");
        assert_eq!(back, p.profile);
        assert_eq!(back.brokers.len(), 4);
    }

    #[test]
    fn the_endpoints_record_waits_for_a_rotation_holding_the_profile() {
        let root = tempfile::tempdir().expect("tempdir");
        let p = sample();
        let dir = root.path().join(p.name.as_str());
        crate::fsutil::create_private_dir(&dir).expect("dir");
        p.write_fixture(&dir);
        let endpoint = Endpoint::Direct.local(9092, &p.brokers, &[]);
        let held = crate::profile::lock::lock(root.path(), &p.name).expect("lock");
        let busy = write_endpoint(&dir, endpoint.clone(), p.brokers.clone());
        assert!(
            matches!(
                busy,
                Err(Error::Profile(crate::error::ProfileError::Busy { .. }))
            ),
            "{busy:?}"
        );
        assert_eq!(
            Profile::load(&dir).expect("load").endpoint,
            Endpoint::Direct
        );
        drop(held);
        write_endpoint(&dir, endpoint.clone(), p.brokers.clone()).expect("written");
        assert_eq!(Profile::load(&dir).expect("load").endpoint, endpoint);
    }

    #[test]
    fn ssh_config_does_not_depend_on_the_keystore_password() {
        // The reason `render_ssh_config` may pass an empty password.
        let p = with_forwards(sample());
        let (f, _) = plan::forwards(&p.brokers, p.mysql.as_ref(), &p.endpoint).expect("forwards");
        let dir = Path::new("/home/saige/.shiqi/saige");
        let a = render_ssh_config(&p, &f, dir, None).expect("render");
        let pw = Secret::new("s3cret-pw".to_owned());
        let b = render::render(&p, &f, dir, None, &pw)
            .expect("render")
            .ssh_config()
            .to_owned();
        assert_eq!(a, b);
        assert!(!a.contains("s3cret-pw"));
    }
}
