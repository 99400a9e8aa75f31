//! The Java drivers DataGrip and Java apps use, run for real: MySQL Connector/J and MariaDB
//! Connector/J log in through `shiqi-connect tunnel up` with exactly the URLs `shiqi-connect
//! jdbc` prints, and a Kafka AdminClient lists topics with the profile's `client.properties`
//! (scripts/jdbc builds the small Java program from Maven Central). `datagrip --project` writes
//! DataGrip's project files and merges into them.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use crate::setup::Home;
use crate::stack::{Stack, stack, unique_name};

/// The checker jar, built once per test run.
pub(crate) fn jar(s: &Stack) -> &'static str {
    static JAR: OnceLock<String> = OnceLock::new();
    JAR.get_or_init(|| {
        let build = s.script().parent().expect("scripts/").join("jdbc/build");
        let out = Command::new(&build)
            .output()
            .expect("scripts/jdbc/build runs");
        assert!(
            out.status.success(),
            "scripts/jdbc/build failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    })
}

#[test]
fn both_jdbc_drivers_log_in_through_tunnel_up_with_the_printed_urls_and_kafka_lists_topics() {
    let s = stack();
    let jar = jar(s);
    let home = Home::new(s, "jdbc");
    let name = unique_name("jd");
    home.setup(s, &name, &[]).ok();
    let topic = format!("app.{name}");
    crate::lifecycle::create_topic(s, &topic);
    let env = [("SHIQI_HOME", home.env())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    s.laptop(&["shiqi-connect", "tunnel", "up", &name], &env, None)
        .ok();
    let down = || {
        let _ = s.laptop(&["shiqi-connect", "tunnel", "down", &name], &env, None);
    };

    for driver in ["mysql", "mariadb"] {
        // The URL goes from `jdbc` to the program through a pipe: its password never in argv.
        let script = format!("shiqi-connect jdbc {name} --driver {driver} | java -jar {jar} -");
        let out = s.laptop(&["sh", "-c", &script], &env, None);
        if !out.success() {
            down();
        }
        let out = out.ok();
        assert!(
            out.stdout
                .contains(&format!("current_user={name}@127.0.0.1")),
            "{driver}:\n{}",
            out.all()
        );
        let class = if driver == "mysql" {
            "com.mysql.cj.jdbc.Driver"
        } else {
            "org.mariadb.jdbc.Driver"
        };
        assert!(out.stdout.contains(class), "{driver}:\n{}", out.all());
    }

    let props = home.profile(&name).join("client.properties");
    let props = props.display().to_string();
    let out = s.laptop(&["java", "-jar", jar, "--kafka", &props], &env, None);
    down();
    let out = out.ok();
    assert!(
        out.stdout.lines().any(|l| l == format!("topic={topic}")),
        "{}",
        out.all()
    );
}

#[test]
fn datagrip_prints_the_import_block_and_merges_into_a_project() {
    let s = stack();
    let home = Home::new(s, "datagrip");
    let name = unique_name("dg");
    home.setup(s, &name, &[]).ok();
    let env = [("SHIQI_HOME", home.env())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();

    let block = s
        .laptop(&["shiqi-connect", "datagrip", &name], &env, None)
        .ok();
    assert!(
        block.stdout.starts_with("#DataSourceSettings#"),
        "{}",
        block.all()
    );
    assert!(block.stdout.contains("127.0.0.1:3306"), "{}", block.stdout);
    assert!(block.stdout.contains("client.crt"), "{}", block.stdout);

    // A project with someone else's data source: ours is added, theirs kept, a second run
    // changes nothing.
    let project: PathBuf = home.dir.join("project");
    let idea = project.join(".idea");
    s.laptop(&["mkdir", "-p", &idea.display().to_string()], &[], None)
        .ok();
    let theirs = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<project version=\"4\">\n  \
                  <component name=\"DataSourceManagerImpl\" format=\"xml\" multifile-model=\"true\">\n    \
                  <data-source source=\"LOCAL\" name=\"theirs\" uuid=\"11111111-2222-3333-4444-555555555555\">\n      \
                  <driver-ref>postgresql</driver-ref>\n    </data-source>\n  </component>\n</project>\n";
    let sources = idea.join("dataSources.xml");
    s.laptop(
        &["sh", "-c", "cat > \"$0\"", &sources.display().to_string()],
        &[],
        Some(theirs.as_bytes()),
    )
    .ok();
    let dir = project.display().to_string();
    s.laptop(
        &["shiqi-connect", "datagrip", &name, "--project", &dir],
        &env,
        None,
    )
    .ok();
    let first = std::fs::read_to_string(&sources).expect("dataSources.xml");
    assert!(first.contains("name=\"theirs\""), "{first}");
    assert!(first.contains(&name), "{first}");
    assert!(idea.join("dataSources.local.xml").exists());
    s.laptop(
        &["shiqi-connect", "datagrip", &name, "--project", &dir],
        &env,
        None,
    )
    .ok();
    assert_eq!(
        std::fs::read_to_string(&sources).expect("dataSources.xml"),
        first,
        "a second run changed the project"
    );
}
