//! A tiny library with one bug, for the coding-agent tour.

/// The sum of `a` and `b`.
pub fn add(a: i64, b: i64) -> i64 {
    a - b
}
