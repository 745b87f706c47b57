//! Decisions: which grant row authorises a tool call, or why none does.
//!
//! The runtime gathers facts (the canonical path a file tool would touch, the command line and working directory of a
//! bash call, the arguments of any other call) and asks [`decide`]. The answer names the row that authorises the call
//! — the very row the sandbox is then built from — or a denial whose reason teaches the model what it may do instead.
//! Containment is always asked of the tool's own algebra, so a decision can never disagree with `loom audit`.

mod broker;
mod denial;
mod shell;
mod terminal;

pub use broker::{
    brokered_commands, caller_var_crosses, decide_brokered, BrokerDenial, Brokered, BROKER_BASE_ENV,
};
pub use denial::{Denial, DenialKind};
pub use shell::plain_argv;
pub use terminal::{terminal_plan, TerminalFacts, TerminalPlan};

use crate::lattice::algebra::{Algebra, AlgebraKind};
use crate::lattice::grant::{Grant, Row};
use crate::lattice::path::PathCtx;
use crate::lattice::value::Value;

/// Read or write access to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reading (`read_file`, `find`).
    Read,
    /// Writing or editing (`write_file`, `edit_file`).
    Write,
}

/// The facts of one tool call, gathered by the runtime.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// A file tool touching one path. The runtime passes the path after resolving symlinks.
    File {
        /// Absolute, canonical path.
        path: String,
        /// What the tool does to it.
        access: Access,
    },
    /// A bash call.
    Bash {
        /// The command line the model sent.
        command: String,
        /// The absolute working directory the command would run in.
        cwd: String,
    },
    /// A command given as argv rather than a command line (`loom sandbox run -- CMD ARGS`, a brokered call). It
    /// never goes through a shell: a rowed command runs under its own row, anything else under a general row.
    BashArgv {
        /// The argv; `argv[0]` is the command as invoked.
        argv: Vec<String>,
        /// The absolute working directory.
        cwd: String,
    },
    /// Any other tool: its arguments as a request row (argument name -> value).
    Args(Row),
}

/// How an authorised bash call runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exec {
    /// The grant is `"*"`: no sandbox.
    Unconfined,
    /// `/bin/bash -c <command>` under the chosen general (`commands = "*"`) row.
    Shell,
    /// Direct argv exec (no shell) of a plain invocation of a rowed command, under that command's row.
    Argv(Vec<String>),
    /// Not a bash call: the tool runs in-process under the row.
    InProcess,
}

/// A call the grant authorises. Only [`decide`] makes one (the fields are private), so a tool's `run`, which takes an
/// `Authorization`, can only be reached through the kernel's decision.
///
/// Code outside the kernel cannot forge one:
/// ```compile_fail,E0451
/// let forged = loom_kernel::Authorization { row: None, exec: loom_kernel::Exec::Unconfined };
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    row: Option<(usize, Row)>,
    exec: Exec,
}

impl Authorization {
    /// For the kernel's own tests: an authorisation as `decide` would give it.
    #[cfg(test)]
    pub(crate) fn new(row: Option<(usize, Row)>, exec: Exec) -> Authorization {
        Authorization { row, exec }
    }

    /// The authorising row and its index in the grant; `None` when the grant is `"*"`.
    pub fn row(&self) -> Option<&(usize, Row)> {
        self.row.as_ref()
    }

    /// How the call runs.
    pub fn exec(&self) -> &Exec {
        &self.exec
    }

    /// The row (with its index) and how the call runs, taken apart.
    pub fn into_parts(self) -> (Option<(usize, Row)>, Exec) {
        (self.row, self.exec)
    }
}

/// The kernel's answer for one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Authorised by a row (or by `"*"`).
    Allow(Authorization),
    /// Refused.
    Deny(Denial),
}

impl Decision {
    /// The authorising row (with its index) of an allowed call; `None` for a denial or the grant `"*"`.
    pub fn into_row(self) -> Option<(usize, Row)> {
        match self {
            Decision::Allow(a) => a.row,
            Decision::Deny(_) => None,
        }
    }

    /// True when the call is authorised.
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }
}

/// Decides one call of tool instance `tool` (whose algebra is `kind`) under `grant`. Relative paths in the grant
/// resolve against `ctx`.
pub fn decide(
    tool: &str,
    kind: AlgebraKind,
    ctx: &PathCtx,
    grant: &Grant,
    request: &Request,
) -> Decision {
    let alg = kind.build(ctx);
    let deny = |kind| Decision::Deny(Denial::new(tool, request, Some(grant), kind));
    match request {
        Request::Bash { command, cwd } => {
            decide_bash(ctx, grant, plain_argv(command), Fallback::Shell, cwd).unwrap_or_else(deny)
        }
        Request::BashArgv { argv, cwd } => {
            if argv.is_empty() {
                return deny(DenialKind::EmptyCommand);
            }
            decide_bash(ctx, grant, Some(argv.clone()), Fallback::Argv, cwd).unwrap_or_else(deny)
        }
        Request::File { path, access } => {
            let kind_name = match access {
                Access::Read => "read_paths",
                Access::Write => "paths",
            };
            let want = Row::from_pairs([(kind_name, Value::strs([path.as_str()]))]);
            first_row(alg.as_ref(), grant, &want)
                .unwrap_or_else(|| deny(DenialKind::PathOutsideGrant))
        }
        Request::Args(row) => first_row(alg.as_ref(), grant, row)
            .unwrap_or_else(|| deny(DenialKind::ArgsOutsideGrant)),
    }
}

fn first_row(alg: &dyn Algebra, grant: &Grant, want: &Row) -> Option<Decision> {
    match grant {
        Grant::Unrestricted => Some(Decision::Allow(Authorization {
            row: None,
            exec: Exec::InProcess,
        })),
        Grant::Set(rows) => rows
            .iter()
            .enumerate()
            .find(|(_, r)| alg.row_contains(r, want))
            .map(|(i, r)| {
                Decision::Allow(Authorization {
                    row: Some((i, r.clone())),
                    exec: Exec::InProcess,
                })
            }),
    }
}

/// The commands a per-command row names (`commands = [...]`), or `None` for a general row or a row without
/// `commands`.
pub fn rowed_commands(row: &Row) -> Option<Vec<&str>> {
    match row.get("commands")? {
        Value::Star => None,
        v => Some(
            v.elements()
                .unwrap_or_default()
                .into_iter()
                .filter_map(Value::as_str)
                .collect(),
        ),
    }
}

/// Programs that run code their arguments choose: `git -c alias.x='!sh -c …'`, `core.sshCommand`, `--upload-pack`;
/// interpreters' `-c`/`-e`; `env`, `xargs`, `find -exec`, `make`, package managers' scripts; `ssh`'s remote command.
/// A per-command row naming one is in effect a general shell with that row's authority (its paths, network and
/// secrets): loom runs the argv the model writes, and cannot tell data from code in it.
pub const CODE_RUNNERS: &[&str] = &[
    "awk", "bash", "busybox", "cargo", "deno", "docker", "env", "find", "gawk", "git", "go",
    "java", "make", "node", "npm", "npx", "nice", "nohup", "perl", "php", "pip", "pip3", "pnpm",
    "podman", "python", "python3", "ruby", "rustc", "sed", "sh", "ssh", "sudo", "time", "timeout",
    "uv", "uvx", "xargs", "yarn", "zsh",
];

/// The commands of a per-command row that run code their arguments choose (see [`CODE_RUNNERS`]), by basename.
pub fn code_runners(row: &Row) -> Vec<&str> {
    rowed_commands(row)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| CODE_RUNNERS.contains(&c.rsplit('/').next().unwrap_or(c)))
        .collect()
}

/// True for a general (`commands = "*"`) row: it runs any command through the shell.
pub fn is_general_row(row: &Row) -> bool {
    matches!(row.get("commands"), Some(Value::Star))
}

/// Does `row` let a command run with working directory `cwd`? Rows with path kinds must contain it.
///
/// Only the path kinds are compared: asking the bash algebra itself would also compare `env`, whose absence in the
/// probe row means "tier 2", and wrongly refuse rows with an explicit `env`.
fn cwd_fits(ctx: &PathCtx, row: &Row, cwd: &str) -> bool {
    if row.get("paths").is_none() && row.get("read_paths").is_none() {
        return true;
    }
    let probe = Row::from_pairs([("read_paths", Value::strs([cwd]))]);
    AlgebraKind::Files.build(ctx).row_contains(row, &probe)
}

/// Whether some row of `grant` lets a command run in `cwd` (its path kinds contain it, or it has none): what a tool
/// that must look at a directory before it can name its command (`run_tests` reading the project's build files)
/// asks first, so it reads nothing where no command of its grant could run.
pub fn command_dir_fits(ctx: &PathCtx, grant: &Grant, cwd: &str) -> bool {
    match grant {
        Grant::Unrestricted => true,
        Grant::Set(rows) => {
            let cwd = ctx.normalize(cwd);
            rows.iter().any(|r| cwd_fits(ctx, r, &cwd))
        }
    }
}

/// How a bash call that no per-command row claims runs under a general row.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fallback {
    /// Through `/bin/bash -c` (the call was a command line).
    Shell,
    /// As the given argv (the call was an argv).
    Argv,
}

fn decide_bash(
    ctx: &PathCtx,
    grant: &Grant,
    argv: Option<Vec<String>>,
    fallback: Fallback,
    cwd: &str,
) -> Result<Decision, DenialKind> {
    let rows = match grant {
        Grant::Unrestricted => {
            return Ok(Decision::Allow(Authorization {
                row: None,
                exec: Exec::Unconfined,
            }))
        }
        Grant::Set(rows) => rows,
    };
    let cwd = ctx.normalize(cwd);
    if let Some(argv) = &argv {
        let name = argv[0].as_str();
        if !name.contains('/') {
            let rowed = rows
                .iter()
                .enumerate()
                .find(|(_, r)| rowed_commands(r).is_some_and(|cmds| cmds.contains(&name)));
            if let Some((i, row)) = rowed {
                if !cwd_fits(ctx, row, &cwd) {
                    return Err(DenialKind::CommandOutsideItsPaths {
                        command: name.to_string(),
                        row: row.clone(),
                        cwd,
                    });
                }
                return Ok(Decision::Allow(Authorization {
                    row: Some((i, row.clone())),
                    exec: Exec::Argv(argv.clone()),
                }));
            }
        }
    }
    let general: Vec<(usize, &Row)> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| is_general_row(r))
        .collect();
    if let Some((i, row)) = general.iter().find(|(_, r)| cwd_fits(ctx, r, &cwd)) {
        let exec = match (fallback, &argv) {
            (Fallback::Argv, Some(argv)) => Exec::Argv(argv.clone()),
            _ => Exec::Shell,
        };
        return Ok(Decision::Allow(Authorization {
            row: Some((*i, (*row).clone())),
            exec,
        }));
    }
    if !general.is_empty() {
        return Err(DenialKind::CwdOutsideShell { cwd });
    }
    let mut allowed: Vec<String> = rows
        .iter()
        .filter_map(rowed_commands)
        .flatten()
        .map(str::to_string)
        .collect();
    allowed.sort_unstable();
    allowed.dedup();
    if allowed.is_empty() {
        return Err(DenialKind::NothingGranted);
    }
    Err(match argv {
        Some(mut argv) if argv[0].contains('/') => DenialKind::CommandIsPath {
            command: argv.swap_remove(0),
            allowed,
        },
        Some(mut argv) => DenialKind::CommandNotGranted {
            command: argv.swap_remove(0),
            allowed,
        },
        None => DenialKind::ShellSyntax { allowed },
    })
}

#[cfg(test)]
mod code_runner_tests {
    use super::*;
    use crate::lattice::grant::test_grant;

    #[test]
    fn rows_naming_programs_that_run_their_arguments_are_found() {
        let g = test_grant(
            r#"[{ commands = ["git", "/usr/bin/python3", "gcalcli"], network = "*" }, { commands = "*" }]"#,
        );
        let rows = g.rows().unwrap();
        let rowed = rows.iter().find(|r| !is_general_row(r)).unwrap();
        let general = rows.iter().find(|r| is_general_row(r)).unwrap();
        assert_eq!(code_runners(rowed), vec!["/usr/bin/python3", "git"]);
        assert!(
            code_runners(general).is_empty(),
            "a general row is a shell already"
        );
        let plain = test_grant(r#"{ commands = ["gcalcli", "ls"] }"#);
        assert!(code_runners(&plain.rows().unwrap()[0]).is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::lattice::grant::test_grant as g;

    fn ctx() -> PathCtx {
        PathCtx::new("/w", Some("/home/u".into()))
    }

    fn bash(grant: &str, command: &str, cwd: &str) -> Decision {
        let req = Request::Bash {
            command: command.into(),
            cwd: cwd.into(),
        };
        decide("bash", AlgebraKind::Bash, &ctx(), &g(grant), &req)
    }

    const GCAL: &str =
        "[{ commands = \"*\", paths = [\"./\"] }, { commands = [\"gcalcli\"], network = \"*\", paths = [\"~/.gcalcli\"] }]";

    #[test]
    fn a_plain_rowed_command_is_promoted_to_argv_under_its_row() {
        let d = bash(GCAL, "gcalcli agenda", "/home/u/.gcalcli");
        let Decision::Allow(a) = d else {
            panic!("{d:?}")
        };
        assert_eq!(a.exec, Exec::Argv(vec!["gcalcli".into(), "agenda".into()]));
        assert_eq!(a.row.unwrap().1.get("network"), Some(&Value::Star));
    }

    #[test]
    fn anything_else_uses_the_general_row() {
        for cmd in [
            "gcalcli agenda | head",
            "ls -la",
            "/usr/bin/gcalcli agenda",
            "FOO=1 gcalcli",
        ] {
            let Decision::Allow(a) = bash(GCAL, cmd, "/w/src") else {
                panic!("{cmd}")
            };
            assert_eq!(a.exec, Exec::Shell, "{cmd}");
            assert_eq!(
                a.row.unwrap().1.get("network"),
                None,
                "{cmd}: the shell never gets the network"
            );
        }
    }

    #[test]
    fn the_cwd_must_be_inside_the_chosen_rows_paths() {
        let Decision::Deny(d) = bash(GCAL, "ls", "/etc") else {
            panic!()
        };
        assert!(d.to_string().contains("/etc"), "{}", d.to_string());
        let Decision::Deny(d) = bash(GCAL, "gcalcli agenda", "/w") else {
            panic!()
        };
        assert!(
            d.to_string().contains("only inside its own paths"),
            "{}",
            d.to_string()
        );
    }

    #[test]
    fn a_directory_fits_when_some_row_may_run_there() {
        let c = ctx();
        assert!(command_dir_fits(&c, &g(GCAL), "/w/src"));
        assert!(command_dir_fits(&c, &g(GCAL), "/home/u/.gcalcli"));
        assert!(!command_dir_fits(&c, &g(GCAL), "/etc"));
        assert!(command_dir_fits(
            &c,
            &g("{ commands = [\"cargo\"] }"),
            "/etc"
        ));
        assert!(!command_dir_fits(&c, &g("{}"), "/w"));
        assert!(command_dir_fits(&c, &Grant::Unrestricted, "/etc"));
    }

    #[test]
    fn without_a_general_row_shell_syntax_is_refused_with_a_teaching_message() {
        let grant = "{ commands = [\"ls\", \"cat\"], paths = [\"./\"] }";
        let Decision::Deny(d) = bash(grant, "ls | wc -l", "/w") else {
            panic!()
        };
        assert!(
            d.to_string().contains("shell syntax") && d.to_string().contains("cat, ls"),
            "{}",
            d.to_string()
        );
        let Decision::Deny(d) = bash(grant, "rm -rf x", "/w") else {
            panic!()
        };
        assert!(
            d.to_string().contains("`rm` is not a command"),
            "{}",
            d.to_string()
        );
        let Decision::Deny(d) = bash(grant, "/bin/ls", "/w") else {
            panic!()
        };
        assert!(d.to_string().contains("is a path"), "{}", d.to_string());
        assert!(bash(grant, "ls -la", "/w").is_allowed());
    }

    #[test]
    fn argv_requests_never_use_a_shell() {
        let req = |argv: &[&str], cwd: &str| Request::BashArgv {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            cwd: cwd.into(),
        };
        let d = decide(
            "bash",
            AlgebraKind::Bash,
            &ctx(),
            &g(GCAL),
            &req(&["ls", "-la", "|", "x"], "/w"),
        );
        let Decision::Allow(a) = d else { panic!() };
        assert_eq!(
            a.exec,
            Exec::Argv(vec!["ls".into(), "-la".into(), "|".into(), "x".into()])
        );
        assert!(is_general_row(&a.row.unwrap().1));
        let d = decide(
            "bash",
            AlgebraKind::Bash,
            &ctx(),
            &g(GCAL),
            &req(&["gcalcli", "agenda"], "/home/u/.gcalcli"),
        );
        let Decision::Allow(a) = d else { panic!() };
        assert_eq!(a.row.unwrap().1.get("network"), Some(&Value::Star));
        let only = g("{ commands = [\"ls\"] }");
        let Decision::Deny(d) = decide(
            "bash",
            AlgebraKind::Bash,
            &ctx(),
            &only,
            &req(&["/bin/ls"], "/w"),
        ) else {
            panic!()
        };
        assert!(d.to_string().contains("is a path"), "{}", d.to_string());
        assert!(!decide("bash", AlgebraKind::Bash, &ctx(), &only, &req(&[], "/w")).is_allowed());
    }

    #[test]
    fn an_explicit_env_does_not_hide_the_cwd() {
        // regression: the cwd probe must compare paths only, not the row's env
        let grant = "[{ commands = \"*\", paths = [\"/w\"], env = [] }, { commands = [\"env\"], paths = [\"/w\"], env = [\"SECRET_*\"] }]";
        assert!(bash(grant, "ls", "/w").is_allowed());
        assert!(bash(grant, "env", "/w").is_allowed());
        let Decision::Deny(d) = bash("{}", "ls", "/w") else {
            panic!()
        };
        assert!(
            d.to_string().contains("grants nothing"),
            "{}",
            d.to_string()
        );
    }

    #[test]
    fn star_runs_unconfined() {
        let Decision::Allow(a) = bash("\"*\"", "anything | at all", "/") else {
            panic!()
        };
        assert_eq!(a.exec, Exec::Unconfined);
    }

    #[test]
    fn file_requests() {
        let grant = g("[{ paths = [\"./src\"] }, { read_paths = [\"./docs\"] }]");
        let file = |path: &str, access| {
            decide(
                "read_file",
                AlgebraKind::Files,
                &ctx(),
                &grant,
                &Request::File {
                    path: path.into(),
                    access,
                },
            )
        };
        assert!(file("/w/src/a.rs", Access::Write).is_allowed());
        assert!(file("/w/docs/x.md", Access::Read).is_allowed());
        assert!(!file("/w/docs/x.md", Access::Write).is_allowed());
        let Decision::Deny(d) = file("/w/srcother/a", Access::Read) else {
            panic!()
        };
        assert!(
            d.to_string().contains("outside this tool's grant"),
            "{}",
            d.to_string()
        );
    }

    #[test]
    fn argument_requests() {
        let grant = g("{ status = [\"online\", \"away\"], path = \"/doc\" }");
        let args = |src: &str| {
            let t: toml::Table = toml::from_str(src).unwrap();
            let Grant::Set(rows) = Grant::from_toml(&toml::Value::Table(t)).unwrap() else {
                panic!()
            };
            Request::Args(rows.into_iter().next().unwrap_or_default())
        };
        assert!(decide(
            "set_status",
            AlgebraKind::Mcp,
            &ctx(),
            &grant,
            // a call always carries the bound literal (`apply` adds it)
            &args("status = \"away\"\npath = \"/doc\"")
        )
        .is_allowed());
        assert!(!decide(
            "set_status",
            AlgebraKind::Mcp,
            &ctx(),
            &grant,
            &args("status = \"busy\"\npath = \"/doc\"")
        )
        .is_allowed());
    }
}
