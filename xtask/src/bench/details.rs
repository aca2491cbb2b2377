//! BENCHMARKS.md's sections 1 to 8: how each figure of one run was
//! measured, with every number of that run. They need the run's full
//! results, which the history does not keep; the summary and the history
//! tables come from the history (report.rs). Each section is drawn by the
//! module named for it: those of this directory, and for 4b, 4c, 7 and 8
//! the modules that measure them.

mod bpf_run_time;
mod machine_cost;
mod memory;
pub mod per_interruption;
mod probe_floor;
mod ring_capacity;
mod startup;

use super::figures::Figures;
use super::results::{Machine, Results};

/// The heading the details start with.
pub const START: &str = "## 1. Probe floor";

/// Sections 1 to 8 of the run `r` on `mc`, whose figures are `fig`.
pub fn markdown(mc: &Machine, r: &Results, fig: &Figures) -> String {
    let (w, h) = (mc.watched, mc.house);
    let mut o = String::new();
    probe_floor::section(&mut o, &r.floor, w);
    machine_cost::section(&mut o, r, fig, w, h);
    bpf_run_time::section(&mut o, &r.bpf, w, h);
    per_interruption::section(&mut o, r.per_interruption.as_ref(), w, h);
    ring_capacity::section(&mut o, &r.cap, w, h);
    super::recorder::section(&mut o, &r.recorder, w);
    match &r.mix {
        Some(m) => o += &super::passive::markdown(m, w),
        None => o += "\n### 4c. The collector at a real app's mix (passive mode)\n\nNot measured.\n",
    }
    o += &super::screen::markdown(r.screen.as_ref(), w, h);
    memory::section(&mut o, &r.mem, w);
    startup::section(&mut o, &r.floor.startup, w);
    o += &super::replay::markdown(&r.replay, h);
    o += &super::explain_scale::markdown(r.explain.as_ref());
    o += &super::wakeup::markdown(&r.wakeup, r.observer.as_ref(), w, mc.quick);
    o
}
