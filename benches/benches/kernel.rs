//! Criterion benches of the policy kernel. See `benches/README.md`.
fn main() {}
