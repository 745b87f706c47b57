//! The secrets chain's order and its files through `loom prompt`: the user's stores (environment, user secrets file)
//! beat the project's `.loom-secrets`, a `.loom-secrets` in the working directory is never read (and loom says so),
//! a FIFO in place of a secrets file is refused at once, and a missing secret's error points at the user's file,
//! never into the project. The unconfined bash grant `"*"` prints what the shared secret resolved to.

use std::path::Path;

use loom_tests::{Run, Scratch};

use super::{results, updates};

const PROJECT: &str = "gh-from-project-file-1";
const USER: &str = "gh-from-user-file-2";
const ENV: &str = "gh-from-environment-3";
const CWD: &str = "gh-from-cwd-file-4";

/// An agent sharing `GH_TOKEN` with an unconfined bash that prints it.
fn manifest(s: &Scratch, at: &str) {
    s.write(
        at,
        r#"[agent]
name = "secrets-chain-e2e"
secrets = ["GH_TOKEN"]

[harness]
provider = "test"
script = [[{ call = { tool = "bash", input = { command = "echo token=$GH_TOKEN" } } }, { say = "done" }]]

[session]
provider = "in-memory"

[capabilities]
bash = "*"

[tools]
bash = "builtin"
"#,
    );
}

/// `loom prompt <manifest> go` from `cwd` (inside the scratch directory) with the user's config home in the scratch
/// directory and `env`.
fn prompt(s: &Scratch, cwd: &str, manifest: &str, env: &[(&str, &str)]) -> Run {
    let mut cmd = std::process::Command::new(loom_tests::loom_bin());
    let dir = s.path().join(cwd);
    cmd.args(["prompt", manifest, "go", "--format", "jsonl"])
        .current_dir(&dir)
        .env_clear();
    for key in ["PATH", "HOME", "TMPDIR"] {
        if let Ok(v) = std::env::var(key) {
            cmd.env(key, v);
        }
    }
    cmd.env("LOOM_DATA_HOME", s.path().join(".loom-data"))
        .env("XDG_CONFIG_HOME", s.path().join("config"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    Run {
        args: vec![manifest.to_string()],
        cwd: dir,
        output: cmd.output().unwrap(),
    }
}

/// The token the command printed.
fn token(run: &Run) -> String {
    run.expect_code(0);
    let r = results(&updates(run));
    assert_eq!(r.len(), 1, "{r:#?}");
    assert_eq!(r[0].0, "completed", "{r:#?}");
    r[0].1
        .trim()
        .strip_prefix("token=")
        .unwrap_or_else(|| panic!("{r:#?}"))
        .to_string()
}

fn user_file(s: &Scratch, text: &str) {
    s.write("config/loom/secrets.toml", text);
}

#[test]
fn the_environment_beats_the_project_file_which_is_used_when_nothing_else_has_the_secret() {
    let s = Scratch::new();
    manifest(&s, "agent.toml");
    s.write(".loom-secrets", &format!("GH_TOKEN={PROJECT}\n"));
    // the control: alone, the project file is read
    assert_eq!(token(&prompt(&s, "", "agent.toml", &[])), PROJECT);
    // the attack: a repository's file must not replace the user's exported value
    assert_eq!(
        token(&prompt(&s, "", "agent.toml", &[("GH_TOKEN", ENV)])),
        ENV
    );
    assert_eq!(
        token(&prompt(&s, "", "agent.toml", &[("LOOM_GH_TOKEN", ENV)])),
        ENV
    );
}

#[test]
fn the_user_secrets_file_beats_the_project_file() {
    let s = Scratch::new();
    manifest(&s, "agent.toml");
    s.write(".loom-secrets", &format!("GH_TOKEN={PROJECT}\n"));
    user_file(&s, &format!("GH_TOKEN = \"{USER}\"\n"));
    assert_eq!(token(&prompt(&s, "", "agent.toml", &[])), USER);
    // and the environment beats the user file
    assert_eq!(
        token(&prompt(&s, "", "agent.toml", &[("GH_TOKEN", ENV)])),
        ENV
    );
}

#[test]
fn a_secrets_file_in_the_working_directory_is_ignored_with_a_notice() {
    let s = Scratch::new();
    manifest(&s, "agent/agent.toml");
    s.write("agent/.loom-secrets", &format!("GH_TOKEN={PROJECT}\n"));
    std::fs::create_dir_all(s.path().join("work")).unwrap();
    s.write("work/.loom-secrets", &format!("GH_TOKEN={CWD}\n"));
    let run = prompt(&s, "work", "../agent/agent.toml", &[]);
    assert_eq!(token(&run), PROJECT);
    let ignored = s.path().join("work/.loom-secrets");
    let stderr = run.stderr();
    assert_eq!(
        stderr.matches("was ignored").count(),
        1,
        "one notice naming the file: {stderr}"
    );
    assert!(
        stderr.contains(&format!("{} was ignored", real(&ignored))),
        "{stderr}"
    );
    assert!(!stderr.contains(CWD) && !run.stdout().contains(CWD));

    // with nothing else holding the secret, boot refuses: the error names the user's file, not the project's
    std::fs::remove_file(s.path().join("agent/.loom-secrets")).unwrap();
    let run = prompt(&s, "work", "../agent/agent.toml", &[]);
    assert_ne!(run.code(), 0, "{}", run.stderr());
    let err = run.stderr();
    let user = s.path().join("config/loom/secrets.toml");
    assert!(
        err.contains("GH_TOKEN")
            && err.contains(&user.display().to_string())
            && err.contains("GH_TOKEN = \"value\"")
            && err.contains("not read")
            && !err.contains("next to the manifest")
            && !err.contains(CWD),
        "{err}"
    );
}

/// The path as loom names it (the scratch directory may sit behind a symbolic link, e.g. /tmp).
fn real(p: &Path) -> String {
    let dir = std::fs::canonicalize(p.parent().unwrap()).unwrap();
    dir.join(p.file_name().unwrap()).display().to_string()
}

#[test]
fn a_fifo_as_the_project_secrets_file_fails_at_once_naming_it() {
    let s = Scratch::new();
    manifest(&s, "agent.toml");
    let fifo = s.path().join(".loom-secrets");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // should loom ever block opening the FIFO, this writer releases it (the test then fails on the assertions
    // instead of hanging); when loom never opens it, the writer is released by our own reader below
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || drop(std::fs::OpenOptions::new().write(true).open(fifo)))
    };
    let run = prompt(&s, "", "agent.toml", &[("GH_TOKEN", ENV)]);
    {
        use std::os::unix::fs::OpenOptionsExt;
        let _reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        writer.join().unwrap();
    }
    assert_ne!(run.code(), 0, "{}", run.stdout());
    let err = run.stderr();
    assert!(
        err.contains(".loom-secrets") && err.contains("FIFO") && err.contains("regular file"),
        "{err}"
    );
}
