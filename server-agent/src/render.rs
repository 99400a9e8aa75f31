//! Renders the server-side config fragments from `templates/` (embedded at build time).

use minijinja::Environment;
use serde::Serialize;

use crate::error::AgentError;

const TEMPLATES: &[(&str, &str)] = &[
    (
        "kafka-server.properties",
        include_str!("../../templates/kafka-server.properties.j2"),
    ),
    ("mysqld.cnf", include_str!("../../templates/mysqld.cnf.j2")),
];

/// Renders the named template with `ctx`.
pub fn render(name: &'static str, ctx: impl Serialize) -> Result<String, AgentError> {
    let mut env = Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    for (n, src) in TEMPLATES {
        env.add_template(n, src).map_err(|e| AgentError::Template {
            name,
            why: e.to_string(),
        })?;
    }
    env.get_template(name)
        .and_then(|t| t.render(minijinja::value::Serde(&ctx)))
        .map(|mut text| {
            // minijinja drops the final newline; config files end with one.
            text.push('\n');
            text
        })
        .map_err(|e| AgentError::Template {
            name,
            why: e.to_string(),
        })
}
