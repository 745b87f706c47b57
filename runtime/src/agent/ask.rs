//! The questions the turn loop puts to a user, and who answers them.

use futures::future::BoxFuture;

use crate::update::ToolCall;

/// A question the turn loop puts to the user: a `[permissions]` ask rule matched an allowed call, or the doom-loop
/// guard saw the same call repeated. Only calls the kernel allowed are ever asked about.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionAsk {
    /// The call, as it was announced (status `pending`).
    pub call: ToolCall,
    /// Why approval is needed.
    pub reason: String,
    /// True when an "always" answer can be remembered for this call (an ask rule asked; the doom-loop guard's
    /// asks are about this run and are never remembered). A client offers "always" only then.
    pub rememberable: bool,
}

/// The user's answer to a [`PermissionAsk`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AskAnswer {
    /// Run this one call.
    AllowOnce,
    /// Run it, and remember the answer for this exact call (see [`loom_kernel::Approval`]); for an ask that is not
    /// [`rememberable`](PermissionAsk::rememberable) it means the same as `AllowOnce`.
    AllowAlways,
    /// Refuse it; the text says why (the user rejected it, the client went away, …) and is fed back to the model.
    Reject(String),
}

/// Who answers [`PermissionAsk`]s. Without one, an agent is headless and every ask is a refusal.
pub trait Asker: Send + Sync {
    /// Puts `ask` to the user. The turn loop stops waiting (and marks the call interrupted) when the turn is
    /// cancelled, dropping the future.
    fn ask(&self, ask: PermissionAsk) -> BoxFuture<'static, AskAnswer>;
}
