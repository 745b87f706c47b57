//! The grant lattice: grant values and rows, paths, each tool's algebra (containment and merge), and the boot
//! property check that every algebra in use is a join-semilattice.

pub(crate) mod algebra;
pub(crate) mod grant;
pub(crate) mod laws;
pub(crate) mod path;
pub(crate) mod rng;
pub(crate) mod row_map;
pub(crate) mod value;
