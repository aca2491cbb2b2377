//! Section 6: from exec to main(), the first probe sample and the first
//! kernel event.

use std::fmt::Write;

use crate::bench::measure::Startup;

/// Section 6, from figure 1's runs on the watched CPU `w`.
pub fn section(o: &mut String, s: &Startup, w: usize) {
    let _ = writeln!(o, "\n## 6. Start-up\n");
    let _ = writeln!(
        o,
        "The bench reads CLOCK_MONOTONIC just before spawning `jitterwatch --cpus {w}` (the runs of figure 1, {} of them) \
         and subtracts it from the summary's `overhead.main_start_ns`, `first_sample_ns` (the probe's first clock read) \
         and `first_event_ns` (the timestamp of the first kernel event drained).\n",
        s.to_first_sample.n
    );
    let _ = writeln!(o, "| from exec to | ms |\n|---|---|");
    let _ = writeln!(o, "| main() | {} |", s.to_main.show(1));
    let _ = writeln!(o, "| first probe sample | {} |", s.to_first_sample.show(1));
    let _ = writeln!(o, "| first kernel event | {} |", s.to_first_event.show(1));
}
