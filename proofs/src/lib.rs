//! # loom-proofs
//!
//! The lattice laws of every built-in algebra, checked exhaustively over bounded domains and by random testing
//! (proptest and quickcheck). The checks live in `tests/`; this library holds the bounded domains they enumerate.
