//! One check of a VM: what the guest script said of it (a `JWTEST check=`
//! line), or what the host judged from the guest's counts (ticks, rtla).
//! Its own module because both the serial log's reader (report.rs) and the
//! rtla comparison (rtla.rs) make checks, and the reader also holds the
//! comparison's counts: with `Check` in either, each would import the other.

#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// The table's column (report::CHECKS).
    pub name: String,
    pub pass: bool,
    /// Why it failed, or what it saw when it passed.
    pub detail: String,
}
