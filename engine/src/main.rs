//! `loom-engine`: the local model engine process that the `local` harness starts (see the crate's documentation).
#![forbid(unsafe_code)]

fn main() {
    std::process::exit(loom_engine::serve(
        std::io::stdin().lock(),
        std::io::stdout(),
    ));
}
