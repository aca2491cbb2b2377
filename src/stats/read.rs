//! What the outputs read of the aggregates (the snapshot, the summary,
//! replay), and what the sources and the collector set in them: the
//! fields stay private to stats/.

use super::{origins, Counters, CpuStats, Hiccup, Method, Stats, Threads};

impl Stats {
    pub fn method(&self) -> Method {
        self.method
    }

    /// CLOCK_MONOTONIC ns when the probes began measuring (or the reset).
    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }

    /// Measuring began at `at` (the source's first sample): elapsed time
    /// counts from it.
    pub fn started_at(&mut self, at: u64) {
        self.start_ns = at;
    }

    /// The latest time the aggregates cover.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Moves the aggregates' clock to `at` (tests: the collector moves it
    /// with each counters' reading).
    #[cfg(test)]
    pub fn set_now_ns(&mut self, at: u64) {
        self.now_ns = at;
    }

    /// Each watched CPU's aggregates, in the order watched.
    pub fn cpus(&self) -> &[CpuStats] {
        &self.cpus
    }

    /// The recent worst stalls, largest first.
    pub fn worst(&self) -> &[Hiccup] {
        &self.worst
    }

    /// What the probes, the kernel and jitterwatch count, since the reset.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Whether the user reset the aggregates during the run.
    pub fn was_reset(&self) -> bool {
        self.was_reset
    }

    /// Passive mode: per watched thread.
    pub fn threads(&self) -> &Threads {
        &self.threads
    }

    /// Passive mode: watched threads seen on CPUs not watched (tid, cpu),
    /// and those found at start not seen on a watched CPU since
    /// (`comm[tid]`, escaped), as the source last said.
    pub fn threads_away(&self) -> (&[(u32, u32)], &[String]) {
        (&self.threads_elsewhere, &self.threads_idle)
    }

    /// Passive mode: what the source knows of its threads' whereabouts.
    pub fn set_threads_away(&mut self, elsewhere: Vec<(u32, u32)>, idle: Vec<String>) {
        self.threads_elsewhere = elsewhere;
        self.threads_idle = idle;
    }

    /// Causes by who sent them, per CPU.
    pub fn by_sender(&self) -> &origins::BySender {
        &self.by_sender
    }
}
