//! What a sub-agent keeps from the agent that spawns it (kernel review K8): rules and hooks only narrow, so a
//! descendant is never freer than its parent.
//!
//! Specification ([`inherit_policy`]): the child's deny and ask rules are the parent's followed by its own (a
//! parent rule already in the child's list is not repeated), so with the precedence deny → ask → allow the child's
//! rules are the intersection of both: an allow rule of the child's never answers a call a parent's deny or ask
//! rule catches. The parent's `PreToolUse` hooks run first for every tool call of the child; a command hook runs
//! from the parent's directory, as it does for the parent. Applied at each spawn, so every descendant carries every
//! ancestor's rules and hooks.

use crate::manifest::Manifest;
use crate::policy::hooks::{HookAction, HookEvent};

/// How many rules and hooks a sub-agent keeps from `parent`: (deny rules, ask rules, PreToolUse hooks).
pub fn inherited_counts(parent: &Manifest) -> (usize, usize, usize) {
    let pre = parent
        .hooks
        .0
        .iter()
        .filter(|(e, _)| *e == HookEvent::PreToolUse)
        .count();
    (
        parent.permissions.deny.len(),
        parent.permissions.ask.len(),
        pre,
    )
}

/// `child` with `parent`'s deny and ask rules and `PreToolUse` hooks put before its own (see the module docs).
/// `parent_dir` is the directory the parent's command hooks run from.
pub fn inherit_policy(parent: &Manifest, parent_dir: &str, child: &mut Manifest) {
    for (from, to) in [
        (&parent.permissions.deny, &mut child.permissions.deny),
        (&parent.permissions.ask, &mut child.permissions.ask),
    ] {
        let own = std::mem::take(to);
        let mut all: Vec<_> = from.clone();
        all.extend(own.into_iter().filter(|r| !from.contains(r)));
        *to = all;
    }
    let mut hooks: Vec<_> = parent
        .hooks
        .0
        .iter()
        .filter(|(e, _)| *e == HookEvent::PreToolUse)
        .map(|(e, h)| {
            let mut h = h.clone();
            if let HookAction::Command(c) = &h.action {
                h.action =
                    HookAction::Command(format!("cd {} && {{ {c}\n}}", sh_quote(parent_dir)));
            }
            (*e, h)
        })
        .collect();
    hooks.extend(std::mem::take(&mut child.hooks.0));
    child.hooks.0 = hooks;
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::policy::rules::{CallFacts, Verdict};

    fn man(text: &str) -> Manifest {
        crate::manifest::parse_manifest(
            &format!("[agent]\nname = \"a\"\n{text}"),
            "agent.toml",
            &BTreeMap::new(),
        )
        .unwrap()
    }

    const PARENT: &str = "[[permissions.deny_rules]]\ntool = \"bash\"\ncommand_prefix = \"rm -rf\"\n[[permissions.ask_rules]]\ntool = \"bash\"\ncommand_prefix = \"git push\"\n[[hooks.PreToolUse]]\nmatcher = \"bash\"\ncommand = \"./check.sh\"\n[[hooks.SessionStart]]\ncommand = \"echo hi\"\n";

    fn verdict(m: &Manifest, command: &str) -> Verdict {
        let facts = CallFacts {
            tool: "bash".into(),
            command: Some(command.into()),
            ..CallFacts::default()
        };
        m.permissions.evaluate(&facts, Verdict::Allow)
    }

    #[test]
    fn a_child_keeps_its_parents_deny_and_ask_rules_whatever_it_allows() {
        let parent = man(PARENT);
        let children = [
            "",
            "[[permissions.allow_rules]]\ntool = \"bash\"\n",
            "[[permissions.allow_rules]]\ntool = \"bash\"\ncommand_prefix = \"rm -rf\"\n[[permissions.deny_rules]]\ntool = \"bash\"\ncommand_prefix = \"curl\"\n",
            PARENT,
        ];
        for text in children {
            let mut child = man(text);
            let own = man(text);
            inherit_policy(&parent, "/p", &mut child);
            // (command, the verdict the child gets): the parent's deny and ask win, the child's own deny stays
            for (command, want) in [
                ("rm -rf x", Verdict::Deny),
                ("git push", Verdict::Ask),
                ("ls", Verdict::Allow),
            ] {
                assert_eq!(verdict(&child, command), want, "{text:?} {command}");
            }
            assert_eq!(
                verdict(&child, "curl x"),
                verdict(&own, "curl x"),
                "{text:?}"
            );
            // rules are not repeated, and the parent's PreToolUse hook comes first, run from the parent's directory
            assert_eq!(
                child
                    .permissions
                    .deny
                    .iter()
                    .filter(|r| **r == parent.permissions.deny[0])
                    .count(),
                1
            );
            let (e, h) = &child.hooks.0[0];
            assert_eq!(*e, HookEvent::PreToolUse);
            assert_eq!(
                h.action,
                HookAction::Command("cd '/p' && { ./check.sh\n}".into())
            );
            assert_eq!(h.matcher.as_deref(), Some("bash"));
            // only PreToolUse: the parent's SessionStart is its own
            let session_starts = child
                .hooks
                .0
                .iter()
                .filter(|(e, _)| *e == HookEvent::SessionStart)
                .count();
            assert_eq!(
                session_starts,
                own.hooks
                    .0
                    .iter()
                    .filter(|(e, _)| *e == HookEvent::SessionStart)
                    .count()
            );
        }
        assert_eq!(inherited_counts(&parent), (1, 1, 1));
        assert_eq!(sh_quote("/a b/it's"), "'/a b/it'\\''s'");
    }
}
