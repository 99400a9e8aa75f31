//! `DIR/.idea/dataSources.xml` and `dataSources.local.xml`: our data source merged into
//! whatever the project holds. Each file is parsed and re-emitted event by event (quick-xml);
//! every other element, data source, comment and whitespace passes through untouched, and only
//! the `<data-source>` with our uuid is replaced (or added). A file that is not well-formed XML
//! with a `<project>` root is refused, and then nothing is written.

use std::io;
use std::path::{Path, PathBuf};

use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, Event};
use quick_xml::{Reader, Writer};

use super::DataSource;
use super::xml::{self, Node, newline};
use crate::error::{DataGripError, Error};
use crate::fsutil;

/// The shared file's component.
const SHARED: Component = Component {
    file: "dataSources.xml",
    name: "DataSourceManagerImpl",
    attrs: &[("format", "xml"), ("multifile-model", "true")],
};

/// The per-user file's component.
const LOCAL: Component = Component {
    file: "dataSources.local.xml",
    name: "dataSourceStorageLocal",
    attrs: &[],
};

/// A file, and the `<component>` in it that holds data sources.
struct Component {
    file: &'static str,
    name: &'static str,
    attrs: &'static [(&'static str, &'static str)],
}

/// What [`write()`] did to each file.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Written {
    /// The files, shared first.
    pub(crate) files: Vec<PathBuf>,
    /// Whether our data source was already there (and was replaced).
    pub(crate) replaced: bool,
}

/// Merges `ds` into `dir/.idea/`. Both files are computed before either is written; the
/// per-user file goes first, so DataGrip never lists the source without its SSL settings.
///
/// # Errors
/// [`DataGripError::File`] when a file exists but cannot be merged into; [`Error::Io`] when a
/// folder or file cannot be written.
pub(crate) fn write(dir: &Path, ds: &DataSource) -> Result<Written, Error> {
    let idea = dir.join(".idea");
    let shared_path = idea.join(SHARED.file);
    let local_path = idea.join(LOCAL.file);
    let (shared, replaced_shared) = merged(&shared_path, &SHARED, &xml::shared(ds), &ds.uuid)?;
    let (local, replaced_local) = merged(&local_path, &LOCAL, &xml::local(ds), &ds.uuid)?;
    fsutil::create_dir_all(&idea)?;
    fsutil::write_shared(&local_path, local.as_bytes())?;
    fsutil::write_shared(&shared_path, shared.as_bytes())?;
    Ok(Written {
        files: vec![shared_path, local_path],
        replaced: replaced_shared || replaced_local,
    })
}

fn merged(
    path: &Path,
    component: &Component,
    ours: &Node,
    uuid: &str,
) -> Result<(String, bool), Error> {
    let existing = fsutil::read_optional(path)?;
    let result = match existing.as_deref() {
        None => fresh(component, ours).map(|s| (s, false)),
        Some(text) if text.trim().is_empty() => fresh(component, ours).map(|s| (s, false)),
        Some(text) => merge(text, component, ours, uuid),
    };
    result.map_err(|why| {
        Error::DataGrip(DataGripError::File {
            path: path.to_path_buf(),
            why,
        })
    })
}

/// A new file holding only our data source.
fn fresh(component: &Component, ours: &Node) -> Result<String, String> {
    let mut w = Writer::new(Vec::new());
    let io = |e: io::Error| e.to_string();
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))
        .map_err(io)?;
    newline(&mut w, 0).map_err(io)?;
    w.write_event(Event::Start(project_start())).map_err(io)?;
    newline(&mut w, 1).map_err(io)?;
    write_component(&mut w, component, ours).map_err(io)?;
    newline(&mut w, 0).map_err(io)?;
    w.write_event(Event::End(BytesEnd::new("project")))
        .map_err(io)?;
    newline(&mut w, 0).map_err(io)?;
    Ok(into_string(w))
}

fn project_start() -> BytesStart<'static> {
    BytesStart::new("project").with_attributes([("version", "4")])
}

/// `<component name=…>` with our data source, at depth 1.
fn write_component<W: io::Write>(
    w: &mut Writer<W>,
    component: &Component,
    ours: &Node,
) -> io::Result<()> {
    let start = BytesStart::new("component").with_attributes(
        [("name", component.name)]
            .into_iter()
            .chain(component.attrs.iter().copied()),
    );
    w.write_event(Event::Start(start))?;
    newline(w, 2)?;
    ours.write(w, true, 2)?;
    newline(w, 1)?;
    w.write_event(Event::End(BytesEnd::new("component")))
}

fn into_string(w: Writer<Vec<u8>>) -> String {
    // Built from `&str` input and UTF-8 events only.
    String::from_utf8_lossy(&w.into_inner()).into_owned()
}

/// Where the reader is in the document.
#[derive(Clone, Copy, PartialEq, Eq)]
enum At {
    /// Before the root element.
    Prolog,
    /// Inside `<project>`, at depth `n` (1 = its children).
    Inside(usize),
    /// Inside our component (depth 2 = its children).
    Ours(usize),
    /// After the root.
    Done,
}

/// Streams `text` through, replacing or adding our data source. Returns the new text and
/// whether ours was replaced.
fn merge(
    text: &str,
    component: &Component,
    ours: &Node,
    uuid: &str,
) -> Result<(String, bool), String> {
    let mut r = Reader::from_str(text);
    let mut w = Writer::new(Vec::new());
    let io = |e: io::Error| e.to_string();
    let mut at = At::Prolog;
    let mut replaced = false;
    let mut placed = false;
    loop {
        let pos = r.buffer_position();
        let ev = r
            .read_event()
            .map_err(|e| format!("it is not well-formed XML near byte {pos}: {e}"))?;
        match (&ev, at) {
            (Event::Eof, At::Done) => break,
            (Event::Eof, _) => return Err("it ends before `</project>`".to_owned()),
            (Event::Start(e), At::Prolog) if e.name().as_ref() == "project" => {
                at = At::Inside(1);
            }
            (Event::Empty(e), At::Prolog) if e.name().as_ref() == "project" => {
                // `<project/>`: open it to put our component in.
                w.write_event(Event::Start(e.clone())).map_err(io)?;
                newline(&mut w, 1).map_err(io)?;
                write_component(&mut w, component, ours).map_err(io)?;
                newline(&mut w, 0).map_err(io)?;
                w.write_event(Event::End(BytesEnd::new("project")))
                    .map_err(io)?;
                at = At::Done;
                placed = true;
                continue;
            }
            (Event::Start(e) | Event::Empty(e), At::Prolog) => {
                return Err(format!(
                    "its root element is `<{}>`, not `<project>`",
                    e.name().as_ref()
                ));
            }
            (Event::Start(e), At::Inside(1)) if is_component(e, component)? && !placed => {
                at = At::Ours(2);
            }
            (Event::Empty(e), At::Inside(1)) if is_component(e, component)? && !placed => {
                w.write_event(Event::Start(e.clone())).map_err(io)?;
                newline(&mut w, 2).map_err(io)?;
                ours.write(&mut w, true, 2).map_err(io)?;
                newline(&mut w, 1).map_err(io)?;
                w.write_event(Event::End(BytesEnd::new("component")))
                    .map_err(io)?;
                placed = true;
                continue;
            }
            (Event::Start(_), At::Inside(n)) => at = At::Inside(n + 1),
            (Event::Start(e), At::Ours(2)) if has_uuid(e, uuid)? => {
                // Ours from an earlier run: skip it whole, write the new one in its place.
                r.read_to_end(e.name())
                    .map_err(|e| format!("it is not well-formed XML: {e}"))?;
                ours.write(&mut w, true, 2).map_err(io)?;
                replaced = true;
                continue;
            }
            (Event::Empty(e), At::Ours(2)) if has_uuid(e, uuid)? => {
                ours.write(&mut w, true, 2).map_err(io)?;
                replaced = true;
                continue;
            }
            (Event::Start(_), At::Ours(n)) => at = At::Ours(n + 1),
            (Event::End(_), At::Ours(2)) => {
                if !replaced {
                    // After the last child's whitespace, which already ends the line.
                    w.write_event(Event::Text(quick_xml::events::BytesText::from_escaped(
                        "  ",
                    )))
                    .map_err(io)?;
                    ours.write(&mut w, true, 2).map_err(io)?;
                    newline(&mut w, 1).map_err(io)?;
                }
                placed = true;
                at = At::Inside(1);
            }
            (Event::End(_), At::Ours(n)) => at = At::Ours(n - 1),
            (Event::End(_), At::Inside(1)) => {
                if !placed {
                    w.write_event(Event::Text(quick_xml::events::BytesText::from_escaped(
                        "  ",
                    )))
                    .map_err(io)?;
                    write_component(&mut w, component, ours).map_err(io)?;
                    newline(&mut w, 0).map_err(io)?;
                    placed = true;
                }
                at = At::Done;
            }
            (Event::End(_), At::Inside(n)) => at = At::Inside(n - 1),
            _ => {}
        }
        w.write_event(ev).map_err(io)?;
    }
    Ok((into_string(w), replaced))
}

fn is_component(e: &BytesStart<'_>, c: &Component) -> Result<bool, String> {
    Ok(e.name().as_ref() == "component" && attr(e, "name")?.as_deref() == Some(c.name))
}

fn has_uuid(e: &BytesStart<'_>, uuid: &str) -> Result<bool, String> {
    Ok(e.name().as_ref() == "data-source" && attr(e, "uuid")?.as_deref() == Some(uuid))
}

fn attr(e: &BytesStart<'_>, name: &str) -> Result<Option<String>, String> {
    let a = e.try_get_attribute(name).map_err(|err| {
        format!(
            "a `<{}>` has a malformed attribute: {err}",
            e.name().as_ref()
        )
    })?;
    a.map(|a| {
        a.normalized_value(quick_xml::XmlVersion::default())
            .map(|v| v.into_owned())
    })
    .transpose()
    .map_err(|err| format!("attribute `{name}` cannot be read: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datagrip::tests::sample;
    use crate::jdbc::{Driver, Verification};

    const OTHER: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<project version="4">
  <component name="DataSourceManagerImpl" format="xml" multifile-model="true">
    <data-source source="LOCAL" name="prod &amp; co" uuid="11111111-2222-4333-8444-555555555555">
      <driver-ref>postgresql</driver-ref>
      <jdbc-url>jdbc:postgresql://db:5432/x</jdbc-url>
    </data-source>
    <!-- a comment the user wrote -->
  </component>
  <component name="SomethingElse" />
</project>
"#;

    fn merge_shared(text: &str) -> Result<(String, bool), String> {
        let ds = sample(Driver::Mysql);
        merge(text, &SHARED, &xml::shared(&ds), &ds.uuid)
    }

    #[test]
    fn adds_ours_and_keeps_everything_else() {
        let (out, replaced) = merge_shared(OTHER).expect("merges");
        assert!(!replaced);
        // The other source, the comment and the other component pass through untouched.
        let kept = OTHER.split("  </component>").next().expect("head");
        assert!(out.starts_with(kept), "{out}");
        assert!(
            out.contains("<component name=\"SomethingElse\" />"),
            "{out}"
        );
        insta::assert_snapshot!(&out[kept.len()..], @r##"
            <data-source source="LOCAL" name="shiqi saige" uuid="b00247f8-faef-576d-a2df-7ab1768b4924">
              <driver-ref>mysql.8</driver-ref>
              <synchronize>true</synchronize>
              <jdbc-driver>com.mysql.cj.jdbc.Driver</jdbc-driver>
              <jdbc-url>jdbc:mysql://127.0.0.1:3306/?user=saige</jdbc-url>
              <remarks>Certificate login through the shiqi tunnel: start it first with `shiqi-connect tunnel up saige`</remarks>
              <working-dir>$ProjectFileDir$</working-dir>
            </data-source>
          </component>
          <component name="SomethingElse" />
        </project>
        "##);
    }

    #[test]
    fn a_second_run_replaces_only_ours() {
        let (once, _) = merge_shared(OTHER).expect("merges");
        let mut ds = sample(Driver::Mariadb);
        if let Some(tls) = &mut ds.tls {
            tls.verification = Verification::Ca;
        }
        let (twice, replaced) = merge(&once, &SHARED, &xml::shared(&ds), &ds.uuid).expect("merges");
        assert!(replaced);
        assert_eq!(twice.matches("<data-source ").count(), 2, "{twice}");
        assert!(twice.contains("jdbc:mariadb://"), "{twice}");
        assert!(!twice.contains("jdbc:mysql://"), "{twice}");
        // Idempotent: the same source again changes nothing.
        let (thrice, _) = merge(&twice, &SHARED, &xml::shared(&ds), &ds.uuid).expect("merges");
        assert_eq!(thrice, twice);
    }

    #[test]
    fn adds_a_missing_component_and_writes_fresh_files() {
        let text = "<?xml version=\"1.0\"?>\n<project version=\"4\">\n  <component name=\"X\"/>\n</project>\n";
        let ds = sample(Driver::Mysql);
        let (out, _) = merge(text, &LOCAL, &xml::local(&ds), &ds.uuid).expect("merges");
        assert!(out.contains("<component name=\"X\"/>\n  <component name=\"dataSourceStorageLocal\">\n    <data-source name=\"shiqi saige\""), "{out}");
        let fresh = fresh(&LOCAL, &xml::local(&ds)).expect("fresh");
        insta::assert_snapshot!(fresh, @r##"
        <?xml version="1.0" encoding="UTF-8"?>
        <project version="4">
          <component name="dataSourceStorageLocal">
            <data-source name="shiqi saige" uuid="b00247f8-faef-576d-a2df-7ab1768b4924">
              <auth-provider>no-auth</auth-provider>
              <user-name>saige</user-name>
              <ssl-config>
                <ca-cert>/home/saige/.shiqi/saige/ca.crt</ca-cert>
                <client-cert>/home/saige/.shiqi/saige/client.crt</client-cert>
                <client-key>/home/saige/.shiqi/saige/client.key</client-key>
                <enabled>true</enabled>
                <mode>VERIFY_FULL</mode>
              </ssl-config>
            </data-source>
          </component>
        </project>
        "##);
        // A fresh file merges into itself unchanged.
        let (again, replaced) = merge(&fresh, &LOCAL, &xml::local(&ds), &ds.uuid).expect("merges");
        assert!(replaced);
        assert_eq!(again, fresh);
    }

    #[test]
    fn refuses_what_it_cannot_merge_into() {
        for (text, why) in [
            ("<project><component></project>", "not well-formed"),
            ("<settings/>", "root element is `<settings>`"),
            ("<project version=\"4\">", "ends before"),
            ("not xml at all", "ends before"),
        ] {
            let e = merge_shared(text).expect_err(text);
            assert!(e.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn writes_both_files_and_nothing_when_one_is_broken() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ds = sample(Driver::Mysql);
        let w = write(dir.path(), &ds).expect("writes");
        assert!(!w.replaced);
        assert_eq!(w.files.len(), 2);
        assert!(write(dir.path(), &ds).expect("again").replaced);

        let broken = tempfile::tempdir().expect("tempdir");
        let idea = broken.path().join(".idea");
        std::fs::create_dir(&idea).expect("mkdir");
        fsutil::write_private(&idea.join("dataSources.local.xml"), b"<project>").expect("seed");
        let e = write(broken.path(), &ds).expect_err("broken local file");
        assert!(
            matches!(e, Error::DataGrip(DataGripError::File { .. })),
            "{e}"
        );
        // The shared file was not written either.
        assert!(!idea.join("dataSources.xml").exists());
    }
}
