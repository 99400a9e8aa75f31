//! Operations: what a command asks for, from start to end (`setup`'s enrolment, a rotation, a
//! renewal), composed of [`crate::steps`] over one SSH session. A command parses its flags,
//! calls an operation and prints what it returns; the tunnel's daemon calls the same
//! operations. They never print: progress goes to a [`Report`] (the printer for a command,
//! the log for the daemon).

pub(crate) mod renew;
pub(crate) mod rotate;
pub(crate) mod setup;

/// Where an operation tells how it goes.
pub(crate) trait Report {
    /// Starts a step; [`Step::done`] finishes it, and dropping it unfinished marks it failed
    /// (an error on the way out), so the report that follows says which step failed.
    fn step(&self, label: &str) -> Box<dyn Step + '_>;
    /// A step that waits on the server and asks nothing: shown as still waiting while it lasts
    /// (a spinner and the seconds, on a terminal).
    fn wait(&self, label: &str) -> Box<dyn Step + '_> {
        self.step(label)
    }
    /// Something the user should know that is not a problem.
    fn note(&self, text: &str);
    /// Something that needs the user's attention; the operation went on.
    fn warn(&self, text: &str);
}

/// A step in progress (see [`Report::step`]).
pub(crate) trait Step {
    /// The step succeeded, with `outcome` (`serial 0a1b, valid until …`).
    fn done(self: Box<Self>, outcome: &str);
}
