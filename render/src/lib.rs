//! `shiqi-render`: every config file shiqi-connect writes, as minijinja templates embedded from
//! `render/templates/*.j2`, and the one environment both sides render them with — the laptop
//! (Kafka client configs, my.cnf, ssh_config, DATAGRIP.md) and the agent (broker and MariaDB TLS
//! fragments).
//!
//! The rules, the same everywhere: an undefined variable is an error (a typo in a template never
//! renders as an empty value); block tags on their own line leave no blank line (`trim_blocks`,
//! `lstrip_blocks`); a template's final newline is kept, so files end with one; and no value
//! holding a control character is ever written, whatever its origin (a field added later
//! without validation still cannot inject a line).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;

/// Every template, by the name callers render it with: each `templates/NAME.j2` of this crate
/// (`build.rs` lists them).
const TEMPLATES: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/templates.rs"));

/// Renders template `name` (e.g. `"my.cnf"`) with `ctx`.
///
/// # Errors
/// An unknown name, an undefined variable, a value with a control character, or a template bug.
pub fn render<S: Serialize>(name: &str, ctx: S) -> Result<String, minijinja::Error> {
    environment()
        .get_template(name)?
        .render(minijinja::value::Serde(&ctx))
}

/// The environment with every template and filter loaded.
pub fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_formatter(refuse_control_characters);
    // The default delimiters always build.
    if let Ok(syntax) = SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .keep_trailing_newline(true)
        .build()
    {
        env.set_syntax(syntax);
    }
    env.add_filter("ssh_quote", ssh_quote);
    env.add_filter("cnf_quote", cnf_quote);
    env.add_filter("prop_escape", prop_escape);
    env.add_filter("hostport", |host: String, port: u16| hostport(&host, port));
    for (name, source) in TEMPLATES {
        // Checked by this crate's tests: every template parses.
        let _ = env.add_template(name, source);
    }
    env
}

/// The last line of defence: no rendered value may hold a control character.
fn refuse_control_characters(
    out: &mut minijinja::Output<'_>,
    state: &mut minijinja::State<'_, '_>,
    value: &minijinja::Value,
) -> Result<(), minijinja::Error> {
    if let Some(s) = value.as_str()
        && s.chars().any(char::is_control)
    {
        return Err(minijinja::Error::new(
            minijinja::ErrorKind::InvalidOperation,
            format!("refusing a value with a control character: `{}`", shown(s)),
        ));
    }
    minijinja::escape_formatter(out, state, value)
}

/// A refused value as an error may show it: controls escaped, at most 80 characters. (This
/// crate depends on nothing of ours: shiqi-ca's `text::one_line` says the same for the rest.)
fn shown(s: &str) -> String {
    let escaped: String = s.escape_debug().collect();
    match escaped.char_indices().nth(79) {
        Some((cut, _)) => format!("{}…", &escaped[..cut]),
        None => escaped,
    }
}

/// ssh_config values with spaces must be double-quoted.
pub fn ssh_quote(s: String) -> String {
    if s.contains(char::is_whitespace) {
        format!("\"{s}\"")
    } else {
        s
    }
}

/// Option-file values with spaces or `#` must be quoted.
pub fn cnf_quote(s: String) -> String {
    if s.contains(|c: char| c.is_whitespace() || c == '#' || c == '"' || c == '\'') {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        s
    }
}

/// java.util.Properties treats `\` as an escape (a Windows path needs doubled backslashes).
pub fn prop_escape(s: String) -> String {
    s.replace('\\', "\\\\")
}

/// `host:port`, with IPv6 literals in brackets.
pub fn hostport(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use minijinja::context;

    use super::*;

    #[test]
    fn every_template_parses() {
        let env = environment();
        for (name, source) in TEMPLATES {
            Environment::new()
                .template_from_str(source)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(env.get_template(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn block_lines_vanish_and_the_final_newline_stays() {
        let ctx = |crl: Option<&str>| {
            context! {
                name => "mysql", sans => ["db.internal"], serial => "0a", not_after => "2027",
                ca => "/s/ca.crt", cert => "/s/server.crt", key => "/s/server.key", crl => crl,
            }
        };
        let with = render("mysqld.cnf", ctx(Some("/s/crl.pem"))).expect("renders");
        assert!(with.ends_with("ssl_key = /s/server.key\n# The CA's revocation list (`[crl] publish_dir`): a revoked certificate fails the handshake.\n# `shiqi-ca-agent` rewrites it and runs FLUSH SSL; the server refuses to start TLS if it is missing.\nssl_crl = /s/crl.pem\n"), "{with}");
        let without = render("mysqld.cnf", ctx(None)).expect("renders");
        assert!(without.ends_with("ssl_key = /s/server.key\n"), "{without}");
        assert!(!without.contains("\n\n"), "{without}");
    }

    #[test]
    fn refuses_undefined_variables_and_control_characters() {
        let e = render("mysqld.cnf", context! { name => "x" }).expect_err("undefined");
        assert_eq!(e.kind(), minijinja::ErrorKind::UndefinedError);
        let mut env = environment();
        env.add_template("t", "v={{ v }}\n").expect("parses");
        let t = env.get_template("t").expect("added");
        assert_eq!(t.render(context! { v => "ok" }).expect("renders"), "v=ok\n");
        let e = t.render(context! { v => "a\nb" }).expect_err("newline");
        assert!(e.to_string().contains("control character"), "{e}");
        assert!(e.to_string().contains(r"`a\nb`"), "shown escaped: {e}");
        let long = format!("{}\n", "x".repeat(200));
        let e = t.render(context! { v => long }).expect_err("newline");
        assert!(
            e.to_string().contains(&format!("`{}…`", "x".repeat(79))),
            "{e}"
        );
    }

    #[test]
    fn quotes_what_each_format_needs() {
        assert_eq!(ssh_quote("a b".into()), "\"a b\"");
        assert_eq!(cnf_quote("x#y".into()), "\"x#y\"");
        assert_eq!(prop_escape(r"C:\k".into()), r"C:\\k");
        assert_eq!(hostport("::1", 9), "[::1]:9");
    }
}
