//! The SQL text the agent writes or accepts: string literals, and the grants and account host
//! parts that come from `agent.toml`, checked before they are ever spliced into a statement.
//! Plain functions with no connection, shared by `config.rs` (validation) and `mysql.rs`.

/// A SQL string literal. Backslashes and quotes are escaped; the inputs here never contain
/// them (names are validated, DNs are ours), this is the second lock on the door.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            '\0' => out.push_str("\\0"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A grant from the config: `PRIVILEGE[, PRIVILEGE…] ON db.table` with plain identifiers,
/// backquotes and `*` only.
pub(crate) fn check_grant(grant: &str) -> Result<(), String> {
    let Some((privileges, target)) = grant.split_once(" ON ") else {
        return Err("expected `PRIVILEGES ON db.table`".to_owned());
    };
    let privileges_ok = privileges.split(',').all(|p| {
        let p = p.trim();
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_alphabetic() || c == ' ' || c == '_')
    });
    if !privileges_ok {
        return Err("privileges must be words such as `SELECT, INSERT`".to_owned());
    }
    let target = target.trim();
    let target_ok = !target.is_empty()
        && target.contains('.')
        && target
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '`' | '.' | '*' | '-'));
    if !target_ok || target.matches('`').count() % 2 != 0 {
        return Err("the target must look like `app`.* or app.table".to_owned());
    }
    Ok(())
}

/// The host part of an account: a host name, an IP address or a `%` pattern, nothing quoted.
pub(crate) fn check_account_part(s: &str) -> Result<(), String> {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '%' | ':'))
    {
        Ok(())
    } else {
        Err(format!(
            "`{s}` is not a host name, IP address or `%` pattern"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_literals() {
        assert_eq!(quote("/CN=saige"), "'/CN=saige'");
        assert_eq!(quote("a'b\\c"), "'a''b\\\\c'");
    }

    #[test]
    fn grants_are_checked() {
        assert!(check_grant("SELECT, INSERT ON `app`.*").is_ok());
        assert!(check_grant("ALL PRIVILEGES ON app.t1").is_ok());
        assert!(check_grant("SELECT ON app.*; DROP TABLE x").is_err());
        assert!(check_grant("SELECT ON `app`.* TO 'root'@'%'").is_err());
        assert!(check_grant("SELECT").is_err());
    }

    #[test]
    fn account_host_parts_are_checked() {
        assert!(check_account_part("127.0.0.1").is_ok());
        assert!(check_account_part("%").is_ok());
        assert!(check_account_part("x' OR 1").is_err());
        assert!(check_account_part("").is_err());
    }
}
