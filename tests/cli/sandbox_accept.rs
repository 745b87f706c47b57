//! `[sandbox] accept`: a gap the sandbox may lack on a weak host is accepted only by a known name, and `loom audit`
//! and `loom doctor` show it.

use loom_tests::Scratch;

const MANIFEST: &str = r#"
[agent]
name = "accepts"

[harness]
provider = "test"
script = [[{ say = "ok" }]]

[tools]
bash = { capabilities = { commands = "*", paths = ["./"] } }
"#;

#[test]
fn an_accepted_gap_is_shown_by_audit_and_an_unknown_one_is_an_error() {
    let s = Scratch::new();
    s.write("agent.toml", MANIFEST);
    s.loom(&["audit", "agent.toml"])
        .expect_code(0)
        .stdout_lacks("accept = [");
    s.write(
        "accepts.toml",
        &format!("{MANIFEST}\n[sandbox]\naccept = [\"signals\"]\n"),
    );
    s.loom(&["audit", "accepts.toml"])
        .expect_code(0)
        .stdout_has("accept = [\"signals\"]")
        .stdout_has("signal any process of the same user");
    s.write(
        "bad.toml",
        &format!("{MANIFEST}\n[sandbox]\naccept = [\"sockets\"]\n"),
    );
    s.loom(&["audit", "bad.toml"])
        .expect_code(1)
        .stderr_has("sandbox.accept[1]")
        .stderr_has("unknown sandbox gap \"sockets\"")
        .stderr_has("signals");
}

#[test]
fn doctor_names_what_tier_b_withholds_and_what_it_costs() {
    let s = Scratch::new();
    let run = s.loom(&["doctor", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    assert_eq!(v["accept"], serde_json::json!(["signals"]));
    if v["landlock"]["ok"] != true {
        eprintln!("SKIPPED: no Landlock here, so no tier B to describe");
        return;
    }
    let rights = &v["tierB"]["rights"];
    assert_eq!(rights["metadata"]["by"], "seccomp", "{v}");
    assert!(
        rights["metadata"]["cost"]
            .as_str()
            .is_some_and(|c| c.contains("chmod +x")),
        "{v}"
    );
    assert_eq!(rights["pathname-sockets"]["by"], "seccomp", "{v}");
    // The table printed for SECURITY.md comes from the same data.
    s.loom(&["doctor", "--table"])
        .expect_code(0)
        .stdout_has("| Threat / grant kind | Tier A | Tier B | Tier C |")
        .stdout_has("seccomp denies `socket(AF_UNIX)`");
}
