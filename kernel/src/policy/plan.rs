//! Plan mode (seed 000): while the user plans, tools that change the workspace or the world are neither offered to
//! the model nor run. Only the user enters and leaves it; nothing the model can call changes it.

use crate::policy::rules::Verdict;

/// What a tool does, as the runtime reports it from the tool's declared kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Reads or searches, and changes nothing (file reads, searches, web searches).
    Reads,
    /// Changes files, runs commands, or does something loom cannot classify (sub-agents, MCP tools): treated as
    /// a change, since plan mode must fail closed.
    Changes,
}

/// Plan mode's verdict on a call of a tool with `effect`: a tool that changes anything is refused; reading is
/// allowed (and still decided by the grant and the rules like any call).
pub fn plan_mode_verdict(effect: Effect) -> Verdict {
    match effect {
        Effect::Reads => Verdict::Allow,
        Effect::Changes => Verdict::Deny,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::decide::{Authorization, Exec};
    use crate::policy::rules::combine;

    #[test]
    fn plan_mode_refuses_changes_and_never_widens() {
        assert_eq!(plan_mode_verdict(Effect::Changes), Verdict::Deny);
        assert_eq!(plan_mode_verdict(Effect::Reads), Verdict::Allow);
        let allowed =
            crate::policy::decide::Decision::Allow(Authorization::new(None, Exec::InProcess));
        // plan mode's allow cannot lift an ask or a deny from the rules
        assert_eq!(
            combine(&allowed, Verdict::Ask, &[plan_mode_verdict(Effect::Reads)]),
            Verdict::Ask
        );
        assert_eq!(
            combine(
                &allowed,
                Verdict::Allow,
                &[plan_mode_verdict(Effect::Changes)]
            ),
            Verdict::Deny
        );
    }
}
