//! The broker trusts nothing the shell can write: a rowed command is never looked up in a PATH directory inside a
//! writable root of the grant (a planted `gcalcli` there never runs with gcalcli's grant), and the caller's
//! environment reaches a brokered command only for the variables its row names exactly (an allowlist, so the
//! variables that redirect code, configuration, certificates or proxies do not cross under a pattern or `"*"`).

use crate::{need_sandbox, Bk};

/// Plants `work/bin/gcalcli` from inside the general row's shell, then calls `gcalcli agenda`.
const PLANT: &str = r#"mkdir -p bin && printf '#!/bin/sh\necho PWNED-BY-PLANTED-BINARY\n' > bin/gcalcli && chmod +x bin/gcalcli
gcalcli agenda; echo "rc=$?""#;

#[test]
fn a_binary_planted_in_a_writable_path_directory_never_runs_with_the_rows_grant() {
    need_sandbox!();
    let b = Bk::new();
    let grant = b.grant("");
    let planted_first = format!("{}/bin:{}", b.work.display(), b.host_path());
    // loom's PATH has the project's bin/ first (direnv, mise, ~/.local/bin under a writable home): the installed
    // gcalcli outside every writable root runs, never the planted one
    let r = b.bash_env(&grant, &[], PLANT, &[("PATH", &planted_first)]);
    r.expect_code(0)
        .stdout_lacks("PWNED")
        .stdout_has("gcalcli argv: agenda\nrc=0\n");
    // only the planted copy on loom's PATH: refused (126), naming the file, the root and the fix
    let only_planted = format!("{}/bin:/usr/bin:/bin", b.work.display());
    let r = b.bash_env(&grant, &[], PLANT, &[("PATH", &only_planted)]);
    r.expect_code(0)
        .stdout_lacks("PWNED")
        .stdout_has("rc=126\n")
        .stderr_has(&format!("{}/bin/gcalcli", b.work.display()))
        .stderr_has("which this grant can write")
        .stderr_has("Install `gcalcli` in a directory no row of the grant can write");
    // the brokered command's own PATH leaves the writable directory out as well
    let r = b.bash_env(
        &grant,
        &[],
        "gcalcli env | grep '^PATH='",
        &[("PATH", &planted_first)],
    );
    r.expect_code(0)
        .stdout_has(&format!("PATH={}\n", b.host_path()));
}

/// Variables that load code or configuration, or redirect trust or traffic, in common programs.
const REDIRECTS: [(&str, &str); 12] = [
    ("GIT_DIR", "/tmp/evil-repo"),
    ("GIT_PROXY_COMMAND", "/tmp/evil-proxy"),
    ("GIT_EXTERNAL_DIFF", "/tmp/evil-diff"),
    ("OPENSSL_CONF", "/tmp/evil.cnf"),
    ("JDK_JAVA_OPTIONS", "-javaagent:/tmp/evil.jar"),
    ("KUBECONFIG", "/tmp/evil-kubeconfig"),
    ("npm_config_userconfig", "/tmp/evil-npmrc"),
    ("SSL_CERT_FILE", "/tmp/evil-ca.pem"),
    ("CURL_CA_BUNDLE", "/tmp/evil-ca.pem"),
    ("https_proxy", "http://evil.invalid:8080"),
    ("HTTPS_PROXY", "http://evil.invalid:8080"),
    ("GH_CONFIG_DIR", "/tmp/evil-gh"),
];

fn exports() -> String {
    REDIRECTS
        .iter()
        .map(|(k, v)| format!("export {k}='{v}'\n"))
        .collect::<String>()
}

#[test]
fn the_callers_variables_cross_only_when_the_row_names_them_exactly() {
    need_sandbox!();
    let b = Bk::new();
    // patterns covering every redirect, plus one exact name (the control)
    let grant = b.grant(
        r#", env = ["GCAL_NAMED", "GIT_*", "OPENSSL_*", "JDK_*", "KUBE*", "npm_*", "SSL_*", "CURL_*", "https*", "HTTPS*", "GH_*"]"#,
    );
    let script = format!(
        "{}export GCAL_NAMED=arrived GCAL_OTHER=x\ngcalcli env",
        exports()
    );
    let r = b.bash(&grant, &[], &script);
    let out = r.stdout();
    r.expect_code(0).stdout_has("GCAL_NAMED=arrived\n");
    for (k, _) in REDIRECTS.iter().chain(&[("GCAL_OTHER", "")]) {
        assert!(
            !out.lines().any(|l| l.starts_with(&format!("{k}="))),
            "{k} crossed from the caller under a pattern:\n{out}"
        );
    }
    // env = "*": loom's own variables reach the command (control), the caller's do not
    let r = b.bash_env(
        &b.grant(r#", env = "*""#),
        &[],
        &format!("{}export CALLER_ONLY=x\ngcalcli env", exports()),
        &[("HOST_SIDE", "from-loom")],
    );
    let out = r.stdout();
    r.expect_code(0).stdout_has("HOST_SIDE=from-loom\n");
    for (k, _) in REDIRECTS.iter().chain(&[("CALLER_ONLY", "")]) {
        assert!(
            !out.lines().any(|l| l.starts_with(&format!("{k}="))),
            "{k} crossed from the caller under env = \"*\":\n{out}"
        );
    }
}
