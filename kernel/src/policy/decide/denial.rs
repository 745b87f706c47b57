//! Why the kernel refused a call: a typed value — the tool, what was asked, the grant it was judged against, and
//! which rule refused it — and the one place it becomes the sentence the model and the user read ([`Denial`]'s
//! `Display`). The sentence says what was refused and what is possible instead.

use std::fmt;

use super::{Access, Request};
use crate::lattice::grant::{Grant, Row};
use crate::policy::authority_kind::AuthorityKind;

/// A call the kernel refuses.
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    /// The tool instance.
    pub tool: String,
    /// What the call asked for.
    pub request: Request,
    /// The grant it was judged against; `None` for a refusal no grant can lift (an authority file, a protected name).
    pub grant: Option<Grant>,
    /// Which rule refused it.
    pub kind: DenialKind,
}

/// Which rule refused a call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DenialKind {
    /// An argv call with no words.
    EmptyCommand,
    /// A file path outside the grant's paths.
    PathOutsideGrant,
    /// Arguments no row of the grant covers.
    ArgsOutsideGrant,
    /// A command a per-command row names, asked to run outside that row's paths.
    CommandOutsideItsPaths {
        /// The command.
        command: String,
        /// Its row.
        row: Row,
        /// The working directory asked for (normalised).
        cwd: String,
    },
    /// The working directory is outside every general row's paths.
    CwdOutsideShell {
        /// The working directory asked for (normalised).
        cwd: String,
    },
    /// The grant has no row that runs anything.
    NothingGranted,
    /// A command named by path where the grant names only bare commands.
    CommandIsPath {
        /// The command as written.
        command: String,
        /// The commands the grant names.
        allowed: Vec<String>,
    },
    /// A command the grant does not name.
    CommandNotGranted {
        /// The command.
        command: String,
        /// The commands the grant names.
        allowed: Vec<String>,
    },
    /// A command line with shell syntax, under a grant without a general shell row.
    ShellSyntax {
        /// The commands the grant names.
        allowed: Vec<String>,
    },
    /// A write through a protected name (`.git`, `.bashrc`, …).
    ProtectedName {
        /// The name.
        name: &'static str,
    },
    /// A write to (or below) an authority file.
    AuthorityFile {
        /// What the file is to loom.
        kind: AuthorityKind,
        /// Where it comes from (`hooks.PreToolUse[1]`, `skills root`, …).
        origin: String,
    },
    /// A read of a secret store.
    SecretStore {
        /// Where it comes from.
        origin: String,
    },
}

impl Denial {
    /// A denial of `request` by `tool` under `grant`.
    pub fn new(
        tool: impl Into<String>,
        request: &Request,
        grant: Option<&Grant>,
        kind: DenialKind,
    ) -> Denial {
        Denial {
            tool: tool.into(),
            request: request.clone(),
            grant: grant.cloned(),
            kind,
        }
    }
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tool = &self.tool;
        let grant = self
            .grant
            .as_ref()
            .map_or_else(|| "none".to_string(), Grant::to_string);
        let path = match &self.request {
            Request::File { path, .. } => path.as_str(),
            _ => "",
        };
        let verb = match &self.request {
            Request::File {
                access: Access::Read,
                ..
            } => "read",
            _ => "write",
        };
        match &self.kind {
            DenialKind::EmptyCommand => write!(f, "{tool}: an empty command line runs nothing"),
            DenialKind::PathOutsideGrant => write!(
                f,
                "{tool} may not {verb} {path}: it is outside this tool's grant ({grant}); work inside the granted \
                 paths, or ask the user to widen [capabilities].{tool}"
            ),
            DenialKind::ArgsOutsideGrant => {
                let args = match &self.request {
                    Request::Args(row) => row.to_toml(),
                    _ => String::new(),
                };
                write!(
                    f,
                    "{tool}: the arguments {args} are not covered by this tool's grant ({grant}); ask the user to \
                     widen [capabilities].{tool}"
                )
            }
            DenialKind::CommandOutsideItsPaths { command, row, cwd } => write!(
                f,
                "{tool}: `{command}` may run only inside its own paths ({}), not in {cwd}; pass a cwd inside them",
                row.to_toml()
            ),
            DenialKind::CwdOutsideShell { cwd } => write!(
                f,
                "{tool}: the working directory {cwd} is outside every path this shell may use; run the command from \
                 inside one of them"
            ),
            DenialKind::NothingGranted => write!(
                f,
                "{tool}: the grant {grant} grants nothing, so no command may run; grant a row such as \
                 {{ commands = [\"ls\"], paths = [\"./\"] }}"
            ),
            DenialKind::CommandIsPath { command, allowed } => {
                let list = allowed.join(", ");
                write!(
                    f,
                    "{tool}: `{command}` is a path; name the command instead (one of: {list}). {}",
                    only_these(&list)
                )
            }
            DenialKind::CommandNotGranted { command, allowed } => write!(
                f,
                "{tool}: `{command}` is not a command this tool may run. {}",
                only_these(&allowed.join(", "))
            ),
            DenialKind::ShellSyntax { allowed } => write!(
                f,
                "{tool}: the command uses shell syntax (pipes, redirects, $, globs, quoting tricks or VAR=value \
                 prefixes), and this grant has no general shell row. {}",
                only_these(&allowed.join(", "))
            ),
            DenialKind::ProtectedName { name } => write!(
                f,
                "{tool} may not write {path}: `{name}` is protected — code that git, shells, editors or agents run \
                 or trust on their own lives there; ask the user to change it"
            ),
            DenialKind::AuthorityFile { kind, origin } => write!(
                f,
                "{tool} may not write {path}: it is an authority file ({kind}: {origin}) — loom runs or trusts what \
                 it holds, so no tool may change it; ask the user to edit it"
            ),
            DenialKind::SecretStore { origin } => write!(
                f,
                "{tool} may not read {path}: it is a secret store ({origin}); secrets reach a tool only through the \
                 environment its grant names"
            ),
        }
    }
}

fn only_these(list: &str) -> String {
    format!(
        "It runs only these commands, as plain `command arg …` invocations with no shell: {list}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lattice::algebra::AlgebraKind;
    use crate::lattice::grant::test_grant as g;
    use crate::lattice::path::PathCtx;
    use crate::policy::authority::{authority_denial, Authority, AuthorityFile};
    use crate::policy::decide::{decide, Decision};

    fn denied(d: Decision) -> Denial {
        match d {
            Decision::Deny(d) => d,
            other => panic!("expected a denial, got {other:?}"),
        }
    }

    fn bash(grant: &str, request: Request) -> Denial {
        let ctx = PathCtx::new("/w", Some("/home/u".into()));
        denied(decide("sh", AlgebraKind::Bash, &ctx, &g(grant), &request))
    }

    fn line(command: &str) -> Request {
        Request::Bash {
            command: command.into(),
            cwd: "/w".into(),
        }
    }

    fn argv(words: &[&str], cwd: &str) -> Request {
        Request::BashArgv {
            argv: words.iter().map(|w| w.to_string()).collect(),
            cwd: cwd.into(),
        }
    }

    /// Every kind, through the function that produces it, with the exact sentence the model reads.
    #[test]
    fn each_denial_is_typed_and_rendered_in_one_sentence() {
        let ctx = PathCtx::new("/w", None);
        let files = g(r#"{ paths = ["./src"] }"#);
        let read = Request::File {
            path: "/etc/passwd".into(),
            access: Access::Read,
        };
        let d = denied(decide("rf", AlgebraKind::Files, &ctx, &files, &read));
        assert_eq!(
            (d.tool.as_str(), &d.request, d.grant.as_ref(), &d.kind),
            ("rf", &read, Some(&files), &DenialKind::PathOutsideGrant)
        );
        assert_eq!(
            d.to_string(),
            "rf may not read /etc/passwd: it is outside this tool's grant ({ paths = [\"./src\"] }); work inside \
             the granted paths, or ask the user to widen [capabilities].rf"
        );

        let args = Request::Args(Row::from_pairs([(
            "query",
            crate::lattice::value::Value::strs(["x"]),
        )]));
        let d = denied(decide(
            "ws",
            AlgebraKind::Default,
            &ctx,
            &g(r#"{ query = ["y"] }"#),
            &args,
        ));
        assert_eq!(d.kind, DenialKind::ArgsOutsideGrant);
        assert_eq!(
            d.to_string(),
            "ws: the arguments { query = [\"x\"] } are not covered by this tool's grant ({ query = [\"y\"] }); ask \
             the user to widen [capabilities].ws"
        );

        let cases: [(&str, Request, &str); 7] = [
            (
                r#"{ commands = ["ls"] }"#,
                argv(&[], "/w"),
                "sh: an empty command line runs nothing",
            ),
            (
                r#"{ commands = ["gcalcli"], paths = ["~/.gcalcli"] }"#,
                argv(&["gcalcli", "agenda"], "/w"),
                "sh: `gcalcli` may run only inside its own paths ({ commands = [\"gcalcli\"], paths = \
                 [\"~/.gcalcli\"] }), not in /w; pass a cwd inside them",
            ),
            (
                r#"{ commands = "*", paths = ["/srv"] }"#,
                line("ls"),
                "sh: the working directory /w is outside every path this shell may use; run the command from inside \
                 one of them",
            ),
            (
                r#"[]"#,
                line("ls"),
                "sh: the grant {} grants nothing, so no command may run; grant a row such as { commands = [\"ls\"], \
                 paths = [\"./\"] }",
            ),
            (
                r#"{ commands = ["ls", "cat"] }"#,
                line("/bin/ls -l"),
                "sh: `/bin/ls` is a path; name the command instead (one of: cat, ls). It runs only these commands, \
                 as plain `command arg …` invocations with no shell: cat, ls",
            ),
            (
                r#"{ commands = ["ls", "cat"] }"#,
                line("rm -rf x"),
                "sh: `rm` is not a command this tool may run. It runs only these commands, as plain `command arg …` \
                 invocations with no shell: cat, ls",
            ),
            (
                r#"{ commands = ["ls", "cat"] }"#,
                line("ls | cat"),
                "sh: the command uses shell syntax (pipes, redirects, $, globs, quoting tricks or VAR=value \
                 prefixes), and this grant has no general shell row. It runs only these commands, as plain \
                 `command arg …` invocations with no shell: cat, ls",
            ),
        ];
        for (grant, request, want) in cases {
            let d = bash(grant, request.clone());
            assert_eq!(
                (&d.request, d.grant.as_ref()),
                (&request, Some(&g(grant))),
                "{want}"
            );
            assert_eq!(d.to_string(), want);
        }
    }

    #[test]
    fn authority_denials_name_no_grant_because_none_can_lift_them() {
        let authority = Authority::new([
            AuthorityFile::new("/w/agent.toml", AuthorityKind::Manifest, "the manifest"),
            AuthorityFile::new(
                "/w/.loom-secrets",
                AuthorityKind::SecretStore,
                "[secrets] file",
            ),
        ]);
        let file = |path: &str, access| Request::File {
            path: path.into(),
            access,
        };
        let cases = [
            (
                file("/w/agent.toml", Access::Write),
                DenialKind::AuthorityFile {
                    kind: AuthorityKind::Manifest,
                    origin: "the manifest".into(),
                },
                "wf may not write /w/agent.toml: it is an authority file (manifest: the manifest) — loom runs or \
                 trusts what it holds, so no tool may change it; ask the user to edit it",
            ),
            (
                file("/w/.loom-secrets", Access::Read),
                DenialKind::SecretStore {
                    origin: "[secrets] file".into(),
                },
                "wf may not read /w/.loom-secrets: it is a secret store ([secrets] file); secrets reach a tool only \
                 through the environment its grant names",
            ),
            (
                file("/w/.git/hooks/pre-commit", Access::Write),
                DenialKind::ProtectedName { name: ".git" },
                "wf may not write /w/.git/hooks/pre-commit: `.git` is protected — code that git, shells, editors or \
                 agents run or trust on their own lives there; ask the user to change it",
            ),
        ];
        for (request, kind, want) in cases {
            let Some(Decision::Deny(d)) = authority_denial("wf", &request, &authority) else {
                panic!("{want}: not denied");
            };
            assert_eq!((&d.kind, &d.grant), (&kind, &None));
            assert_eq!(d.to_string(), want);
        }
    }
}
