//! What a run came to besides its aggregates: the stall that stopped it
//! (`--stop-above`), the traces the flight recorder wrote, the whole-run
//! recording. The sinks that make them fill them in; the summary and the
//! exit status read them. The aggregates (`stats`) keep only counts.

use crate::trace::{Recorded, Totals};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The stall that stopped the run (--stop-above).
    pub stopped_on: Option<StopStall>,
    /// The flight recorder's traces, at the end.
    pub traces: Option<Totals>,
    /// The whole-run recording, at the end.
    pub recorded: Option<Recorded>,
    /// Outputs that failed (a full disk, EIO), each said once as it failed
    /// and dropped: the run ended there, and its exit status says so.
    pub failed: Vec<String>,
}

/// A stall at or over `--stop-above`, which ends the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct StopStall {
    pub cpu: u32,
    pub time_ns: u64,
    pub gap_ns: u64,
    pub limit_ns: u64,
}
