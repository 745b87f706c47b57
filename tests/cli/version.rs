use loom_tests::Scratch;

#[test]
fn version_prints_the_package_version() {
    Scratch::new()
        .loom(&["version"])
        .expect_code(0)
        .stdout_has(env!("CARGO_PKG_VERSION"));
}

#[test]
fn an_unknown_flag_is_a_usage_error() {
    Scratch::new()
        .loom(&["audit", "--no-such-flag"])
        .expect_code(2);
}
