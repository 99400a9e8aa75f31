//! The `<data-source>` elements, as a small tree written through quick-xml (which escapes every
//! attribute and text). Pure.

use std::io;

use quick_xml::Writer;
use quick_xml::events::{BytesEnd, BytesStart, BytesText, Event};

use super::DataSource;

/// An element: name, attributes, then either text or children.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Node {
    name: &'static str,
    attrs: Vec<(&'static str, String)>,
    text: Option<String>,
    children: Vec<Node>,
}

impl Node {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            attrs: Vec::new(),
            text: None,
            children: Vec::new(),
        }
    }

    fn attr(mut self, k: &'static str, v: impl Into<String>) -> Self {
        self.attrs.push((k, v.into()));
        self
    }

    fn text(name: &'static str, v: impl Into<String>) -> Self {
        Self {
            text: Some(v.into()),
            ..Self::new(name)
        }
    }

    fn child(mut self, c: Node) -> Self {
        self.children.push(c);
        self
    }

    /// Writes the element; with `indent`, children go on their own lines, two spaces deeper
    /// than `level` (the caller has placed the opening tag).
    ///
    /// # Errors
    /// Only the writer's own I/O errors (none for a `Vec`).
    pub(crate) fn write<W: io::Write>(
        &self,
        w: &mut Writer<W>,
        indent: bool,
        level: usize,
    ) -> io::Result<()> {
        let mut start = BytesStart::new(self.name);
        for (k, v) in &self.attrs {
            start.push_attribute((*k, v.as_str()));
        }
        if let Some(t) = &self.text {
            w.write_event(Event::Start(start))?;
            w.write_event(Event::Text(BytesText::new(t)))?;
            return w.write_event(Event::End(BytesEnd::new(self.name)));
        }
        if self.children.is_empty() {
            return w.write_event(Event::Empty(start));
        }
        w.write_event(Event::Start(start))?;
        for c in &self.children {
            if indent {
                newline(w, level + 1)?;
            }
            c.write(w, indent, level + 1)?;
        }
        if indent {
            newline(w, level)?;
        }
        w.write_event(Event::End(BytesEnd::new(self.name)))
    }
}

/// A line break and two spaces per level, as DataGrip indents its files.
pub(crate) fn newline<W: io::Write>(w: &mut Writer<W>, level: usize) -> io::Result<()> {
    let ws = format!("\n{}", "  ".repeat(level));
    w.write_event(Event::Text(BytesText::from_escaped(ws)))
}

/// The shared half (`dataSources.xml`): driver and URL.
pub(crate) fn shared(ds: &DataSource) -> Node {
    Node::new("data-source")
        .attr("source", "LOCAL")
        .attr("name", &ds.name)
        .attr("uuid", &ds.uuid)
        .child(Node::text("driver-ref", ds.driver_ref()))
        .child(Node::text("synchronize", "true"))
        .child(Node::text("jdbc-driver", ds.driver.class()))
        .child(Node::text("jdbc-url", ds.jdbc_url()))
        .child(Node::text(
            "remarks",
            if ds.tls.is_some() {
                format!(
                    "Certificate login through the shiqi tunnel: start it first with `{}`",
                    ds.tunnel_up
                )
            } else {
                format!(
                    "Through the shiqi tunnel's local endpoint, which logs in with the \
                     profile's certificate: start it first with `{}`",
                    ds.tunnel_up
                )
            },
        ))
        .child(Node::text("working-dir", "$ProjectFileDir$"))
}

/// The per-user half (`dataSources.local.xml`): who logs in and with which files.
pub(crate) fn local(ds: &DataSource) -> Node {
    let mut n = Node::new("data-source")
        .attr("name", &ds.name)
        .attr("uuid", &ds.uuid);
    n.children = per_user(ds);
    n
}

/// Both halves in one element, as a clipboard block holds them.
pub(crate) fn clipboard_element(ds: &DataSource) -> String {
    let mut n = shared(ds);
    let working_dir = n.children.pop();
    n.children.extend(per_user(ds));
    n.children.extend(working_dir);
    let mut w = Writer::new(Vec::new());
    // Writing into a Vec cannot fail.
    let _ = n.write(&mut w, false, 0);
    String::from_utf8_lossy(&w.into_inner()).into_owned()
}

fn per_user(ds: &DataSource) -> Vec<Node> {
    // No password to prompt for or store: the certificate is the credential.
    let mut out = vec![
        Node::text("auth-provider", "no-auth"),
        Node::text("user-name", ds.user.as_str()),
    ];
    if let Some(tls) = &ds.tls {
        out.push(
            Node::new("ssl-config")
                .child(Node::text("ca-cert", tls.ca_crt.display().to_string()))
                .child(Node::text(
                    "client-cert",
                    tls.client_crt.display().to_string(),
                ))
                .child(Node::text(
                    "client-key",
                    tls.client_key.display().to_string(),
                ))
                .child(Node::text("enabled", "true"))
                .child(Node::text("mode", tls.ssl_mode())),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datagrip::tests::sample;
    use crate::jdbc::Driver;

    #[test]
    fn the_clipboard_block_holds_both_halves() {
        let ds = sample(Driver::Mysql);
        insta::assert_snapshot!(ds.clipboard(), @r##"
        #DataSourceSettings#
        #LocalDataSource: shiqi saige
        #BEGIN#
        <data-source source="LOCAL" name="shiqi saige" uuid="b00247f8-faef-576d-a2df-7ab1768b4924"><driver-ref>mysql.8</driver-ref><synchronize>true</synchronize><jdbc-driver>com.mysql.cj.jdbc.Driver</jdbc-driver><jdbc-url>jdbc:mysql://127.0.0.1:3306/?user=saige</jdbc-url><remarks>Certificate login through the shiqi tunnel: start it first with `shiqi-connect tunnel up saige`</remarks><auth-provider>no-auth</auth-provider><user-name>saige</user-name><ssl-config><ca-cert>/home/saige/.shiqi/saige/ca.crt</ca-cert><client-cert>/home/saige/.shiqi/saige/client.crt</client-cert><client-key>/home/saige/.shiqi/saige/client.key</client-key><enabled>true</enabled><mode>VERIFY_FULL</mode></ssl-config><working-dir>$ProjectFileDir$</working-dir></data-source>
        #END#
        "##);
    }

    #[test]
    fn the_local_endpoint_needs_no_ssl_settings() {
        let mut ds = sample(Driver::Mariadb);
        ds.tls = None;
        let x = ds.clipboard();
        for absent in ["ssl", "key", "password", ".crt"] {
            assert!(!x.contains(absent), "`{absent}` in {x}");
        }
        assert!(
            x.contains(
                "<jdbc-url>jdbc:mariadb://127.0.0.1:3306/?user=saige&amp;allowLocalInfile=false\
                 </jdbc-url>"
            ),
            "{x}"
        );
        assert!(x.contains("<auth-provider>no-auth</auth-provider>"), "{x}");
    }

    #[test]
    fn values_are_escaped() {
        let mut ds = sample(Driver::Mariadb);
        if let Some(tls) = &mut ds.tls {
            tls.client_key = "/a&b/<k>.key".into();
        }
        let x = clipboard_element(&ds);
        assert!(
            x.contains("<client-key>/a&amp;b/&lt;k&gt;.key</client-key>"),
            "{x}"
        );
    }
}
