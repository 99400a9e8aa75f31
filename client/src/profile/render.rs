//! The text files of a profile, rendered from `render/templates/` (minijinja, embedded) and the
//! profile itself: the one way setup, rotate, renew and the tunnel's refresh turn a profile into
//! its files. Pure: no network, no filesystem. The forwards it renders are planned by the
//! tunnel (`profile::plan`) and passed in.

use std::collections::BTreeMap;
use std::path::Path;

use minijinja::context;
use minijinja::value::Serde;
use shiqi_ca::Secret;

use super::{Endpoint, ForwardRecord, KeyUsed, Profile, files};
use crate::error::{Error, ProfileError};

/// The rendered text files of the catalogue ([`files::CATALOGUE`]) the profile has: Kafka's only
/// with brokers, `my.cnf` only with MySQL.
pub(crate) struct Rendered(BTreeMap<&'static str, Secret<String>>);

impl Rendered {
    /// The text of profile file `name`, when the profile has it. Kept as a [`Secret`]: some
    /// (`client.properties`) hold the keystore password.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(|t| t.expose().as_str())
    }

    /// Every rendered file, by name.
    pub(crate) fn files(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.0.iter().map(|(n, t)| (*n, t.expose().as_str()))
    }

    /// `ssh_config`, which every profile has.
    pub(crate) fn ssh_config(&self) -> &str {
        self.get(files::SSH_CONFIG).unwrap_or_default()
    }
}

/// What a value may hold before it reaches a config file. Values from the server are already
/// typed ([`Host`], [`Port`], [`ProfileName`]) and cannot hold any of this; these checks are
/// for what the laptop itself supplies (the `--server` text, ssh_config answers, paths).
#[derive(Clone, Copy)]
enum Shape {
    /// A token: no whitespace, quotes, `#`, `\\`, `=` or control characters.
    Word,
    /// A file path: spaces allowed (every template quotes or escapes paths where its format
    /// needs it), no quotes, `#` or control characters.
    Path,
    /// Free text in a comment: no control characters.
    Comment,
}

/// Refuses a value that could end a line, open a quote or start a comment in a config file.
fn checked<'a>(field: &'static str, value: &'a str, shape: Shape) -> Result<&'a str, Error> {
    let bad = |why: &'static str| {
        Error::Profile(ProfileError::UnsafeValue {
            field,
            value: shiqi_ca::text::one_line(value, 80),
            why,
        })
    };
    if value.chars().any(char::is_control) {
        return Err(bad(
            "it holds a control character (a newline, an escape sequence)",
        ));
    }
    let word_breakers = |c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '#' | '\\' | '=');
    match shape {
        Shape::Word if value.contains(word_breakers) => Err(bad(
            "it holds whitespace, a quote, `#`, `\\` or `=`, which config files would split or treat as syntax",
        )),
        Shape::Path if value.contains(['"', '\'', '#']) => Err(bad(
            "it holds a quote or `#`, which config files would treat as syntax",
        )),
        _ => Ok(value),
    }
}

/// The identity file ssh_config names for a key: the file, or the agent key's file if known.
fn key_file(k: &KeyUsed) -> Option<String> {
    match k {
        KeyUsed::File { path, .. } => Some(portable(path)),
        KeyUsed::Agent { file, .. } => file.as_ref().map(portable),
    }
}

/// Every string the laptop supplies, checked by its shape before any template sees it (the
/// rest of the profile is typed: names, hosts, ports, serials, times).
fn check_input(
    p: &Profile,
    dir: &Path,
    host_key_alias: Option<&str>,
    password: &Secret<String>,
) -> Result<(), Error> {
    let server = &p.server;
    checked("--server", &server.destination, Shape::Word)?;
    checked("HostName", &server.host, Shape::Word)?;
    checked("User", &server.user, Shape::Word)?;
    if let Some(alias) = host_key_alias {
        checked("HostKeyAlias", alias, Shape::Word)?;
    }
    checked("tunnel Host", &p.tunnel_host, Shape::Word)?;
    for j in &server.jumps {
        checked("jump host", &j.host, Shape::Word)?;
        checked("jump User", &j.user, Shape::Word)?;
        checked(
            "jump UserKnownHostsFile",
            &portable(&j.known_hosts),
            Shape::Path,
        )?;
        if let Some(file) = key_file(&j.ssh_key) {
            checked("jump IdentityFile", &file, Shape::Path)?;
        }
    }
    checked("profile folder", &portable(dir), Shape::Path)?;
    if let Some(c) = &server.certificate_file {
        checked("CertificateFile", &portable(c), Shape::Path)?;
    }
    checked(
        "UserKnownHostsFile",
        &portable(&server.known_hosts),
        Shape::Path,
    )?;
    checked("keystore password", password.expose(), Shape::Word)?;
    match &server.ssh_key {
        KeyUsed::File { path, .. } => {
            checked("IdentityFile", &portable(path), Shape::Path)?;
        }
        KeyUsed::Agent {
            comment,
            fingerprint,
            file,
            socket,
        } => {
            checked("ssh-agent key comment", comment, Shape::Comment)?;
            checked("ssh-agent key fingerprint", fingerprint, Shape::Word)?;
            if let Some(p) = file {
                checked("IdentityFile", &portable(p), Shape::Path)?;
            }
            if let Some(p) = socket {
                checked("IdentityAgent", &portable(p), Shape::Path)?;
            }
        }
    }
    Ok(())
}

/// Renders every text file of `p` (in folder `dir`, with the tunnel's `forwards`; all paths
/// are the profile's final, not staging, paths): the files of the catalogue
/// ([`files::CATALOGUE`]) the profile has.
///
/// # Errors
/// [`ProfileError::UnsafeValue`] when a string the laptop supplied could break a config file's syntax;
/// [`ProfileError::Template`] only on a template bug.
pub(crate) fn render(
    p: &Profile,
    forwards: &[ForwardRecord],
    dir: &Path,
    host_key_alias: Option<&str>,
    password: &Secret<String>,
) -> Result<Rendered, Error> {
    check_input(p, dir, host_key_alias, password)?;
    let rfc = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_else(|_| t.to_string())
    };
    let server = &p.server;
    let env = shiqi_render::environment();
    let path = |f: &str| portable(dir.join(f));
    let local_bootstrap = match &p.endpoint {
        Endpoint::Local { bootstrap_port, .. } => Some(format!("127.0.0.1:{bootstrap_port}")),
        Endpoint::Direct => None,
    };
    let bootstrap = local_bootstrap.clone().unwrap_or_else(|| {
        p.brokers
            .iter()
            .map(|b| shiqi_render::hostport(b.host.as_str(), b.port.get()))
            .collect::<Vec<_>>()
            .join(",")
    });
    // OpenSSH reads the jump hosts from this same file (`ssh -F` passes it on to each hop).
    let jumps: Vec<_> = server
        .jumps
        .iter()
        .enumerate()
        .map(|(i, j)| {
            context! {
                alias => format!("{}-jump{}", p.tunnel_host, i + 1),
                host => &j.host,
                port => j.port,
                user => &j.user,
                known_hosts => portable(&j.known_hosts),
                key_file => key_file(&j.ssh_key),
            }
        })
        .collect();
    let proxy_jump = (!jumps.is_empty()).then(|| {
        (1..=jumps.len())
            .map(|i| format!("{}-jump{i}", p.tunnel_host))
            .collect::<Vec<_>>()
            .join(",")
    });
    let (key_file, agent_key, identity_agent) = match &server.ssh_key {
        KeyUsed::File { path, .. } => (Some(portable(path)), None, None),
        KeyUsed::Agent {
            comment,
            fingerprint,
            file,
            socket,
        } => (
            file.as_ref().map(portable),
            Some(format!("{comment} {fingerprint}").trim().to_owned()),
            socket.as_ref().map(portable),
        ),
    };
    let tunnel_cmd = format!(
        "ssh -fN -F {} {}",
        shiqi_render::ssh_quote(path(files::SSH_CONFIG)),
        p.tunnel_host
    );
    let ctx = context! {
        name => p.name.as_str(),
        dir => portable(dir),
        destination => &server.destination,
        ssh_host => &server.host,
        ssh_port => server.port,
        ssh_user => &server.user,
        host_key_alias => host_key_alias,
        known_hosts => portable(&server.known_hosts),
        key_file => key_file,
        agent_key => agent_key,
        identity_agent => identity_agent,
        certificate_file => server.certificate_file.as_ref().map(portable),
        tunnel_host => &p.tunnel_host,
        jumps => jumps,
        proxy_jump => proxy_jump,
        tunnel_cmd => tunnel_cmd,
        brokers => Serde(&p.brokers),
        bootstrap => bootstrap,
        local_endpoint => local_bootstrap,
        allow_local_infile => p.endpoint_options.allow_local_infile,
        mysql => Serde(&p.mysql),
        forwards => Serde(forwards),
        password => password.expose(),
        p12_format => p.p12_format.to_string(),
        created => rfc(p.created),
        not_after => rfc(p.certificate.not_after),
        serial => p.certificate.serial.to_string(),
        client_key => path(files::CLIENT_KEY),
        client_crt => path(files::CLIENT_CRT),
        ca_crt => path(files::CA_CRT),
        keystore => path(files::KEYSTORE),
        truststore => path(files::TRUSTSTORE),
        keystore_password_file => path(files::KEYSTORE_PASSWORD),
        client_properties => path(files::CLIENT_PROPERTIES),
        librdkafka_conf => path(files::LIBRDKAFKA_CONF),
        my_cnf => path(files::MY_CNF),
        ssh_config => path(files::SSH_CONFIG),
        control_path => crate::os::OPENSSH_BACKGROUND.then(|| path("tunnel.sock")),
    };
    let one = |template: &'static str| {
        env.get_template(template)
            .and_then(|t| t.render(&ctx))
            .map_err(|source| Error::Profile(ProfileError::Template { template, source }))
    };
    // The catalogue's rendered files, each when the profile has it.
    let mut out = BTreeMap::new();
    for kind in files::CATALOGUE.iter().filter(|k| k.present(p)) {
        if let files::Source::Template(template) = kind.source {
            out.insert(kind.name, Secret::new(one(template)?));
        }
    }
    Ok(Rendered(out))
}

/// A path as the written files name it ([`crate::os::files::portable`]).
fn portable(p: impl AsRef<Path>) -> String {
    crate::os::files::portable(p.as_ref())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use shiqi_ca::ProfileName;
    use shiqi_ca::protocol::{Broker, MysqlFacts};

    use super::*;
    use crate::profile::JumpHost;
    use crate::profile::plan::forwards;

    fn brokers(ports: &[u16]) -> Vec<Broker> {
        ports
            .iter()
            .enumerate()
            .map(|(i, p)| Broker {
                id: i as i32 + 1,
                host: "localhost".parse().expect("host"),
                port: shiqi_ca::Port::try_from(*p).expect("port"),
            })
            .collect()
    }

    fn mysql() -> MysqlFacts {
        MysqlFacts {
            host: "127.0.0.1".parse().expect("host"),
            port: shiqi_ca::Port::try_from(3306).expect("port"),
            user: "saige".parse().expect("name"),
        }
    }

    /// A profile to render and what comes with it, each field open to a test's change.
    struct Case {
        p: Profile,
        f: Vec<ForwardRecord>,
        pw: Secret<String>,
        dir: PathBuf,
        alias: Option<String>,
    }

    impl Case {
        fn render(&self) -> Result<Rendered, Error> {
            render(&self.p, &self.f, &self.dir, self.alias.as_deref(), &self.pw)
        }
    }

    fn input(
        name: &ProfileName,
        b: &[Broker],
        m: Option<&MysqlFacts>,
        f: &[ForwardRecord],
        key: &KeyUsed,
        pw: &Secret<String>,
        dir: &Path,
    ) -> Case {
        let mut p = crate::profile::tests::sample();
        p.name = name.clone();
        p.brokers = b.to_vec();
        p.mysql = m.cloned();
        p.server.ssh_key = key.clone();
        p.forwards = f.to_vec();
        Case {
            p,
            f: f.to_vec(),
            pw: pw.clone(),
            dir: dir.to_path_buf(),
            alias: None,
        }
    }

    /// Every string the laptop feeds the templates, with each hostile payload in turn, through
    /// the public `render`: each is refused, naming the field. (Server values cannot even be
    /// built with these payloads: `Host`, `Port` and `ProfileName` refuse them when parsed.)
    #[test]
    fn refuses_hostile_strings_in_every_field_of_every_template() {
        let name: ProfileName = "saige".parse().expect("name");
        let b = brokers(&[19094]);
        let m = mysql();
        let (f, _) = forwards(&b, Some(&m), &Endpoint::Direct).expect("forwards");
        let pw = Secret::new("pw123".to_owned());
        let dir = PathBuf::from("/home/saige/.shiqi/saige");
        let payloads = [
            "x\nMatch exec \"touch /tmp/pwned\"",
            "x\rProxyCommand sh",
            "x\u{1b}]0;title\u{7}",
            "x\0y",
            "x\"y",
            "x'y",
            "x#y",
        ];
        type Set = fn(&mut Case, &'static str);
        let fields: [(&str, Set); 5] = [
            ("--server", |c, v| c.p.server.destination = v.into()),
            ("HostName", |c, v| c.p.server.host = v.into()),
            ("User", |c, v| c.p.server.user = v.into()),
            ("HostKeyAlias", |c, v| c.alias = Some(v.into())),
            ("tunnel Host", |c, v| c.p.tunnel_host = v.into()),
        ];
        let file_key = KeyUsed::File {
            path: PathBuf::from("/home/saige/.ssh/id_ed25519"),
            fingerprint: "SHA256:x".into(),
        };
        for payload in payloads {
            for (field, set) in &fields {
                let mut i = input(&name, &b, Some(&m), &f, &file_key, &pw, &dir);
                set(&mut i, payload);
                let e = i.render().map(|_| ()).expect_err(payload);
                assert!(
                    matches!(e, Error::Profile(ProfileError::UnsafeValue { field: got, .. }) if got == *field),
                    "{field} with {payload:?}: {e}"
                );
                assert!(!e.to_string().chars().any(char::is_control), "{e}");
            }
            // Paths and the ssh-agent key's comment, which allow spaces but nothing else.
            let bad_dir = PathBuf::from(format!("/home/saige/{payload}"));
            let i = input(&name, &b, Some(&m), &f, &file_key, &pw, &bad_dir);
            assert!(i.render().is_err(), "profile folder with {payload:?}");
            let bad_key = KeyUsed::File {
                path: PathBuf::from(format!("/k/{payload}")),
                fingerprint: "SHA256:x".into(),
            };
            let i = input(&name, &b, Some(&m), &f, &bad_key, &pw, &dir);
            assert!(i.render().is_err(), "IdentityFile with {payload:?}");
            for (host, user) in [(payload, "jumper"), ("bastion", payload)] {
                let hop = [JumpHost {
                    host: host.to_owned(),
                    port: 22,
                    user: user.to_owned(),
                    known_hosts: PathBuf::from("/home/saige/.ssh/known_hosts"),
                    ssh_key: file_key.clone(),
                }];
                let mut i = input(&name, &b, Some(&m), &f, &file_key, &pw, &dir);
                i.p.server.jumps = hop.to_vec();
                assert!(i.render().is_err(), "jump host {host:?} user {user:?}");
            }
            let bad_pw = Secret::new(payload.to_owned());
            let i = input(&name, &b, Some(&m), &f, &file_key, &bad_pw, &dir);
            assert!(i.render().is_err(), "password with {payload:?}");
        }
        let agent_key = KeyUsed::Agent {
            comment: "saige@laptop\nMatch exec x".into(),
            fingerprint: "SHA256:x".into(),
            file: None,
            socket: None,
        };
        let i = input(&name, &b, Some(&m), &f, &agent_key, &pw, &dir);
        assert!(i.render().is_err(), "agent key comment with a newline");
        // A path with a space stays possible: it is quoted where the format needs it.
        let spaced = PathBuf::from("/Users/Saige Doe/.shiqi/saige");
        let r = input(&name, &b, Some(&m), &f, &file_key, &pw, &spaced)
            .render()
            .expect("space");
        assert_control_path(
            r.ssh_config(),
            "\"/Users/Saige Doe/.shiqi/saige/tunnel.sock\"",
        );
    }

    /// The control socket's line where OpenSSH multiplexes; none at all on Windows.
    fn assert_control_path(ssh_config: &str, path: &str) {
        if crate::os::OPENSSH_BACKGROUND {
            assert!(
                ssh_config.contains(&format!("ControlPath {path}")),
                "{ssh_config}"
            );
        } else {
            assert!(!ssh_config.contains("Control"), "{ssh_config}");
            assert!(ssh_config.contains("ssh -N -F"), "{ssh_config}");
        }
    }

    #[test]
    fn renders_the_whole_profile() {
        let name: ProfileName = "saige".parse().expect("name");
        let b = brokers(&[19094, 29094, 39094]);
        let m = mysql();
        let (f, _) = forwards(&b, Some(&m), &Endpoint::Direct).expect("forwards");
        let key = KeyUsed::File {
            path: PathBuf::from("/home/saige/.ssh/id_ed25519"),
            fingerprint: "SHA256:x".into(),
        };
        let pw = Secret::new("pw123".to_owned());
        let dir = PathBuf::from("/home/saige/.shiqi/saige");
        let r = input(&name, &b, Some(&m), &f, &key, &pw, &dir)
            .render()
            .expect("render");

        let props = r.get(files::CLIENT_PROPERTIES).expect("kafka");
        assert!(
            props.contains("\nbootstrap.servers=localhost:19094,localhost:29094,localhost:39094\n")
        );
        assert!(props.contains("\nsecurity.protocol=SSL\n"));
        assert!(props.contains("\nssl.keystore.location=/home/saige/.shiqi/saige/keystore.p12\n"));
        assert!(props.contains("\nssl.keystore.password=pw123\n"));
        assert!(props.contains("\nssl.truststore.type=PKCS12\n"));
        assert!(!props.contains("\nssl.endpoint.identification.algorithm"));

        let rdk = r.get(files::LIBRDKAFKA_CONF).expect("kafka");
        assert!(rdk.contains("\nsecurity.protocol=ssl\n"));
        assert!(rdk.contains("\nssl.key.location=/home/saige/.shiqi/saige/client.key\n"));

        let cnf = r.get(files::MY_CNF).expect("mysql");
        assert!(cnf.contains("[client]\n"));
        assert!(cnf.contains("\nhost=127.0.0.1\nport=3306\n"));
        assert!(cnf.contains("\nuser=saige\n"));
        assert!(cnf.contains("\nssl-verify-server-cert\n"));

        let ssh = &r.ssh_config();
        assert!(ssh.contains("\nHost shiqi-tunnel\n"));
        for line in [
            "    HostName 10.231.0.1",
            "    User shiqi-dev",
            "    Port 22",
            "    IdentityFile /home/saige/.ssh/id_ed25519",
            "    IdentitiesOnly yes",
            "    UserKnownHostsFile /home/saige/.ssh/known_hosts",
            "    LocalForward 127.0.0.1:19094 localhost:19094",
            "    LocalForward 127.0.0.1:29094 localhost:29094",
            "    LocalForward 127.0.0.1:39094 localhost:39094",
            "    LocalForward 127.0.0.1:3306 127.0.0.1:3306",
            "    ExitOnForwardFailure yes",
            "    ServerAliveInterval 15",
            "    ServerAliveCountMax 3",
        ] {
            assert!(ssh.lines().any(|l| l == line), "missing {line:?} in\n{ssh}");
        }
        assert!(
            !r.get(files::DATAGRIP_MD)
                .unwrap_or_default()
                .contains("pw123"),
            "the password stays in keystore.password"
        );
        assert!(
            r.get(files::DATAGRIP_MD)
                .unwrap_or_default()
                .contains("/home/saige/.shiqi/saige/client.properties")
        );
        assert!(
            !props.contains("{{")
                && !ssh.contains("{%")
                && !r.get(files::DATAGRIP_MD).unwrap_or_default().contains("{{")
        );
    }

    #[test]
    fn the_local_endpoint_leaves_no_tls_setting_and_no_secret_in_client_files() {
        let name: ProfileName = "saige".parse().expect("name");
        let b = brokers(&[19094, 29094, 39094]);
        let m = mysql();
        let endpoint = Endpoint::Local {
            bootstrap_port: 9092,
            brokers: vec![],
        };
        let (f, _) = forwards(&b, Some(&m), &endpoint).expect("forwards");
        assert_eq!(f.len(), 1, "MySQL only: {f:?}");
        assert!(f[0].purpose.contains("local endpoint"), "{f:?}");
        let key = KeyUsed::File {
            path: PathBuf::from("/home/saige/.ssh/id_ed25519"),
            fingerprint: "SHA256:x".into(),
        };
        let pw = Secret::new("pw123".to_owned());
        let dir = PathBuf::from("/home/saige/.shiqi/saige");
        let mut i = input(&name, &b, Some(&m), &f, &key, &pw, &dir);
        i.p.endpoint = endpoint.clone();
        let r = i.render().expect("render");

        let cnf = r.get(files::MY_CNF).expect("mysql");
        let settings: Vec<&str> = cnf.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            settings,
            [
                "",
                "[client]",
                "host=127.0.0.1",
                "port=3306",
                "user=saige",
                "",
                "[mysql]",
                "local-infile=0"
            ],
            "{cnf}"
        );
        // `--allow-local-infile` leaves it to the client.
        i.p.endpoint_options.allow_local_infile = true;
        let allowed = i.render().expect("render");
        let cnf = allowed.get(files::MY_CNF).expect("mysql");
        assert!(
            !cnf.contains("[mysql]") && !cnf.contains("local-infile"),
            "{cnf}"
        );
        // OpenSSH cannot stand in for the endpoint: no forward it could carry wrongly.
        assert!(
            !r.ssh_config().contains("LocalForward"),
            "{}",
            r.ssh_config()
        );
        assert!(
            r.ssh_config().contains("MySQL 127.0.0.1:3306"),
            "{}",
            r.ssh_config()
        );
        let md = &r.get(files::DATAGRIP_MD).unwrap_or_default();
        assert!(md.contains("| Authentication | `No auth` |"), "{md}");
        assert!(md.contains("`PLAINTEXT`"), "{md}");
        assert!(
            !md.contains("Client key file") && !md.contains("pw123"),
            "{md}"
        );
        assert!(!md.contains("{{") && !md.contains("{%"));
    }

    #[test]
    fn agent_login_and_no_kafka() {
        let name: ProfileName = "bob".parse().expect("name");
        let m = mysql();
        let (f, _) = forwards(&[], Some(&m), &Endpoint::Direct).expect("forwards");
        let key = KeyUsed::Agent {
            comment: "bob@laptop".into(),
            fingerprint: "SHA256:y".into(),
            file: None,
            socket: Some(PathBuf::from("/home/bob/Library/Secretive/socket.ssh")),
        };
        let pw = Secret::new("pw".to_owned());
        let dir = PathBuf::from("/home/bob/my profiles/bob");
        let r = input(&name, &[], Some(&m), &f, &key, &pw, &dir)
            .render()
            .expect("render");
        assert!(
            r.get(files::CLIENT_PROPERTIES).is_none() && r.get(files::LIBRDKAFKA_CONF).is_none()
        );
        assert!(!r.ssh_config().contains("IdentityFile"));
        assert!(r.ssh_config().contains("ssh-agent"));
        // The agent ~/.ssh/config named, so OpenSSH (and DataGrip) ask the same one.
        assert!(
            r.ssh_config()
                .contains("    IdentityAgent /home/bob/Library/Secretive/socket.ssh\n"),
            "{}",
            r.ssh_config()
        );
        assert_control_path(r.ssh_config(), "\"/home/bob/my profiles/bob/tunnel.sock\"");
        assert!(
            r.get(files::MY_CNF)
                .expect("mysql")
                .contains("ssl-key=\"/home/bob/my profiles/bob/client.key\"")
        );
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "Unix's file: Windows' has no control socket (assert_control_path)"
    )]
    fn ssh_config_snapshot() {
        let name: ProfileName = "saige".parse().expect("name");
        let b = brokers(&[19094, 29094, 39094]);
        let m = mysql();
        let (f, _) = forwards(&b, Some(&m), &Endpoint::Direct).expect("forwards");
        let key = KeyUsed::Agent {
            comment: "saige@laptop".into(),
            fingerprint: "SHA256:x".into(),
            file: Some(PathBuf::from("/home/saige/.ssh/id_ed25519")),
            socket: None,
        };
        let pw = Secret::new("pw123".to_owned());
        let dir = PathBuf::from("/home/saige/.shiqi/saige");
        let r = input(&name, &b, Some(&m), &f, &key, &pw, &dir)
            .render()
            .expect("render");
        insta::assert_snapshot!(r.ssh_config(), @r#"
# SSH tunnel for profile `saige`, written by `shiqi-connect setup saige` at 2026-10-10T08:00:00Z.
#
# Start:  shiqi-connect tunnel up saige   (the built-in tunnel, which renews the certificate too)
#   or:   ssh -fN -F /home/saige/.shiqi/saige/ssh_config shiqi-tunnel
# Check:  ssh -F /home/saige/.shiqi/saige/ssh_config -O check shiqi-tunnel
# Stop:   ssh -F /home/saige/.shiqi/saige/ssh_config -O exit shiqi-tunnel
# Or add `Include /home/saige/.shiqi/saige/ssh_config` at the top of ~/.ssh/config and use `ssh -fN shiqi-tunnel`.

Host shiqi-tunnel
    # The server, as `shiqi-dev@10.231.0.1` resolved during setup.
    HostName 10.231.0.1
    User shiqi-dev
    Port 22
    # Setup logged in with this key through ssh-agent (saige@laptop SHA256:x); ssh takes it from the
    # agent when loaded, else from the file.
    # IdentitiesOnly stops ssh from offering other keys first (servers allow only a few tries).
    IdentityFile /home/saige/.ssh/id_ed25519
    IdentitiesOnly yes
    # The server's host key was checked against this file during setup; refuse any other.
    UserKnownHostsFile /home/saige/.ssh/known_hosts
    StrictHostKeyChecking yes

    # Kafka: one forward per broker. After bootstrap the client connects to every broker at its
    # advertised address, so a tunnel with only the bootstrap port hangs on the others. Each
    # target is the advertised host as the server resolves it.
    # Kafka broker 1 (advertised localhost:19094)
    LocalForward 127.0.0.1:19094 localhost:19094
    # Kafka broker 2 (advertised localhost:29094)
    LocalForward 127.0.0.1:29094 localhost:29094
    # Kafka broker 3 (advertised localhost:39094)
    LocalForward 127.0.0.1:39094 localhost:39094

    # MySQL on the server's 127.0.0.1:3306 (it listens there only).
    LocalForward 127.0.0.1:3306 127.0.0.1:3306

    # Fail at once if a local port is taken, instead of running a tunnel with a hole in it.
    ExitOnForwardFailure yes
    # Notice a dead connection within about 45 s and exit, rather than hang.
    ServerAliveInterval 15
    ServerAliveCountMax 3
    # Lets `-O check` / `-O exit` above find the running tunnel.
    ControlMaster auto
    ControlPath /home/saige/.shiqi/saige/tunnel.sock
"#);
    }

    #[test]
    fn names_each_jump_host_so_openssh_follows_them() {
        let (name, b, m) = ("saige".parse().expect("name"), brokers(&[19094]), mysql());
        let (f, _) = forwards(&b, Some(&m), &Endpoint::Direct).expect("ok");
        let pw = Secret::new("pw".to_owned());
        let dir = PathBuf::from("/home/saige/.shiqi/saige");
        let key = KeyUsed::File {
            path: PathBuf::from("/home/saige/.ssh/id_ed25519"),
            fingerprint: "SHA256:x".into(),
        };
        let hop = |host: &str, user: &str, port| JumpHost {
            host: host.to_owned(),
            port,
            user: user.to_owned(),
            known_hosts: PathBuf::from("/home/saige/.ssh/known_hosts"),
            ssh_key: key.clone(),
        };
        let hops = [hop("192.0.2.1", "jumper", 2222), hop("10.0.0.9", "gw", 22)];
        let mut i = input(&name, &b, Some(&m), &f, &key, &pw, &dir);
        i.p.server.jumps = hops.to_vec();
        let text = i.render().expect("renders").ssh_config().to_owned();
        assert!(
            text.contains("ProxyJump shiqi-tunnel-jump1,shiqi-tunnel-jump2"),
            "{text}"
        );
        // OpenSSH's own reading of the file: the tunnel host and each hop.
        let Some(ssh) = crate::ssh::config::find_in_path("ssh") else {
            return;
        };
        let tmp = tempfile::tempdir().expect("tempdir");
        let cfg = tmp.path().join("ssh_config");
        crate::fsutil::write_private(&cfg, text.as_bytes()).expect("write");
        let g = |host: &str| {
            let out = std::process::Command::new(&ssh)
                .arg("-G")
                .arg("-F")
                .arg(&cfg)
                .arg(host)
                .output()
                .expect("ssh -G runs");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let tunnel = g("shiqi-tunnel");
        assert!(
            tunnel.contains("\nproxyjump shiqi-tunnel-jump1,shiqi-tunnel-jump2\n"),
            "{tunnel}"
        );
        let second = g("shiqi-tunnel-jump2");
        assert!(
            second.contains("\nhostname 10.0.0.9\n") && second.contains("\nuser gw\n"),
            "{second}"
        );
        assert!(g("shiqi-tunnel-jump1").contains("\nport 2222\n"));
    }
}
