//! Client config files as their readers parse them: Java `.properties` (java.util.Properties:
//! `key=value`, `key: value` or `key value`, `\` continuations and escapes), librdkafka files as
//! `kcat -F` reads them (`key=value`, nothing trimmed around the `=`), and MySQL option files
//! (`[group]`, `key[=value]`, quotes, `!include`). Also guesses which of the three a file is.
//! Pure apart from reading the file.

use std::path::{Path, PathBuf};

/// Which client reads a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The Java Kafka clients (`client.properties`).
    Java,
    /// librdkafka / kcat (`librdkafka.conf`).
    Librdkafka,
    /// MySQL/MariaDB option file (`my.cnf`).
    Mysql,
}

impl Kind {
    /// In words, for the report.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Java => "Java Kafka client",
            Self::Librdkafka => "librdkafka/kcat",
            Self::Mysql => "MySQL option file",
        }
    }
}

/// One setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// 1-based line where it starts.
    pub line: usize,
    /// The `[group]` (option files only).
    pub group: Option<String>,
    /// The key as the reader sees it.
    pub key: String,
    /// The value (`None`: a bare option-file key).
    pub value: Option<String>,
}

/// A config file, read and parsed.
#[derive(Clone, Debug)]
pub struct ConfigFile {
    /// Where it is.
    pub path: PathBuf,
    /// What reads it.
    pub kind: Kind,
    /// Its settings in order.
    pub entries: Vec<Entry>,
    /// Lines the reader would reject (with their line numbers).
    pub problems: Vec<(usize, String)>,
    /// `!include` / `!includedir` targets (option files).
    pub includes: Vec<(usize, PathBuf)>,
    /// Why it could not be read, if it could not.
    pub unreadable: Option<String>,
}

impl ConfigFile {
    /// Reads and parses `path`, guessing its kind from its name and contents.
    pub fn load(path: &Path) -> Self {
        Self::read(path, None)
    }

    /// Reads and parses `path` as `kind` (`None`: guessed from its name and contents).
    pub fn read(path: &Path, kind: Option<Kind>) -> Self {
        let text = std::fs::read_to_string(path);
        let (text, unreadable) = match text {
            Ok(t) => (t, None),
            Err(e) => (String::new(), Some(e.to_string())),
        };
        let kind = kind.unwrap_or_else(|| guess_kind(path, &text));
        let mut file = Self::parse(kind, &text);
        file.path = path.to_path_buf();
        file.unreadable = unreadable;
        file
    }

    /// Parses `text` as `kind`.
    pub fn parse(kind: Kind, text: &str) -> Self {
        let mut file = Self {
            path: PathBuf::new(),
            kind,
            entries: Vec::new(),
            problems: Vec::new(),
            includes: Vec::new(),
            unreadable: None,
        };
        match kind {
            Kind::Java => parse_properties(text, &mut file),
            Kind::Librdkafka => parse_librdkafka(text, &mut file),
            Kind::Mysql => parse_option_file(text, &mut file),
        }
        file
    }

    /// The value that takes effect for `key` (the last one; for option files, in `groups`).
    pub fn get(&self, key: &str) -> Option<&Entry> {
        self.entries.iter().rev().find(|e| e.key == key)
    }

    /// The file name, for the report.
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.path.display().to_string())
    }
}

/// Guesses the reader from the name, then from the contents: a `[group]` line means an option
/// file; keys only one Kafka client knows decide between the two Kafka formats.
pub fn guess_kind(path: &Path, text: &str) -> Kind {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if name.ends_with(".cnf") || name.ends_with(".ini") {
        return Kind::Mysql;
    }
    if name.ends_with(".properties") {
        return Kind::Java;
    }
    if name.contains("librdkafka") || name.contains("kcat") || name.contains("rdkafka") {
        return Kind::Librdkafka;
    }
    let lines = || {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(';'))
    };
    if lines().any(|l| l.starts_with('[') && l.ends_with(']')) {
        return Kind::Mysql;
    }
    let keys: Vec<&str> = lines()
        .filter_map(|l| l.split(['=', ':']).next())
        .map(str::trim)
        .collect();
    let java = keys
        .iter()
        .filter(|k| crate::doctor::keys::java_only(k))
        .count();
    let rdkafka = keys
        .iter()
        .filter(|k| crate::doctor::keys::librdkafka_only(k))
        .count();
    if rdkafka > java {
        Kind::Librdkafka
    } else {
        Kind::Java
    }
}

/// java.util.Properties.load, line by line.
fn parse_properties(text: &str, file: &mut ConfigFile) {
    let mut lines = text.lines().enumerate().peekable();
    while let Some((i, raw)) = lines.next() {
        let start = raw.trim_start_matches([' ', '\t', '\x0c']);
        if start.is_empty() || start.starts_with('#') || start.starts_with('!') {
            continue;
        }
        let mut logical = String::from(start);
        while ends_in_continuation(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start_matches([' ', '\t', '\x0c'])),
                None => break,
            }
        }
        let (key, value) = split_property(&logical);
        file.entries.push(Entry {
            line: i + 1,
            group: None,
            key: unescape_property(key),
            value: Some(unescape_property(value)),
        });
    }
}

/// An odd number of trailing backslashes continues the line.
fn ends_in_continuation(s: &str) -> bool {
    s.chars().rev().take_while(|c| *c == '\\').count() % 2 == 1
}

/// The key ends at the first unescaped `=`, `:` or whitespace; then whitespace, one `=`/`:`,
/// whitespace.
fn split_property(line: &str) -> (&str, &str) {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'=' | b':' | b' ' | b'\t' | b'\x0c' => break,
            _ => i += 1,
        }
    }
    let i = i.min(bytes.len());
    let key = &line[..i];
    let mut rest = line[i..].trim_start_matches([' ', '\t', '\x0c']);
    if let Some(r) = rest.strip_prefix(['=', ':']) {
        rest = r.trim_start_matches([' ', '\t', '\x0c']);
    }
    (key, rest)
}

fn unescape_property(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => out.push_str(&hex),
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// `kcat -F`: left-trim, skip `#` and blank lines, right-trim, split at the first `=`.
fn parse_librdkafka(text: &str, file: &mut ConfigFile) {
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_start().trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.split_once('=') {
            Some((k, v)) => file.entries.push(Entry {
                line: i + 1,
                group: None,
                key: k.to_owned(),
                value: Some(v.to_owned()),
            }),
            None => file
                .problems
                .push((i + 1, format!("`{line}` is not `property=value`"))),
        }
    }
}

/// MySQL option files (my_default.c / mysys `search_default_file`).
fn parse_option_file(text: &str, file: &mut ConfigFile) {
    let mut group: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(rest) = line.strip_prefix('!') {
            let (directive, arg) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            match directive {
                "include" | "includedir" => {
                    file.includes.push((i + 1, PathBuf::from(arg.trim())));
                }
                _ => file
                    .problems
                    .push((i + 1, format!("unknown directive `!{directive}`"))),
            }
            continue;
        }
        if let Some(inner) = line.strip_prefix('[') {
            match inner.split_once(']') {
                Some((g, _)) => group = Some(g.trim().to_owned()),
                None => file
                    .problems
                    .push((i + 1, format!("`{line}`: a group header needs its `]`"))),
            }
            continue;
        }
        if group.is_none() {
            file.problems.push((
                i + 1,
                format!("`{line}` comes before any `[group]`, so every client rejects the file"),
            ));
            continue;
        }
        let line = strip_option_comment(line);
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), Some(unquote_option(v.trim()))),
            None => (line.trim(), None),
        };
        file.entries.push(Entry {
            line: i + 1,
            group: group.clone(),
            key: key.to_owned(),
            value,
        });
    }
}

/// Drops a ` #…` comment outside quotes.
fn strip_option_comment(line: &str) -> &str {
    let mut quote = None;
    for (i, c) in line.char_indices() {
        match (c, quote) {
            ('"' | '\'', None) => quote = Some(c),
            (q, Some(open)) if q == open => quote = None,
            ('#', None) => return line[..i].trim_end(),
            _ => {}
        }
    }
    line
}

fn unquote_option(v: &str) -> String {
    let inner = match v.as_bytes() {
        [b'"', .., b'"'] | [b'\'', .., b'\''] if v.len() >= 2 => &v[1..v.len() - 1],
        _ => v,
    };
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('b') => out.push('\x08'),
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('s') => out.push(' '),
            Some('\\') => out.push('\\'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(f: &ConfigFile) -> Vec<(&str, Option<&str>)> {
        f.entries
            .iter()
            .map(|e| (e.key.as_str(), e.value.as_deref()))
            .collect()
    }

    #[test]
    fn properties_as_java_reads_them() {
        let f = ConfigFile::parse(
            Kind::Java,
            "# c\n! c\n  security.protocol = SSL\nssl.keystore.location:/a\\\n   /b.p12\n\
             bootstrap.servers localhost:1\\u0041\nkey\\=with\\:seps=v\nempty\n",
        );
        assert_eq!(
            keys(&f),
            [
                ("security.protocol", Some("SSL")),
                ("ssl.keystore.location", Some("/a/b.p12")),
                ("bootstrap.servers", Some("localhost:1A")),
                ("key=with:seps", Some("v")),
                ("empty", Some("")),
            ]
        );
        assert_eq!(f.entries[1].line, 4);
        assert_eq!(f.get("security.protocol").map(|e| e.line), Some(3));
    }

    #[test]
    fn librdkafka_keeps_spaces_around_the_equals_sign_as_kcat_does() {
        let f = ConfigFile::parse(
            Kind::Librdkafka,
            "  # c\nsecurity.protocol=ssl\nssl.ca.location = /x\nnonsense\n",
        );
        assert_eq!(
            keys(&f),
            [
                ("security.protocol", Some("ssl")),
                ("ssl.ca.location ", Some(" /x"))
            ]
        );
        assert_eq!(f.problems.len(), 1);
        assert_eq!(f.problems[0].0, 4);
    }

    #[test]
    fn option_files_with_groups_quotes_and_includes() {
        let f = ConfigFile::parse(
            Kind::Mysql,
            "; c\nuser=x\n[client]\nhost = 127.0.0.1 # tunnel\nssl-ca=\"/my path/ca.crt\"\n\
             ssl-verify-server-cert\n!include /etc/x.cnf\n[client-mariadb]\nport=3306\n",
        );
        assert_eq!(
            keys(&f),
            [
                ("host", Some("127.0.0.1")),
                ("ssl-ca", Some("/my path/ca.crt")),
                ("ssl-verify-server-cert", None),
                ("port", Some("3306")),
            ]
        );
        assert_eq!(f.entries[3].group.as_deref(), Some("client-mariadb"));
        assert_eq!(f.includes, [(7, PathBuf::from("/etc/x.cnf"))]);
        assert_eq!(f.problems.len(), 1, "{:?}", f.problems);
    }

    #[test]
    fn guesses_the_kind() {
        assert_eq!(guess_kind(Path::new("a/my.cnf"), ""), Kind::Mysql);
        assert_eq!(guess_kind(Path::new("app.properties"), ""), Kind::Java);
        assert_eq!(
            guess_kind(Path::new("librdkafka.conf"), ""),
            Kind::Librdkafka
        );
        assert_eq!(
            guess_kind(Path::new("x.conf"), "[client]\nuser=a\n"),
            Kind::Mysql
        );
        assert_eq!(
            guess_kind(
                Path::new("x.conf"),
                "ssl.ca.location=/a\nsecurity.protocol=ssl\n"
            ),
            Kind::Librdkafka
        );
        assert_eq!(
            guess_kind(
                Path::new("x.conf"),
                "ssl.truststore.location=/a\nsecurity.protocol=SSL\n"
            ),
            Kind::Java
        );
    }
}
