//! Traces a viewer opens (Perfetto, chrome://tracing): the flight recorder
//! that writes one around each large stall (`--trace-dir`), the whole run
//! as one trace (`--record`), and `events --format perfetto`. The model
//! (model.rs) is built from events (build.rs) and written per format
//! (perfetto.rs, json.rs) in one order (order.rs).

mod build;
mod json;
mod model;
mod order;
mod perfetto;
mod recorder;
mod ring;
mod stall;
mod whole;
mod writer;

#[cfg(test)]
mod tests;

pub use recorder::{FlightRecorder, Options, ABOVE_THRESHOLDS};
pub use whole::{Recorded, Whole, RECORD_CAP_BYTES};
pub use writer::Format;

/// What the traces came to, for the summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Totals {
    /// Where they went (the flight recorder's directory).
    pub dir: Option<String>,
    /// Stalls at or above --trace-above.
    pub triggered: u64,
    pub written: u64,
    /// Left out by --trace-max.
    pub skipped_rate: u64,
    /// Left out because the writer was still busy with earlier traces.
    pub skipped_busy: u64,
    /// Written, but their window began before what the memory cap kept.
    pub cut: u64,
    /// Writes that failed (the first one was reported as it happened).
    pub failed: u64,
    /// Events evicted by the memory cap.
    pub evicted: u64,
    /// The most memory one CPU's events took, and the cap, in bytes.
    pub peak_bytes: u64,
    pub cap_bytes: u64,
    pub largest_bytes: u64,
    /// The first write that failed, and why.
    pub first_error: Option<String>,
}

/// The memory cap per CPU, in MiB, as the start line says it.
pub fn cap_mib() -> f64 {
    (recorder::cap_events() * std::mem::size_of::<crate::record::Event>()) as f64 / (1 << 20) as f64
}
