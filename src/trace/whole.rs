//! The whole run as one trace (`--record FILE`, and `events --format
//! perfetto`): every event of the watched CPUs and every stall with its
//! causes, kept in memory up to a cap and written at the end. Meant for
//! short runs: past the cap the recording stops, and the trace and the
//! summary say where it was cut.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::engine::Namer;
use crate::interval::Hiccup;
use crate::record::Event;

use super::build::Builder;
use super::writer::Format;

/// The events a recording keeps at most, in bytes.
pub const RECORD_CAP_BYTES: usize = 256 << 20;
/// Stalls a recording keeps with their causes at most.
const HICCUPS_KEPT: usize = 1 << 20;

pub struct Whole {
    /// As errors name it.
    what: &'static str,
    path: PathBuf,
    format: Format,
    method: crate::interval::Method,
    cpus: Vec<u32>,
    slots: crate::slots::CpuSlots,
    start: u64,
    events: Vec<Event>,
    cap: usize,
    hiccups: Vec<Hiccup>,
    /// When the cap was reached: the trace ends there.
    pub cut_at: Option<u64>,
}

/// What a recording came to.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Recorded {
    pub path: String,
    pub events: u64,
    pub stalls: u64,
    pub bytes: u64,
    /// CLOCK_MONOTONIC ns where the cap cut it, if it did.
    pub cut_at: Option<u64>,
}

impl Whole {
    /// Checks now that `path` can be written (the run would be lost
    /// otherwise), recording from `start`. `what` names it in errors as
    /// the user asked for it (`--record's trace`, `the events trace`).
    pub fn new(
        path: &Path,
        what: &'static str,
        format: Format,
        cpus: &[usize],
        method: crate::interval::Method,
        start: u64,
    ) -> Result<Self> {
        // Refuses a link or another file's hard link there, as the CSV does.
        crate::output::create(path, what).map_err(anyhow::Error::from)?;
        Ok(Whole {
            what,
            path: path.to_path_buf(),
            format,
            method,
            cpus: cpus.iter().map(|&c| c as u32).collect(),
            slots: crate::slots::CpuSlots::new(cpus),
            start,
            events: Vec::new(),
            cap: super::ring::events_within(RECORD_CAP_BYTES),
            hiccups: Vec::new(),
            cut_at: None,
        })
    }

    /// The recording begins here (the collector's attach time).
    pub fn start_at(&mut self, t: u64) {
        self.start = t;
    }

    /// A smaller cap, for the tests of the cut.
    #[cfg(test)]
    pub fn with_cap(mut self, events: usize) -> Self {
        self.cap = events;
        self
    }

    pub fn on_event(&mut self, ev: &Event) {
        if self.cut_at.is_some() || self.slots.get(ev.cpu).is_none() {
            return;
        }
        if self.events.len() == self.cap {
            self.cut_at = Some(ev.ts);
            return;
        }
        self.events.push(*ev);
    }

    pub fn on_hiccup(&mut self, h: &Hiccup) {
        if self.hiccups.len() < HICCUPS_KEPT && self.cut_at.is_none_or(|c| h.t0 + h.gap <= c) {
            self.hiccups.push(h.clone());
        }
    }

    /// Builds the trace of `[start, end)` (or to the cut) and writes it.
    pub fn finish(mut self, end: u64, namer: &mut Namer) -> Result<Recorded> {
        let to = self.cut_at.unwrap_or(end).max(self.start + 1);
        self.events.sort_by_key(|e| (e.cpu, e.ts));
        let mut b = Builder::new(self.start, to, namer);
        for &cpu in &self.cpus {
            let from = self.events.partition_point(|e| e.cpu < cpu);
            let n = self.events[from..].partition_point(|e| e.cpu == cpu);
            b.cpu(cpu, &self.events[from..from + n]);
            let details: Vec<&Hiccup> = self.hiccups.iter().filter(|h| h.cpu == cpu).collect();
            if !details.is_empty() {
                b.stalls(cpu, self.method, &[], &details);
            }
        }
        let mut trace = b.finish();
        trace.clocks = Some(super::model::clocks_now());
        let bytes = self.format.encode(&trace);
        crate::output::write_whole(&self.path, &bytes).with_context(|| format!("cannot write {} {}", self.what, self.path.display()))?;
        Ok(Recorded {
            path: self.path.display().to_string(),
            events: self.events.len() as u64,
            stalls: self.hiccups.len() as u64,
            bytes: bytes.len() as u64,
            cut_at: self.cut_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::tests::{namer, read, stall, stream, CPU};

    #[test]
    fn the_whole_run_in_one_trace_cut_at_its_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.perfetto-trace");
        let mut w = Whole::new(&path, "--record's trace", Format::Perfetto, &[CPU as usize], crate::interval::Method::Spin, 0).unwrap();
        for e in stream() {
            w.on_event(&e);
        }
        w.on_hiccup(&stall());
        let r = w.finish(3_000_000, &mut namer()).unwrap();
        assert_eq!((r.events, r.stalls, r.cut_at), (stream().len() as u64, 1, None));
        let (slices, _, _) = read(&std::fs::read(&path).unwrap());
        assert!(slices.iter().any(|s| s.name == "stall 2.0ms") && slices.iter().any(|s| s.name == "hog[4242]"));

        let mut w =
            Whole::new(&path, "--record's trace", Format::Json, &[CPU as usize], crate::interval::Method::Spin, 0).unwrap().with_cap(6);
        for e in stream() {
            w.on_event(&e);
        }
        let r = w.finish(3_000_000, &mut namer()).unwrap();
        let cut = stream()[6].ts;
        assert_eq!((r.events, r.cut_at), (6, Some(cut)));
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(v["otherData"]["to_ns"], cut, "the trace ends where it was cut");
        assert!(Whole::new(&dir.path().join("no/such/dir/x"), "--record's trace", Format::Json, &[1], crate::interval::Method::Spin, 0)
            .is_err());
    }
}
