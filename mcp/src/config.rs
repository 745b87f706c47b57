//! From a `{ provider = "mcp-server", ... }` table (already checked by the manifest grammar) to what the client
//! launches: the program and its environment, or the URL and its headers, with secrets looked up in the chain.

use std::path::Path;
use std::time::Duration;

use super::http::HttpSpec;
use super::stdio::StdioSpawn;
use loom_protocol::SecretLookup;

/// Default `startup_timeout_ms`: spawning, `initialize` and `tools/list` (generous: `npx -y` may download).
pub const DEFAULT_STARTUP_TIMEOUT_MS: u64 = 60_000;
/// Default `call_timeout_ms`: one `tools/call`.
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 60_000;

/// The variables of loom's own environment a stdio server inherits (locale, home, search path); nothing else, and
/// in particular no secret, unless `env` or `secrets` names it.
const INHERITED: &[&str] = &[
    "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "PATH",
    "TMPDIR",
];

/// The part of loom's environment every spawned server or provider inherits (`INHERITED`).
pub fn inherited_env(env: &std::collections::BTreeMap<String, String>) -> Vec<(String, String)> {
    INHERITED
        .iter()
        .filter_map(|k| env.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect()
}

/// How a server is reached.
#[derive(Debug, Clone)]
pub enum Launch {
    /// A child process speaking stdio.
    Stdio(StdioSpawn),
    /// A Streamable HTTP endpoint.
    Http(HttpSpec),
}

impl Launch {
    /// For messages: `command node server.mjs`, `url https://…` (never a header or env value).
    pub fn describe(&self) -> String {
        match self {
            Launch::Stdio(s) => format!("command {} {}", s.program, s.args.join(" "))
                .trim_end()
                .to_string(),
            Launch::Http(h) => format!("url {}", h.url),
        }
    }
}

/// A server's launch and timeouts.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// How to reach it.
    pub launch: Launch,
    /// Spawn + `initialize` + `tools/list`.
    pub startup_timeout: Duration,
    /// One `tools/call`.
    pub call_timeout: Duration,
}

/// Why a `[providers]` table does not make a server to start. Each message names the key and the fix, never a
/// secret's value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A key with a value loom cannot use.
    #[error("{key}: {why}")]
    Key {
        /// The key path (`[providers].fs.url`).
        key: String,
        /// What is wrong, and the fix.
        why: String,
    },
    /// A secret the table names is in no store.
    #[error("{key} names the secret {name}, which is not set: {hint}")]
    MissingSecret {
        /// The key that names it.
        key: String,
        /// The secret's name.
        name: String,
        /// Where it could be put.
        hint: String,
    },
}

/// Builds the config of server `handle` from its provider table. `manifest_dir` resolves relative paths: a
/// `command` with a `/` in it, an argument starting with `./` or `../`, an argument naming a file next to the manifest,
/// and `cwd`. `run_dir` is the loom-owned directory the server starts in unless the table sets `cwd` (the caller creates
/// it); an `npx` server is run with `--prefix <run_dir>` so npm resolves no package, `.npmrc` or `node_modules` from the
/// directory loom was started in. `env` is loom's environment. Secrets named by `secrets` (`LOOM_NAME = "ENV_VAR"`) go
/// into a stdio server's environment; `{secret:NAME}` in a header value is replaced by that secret. A missing secret
/// is an error naming it (never a value).
pub fn server_config(
    handle: &str,
    table: &toml::Table,
    manifest_dir: &Path,
    run_dir: &Path,
    chain: &dyn SecretLookup,
    env: &std::collections::BTreeMap<String, String>,
) -> Result<ServerConfig, ConfigError> {
    let at = |key: &str| format!("[providers].{handle}.{key}");
    let bad = |key: &str, why: String| ConfigError::Key { key: at(key), why };
    let s = |key: &str| {
        table
            .get(key)
            .and_then(toml::Value::as_str)
            .map(str::to_string)
    };
    let map = |key: &str| -> Vec<(String, String)> {
        table
            .get(key)
            .and_then(toml::Value::as_table)
            .map(|t| {
                t.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                    .collect()
            })
            .unwrap_or_default()
    };
    let ms = |key: &str, default: u64| {
        let n = table
            .get(key)
            .and_then(toml::Value::as_integer)
            .and_then(|n| u64::try_from(n).ok())
            .unwrap_or(default);
        Duration::from_millis(n.max(1))
    };
    let secret = |name: &str, key: &str| -> Result<String, ConfigError> {
        chain
            .lookup(name)
            .map(|v| v.expose().to_string())
            .ok_or_else(|| ConfigError::MissingSecret {
                key: at(key),
                name: name.to_string(),
                hint: chain.missing_hint(&[name.to_string()]),
            })
    };
    let launch = if let Some(url) = s("url") {
        if table.contains_key("env") || table.contains_key("secrets") {
            return Err(bad(
                "url",
                "env and secrets only go with a spawned server (command or npm); for a url server put \
                 `{secret:NAME}` in a header value"
                    .into(),
            ));
        }
        let parsed = reqwest::Url::parse(&url)
            .map_err(|e| bad("url", format!("{url:?} is not a URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(bad("url", "the URL must be http:// or https://".into()));
        }
        let mut headers = Vec::new();
        for (name, value) in map("headers") {
            headers.push((name, fill_secrets(&value, &|n| secret(n, "headers"))?));
        }
        Launch::Http(HttpSpec {
            url: parsed,
            headers,
        })
    } else {
        // where the server starts: the directory the manifest names, or one of loom's own
        let own_cwd = s("cwd");
        let cwd = match &own_cwd {
            Some(c) => manifest_relative(manifest_dir, c),
            None => run_dir.to_path_buf(),
        };
        let prefix = || vec!["--prefix".to_string(), run_dir.display().to_string()];
        let (program, args) = match (s("command"), s("npm")) {
            (Some(c), _) => {
                let program = if c.contains('/') {
                    manifest_relative(manifest_dir, &c).display().to_string()
                } else {
                    c.clone()
                };
                let mut args: Vec<String> = table
                    .get("args")
                    .and_then(toml::Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str())
                            .map(|a| resolve_arg(manifest_dir, a, own_cwd.is_none()))
                            .collect()
                    })
                    .unwrap_or_default();
                // npx started by name resolves packages from loom's directory, not the agent's
                if c == "npx"
                    && own_cwd.is_none()
                    && !args.iter().any(|a| a.starts_with("--prefix"))
                {
                    args.splice(0..0, prefix());
                }
                (program, args)
            }
            (None, Some(pkg)) => {
                let mut args = if own_cwd.is_none() {
                    prefix()
                } else {
                    Vec::new()
                };
                args.extend(["--yes".to_string(), pkg]);
                ("npx".to_string(), args)
            }
            (None, None) => {
                return Err(ConfigError::Key {
                    key: format!("[providers].{handle}"),
                    why: "names no command, npm or url".into(),
                })
            }
        };
        let mut vars = inherited_env(env);
        let mut set = |k: String, v: String| {
            vars.retain(|(name, _)| *name != k);
            vars.push((k, v));
        };
        for (k, v) in map("env") {
            let v = fill_secrets(&v, &|n| secret(n, "env"))?;
            set(k, v);
        }
        for (loom_name, var) in map("secrets") {
            set(var, secret(&loom_name, "secrets")?);
        }
        Launch::Stdio(StdioSpawn {
            program,
            args,
            env: vars,
            cwd,
        })
    };
    Ok(ServerConfig {
        launch,
        startup_timeout: ms("startup_timeout_ms", DEFAULT_STARTUP_TIMEOUT_MS),
        call_timeout: ms("call_timeout_ms", DEFAULT_CALL_TIMEOUT_MS),
    })
}

/// `p` resolved against the manifest's directory (an absolute `p` stays as it is; a leading `./` is dropped).
fn manifest_relative(manifest_dir: &Path, p: &str) -> std::path::PathBuf {
    match p {
        "." | "./" => manifest_dir.to_path_buf(),
        _ => manifest_dir.join(p.strip_prefix("./").unwrap_or(p)),
    }
}

/// A server argument as the server will get it: `./x` and `../x` resolved against the manifest's directory; with
/// `bare_files` (the server does not start in the manifest's directory), a relative argument naming a file next to
/// the manifest (`server.mjs`, `dist/index.js`) too, so it names the same file it did when servers started there.
/// Options (`-x`, `--x=./y`) and everything else are passed as written.
fn resolve_arg(manifest_dir: &Path, a: &str, bare_files: bool) -> String {
    let explicit = a.starts_with("./") || a.starts_with("../");
    let bare = bare_files
        && !a.is_empty()
        && !a.starts_with('-')
        && !a.starts_with('/')
        && manifest_dir.join(a).is_file();
    if explicit || bare {
        manifest_relative(manifest_dir, a).display().to_string()
    } else {
        a.to_string()
    }
}

/// Replaces each `{secret:NAME}` in `value` with the secret.
fn fill_secrets(
    value: &str,
    get: &dyn Fn(&str) -> Result<String, ConfigError>,
) -> Result<String, ConfigError> {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("{secret:") {
        out.push_str(&rest[..start]);
        let after = &rest[start + "{secret:".len()..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        out.push_str(&get(&after[..end])?);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_protocol::Secret;
    use std::collections::BTreeMap;

    /// A store of the given secrets, as the runtime's chain would answer.
    struct Secrets(BTreeMap<String, Secret>);

    impl SecretLookup for Secrets {
        fn lookup(&self, name: &str) -> Option<Secret> {
            self.0.get(name).cloned()
        }

        fn missing_hint(&self, names: &[String]) -> String {
            format!("export {}", names.join(", "))
        }
    }

    fn chain(secrets: &[(&str, &str)]) -> Secrets {
        Secrets(
            secrets
                .iter()
                .map(|(k, v)| (k.to_string(), Secret::new(*v)))
                .collect(),
        )
    }

    fn table(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn npm_is_npx_and_the_environment_is_scrubbed_but_for_named_secrets() {
        let env: BTreeMap<String, String> = [
            ("PATH", "/bin"),
            ("AWS_SECRET_ACCESS_KEY", "leak"),
            ("HOME", "/h"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let cfg = server_config(
            "fs",
            &table("npm = \"@x/fs\"\nsecrets = { API = \"X_API_KEY\" }\nenv = { MODE = \"a-{secret:API}\" }\ncall_timeout_ms = 5"),
            Path::new("/m"),
            Path::new("/w"),
            &chain(&[("API", "s3cret")]),
            &env,
        )
        .unwrap();
        let Launch::Stdio(s) = cfg.launch else {
            panic!("stdio")
        };
        // npx resolves the package from loom's directory for the server, never from the agent's
        assert_eq!(
            (s.program.as_str(), s.args.clone()),
            (
                "npx",
                vec![
                    "--prefix".to_string(),
                    "/w".to_string(),
                    "--yes".to_string(),
                    "@x/fs".to_string()
                ]
            )
        );
        assert_eq!(s.cwd, Path::new("/w"));
        let vars: BTreeMap<String, String> = s.env.into_iter().collect();
        assert_eq!(vars.get("X_API_KEY").map(String::as_str), Some("s3cret"));
        assert_eq!(vars.get("MODE").map(String::as_str), Some("a-s3cret"));
        assert_eq!(vars.get("PATH").map(String::as_str), Some("/bin"));
        assert!(!vars.contains_key("AWS_SECRET_ACCESS_KEY"), "{vars:?}");
        assert_eq!(cfg.call_timeout, Duration::from_millis(5));
        assert_eq!(
            cfg.startup_timeout,
            Duration::from_millis(DEFAULT_STARTUP_TIMEOUT_MS)
        );
    }

    #[test]
    fn a_missing_secret_is_named_and_a_relative_command_resolves_against_the_manifest() {
        let err = server_config(
            "lin",
            &table("command = \"npx\"\nsecrets = { LINEAR_API_KEY = \"LINEAR_API_KEY\" }"),
            Path::new("/m"),
            Path::new("/w"),
            &chain(&[]),
            &BTreeMap::new(),
        )
        .unwrap_err();
        assert!(
            matches!(&err, ConfigError::MissingSecret { key, name, .. }
                if key == "[providers].lin.secrets" && name == "LINEAR_API_KEY"),
            "{err}"
        );
        let cfg = server_config(
            "x",
            &table("command = \"./srv\""),
            Path::new("/m"),
            Path::new("/w"),
            &chain(&[]),
            &BTreeMap::new(),
        )
        .unwrap();
        assert_eq!(cfg.launch.describe(), "command /m/srv");
    }

    fn stdio(text: &str, manifest_dir: &Path) -> StdioSpawn {
        let cfg = server_config(
            "x",
            &table(text),
            manifest_dir,
            Path::new("/loom/run/x"),
            &chain(&[]),
            &BTreeMap::new(),
        )
        .unwrap();
        match cfg.launch {
            Launch::Stdio(s) => s,
            Launch::Http(_) => panic!("stdio"),
        }
    }

    #[test]
    fn servers_start_in_loom_s_directory_with_paths_resolved_against_the_manifest() {
        let m = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(m.path().join("dist")).unwrap();
        std::fs::write(m.path().join("dist/index.js"), "").unwrap();
        std::fs::write(m.path().join("server.py"), "").unwrap();
        let dir = m.path().display().to_string();
        let s = stdio(
            "command = \"node\"\nargs = [\"./srv.mjs\", \"../up.mjs\", \"dist/index.js\", \"stdio\", \"--flag=./x\", \"-m\", \"/abs\"]",
            m.path(),
        );
        assert_eq!(s.program, "node");
        assert_eq!(
            s.args,
            vec![
                format!("{dir}/srv.mjs"),
                format!("{dir}/../up.mjs"),
                format!("{dir}/dist/index.js"),
                "stdio".into(),
                "--flag=./x".into(),
                "-m".into(),
                "/abs".into()
            ]
        );
        assert_eq!(s.cwd, Path::new("/loom/run/x"));
        // a relative program with a slash is the manifest's too; `python3 -m pkg` finds no `pkg` in loom's directory
        let s = stdio("command = \"bin/srv\"\nargs = [\"server.py\"]", m.path());
        assert_eq!(s.program, format!("{dir}/bin/srv"));
        assert_eq!(s.args, vec![format!("{dir}/server.py")]);
        // npx by name gets loom's prefix unless it names one
        let s = stdio("command = \"npx\"\nargs = [\"-y\", \"@x/y\"]", m.path());
        assert_eq!(s.args, vec!["--prefix", "/loom/run/x", "-y", "@x/y"]);
        let s = stdio(
            "command = \"npx\"\nargs = [\"--prefix=/p\", \"@x/y\"]",
            m.path(),
        );
        assert_eq!(s.args, vec!["--prefix=/p", "@x/y"]);
    }

    #[test]
    fn a_server_that_asks_for_the_project_as_its_cwd_gets_it_and_no_loom_prefix() {
        let m = tempfile::tempdir().unwrap();
        std::fs::write(m.path().join("server.py"), "").unwrap();
        let s = stdio("npm = \"@x/fs\"\ncwd = \"./\"", m.path());
        assert_eq!(s.cwd, m.path());
        assert_eq!(s.args, vec!["--yes", "@x/fs"]);
        let s = stdio(
            "command = \"python3\"\nargs = [\"server.py\", \"./w.py\"]\ncwd = \"./sub\"",
            m.path(),
        );
        assert_eq!(s.cwd, m.path().join("sub"));
        // in the manifest's own tree a bare name is left to the server; `./` is always explicit
        assert_eq!(
            s.args,
            vec![
                "server.py".to_string(),
                m.path().join("w.py").display().to_string()
            ]
        );
        let s = stdio(
            "command = \"npx\"\nargs = [\"pkg\"]\ncwd = \"/abs\"",
            m.path(),
        );
        assert_eq!(
            (s.cwd.as_path(), s.args),
            (Path::new("/abs"), vec!["pkg".to_string()])
        );
    }

    #[test]
    fn header_secrets_are_filled_and_never_described() {
        let cfg = server_config(
            "h",
            &table("url = \"http://127.0.0.1:1/mcp\"\nheaders = { Authorization = \"Bearer {secret:TOKEN}\" }"),
            Path::new("/m"),
            Path::new("/w"),
            &chain(&[("TOKEN", "tok-123")]),
            &BTreeMap::new(),
        )
        .unwrap();
        assert!(!cfg.launch.describe().contains("tok-123"));
        let Launch::Http(h) = cfg.launch else {
            panic!("http")
        };
        assert_eq!(
            h.headers,
            vec![("Authorization".to_string(), "Bearer tok-123".to_string())]
        );
    }
}
