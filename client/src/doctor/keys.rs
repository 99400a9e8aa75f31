//! The real lists of settings each client knows, generated into `keys/` by `keys/generate.sh`
//! (Kafka 4.1.1 `ConfigDef`s via jshell, librdkafka 2.12.1's CONFIGURATION.md, `mariadb --help
//! --verbose`), parsed once into name → value type. Data only; [`super::lint`] judges files.

use std::collections::BTreeMap;
use std::sync::LazyLock;

const KAFKA_CLIENTS: &str = include_str!("keys/kafka-clients.tsv");
const LIBRDKAFKA: &str = include_str!("keys/librdkafka.tsv");
const MARIADB_CLIENT: &str = include_str!("keys/mariadb-client.tsv");

/// Options of Oracle's MySQL 8 client that MariaDB's client does not know (from the MySQL 8.0
/// reference manual, "mysql Client Options"). A MariaDB client stops at them in `[client]`.
pub(super) const ORACLE_MYSQL_ONLY: &[&str] = &[
    "ssl-mode",
    "ssl-fips-mode",
    "tls-ciphersuites",
    "ssl-session-data",
    "ssl-session-data-continue-on-failed-reuse",
    "get-server-public-key",
    "server-public-key-path",
    "tls-sni-servername",
    "load-data-local-dir",
    "compression-algorithms",
    "zstd-compression-level",
    "dns-srv-name",
    "network-namespace",
    "password1",
    "password2",
    "password3",
];

/// A value type and its allowed values.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Value {
    /// Anything (strings, class names, passwords, lists).
    Any,
    /// `true`/`false` (and what the reader also takes).
    Bool,
    /// An integer in a range; `also` is one extra allowed value (`[1,...,9] or -1`).
    Int {
        lo: Option<i64>,
        hi: Option<i64>,
        also: Option<i64>,
    },
    /// A number in a range.
    Float { lo: Option<f64>, hi: Option<f64> },
    /// One of these (a value ending in `:` allows any suffix).
    OneOf {
        values: Vec<String>,
        case_insensitive: bool,
    },
    /// A comma-separated subset of these.
    Csv(Vec<String>),
    /// Cannot be set from a file (a C callback).
    Api,
    /// Takes no value at all (a MySQL `--batch`-like option).
    NoArg,
    /// Needs a value (a MySQL `--ssl-ca=name` option).
    Required,
}

/// One known setting.
#[derive(Clone, Debug)]
pub(super) struct Known {
    /// Its name.
    pub(super) name: String,
    /// Its value type.
    pub(super) value: Value,
}

pub(super) type Table = BTreeMap<String, Known>;

fn rows(text: &str) -> impl Iterator<Item = Vec<&str>> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split('\t').collect())
}

/// Kafka Java: `name type clients validator`.
pub(super) static JAVA: LazyLock<Table> = LazyLock::new(|| {
    rows(KAFKA_CLIENTS)
        .filter_map(|r| {
            let (name, ty) = (*r.first()?, *r.get(1)?);
            let validator = r.get(3).copied().unwrap_or_default();
            let value = match ty {
                "BOOLEAN" => Value::Bool,
                "INT" | "SHORT" | "LONG" => java_range(validator).unwrap_or(Value::Int {
                    lo: None,
                    hi: None,
                    also: None,
                }),
                "DOUBLE" => match java_range(validator) {
                    Some(Value::Int { lo, hi, .. }) => Value::Float {
                        lo: lo.map(|v| v as f64),
                        hi: hi.map(|v| v as f64),
                    },
                    _ => java_float_range(validator),
                },
                "STRING" => java_one_of(validator).unwrap_or(Value::Any),
                _ => Value::Any,
            };
            Some((
                name.to_owned(),
                Known {
                    name: name.to_owned(),
                    value,
                },
            ))
        })
        .collect()
});

/// `[0,...]`, `[1,...,9] or -1`, `[-131072,...,22]`.
fn java_range(v: &str) -> Option<Value> {
    let (range, also) = match v.split_once(" or ") {
        Some((r, a)) => (r, a.trim().parse().ok()),
        None => (v, None),
    };
    let inner = range.strip_prefix('[')?.strip_suffix(']')?;
    let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
    match parts.as_slice() {
        [lo, "..."] => Some(Value::Int {
            lo: Some(lo.parse().ok()?),
            hi: None,
            also,
        }),
        [lo, "...", hi] => Some(Value::Int {
            lo: Some(lo.parse().ok()?),
            hi: Some(hi.parse().ok()?),
            also,
        }),
        _ => None,
    }
}

fn java_float_range(v: &str) -> Value {
    let parts: Vec<f64> = v
        .trim_matches(['[', ']'])
        .split(',')
        .filter_map(|p| p.trim().parse().ok())
        .collect();
    match parts.as_slice() {
        [lo, hi] => Value::Float {
            lo: Some(*lo),
            hi: Some(*hi),
        },
        _ => Value::Float { lo: None, hi: None },
    }
}

/// `[a, b]` or `(case insensitive) [A, B]`.
fn java_one_of(v: &str) -> Option<Value> {
    let (ci, rest) = match v.strip_prefix("(case insensitive) ") {
        Some(r) => (true, r),
        None => (false, v),
    };
    let inner = rest.strip_prefix('[')?.strip_suffix(']')?;
    if inner.contains("...") {
        return None;
    }
    Some(Value::OneOf {
        values: inner.split(',').map(|s| s.trim().to_owned()).collect(),
        case_insensitive: ci,
    })
}

/// librdkafka: `name C/P type range`.
pub(super) static RDKAFKA: LazyLock<Table> = LazyLock::new(|| {
    rows(LIBRDKAFKA)
        .filter_map(|r| {
            let (name, ty) = (*r.first()?, *r.get(2)?);
            let range = r.get(3).copied().unwrap_or_default();
            let list = || range.split(',').map(|s| s.trim().to_owned()).collect();
            let value = match ty {
                "boolean" => Value::Bool,
                "integer" => {
                    let (lo, hi) = rd_range(range);
                    Value::Int {
                        lo: lo.map(|v| v as i64),
                        hi: hi.map(|v| v as i64),
                        also: None,
                    }
                }
                "float" => {
                    let (lo, hi) = rd_range(range);
                    Value::Float { lo, hi }
                }
                "enum value" => Value::OneOf {
                    values: list(),
                    case_insensitive: true,
                },
                "CSV flags" if !range.is_empty() => Value::Csv(list()),
                "see dedicated API" | "pointer" => Value::Api,
                _ => Value::Any,
            };
            Some((
                name.to_owned(),
                Known {
                    name: name.to_owned(),
                    value,
                },
            ))
        })
        .collect()
});

/// `1000 .. 1000000000`, `0 .. 86400e3`.
fn rd_range(r: &str) -> (Option<f64>, Option<f64>) {
    match r.split_once("..") {
        Some((lo, hi)) => (lo.trim().parse().ok(), hi.trim().parse().ok()),
        None => (None, None),
    }
}

/// MariaDB client: `name type`.
pub(super) static MARIADB: LazyLock<Table> = LazyLock::new(|| {
    rows(MARIADB_CLIENT)
        .filter_map(|r| {
            let (name, ty) = (*r.first()?, *r.get(1)?);
            let value = match ty {
                "flag" => Value::NoArg,
                "bool" => Value::Bool,
                "int" => Value::Int {
                    lo: None,
                    hi: None,
                    also: None,
                },
                "string" => Value::Required,
                _ => Value::Any,
            };
            Some((
                name.to_owned(),
                Known {
                    name: name.to_owned(),
                    value,
                },
            ))
        })
        .collect()
});

/// A Java Kafka client setting librdkafka does not have (used to guess a file's kind).
pub(super) fn java_only(key: &str) -> bool {
    JAVA.contains_key(key) && !RDKAFKA.contains_key(key)
}

/// A librdkafka setting the Java client does not have.
pub(super) fn librdkafka_only(key: &str) -> bool {
    RDKAFKA.contains_key(key) && !JAVA.contains_key(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_lists_are_the_real_ones() {
        for k in [
            "security.protocol",
            "ssl.keystore.location",
            "bootstrap.servers",
            "group.id",
            "acks",
            "transactional.id",
            "default.api.timeout.ms",
        ] {
            assert!(JAVA.contains_key(k), "{k}");
        }
        for k in [
            "ssl.ca.location",
            "ssl.key.location",
            "debug",
            "security.protocol",
        ] {
            assert!(RDKAFKA.contains_key(k), "{k}");
        }
        for k in ["ssl-ca", "ssl-verify-server-cert", "host", "user", "batch"] {
            assert!(MARIADB.contains_key(k), "{k}");
        }
        assert_eq!((JAVA.len(), RDKAFKA.len(), MARIADB.len()), (140, 190, 80));
    }
}
