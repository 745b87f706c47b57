//! A bash row the OS sandbox would refuse (here a per-host `network` list, which no sandbox can enforce) is an error
//! in `loom audit` and at boot, naming the file, the key path and the fix — never rendered as "no network" and
//! accepted, only for every call to be refused later. Decided once in the kernel (`sandbox_row_refusal`), which the
//! sandbox refuses with too.

use loom_tests::Scratch;

fn manifest(bash_grant: &str) -> String {
    format!(
        "[agent]\nname = \"a\"\n[harness]\nprovider = \"test\"\necho = true\n[session]\nprovider = \"in-memory\"\n\
         [tools]\nbash = \"builtin\"\n[capabilities]\nbash = {bash_grant}\n"
    )
}

const REFUSED: &str =
    r#"[{ commands = "*", paths = ["./"] }, { commands = ["curl"], network = ["example.com"] }]"#;
const FINE: &str =
    r#"[{ commands = "*", paths = ["./"] }, { commands = ["curl"], network = "*" }]"#;

#[test]
fn a_row_the_sandbox_refuses_fails_audit_and_boot_with_the_key_path_and_fix() {
    let s = Scratch::new();
    let m = s.write("agent.toml", &manifest(REFUSED));
    let m = m.to_str().unwrap();
    s.loom(&["audit", m])
        .expect_code(1)
        .stdout_has(r#"bash: [capabilities].bash row 2: `network` is ["example.com"]"#)
        .stdout_has(r#"write network = "*" (on) or leave it out (off)"#)
        .stdout_has("network value refused by the sandbox")
        .stdout_lacks("own grant  curl — carried into pipelines by the broker; rw: none; ro: none; no network");
    s.loom(&["prompt", "agent.toml", "hi"])
        .expect_code(1)
        .stderr_has("agent.toml")
        .stderr_has(r#"tools.bash: [capabilities].bash row 2: `network` is ["example.com"]"#)
        .stderr_has(r#"network = "*""#);
    // inline capabilities name their own key path
    s.write(
        "agent.toml",
        "[agent]\nname = \"a\"\n[harness]\nprovider = \"test\"\necho = true\n[session]\nprovider = \"in-memory\"\n\
         [tools]\nsh = { tool = \"bash\", provider = \"builtin\", capabilities = { commands = \"*\", network = [\"example.com\"] } }\n",
    );
    s.loom(&["audit", m])
        .expect_code(1)
        .stdout_has(r#"sh: [tools].sh.capabilities row 1: `network` is ["example.com"]"#);
}

#[test]
fn a_row_the_sandbox_can_run_still_passes_audit_and_boot() {
    let s = Scratch::new();
    let m = s.write("agent.toml", &manifest(FINE));
    s.loom(&["audit", m.to_str().unwrap()])
        .expect_code(0)
        .stdout_has(
            "own grant  curl — carried into pipelines by the broker; rw: none; ro: none; network",
        );
    s.loom(&["prompt", "agent.toml", "hi"]).expect_code(0);
}
