//! One module per subcommand.

pub mod audit;
pub mod doctor;
pub mod sandbox;
