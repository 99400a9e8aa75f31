//! What the agent knows of one subcommand, in one place: the [`Handler`] its arguments
//! implement, beside them in `commands/NAME.rs`. The policy ([`crate::access`]), the audit line
//! of a refusal, the name lock and the dispatch read these facts instead of each matching on
//! every command, so a new request is its module and its variant (and arm) in
//! [`crate::commands::Command`].

use shiqi_ca::ProfileName;
use shiqi_ca::protocol;

use crate::error::AgentError;
use crate::state::Context;

/// Who may send a subcommand (before its own [`Handler::user_may`] is asked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Audience {
    /// Nobody, as a request: `serve` never runs inside one, and `completions` and `man` are
    /// answered before any caller is looked at.
    Nobody,
    /// Only the agent's own account: what carries the CA key away or replaces it.
    Local,
    /// The agent's own account and admin keys; a `user` key where [`Handler::user_may`] says.
    Keys,
}

/// One subcommand's facts and its run. Every method but [`Handler::action`] and
/// [`Handler::run`] has the default of an admin-only command that acts on no name.
pub(crate) trait Handler {
    /// The subcommand as the audit log names it (`kafka-user-revoke` for `kafka-user
    /// --revoke`).
    fn action(&self) -> &'static str;

    /// The name the request acts on as given, for the audit line of a refusal; empty for none.
    fn target(&self) -> String {
        String::new()
    }

    /// The request in a few words, for a refusal: "`init`", "a certificate for `bob`".
    fn describe(&self) -> String {
        format!("`{}`", self.action())
    }

    /// Who may send it.
    fn audience(&self) -> Audience {
        Audience::Keys
    }

    /// Whether a `user` key enrolled as `name` may send it (admins and the local account may
    /// send whatever [`Handler::audience`] lets through).
    ///
    /// # Errors
    /// When the inventory cannot answer (a serial's owner).
    fn user_may(&self, _ctx: &Context, _name: &str) -> Result<bool, AgentError> {
        Ok(false)
    }

    /// The name whose grants it changes, held locked while it runs (see [`crate::name_lock`]).
    /// A name that does not parse locks nothing: the command refuses it before it touches any
    /// state.
    ///
    /// # Errors
    /// When the inventory cannot answer (a serial's owner).
    fn locked_name(&self, _ctx: &Context) -> anyhow::Result<Option<ProfileName>> {
        Ok(None)
    }

    /// The laptop's request this is, every value parsed into its strict type; `None` for a
    /// command the laptop never sends (or with an option it never sends, such as `--no-kafka`).
    fn wire(&self) -> Option<Result<protocol::Request, String>> {
        None
    }

    /// Runs it, once [`crate::access::authorize`] let it through and its name is locked.
    ///
    /// # Errors
    /// The command's own; printed by [`crate::report`].
    fn run(&self, ctx: &Context) -> anyhow::Result<()>;
}

/// A name as a request spells it, trimmed and parsed; `None` if it does not parse.
pub(crate) fn name(raw: &str) -> Option<ProfileName> {
    raw.trim().parse().ok()
}

/// A value as a request spells it, trimmed and parsed into its strict type for
/// [`Handler::wire`], or why not.
pub(crate) fn parsed<T>(what: &str, raw: &str) -> Result<T, String>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    raw.trim().parse().map_err(|e| format!("{what}: {e}"))
}
