//! Config lint: every key of `client.properties`, `librdkafka.conf` and `my.cnf` against the
//! real lists of settings their clients know (generated into `keys/` by `keys/generate.sh` from
//! the Kafka 4.1.1 jars, librdkafka 2.12.1 and `mariadb --help --verbose`), with a "did you
//! mean" for near misses, values of the wrong type, and paths that do not exist. A `my.cnf` read
//! through the tunnel's local endpoint must carry no TLS settings: the endpoint offers no TLS on
//! 127.0.0.1 (it does the TLS with the certificate upstream).

use std::collections::BTreeMap;
use std::path::Path;

use crate::doctor::configs::{ConfigFile, Entry, Kind};
use crate::doctor::keys::{JAVA, MARIADB, ORACLE_MYSQL_ONLY, RDKAFKA, Table, Value};
use crate::doctor::{CheckId, Context, Finding, Findings, Status};
use crate::profile::files as pf;

/// The config files of the profile folder `dir` that exist, read as their clients read them:
/// each file of the profile's catalogue that names its reader (`profile::files`' `lint`).
pub fn profile_configs(dir: &Path) -> Vec<ConfigFile> {
    pf::CATALOGUE
        .iter()
        .filter_map(|k| Some((dir.join(k.name), reader(k.lint?))))
        .filter(|(path, _)| path.exists())
        .map(|(path, kind)| ConfigFile::read(&path, Some(kind)))
        .collect()
}

/// The lint rules for a catalogue entry's reader.
fn reader(r: pf::Reader) -> Kind {
    match r {
        pf::Reader::Java => Kind::Java,
        pf::Reader::Librdkafka => Kind::Librdkafka,
        pf::Reader::Mysql => Kind::Mysql,
    }
}

/// The Java spelling of a librdkafka-only setting, and the other way round.
fn counterpart(key: &str, kind: Kind) -> Option<&'static str> {
    const PAIRS: &[(&str, &str)] = &[
        // (librdkafka, Java)
        ("ssl.ca.location", "ssl.truststore.location"),
        ("ssl.certificate.location", "ssl.keystore.location"),
        ("ssl.key.location", "ssl.keystore.location"),
        ("metadata.broker.list", "bootstrap.servers"),
    ];
    match kind {
        Kind::Java => PAIRS.iter().find(|(r, _)| *r == key).map(|(_, j)| *j),
        Kind::Librdkafka => PAIRS.iter().find(|(_, j)| *j == key).map(|(r, _)| *r),
        Kind::Mysql => None,
    }
}

/// Levenshtein distance over chars.
pub fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The closest known key, if close enough to be a typo.
fn did_you_mean<'a>(key: &str, table: &'a Table) -> Option<&'a str> {
    let lower = key.to_ascii_lowercase();
    let (best, d) = table
        .keys()
        .map(|k| (k.as_str(), distance(&lower, k)))
        .min_by_key(|(_, d)| *d)?;
    let limit = if key.len() >= 12 { 3 } else { 2 };
    (d <= limit).then_some(best)
}

/// One problem in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issue {
    /// Its line.
    pub line: usize,
    /// `Warn` or `Fail`.
    pub status: Status,
    /// What is wrong.
    pub what: String,
    /// How to fix it.
    pub fix: String,
}

fn issue(e: &Entry, status: Status, what: String, fix: String) -> Issue {
    Issue {
        line: e.line,
        status,
        what,
        fix,
    }
}

/// Every problem in `file`.
pub fn lint(file: &ConfigFile) -> Vec<Issue> {
    let mut out: Vec<Issue> = file
        .problems
        .iter()
        .map(|(line, what)| Issue {
            line: *line,
            status: Status::Fail,
            what: what.clone(),
            fix: "fix or remove the line".to_owned(),
        })
        .collect();
    let base = file.path.parent().unwrap_or(Path::new("."));
    match file.kind {
        Kind::Java => lint_kafka(file, &JAVA, &RDKAFKA, base, &mut out),
        Kind::Librdkafka => lint_kafka(file, &RDKAFKA, &JAVA, base, &mut out),
        Kind::Mysql => lint_mysql(file, base, &mut out),
    }
    out.sort_by_key(|i| i.line);
    out
}

fn lint_kafka(file: &ConfigFile, table: &Table, other: &Table, base: &Path, out: &mut Vec<Issue>) {
    let reader = file.kind.describe();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for e in &file.entries {
        let value = e.value.as_deref().unwrap_or_default();
        if file.kind == Kind::Librdkafka && (e.key != e.key.trim() || value != value.trim_start()) {
            let (k, v) = (e.key.trim(), value.trim());
            out.push(issue(
                e,
                Status::Fail,
                format!(
                    "spaces around `=`: kcat reads the key as `{}` and the value as `{}`",
                    e.key, value
                ),
                format!("write `{k}={v}`"),
            ));
            continue;
        }
        if let Some(first) = seen.insert(&e.key, e.line) {
            out.push(issue(
                e,
                Status::Warn,
                format!(
                    "`{}` is also set on line {first}; this later value wins",
                    e.key
                ),
                format!("remove one of the two `{}` lines", e.key),
            ));
        }
        let Some(known) = table.get(&e.key) else {
            out.push(unknown_kafka_key(e, file.kind, table, other));
            continue;
        };
        if let Some(why) = bad_value(&known.value, value, file.kind) {
            out.push(issue(
                e,
                Status::Fail,
                format!("`{}={value}`: {why}", known.name),
                format!("give `{}` {}", known.name, expected(&known.value)),
            ));
            continue;
        }
        if is_path_key(&e.key)
            && !value.is_empty()
            && !(e.key == "ssl.ca.location" && value == "probe")
        {
            check_path(e, value, base, out);
        }
        if e.key == "ssl.endpoint.identification.algorithm"
            && (value.is_empty() || value.eq_ignore_ascii_case("none"))
        {
            out.push(issue(
                e,
                Status::Warn,
                format!(
                    "`{}` turns off the check that each broker's certificate names the host \
                     the {reader} dialled",
                    e.key
                ),
                "remove the line: the brokers' certificates cover the names they advertise \
                 (see `addresses.names`)"
                    .to_owned(),
            ));
        }
    }
}

fn unknown_kafka_key(e: &Entry, kind: Kind, table: &Table, other: &Table) -> Issue {
    let reader = kind.describe();
    if other.contains_key(&e.key) {
        let other_reader = match kind {
            Kind::Java => "librdkafka",
            _ => "Java client",
        };
        let fix = match counterpart(&e.key, kind) {
            Some(c) => format!("use `{c}` instead (the {reader} spelling)"),
            None => format!("remove it: the {reader} has no such setting"),
        };
        return issue(
            e,
            Status::Fail,
            format!(
                "`{}` is a {other_reader} setting; the {reader} does not know it",
                e.key
            ),
            fix,
        );
    }
    match did_you_mean(&e.key, table) {
        Some(k) => issue(
            e,
            Status::Fail,
            format!("unknown key `{}` (did you mean `{k}`?)", e.key),
            format!("rename `{}` to `{k}`", e.key),
        ),
        // The Java client only logs "isn't a known config" for these (serializers and
        // interceptors may read their own keys); librdkafka refuses the whole file.
        None if kind == Kind::Java => issue(
            e,
            Status::Warn,
            format!(
                "unknown key `{}`: not a Kafka 4.1 client setting, so the client ignores it",
                e.key
            ),
            "remove it unless a serializer or interceptor of yours reads it".to_owned(),
        ),
        None => issue(
            e,
            Status::Fail,
            format!(
                "unknown key `{}`: librdkafka stops with \"No such configuration property\"",
                e.key
            ),
            "remove it (`kcat -X list` shows every property)".to_owned(),
        ),
    }
}

fn is_path_key(key: &str) -> bool {
    key.ends_with(".location") || key.ends_with(".file")
}

fn check_path(e: &Entry, value: &str, base: &Path, out: &mut Vec<Issue>) {
    let path = Path::new(value);
    let full = if path.is_relative() {
        base.join(path)
    } else {
        path.to_path_buf()
    };
    if std::fs::metadata(&full).is_err() {
        out.push(issue(
            e,
            Status::Fail,
            format!("`{}` names `{value}`, which does not exist", e.key),
            format!("point `{}` at an existing file (absolute path)", e.key),
        ));
    }
}

/// Why `value` does not fit `ty`, if it does not.
fn bad_value(ty: &Value, value: &str, kind: Kind) -> Option<String> {
    let v = value.trim();
    match ty {
        Value::Any | Value::Required | Value::NoArg => None,
        Value::Api => Some("it is set through the C API, not from a file".to_owned()),
        Value::Bool => {
            let ok: &[&str] = match kind {
                Kind::Java => &["true", "false"],
                Kind::Librdkafka => &["true", "false", "t", "f", "1", "0"],
                Kind::Mysql => &["true", "false", "on", "off", "1", "0"],
            };
            (!ok.iter().any(|o| o.eq_ignore_ascii_case(v))).then(|| "not a boolean".to_owned())
        }
        Value::Int { lo, hi, also } => {
            let n: i64 = match kind {
                Kind::Mysql => match mysql_number(v) {
                    Some(n) => n,
                    None => {
                        return Some(
                            "not a whole number (`K`, `M`, `G` suffixes allowed)".to_owned(),
                        );
                    }
                },
                _ => match v.parse() {
                    Ok(n) => n,
                    Err(_) => return Some("not a whole number".to_owned()),
                },
            };
            if Some(n) == *also {
                return None;
            }
            let low = lo.is_some_and(|lo| n < lo);
            let high = hi.is_some_and(|hi| n > hi);
            (low || high).then(|| format!("out of range ({})", expected(ty)))
        }
        Value::Float { lo, hi } => match v.parse::<f64>() {
            Err(_) => Some("not a number".to_owned()),
            Ok(n) if lo.is_some_and(|lo| n < lo) || hi.is_some_and(|hi| n > hi) => {
                Some(format!("out of range ({})", expected(ty)))
            }
            Ok(_) => None,
        },
        Value::OneOf {
            values,
            case_insensitive,
        } => {
            let hit = values.iter().any(|a| match a.find(':') {
                Some(i) => v.starts_with(&a[..=i]),
                None if *case_insensitive => a.eq_ignore_ascii_case(v),
                None => a == v,
            });
            (!hit).then(|| format!("not one of {}", values.join(", ")))
        }
        Value::Csv(allowed) => {
            let bad: Vec<&str> = v
                .split(',')
                .map(str::trim)
                .filter(|f| !f.is_empty() && !allowed.iter().any(|a| a == f))
                .collect();
            (!bad.is_empty()).then(|| format!("unknown flag `{}`", bad.join("`, `")))
        }
    }
}

/// A MySQL number with its optional `K`/`M`/`G` suffix.
fn mysql_number(v: &str) -> Option<i64> {
    let (digits, scale) = match v.chars().last() {
        Some('k' | 'K') => (&v[..v.len() - 1], 1 << 10),
        Some('m' | 'M') => (&v[..v.len() - 1], 1 << 20),
        Some('g' | 'G') => (&v[..v.len() - 1], 1 << 30),
        _ => (v, 1),
    };
    digits.parse::<i64>().ok()?.checked_mul(scale)
}

fn expected(ty: &Value) -> String {
    let bound = |b: Option<String>| b.unwrap_or_else(|| "…".to_owned());
    match ty {
        Value::Bool => "`true` or `false`".to_owned(),
        Value::Int {
            lo: None, hi: None, ..
        } => "a whole number".to_owned(),
        Value::Int { lo, hi, also } => {
            let mut s = match (lo, hi) {
                (Some(lo), None) => format!("a whole number of at least {lo}"),
                (None, Some(hi)) => format!("a whole number of at most {hi}"),
                (lo, hi) => format!(
                    "a whole number from {} to {}",
                    bound(lo.map(|v| v.to_string())),
                    bound(hi.map(|v| v.to_string()))
                ),
            };
            if let Some(a) = also {
                s.push_str(&format!(", or {a}"));
            }
            s
        }
        Value::Float { lo: None, hi: None } => "a number".to_owned(),
        Value::Float { lo, hi } => format!(
            "a number from {} to {}",
            bound(lo.map(|v| v.to_string())),
            bound(hi.map(|v| v.to_string()))
        ),
        Value::OneOf { values, .. } => format!("one of `{}`", values.join("`, `")),
        Value::Csv(f) => format!("a comma-separated list of `{}`", f.join("`, `")),
        Value::Api | Value::Any | Value::NoArg | Value::Required => "a valid value".to_owned(),
    }
}

/// The groups the MariaDB `mysql`/`mariadb` client reads.
const CLIENT_GROUPS: &[&str] = &[
    "client",
    "client-server",
    "client-mariadb",
    "mysql",
    "mariadb-client",
];

/// MySQL option paths that must exist.
const MYSQL_PATHS: &[&str] = &[
    "ssl-ca",
    "ssl-cert",
    "ssl-key",
    "ssl-crl",
    "ssl-capath",
    "ssl-crlpath",
    "character-sets-dir",
    "plugin-dir",
];

/// An option name as my_getopt matches it: `_` is `-`, and `loose-`, `skip-`, `disable-`,
/// `enable-`, `maximum-` are prefixes. Returns (base name, prefix).
fn mysql_name(key: &str) -> (String, Option<&'static str>) {
    let k = key.replace('_', "-").to_ascii_lowercase();
    for p in ["loose-", "skip-", "disable-", "enable-", "maximum-"] {
        if let Some(rest) = k.strip_prefix(p)
            && MARIADB.contains_key(rest)
            && !MARIADB.contains_key(&k)
        {
            return (rest.to_owned(), Some(p));
        }
    }
    (k, None)
}

fn lint_mysql(file: &ConfigFile, base: &Path, out: &mut Vec<Issue>) {
    for (line, inc) in &file.includes {
        if std::fs::metadata(inc).is_err() {
            out.push(Issue {
                line: *line,
                status: Status::Fail,
                what: format!("`!include` names `{}`, which does not exist", inc.display()),
                fix: "fix the path or remove the line".to_owned(),
            });
        }
    }
    for e in &file.entries {
        let group = e.group.as_deref().unwrap_or_default();
        if !CLIENT_GROUPS.contains(&group) {
            continue; // read by other programs (mysqld, mysqldump): not ours to judge
        }
        let (name, prefix) = mysql_name(&e.key);
        let loose = e.key.replace('_', "-").starts_with("loose-");
        let Some(known) = MARIADB.get(&name) else {
            out.push(unknown_mysql(e, &name, group, loose));
            continue;
        };
        let value = e.value.as_deref();
        let bad = match (&known.value, value, prefix) {
            (Value::NoArg, Some(_), _) => Some("it takes no value".to_owned()),
            (Value::Required, None | Some(""), None) => Some("it needs a value".to_owned()),
            (Value::Bool, Some(_), Some("skip-" | "disable-" | "enable-")) => {
                Some(format!("`{}` takes no value", e.key))
            }
            (Value::Int { .. }, None, None) => Some("it needs a number".to_owned()),
            (ty, Some(v), _) => bad_value(ty, v, Kind::Mysql),
            _ => None,
        };
        if let Some(why) = bad {
            out.push(issue(
                e,
                Status::Fail,
                format!("`{}`: {why}", e.key),
                format!("give `{}` {}", known.name, mysql_expected(&known.value)),
            ));
            continue;
        }
        if let Some(v) = value
            && MYSQL_PATHS.contains(&name.as_str())
            && !v.is_empty()
        {
            check_path(e, v, base, out);
        }
        if name == "host" && value.is_some_and(|v| v.eq_ignore_ascii_case("localhost")) {
            out.push(issue(
                e,
                Status::Warn,
                "`host=localhost` makes mysql clients use the local unix socket, not TCP \
                 through the tunnel"
                    .to_owned(),
                "write `host=127.0.0.1`".to_owned(),
            ));
        }
    }
}

/// An option file's key that MariaDB clients do not know (`name`, the key as they spell it).
fn unknown_mysql(e: &Entry, name: &str, group: &str, loose: bool) -> Issue {
    let bare = name.strip_prefix("loose-").unwrap_or(name);
    if ORACLE_MYSQL_ONLY.contains(&bare) {
        return issue(
            e,
            Status::Warn,
            format!(
                "`{}` is an Oracle MySQL 8 client option; MariaDB clients stop at it with \
                 \"unknown variable\"",
                e.key
            ),
            format!(
                "write `loose-{bare}` so MariaDB clients skip it (Oracle's client still reads it)"
            ),
        );
    }
    let status = if loose { Status::Warn } else { Status::Fail };
    let fix = match did_you_mean(bare, &MARIADB) {
        Some(k) => format!("rename `{}` to `{k}`", e.key),
        None => format!("remove `{}`", e.key),
    };
    let what = match did_you_mean(bare, &MARIADB) {
        Some(k) => format!(
            "unknown option `{}` in `[{group}]` (did you mean `{k}`?)",
            e.key
        ),
        None => format!("unknown option `{}` in `[{group}]`", e.key),
    };
    let what = if loose {
        format!("{what}; `loose-` makes clients ignore it")
    } else {
        format!("{what}: the mysql client stops with \"unknown variable\"")
    };
    issue(e, status, what, fix)
}

fn mysql_expected(ty: &Value) -> String {
    match ty {
        Value::NoArg => "no value (write the option name alone)".to_owned(),
        Value::Required => "a value (`option=value`)".to_owned(),
        Value::Bool => "`0`/`1`, `off`/`on` or no value".to_owned(),
        other => expected(other),
    }
}

/// Whether an option file turns TLS off for the mysql client (`skip-ssl`, `ssl=0`, …).
pub fn mysql_tls_disabled(file: &ConfigFile) -> Option<&Entry> {
    file.entries
        .iter()
        .rfind(|e| {
            CLIENT_GROUPS.contains(&e.group.as_deref().unwrap_or_default())
                && mysql_name(&e.key).0 == "ssl"
        })
        .filter(|e| {
            let (_, prefix) = mysql_name(&e.key);
            let off = matches!(prefix, Some("skip-" | "disable-"));
            let zero = e.value.as_deref().is_some_and(|v| {
                ["0", "off", "false"]
                    .iter()
                    .any(|o| o.eq_ignore_ascii_case(v))
            });
            off || zero
        })
}

/// The settings with which a mysql client insists on TLS (`ssl-ca`, `ssl-cert`, `ssl-key`,
/// `ssl`, `ssl-verify-server-cert`, `ssl-mode=REQUIRED`/`VERIFY_*`): against a server that
/// offers none, as the local endpoint does, it stops before logging in.
pub fn mysql_tls_wanted(file: &ConfigFile) -> Vec<&Entry> {
    file.entries
        .iter()
        .filter(|e| CLIENT_GROUPS.contains(&e.group.as_deref().unwrap_or_default()))
        .filter(|e| {
            let (name, prefix) = mysql_name(&e.key);
            let value = e.value.as_deref().map(str::trim);
            let off = matches!(prefix, Some("skip-" | "disable-"))
                || value.is_some_and(|v| {
                    ["0", "off", "false"]
                        .iter()
                        .any(|o| o.eq_ignore_ascii_case(v))
                });
            match name.strip_prefix("loose-").unwrap_or(&name) {
                "ssl-ca" | "ssl-capath" | "ssl-cert" | "ssl-key" => {
                    !off && value.is_some_and(|v| !v.is_empty())
                }
                "ssl" | "ssl-verify-server-cert" => !off,
                "ssl-mode" => value.is_some_and(|v| {
                    ["REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY"]
                        .iter()
                        .any(|m| m.eq_ignore_ascii_case(v))
                }),
                _ => false,
            }
        })
        .collect()
}

/// The value an option file's client groups give `key` (the last one).
fn client_value<'a>(file: &'a ConfigFile, key: &str) -> Option<&'a str> {
    file.entries
        .iter()
        .rfind(|e| {
            CLIENT_GROUPS.contains(&e.group.as_deref().unwrap_or_default())
                && mysql_name(&e.key).0 == key
        })
        .and_then(|e| e.value.as_deref())
        .map(str::trim)
}

/// Whether `file` is read by clients of the local endpoint's MySQL port: the profile's
/// `my.cnf`, or an option file aimed at that port on this machine.
pub(crate) fn to_endpoint(ctx: &Context, file: &ConfigFile) -> bool {
    let Some(port) = ctx.mysql_endpoint() else {
        return false;
    };
    if file.kind != Kind::Mysql {
        return false;
    }
    if ctx.path(pf::MY_CNF).is_some_and(|p| p == file.path) {
        return true;
    }
    let local =
        client_value(file, "host").is_none_or(|h| ["127.0.0.1", "localhost", "::1"].contains(&h));
    local && client_value(file, "port").and_then(|p| p.parse::<u16>().ok()) == Some(port)
}

/// TLS settings in a `my.cnf` of the local endpoint (a direct profile's file, kept after the
/// switch): one issue naming them all.
fn endpoint_tls(file: &ConfigFile) -> Option<Issue> {
    let wanted = mysql_tls_wanted(file);
    let first = wanted.first()?;
    let keys: Vec<String> = wanted.iter().map(|e| format!("`{}`", e.key)).collect();
    let lines: Vec<String> = wanted.iter().map(|e| e.line.to_string()).collect();
    let (those, make, them) = if wanted.len() == 1 {
        ("line", "makes", "it")
    } else {
        ("lines", "make", "them")
    };
    Some(Issue {
        line: first.line,
        status: Status::Warn,
        what: format!(
            "{} ({those} {}) {make} the client insist on TLS, but the profile's MySQL goes \
             through the tunnel's local endpoint, which offers none on 127.0.0.1: the client \
             stops before logging in",
            keys.join(", "),
            lines.join(", ")
        ),
        fix: format!(
            "remove {them} (the endpoint does the TLS with the profile's certificate; the \
             client needs no SSL settings)"
        ),
    })
}

/// An unknown key in a Kafka config that is a typo of `wanted` (e.g. `ecurity.protocol`).
pub fn near_miss<'a>(file: &'a ConfigFile, wanted: &str) -> Option<&'a Entry> {
    let table: &Table = match file.kind {
        Kind::Java => &JAVA,
        Kind::Librdkafka => &RDKAFKA,
        Kind::Mysql => return None,
    };
    file.entries
        .iter()
        .find(|e| !table.contains_key(&e.key) && did_you_mean(&e.key, table) == Some(wanted))
}

/// One `lint` line per config file.
pub(crate) fn check(ctx: &Context, st: &mut Findings) {
    if ctx.configs.is_empty() {
        st.push(Finding::skip(CheckId::Lint, "no config files to read"));
        return;
    }
    for file in &ctx.configs {
        let name = file.name();
        let shown = ctx.show(&file.path);
        if let Some(why) = &file.unreadable {
            st.push(
                Finding::fail(
                    CheckId::Lint,
                    format!("cannot read `{shown}`: {why}"),
                    "check the path and its permissions",
                )
                .about(name),
            );
            continue;
        }
        let mut issues = lint(file);
        if to_endpoint(ctx, file) {
            issues.extend(endpoint_tls(file));
            issues.sort_by_key(|i| i.line);
        }
        let worst = issues.iter().map(|i| i.status).max();
        let check = match worst {
            None => Finding::ok(
                CheckId::Lint,
                format!(
                    "`{shown}` ({}): {} settings, all known, values and paths fine",
                    file.kind.describe(),
                    file.entries.len()
                ),
            ),
            Some(status) => {
                let found = issues
                    .iter()
                    .map(|i| format!("line {}: {}", i.line, i.what))
                    .collect::<Vec<_>>()
                    .join("; ");
                let fix = issues
                    .iter()
                    .map(|i| format!("line {}: {}", i.line, i.fix))
                    .collect::<Vec<_>>()
                    .join("; ");
                let found = format!("`{shown}` ({}): {found}", file.kind.describe());
                if status == Status::Fail {
                    Finding::fail(CheckId::Lint, found, fix)
                } else {
                    Finding::warn(CheckId::Lint, found, fix)
                }
            }
        };
        st.push(check.about(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_files_linted_are_the_catalogues_with_a_reader() {
        let dir = tempfile::tempdir().expect("tempdir");
        for k in pf::CATALOGUE {
            crate::fsutil::write_private(&dir.path().join(k.name), b"").expect("write");
        }
        let read: Vec<(String, Kind)> = profile_configs(dir.path())
            .iter()
            .map(|c| {
                (
                    c.path
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    c.kind,
                )
            })
            .collect();
        let expected: Vec<(String, Kind)> = pf::CATALOGUE
            .iter()
            .filter_map(|k| Some((k.name.to_owned(), reader(k.lint?))))
            .collect();
        assert_eq!(read, expected);
        for (name, kind) in [
            (pf::CLIENT_PROPERTIES, Kind::Java),
            (pf::LIBRDKAFKA_CONF, Kind::Librdkafka),
            (pf::MY_CNF, Kind::Mysql),
        ] {
            assert!(read.contains(&(name.to_owned(), kind)), "{name}: {read:?}");
        }
        // Only what exists is read.
        std::fs::remove_file(dir.path().join(pf::MY_CNF)).expect("rm");
        assert_eq!(profile_configs(dir.path()).len(), expected.len() - 1);
    }

    fn java(text: &str) -> Vec<Issue> {
        lint(&ConfigFile::parse(Kind::Java, text))
    }

    #[test]
    fn a_typo_gets_a_did_you_mean() {
        let i = java("ecurity.protocol=SSL\n");
        assert_eq!(i.len(), 1);
        assert_eq!(i[0].status, Status::Fail);
        assert_eq!(
            i[0].what,
            "unknown key `ecurity.protocol` (did you mean `security.protocol`?)"
        );
        assert_eq!(i[0].fix, "rename `ecurity.protocol` to `security.protocol`");
        let f = ConfigFile::parse(Kind::Java, "ecurity.protocol=SSL\n");
        assert_eq!(near_miss(&f, "security.protocol").map(|e| e.line), Some(1));
        let i = java("ssl.keystore.locaton=/x\n");
        assert!(
            i[0].what.contains("did you mean `ssl.keystore.location`"),
            "{i:?}"
        );
    }

    #[test]
    fn unknown_keys_without_a_near_miss_only_warn_for_java() {
        let i = java("schema.registry.url=http://x\n");
        assert_eq!(i[0].status, Status::Warn);
        let i = lint(&ConfigFile::parse(
            Kind::Librdkafka,
            "schema.registry.url=http://x\n",
        ));
        assert_eq!(i[0].status, Status::Fail);
    }

    #[test]
    fn settings_of_the_other_kafka_client_are_named() {
        let i = java("ssl.ca.location=/etc/ca.pem\n");
        assert!(i[0].what.contains("librdkafka setting"), "{i:?}");
        assert!(i[0].fix.contains("ssl.truststore.location"), "{i:?}");
        let i = lint(&ConfigFile::parse(
            Kind::Librdkafka,
            "ssl.truststore.location=/x\n",
        ));
        assert!(i[0].fix.contains("ssl.ca.location"), "{i:?}");
    }

    #[test]
    fn values_of_the_wrong_type() {
        let i = java(
            "security.protocol=TLS\nrequest.timeout.ms=10s\nenable.auto.commit=yes\n\
             security.protocol=ssl\nacks=2\ncompression.gzip.level=-1\nmax.poll.records=0\n",
        );
        let whats: Vec<_> = i.iter().map(|i| (i.line, i.what.as_str())).collect();
        assert!(
            whats[0].1.contains("not one of SASL_SSL, PLAINTEXT, SSL"),
            "{whats:?}"
        );
        assert!(whats[1].1.contains("not a whole number"), "{whats:?}");
        assert!(whats[2].1.contains("not a boolean"), "{whats:?}");
        // line 4: lowercase ssl is fine (case-insensitive) but it is set twice
        assert_eq!(whats[3].0, 4);
        assert!(whats[3].1.contains("also set on line 1"), "{whats:?}");
        assert!(whats[4].1.contains("`acks=2`"), "{whats:?}");
        // compression.gzip.level=-1 is the `or -1` case: fine. max.poll.records=0 is below 1.
        assert_eq!(whats[5].0, 7, "{whats:?}");
        assert!(whats[5].1.contains("out of range"), "{whats:?}");
        assert_eq!(i.len(), 6);
        let ok = java("auto.offset.reset=by_duration:P1D\nlinger.ms=5\n");
        assert!(ok.is_empty(), "{ok:?}");
    }

    #[test]
    fn paths_must_exist() {
        let dir = tempfile::tempdir().expect("tempdir");
        let there = dir.path().join("ks.p12");
        crate::fsutil::write_private(&there, b"x").expect("write");
        let mut f = ConfigFile::parse(
            Kind::Java,
            &format!(
                "ssl.keystore.location={}\nssl.truststore.location=/nope/ts.p12\n",
                crate::os::files::portable(&there)
            ),
        );
        f.path = dir.path().join("client.properties");
        let i = lint(&f);
        assert_eq!(i.len(), 1);
        assert!(i[0].what.contains("/nope/ts.p12"), "{i:?}");
        let f = ConfigFile::parse(Kind::Librdkafka, "ssl.ca.location=probe\n");
        assert!(lint(&f).is_empty());
    }

    #[test]
    fn librdkafka_values_and_spaces() {
        let f = ConfigFile::parse(
            Kind::Librdkafka,
            "security.protocol=SSL\nsocket.timeout.ms=5\ndebug=broker,nope\n\
             enable.ssl.certificate.verification=t\nbootstrap.servers = localhost:1\n\
             error_cb=x\n",
        );
        let i = lint(&f);
        let lines: Vec<_> = i.iter().map(|i| i.line).collect();
        assert_eq!(lines, [2, 3, 5, 6], "{i:?}");
        assert!(i[0].what.contains("out of range"), "{i:?}");
        assert!(i[1].what.contains("unknown flag `nope`"), "{i:?}");
        assert!(
            i[2].fix.contains("`bootstrap.servers=localhost:1`"),
            "{i:?}"
        );
        assert!(i[3].what.contains("C API"), "{i:?}");
    }

    #[test]
    fn option_files() {
        let f = ConfigFile::parse(
            Kind::Mysql,
            "[client]\nhost=localhost\nport=33o6\nssl-cer=/x\nssl-mode=REQUIRED\nbatch=1\n\
             ssl-ca\nssl_verify_server_cert\nskip-ssl\nloose-nonsense=1\nport=3306\n\
             [mysqld]\nbind-address=0.0.0.0\n",
        );
        let i = lint(&f);
        let got: Vec<_> = i.iter().map(|i| (i.line, i.status)).collect();
        assert_eq!(
            got,
            [
                (2, Status::Warn),
                (3, Status::Fail),
                (4, Status::Fail),
                (5, Status::Warn),
                (6, Status::Fail),
                (7, Status::Fail),
                (10, Status::Warn),
            ],
            "{i:?}"
        );
        assert!(i[2].what.contains("did you mean `ssl-cert`"), "{i:?}");
        assert!(mysql_tls_disabled(&f).is_some_and(|e| e.line == 9));
        let f = ConfigFile::parse(Kind::Mysql, "[client]\nssl=1\n");
        assert!(mysql_tls_disabled(&f).is_none());
    }

    #[test]
    fn local_endpoint_configs_are_plaintext_and_fine() {
        // What setup writes for the local endpoint: no TLS keys, PLAINTEXT to 127.0.0.1.
        let dir = tempfile::tempdir().expect("tempdir");
        let mut p = crate::profile::tests::sample();
        p.endpoint = crate::profile::Endpoint::Local {
            bootstrap_port: 9092,
            brokers: Vec::new(),
        };
        let files = crate::doctor::testing::local_configs(9092);
        let files: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
        let ctx = crate::doctor::testing::context(dir.path(), &p, &[], &files);
        let mut st = Findings::default();
        check(&ctx, &mut st);
        let got: Vec<_> = st
            .checks
            .iter()
            .map(|c| (c.subject.as_deref(), c.status))
            .collect();
        assert_eq!(
            got,
            [
                (Some("client.properties"), Status::Ok),
                (Some("librdkafka.conf"), Status::Ok)
            ],
            "{:?}",
            st.checks
        );
        assert!(
            st.checks[1]
                .found
                .ends_with("(librdkafka/kcat): 2 settings, all known, values and paths fine")
        );
    }

    /// The `lint` line of `my.cnf` holding `text` in a profile in `mode`.
    fn my_cnf_line(mode: crate::profile::Endpoint, text: &str) -> Finding {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut p = crate::doctor::testing::local_mysql_profile(&[9092], 3306);
        p.endpoint = mode;
        // The paths a direct `my.cnf` names, so that only TLS itself is judged.
        let files = [
            (pf::MY_CNF, text),
            (pf::CA_CRT, "x"),
            (pf::CLIENT_CRT, "x"),
            (pf::CLIENT_KEY, "x"),
        ];
        let ctx = crate::doctor::testing::context(dir.path(), &p, &[], &files);
        let mut st = Findings::default();
        check(&ctx, &mut st);
        st.checks.into_iter().next().expect("one line")
    }

    const DIRECT_MY_CNF: &str = "[client]\nhost=127.0.0.1\nport=3306\nuser=saige\n\
                                 ssl-ca=ca.crt\nssl-cert=client.crt\nssl-key=client.key\n\
                                 [client-mariadb]\nssl-verify-server-cert\n";

    #[test]
    fn a_local_endpoint_my_cnf_carries_no_tls_settings() {
        let local = || crate::profile::Endpoint::Local {
            bootstrap_port: 9092,
            brokers: vec![],
        };
        let c = my_cnf_line(local(), &crate::doctor::testing::local_my_cnf(3306));
        assert_eq!(c.status, Status::Ok, "{c:?}");

        // A direct profile's file kept after the switch: the client insists on TLS.
        let c = my_cnf_line(local(), DIRECT_MY_CNF);
        assert_eq!(c.status, Status::Warn, "{c:?}");
        assert!(
            c.found.ends_with(
                "(MySQL option file): line 5: `ssl-ca`, `ssl-cert`, `ssl-key`, \
                 `ssl-verify-server-cert` (lines 5, 6, 7, 9) make the client insist on TLS, but \
                 the profile's MySQL goes through the tunnel's local endpoint, which offers \
                 none on 127.0.0.1: the client stops before logging in"
            ),
            "{c:?}"
        );
        assert_eq!(
            c.fix.as_deref(),
            Some(
                "line 5: remove them (the endpoint does the TLS with the profile's certificate; \
                 the client needs no SSL settings)"
            )
        );

        // Direct mode needs them: no such line.
        let c = my_cnf_line(crate::profile::Endpoint::Direct, DIRECT_MY_CNF);
        assert_eq!(c.status, Status::Ok, "{c:?}");
    }

    #[test]
    fn which_settings_insist_on_tls() {
        let f = ConfigFile::parse(
            Kind::Mysql,
            "[client]\nssl=0\nskip-ssl\nssl-mode=DISABLED\nskip-ssl-verify-server-cert\n\
             ssl-ca=\nloose-ssl-mode=VERIFY_IDENTITY\nenable-ssl\n[mysqld]\nssl-ca=/x\n",
        );
        let lines: Vec<usize> = mysql_tls_wanted(&f).iter().map(|e| e.line).collect();
        assert_eq!(lines, [7, 8]);
    }

    #[test]
    fn distance_is_levenshtein() {
        assert_eq!(distance("ecurity.protocol", "security.protocol"), 1);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
    }
}
