//! `loom-engine`: the local model engine process that the `local` harness starts (see the crate's documentation).
//! `loom-engine --check-confinement FILE` confines itself to reading FILE as it does before loading a model, then
//! tries what it must and must not be able to do, one line each; it exits 0 when every probe came out as required.
#![forbid(unsafe_code)]

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let code = match args.as_slice() {
        [] => loom_engine::serve(std::io::stdin().lock(), std::io::stdout()),
        [flag, file] if flag == "--check-confinement" => check(std::path::Path::new(file)),
        _ => {
            eprintln!(
                "usage: loom-engine (loom starts it and speaks its protocol on stdin and stdout)\n       \
                 loom-engine --check-confinement FILE"
            );
            2
        }
    };
    std::process::exit(code);
}

/// `--check-confinement FILE`.
fn check(file: &std::path::Path) -> i32 {
    // resolved first, as the engine resolves its model's path
    let file = match std::fs::canonicalize(file) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("loom-engine: cannot resolve {}: {e}", file.display());
            return 2;
        }
    };
    match loom_sandbox::check_engine_confinement(&file) {
        Ok((confined, probes)) => {
            println!("confined: {confined}");
            for p in &probes {
                println!("{p}");
            }
            i32::from(!probes.iter().all(|p| p.as_required()))
        }
        Err(e) => {
            eprintln!("loom-engine: cannot confine itself: {e}");
            1
        }
    }
}
