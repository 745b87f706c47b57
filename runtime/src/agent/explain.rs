//! `loom explain`: what the turn loop would decide for one call, without running it.

use super::*;

/// Why a call cannot be explained: there is nothing for the kernel to decide yet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExplainRefusal {
    /// The agent has no tool of that name.
    #[error(
        "there is no tool named {tool:?} in this agent; the tools are: {}",
        if .tools.is_empty() { "(none)".to_string() } else { .tools.join(", ") }
    )]
    UnknownTool {
        /// The name asked for.
        tool: String,
        /// The agent's tools.
        tools: Vec<String>,
    },
    /// The tool refuses the input before any decision (a missing field, a path that cannot be resolved).
    #[error("the tool refuses this input before any decision: {0}")]
    InputRefused(String),
}

impl Agent {
    /// What the turn loop would decide about a call of `tool` with `input`, without running it (`loom explain`):
    /// the grant, the kernel's decision with the authorising row, the `[permissions]` rule and remembered answer
    /// that applied, and the final verdict. The doom-loop guard is not part of it (it depends on the calls before).
    pub fn explain(
        &self,
        tool: &str,
        input: &serde_json::Value,
    ) -> Result<Explanation, ExplainRefusal> {
        let Some(slot) = self.tools.get(tool) else {
            return Err(ExplainRefusal::UnknownTool {
                tool: tool.to_string(),
                tools: self.tools.keys().cloned().collect(),
            });
        };
        let prepared = slot
            .tool
            .prepare(input)
            .map_err(ExplainRefusal::InputRefused)?;
        let (decision, rules) = self.judge(tool, slot, &prepared);
        let verdict = combine(&decision, rules.verdict, &[]);
        let approval = rules
            .approval
            .and_then(|i| self.approvals.as_ref()?.entries().into_iter().nth(i));
        let rule = rules.rule.map(|(kind, index)| {
            let list = match kind {
                RuleKind::Allow => &self.permissions.allow,
                RuleKind::Ask => &self.permissions.ask,
                RuleKind::Deny => &self.permissions.deny,
            };
            (kind, index, list.get(index).cloned().unwrap_or_default())
        });
        Ok(Explanation {
            tool: tool.to_string(),
            algebra: slot.algebra,
            grant: slot.grant.clone(),
            facts: rule_facts(slot, &prepared),
            decision,
            rule,
            matched: rules.matched,
            approval,
            verdict,
            headless: self.asker.is_none(),
            pre_hooks: self
                .hooks
                .as_ref()
                .map(|h| h.describe(HookEvent::PreToolUse, Some(tool)))
                .unwrap_or_default(),
        })
    }
}

/// What [`Agent::explain`] found.
#[derive(Debug, Clone)]
pub struct Explanation {
    /// The tool instance.
    pub tool: String,
    /// Its algebra.
    pub algebra: AlgebraKind,
    /// Its grant.
    pub grant: Grant,
    /// The facts the rules matched against.
    pub facts: CallFacts,
    /// The kernel's decision (the authorising row, or the denial and its reason).
    pub decision: Decision,
    /// The rule that matched: its list, its index and the rule.
    pub rule: Option<(RuleKind, usize, Rule)>,
    /// What the rule matched when the rule alone does not say: the simple command an ask or deny command rule found
    /// in the line.
    pub matched: Option<String>,
    /// The remembered "always" answer that answered an ask rule.
    pub approval: Option<Remembered>,
    /// The verdict: allow, ask (a headless run refuses it) or deny.
    pub verdict: Verdict,
    /// True when no one can answer an ask (the agent as `loom explain` boots it is headless).
    pub headless: bool,
    /// The PreToolUse hooks that would run before the decision (not run by explain), described.
    pub pre_hooks: Vec<String>,
}
