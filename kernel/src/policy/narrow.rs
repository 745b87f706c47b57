//! Why a call the grant allowed does not simply run: the one place that names which narrowing won — a
//! `[permissions]` rule, a PreToolUse hook, plan mode or the doom-loop guard — so the turn loop, `loom explain` and
//! any front end say the same thing. Narrowing never widens: the verdict is [`combine`]'s.

use crate::policy::decide::Decision;
use crate::policy::rules::{combine, RuleKind, RulesVerdict, Verdict};

/// What stops or holds an allowed call, if anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Narrowed {
    /// The grant refused the call (the denial itself says why).
    Denied,
    /// Nothing narrowed it: it runs.
    Runs,
    /// Refused in plan mode: it can change the workspace while the user plans.
    PlanMode,
    /// Refused by a `[permissions]` deny rule: the rule (its list and index) and what it matched, when a rule
    /// matched.
    DenyRule {
        /// The rule.
        rule: Option<(RuleKind, usize)>,
        /// The simple command it matched, when the rule alone does not say.
        matched: Option<String>,
    },
    /// A PreToolUse hook asks for the user's approval.
    HookAsks,
    /// The doom-loop guard: the same call with the same input repeated; the user must approve it.
    Stuck,
    /// A `[permissions]` ask rule asks for the user's approval.
    AskRule {
        /// The rule (its list and index).
        rule: (RuleKind, usize),
    },
}

/// The outcome of narrowing one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Narrowing {
    /// Allow, ask or deny: [`combine`] of the decision, the rules and the other narrowing verdicts.
    pub verdict: Verdict,
    /// Which narrowing decided it.
    pub why: Narrowed,
    /// True when an "always" answer to the ask may be remembered: only an ask rule's, never the doom-loop guard's
    /// or a hook's (those are about this run).
    pub rememberable: bool,
}

/// Narrows the kernel's `decision` with the `[permissions]` rules' verdict and the other narrowing verdicts: the
/// doom-loop guard (`stuck`), plan mode (`plan`) and the PreToolUse hooks (`hooked`). A hook's deny is final before
/// a call is prepared, so here a hook can only ask.
pub fn narrow(
    decision: &Decision,
    rules: &RulesVerdict,
    stuck: Verdict,
    plan: Verdict,
    hooked: Verdict,
) -> Narrowing {
    let verdict = combine(decision, rules.verdict, &[stuck, plan, hooked]);
    let why = match verdict {
        _ if !decision.is_allowed() => Narrowed::Denied,
        Verdict::Allow => Narrowed::Runs,
        Verdict::Deny if plan == Verdict::Deny => Narrowed::PlanMode,
        Verdict::Deny if rules.verdict == Verdict::Deny => Narrowed::DenyRule {
            rule: rules.rule,
            matched: rules.matched.clone(),
        },
        Verdict::Deny => Narrowed::DenyRule {
            rule: None,
            matched: None,
        },
        Verdict::Ask
            if hooked == Verdict::Ask && rules.verdict != Verdict::Ask && stuck != Verdict::Ask =>
        {
            Narrowed::HookAsks
        }
        Verdict::Ask if stuck == Verdict::Ask => Narrowed::Stuck,
        Verdict::Ask => Narrowed::AskRule {
            rule: rules.rule.unwrap_or((RuleKind::Ask, 0)),
        },
    };
    Narrowing {
        verdict,
        why,
        rememberable: rules.rememberable() && stuck != Verdict::Ask && hooked != Verdict::Ask,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::decide::{Authorization, Denial, DenialKind, Exec, Request};
    use crate::Row;

    fn allowed() -> Decision {
        Decision::Allow(Authorization::new(None, Exec::InProcess))
    }

    fn rules(verdict: Verdict, rule: Option<(RuleKind, usize)>) -> RulesVerdict {
        RulesVerdict {
            verdict,
            rule,
            approval: None,
            matched: None,
        }
    }

    const A: Verdict = Verdict::Allow;
    const Q: Verdict = Verdict::Ask;
    const D: Verdict = Verdict::Deny;

    #[test]
    fn a_denial_stays_a_denial_whatever_narrows() {
        let denied = Decision::Deny(Denial::new(
            "t",
            &Request::Args(Row::default()),
            None,
            DenialKind::ArgsOutsideGrant,
        ));
        let n = narrow(&denied, &rules(A, None), A, A, A);
        assert_eq!((n.verdict, n.why), (D, Narrowed::Denied));
    }

    #[test]
    fn plan_mode_wins_a_deny_then_the_rule_says_which() {
        let ask_rule = rules(Q, Some((RuleKind::Ask, 2)));
        assert_eq!(
            narrow(&allowed(), &ask_rule, Q, D, Q).why,
            Narrowed::PlanMode
        );
        let mut deny = rules(D, Some((RuleKind::Deny, 1)));
        deny.matched = Some("rm -rf /".into());
        assert_eq!(
            narrow(&allowed(), &deny, A, A, A).why,
            Narrowed::DenyRule {
                rule: Some((RuleKind::Deny, 1)),
                matched: Some("rm -rf /".into())
            }
        );
    }

    #[test]
    fn an_ask_names_the_hook_then_the_loop_then_the_rule() {
        let none = rules(A, None);
        let ask_rule = rules(Q, Some((RuleKind::Ask, 3)));
        assert_eq!(narrow(&allowed(), &none, A, A, Q).why, Narrowed::HookAsks);
        // the rule's own ask is named before a hook's
        assert_eq!(
            narrow(&allowed(), &ask_rule, A, A, Q).why,
            Narrowed::AskRule {
                rule: (RuleKind::Ask, 3)
            }
        );
        assert_eq!(narrow(&allowed(), &ask_rule, Q, A, Q).why, Narrowed::Stuck);
        assert_eq!(narrow(&allowed(), &none, A, A, A).why, Narrowed::Runs);
    }

    #[test]
    fn only_an_ask_rule_alone_is_remembered() {
        let ask_rule = rules(Q, Some((RuleKind::Ask, 0)));
        assert!(narrow(&allowed(), &ask_rule, A, A, A).rememberable);
        assert!(!narrow(&allowed(), &ask_rule, Q, A, A).rememberable);
        assert!(!narrow(&allowed(), &ask_rule, A, A, Q).rememberable);
        assert!(!narrow(&allowed(), &rules(Q, None), A, A, A).rememberable);
    }
}
