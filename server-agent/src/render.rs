//! The broker and MariaDB TLS fragments `server-cert` writes, rendered by `shiqi-render` (the
//! same templates crate and rules as the laptop's files).

use serde::Serialize;

use crate::error::AgentError;

/// Renders the named template with `ctx`.
pub(crate) fn render(name: &'static str, ctx: impl Serialize) -> Result<String, AgentError> {
    shiqi_render::render(name, ctx).map_err(|e| AgentError::Template {
        name,
        why: e.to_string(),
    })
}
