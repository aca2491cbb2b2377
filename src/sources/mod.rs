//! The run's sources, each a [`crate::source::Source`]: the spin and
//! wake-up probes (`probes`), and passive mode (`passive`). `Mode` chooses
//! one and builds it; nothing past it names them.

pub mod passive;
pub mod probes;
