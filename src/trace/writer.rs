//! Writes traces from a thread of its own, so the collector never waits on
//! a file: it hands over a built trace, or counts it skipped when the
//! writer is still busy with earlier ones. Each file is written beside its
//! name and renamed into place: a viewer never opens half a trace.

use std::fs;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::thread;

use anyhow::{Context, Result};

use crate::engine::Namer;
use crate::interval::Hiccup;
use crate::record::Event;
use crate::say::say;

use super::build::{Builder, Mark};
use super::model::Trace;

/// A trace to build: a CPU's events in `[from, to)` and its stalls.
pub struct Window {
    pub cpu: u32,
    pub from: u64,
    pub to: u64,
    pub method: crate::interval::Method,
    pub events: Vec<Event>,
    pub marks: Vec<Mark>,
    pub hiccup: Hiccup,
}

impl Window {
    pub fn build(&self, namer: &mut Namer) -> Trace {
        let mut b = Builder::new(self.from, self.to, namer);
        b.cpu(self.cpu, &self.events);
        b.stalls(self.cpu, self.method, &self.marks, &[&self.hiccup]);
        let mut trace = b.finish();
        trace.clocks = Some(super::model::clocks_now());
        trace
    }
}

/// Traces waiting for the writer at most.
const QUEUE: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Perfetto's protobuf (ui.perfetto.dev, trace_processor)
    Perfetto,
    /// Chrome's trace-event JSON (chrome://tracing; legacy in Perfetto)
    Json,
}

impl Format {
    pub fn extension(self) -> &'static str {
        match self {
            Format::Perfetto => "perfetto-trace",
            Format::Json => "json",
        }
    }

    /// The trace's bytes in this format.
    pub fn encode(self, trace: &Trace) -> Vec<u8> {
        match self {
            Format::Perfetto => super::perfetto::encode(trace),
            Format::Json => {
                let mut v = Vec::new();
                super::json::write(trace, &mut v).expect("serializing to memory does not fail");
                v
            }
        }
    }
}

/// `<UTC time>-cpu<N>-<gap>us.<ext>`: sorted by time in a listing; the
/// time to the µs, from the stall's CLOCK_MONOTONIC time.
pub fn file_name(cpu: u32, t0: u64, gap: u64, format: Format) -> String {
    let (mono, real) = (crate::clock::now_ns(), realtime_ns());
    let wall = real.saturating_sub(mono.saturating_sub(t0));
    format!("{}-cpu{cpu}-{}us.{}", utc(wall), gap / 1000, format.extension())
}

fn realtime_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// `YYYYMMDDTHHMMSS.uuuuuuZ` for ns since the epoch (UTC, proleptic
/// Gregorian; the civil-from-days arithmetic of Howard Hinnant's paper).
pub fn utc(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let us = (ns % 1_000_000_000) / 1000;
    format!("{y:04}{m:02}{d:02}T{:02}{:02}{:02}.{us:06}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// What a trace is built from, handed over as is: building it (names,
/// slices, encoding) is the writer thread's work, not the collector's.
pub enum Job {
    /// A stall's window: its CPU's events, the other stalls to draw, and a
    /// namer forked from the engine's.
    Window { window: Box<Window>, namer: crate::engine::Namer, name: String },
    /// A trace already built (tests).
    #[cfg(test)]
    Built { trace: Trace, name: String },
}

#[derive(Debug, Default, Clone)]
pub struct Written {
    pub written: u64,
    pub failed: u64,
    pub largest_bytes: u64,
    /// The first failure, for the summary.
    pub first_error: Option<String>,
}

pub struct Writer {
    tx: SyncSender<Job>,
    thread: thread::JoinHandle<Written>,
}

impl Writer {
    /// Creates `dir` if needed and checks that a file can be written there.
    /// `announce`: say a failure on stderr as it happens (not under the
    /// live screen).
    pub fn start(dir: &Path, format: Format, announce: bool) -> Result<Self> {
        crate::output::refuse_link(dir, "--trace-dir")?;
        let existed = dir.exists();
        fs::create_dir_all(dir).with_context(|| format!("--trace-dir: cannot create {}", dir.display()))?;
        // Again: a link planted between the check and the creation.
        crate::output::refuse_link(dir, "--trace-dir")?;
        if !existed {
            crate::output::give_dir_to_sudo_user(dir);
        }
        let probe = dir.join(".jitterwatch-write-test");
        crate::output::write_whole(&probe, b"").with_context(|| format!("--trace-dir: cannot write in {}", dir.display()))?;
        let _ = fs::remove_file(&probe);
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let dir = dir.to_path_buf();
        let thread = thread::Builder::new()
            .name("jw-traces".into())
            .spawn(move || write_all(&rx, &dir, format, announce))
            .context("cannot start the trace writer thread")?;
        Ok(Writer { tx, thread })
    }

    /// Hands a trace over; false if the writer is still busy (dropped).
    pub fn send(&self, job: Job) -> bool {
        match self.tx.try_send(job) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
        }
    }

    pub fn finish(self) -> Written {
        drop(self.tx);
        self.thread.join().unwrap_or_default()
    }
}

fn write_all(rx: &Receiver<Job>, dir: &Path, format: Format, announce: bool) -> Written {
    let mut w = Written::default();
    while let Ok(job) = rx.recv() {
        let (trace, name) = match job {
            Job::Window { window, mut namer, name } => (window.build(&mut namer), name),
            #[cfg(test)]
            Job::Built { trace, name } => (trace, name),
        };
        let bytes = format.encode(&trace);
        let path = dir.join(&name);
        match crate::output::write_whole(&path, &bytes) {
            Ok(()) => {
                w.written += 1;
                w.largest_bytes = w.largest_bytes.max(bytes.len() as u64);
            }
            Err(e) => {
                if w.failed == 0 {
                    let msg = format!("cannot write the trace {}: {e}", crate::sanitize::visible(&path.display().to_string()));
                    // Not over the live screen: the summary says it then.
                    if announce {
                        say!("{msg} (later failures are counted in the summary)");
                    }
                    w.first_error = Some(msg);
                }
                w.failed += 1;
            }
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_times_sort_as_they_read() {
        assert_eq!(utc(0), "19700101T000000.000000Z");
        // 2026-11-23 16:03:12.345678 UTC
        assert_eq!(utc(1_795_449_792_345_678_901), "20261123T160312.345678Z");
        assert_eq!(utc(951_782_400_000_000_000), "20000229T000000.000000Z", "a leap day");
    }

    /// A link planted where the directory would be (in /tmp, by another
    /// user) is refused with the CSV's words, and nothing is made through it.
    #[test]
    fn a_trace_dir_that_is_a_link_is_refused_like_the_csv() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("roots-own");
        std::fs::create_dir(&target).unwrap();
        let sym = d.path().join("traces");
        std::os::unix::fs::symlink(&target, &sym).unwrap();
        let e = Writer::start(&sym, Format::Json, false).err().expect("refused");
        assert_eq!(
            e.to_string(),
            format!("cannot write --trace-dir {}: it is a symbolic link (refused: write to the real path)", sym.display())
        );
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0, "nothing written through the link");
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink(d.path().join("not-yet"), &dangling).unwrap();
        assert!(Writer::start(&dangling, Format::Json, false).is_err());
        assert!(!d.path().join("not-yet").exists(), "no directory made through the link");
        let csv = crate::output::create(&sym, "the CSV").unwrap_err();
        assert_eq!(
            csv.to_string(),
            format!("cannot write the CSV {}: it is a symbolic link (refused: write to the real path)", sym.display())
        );
    }

    #[test]
    fn traces_are_written_whole_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let w = Writer::start(&dir.path().join("sub"), Format::Json, false).unwrap();
        assert!(w.send(Job::Built { trace: Trace::default(), name: "a.json".into() }));
        let done = w.finish();
        assert_eq!((done.written, done.failed), (1, 0));
        let text = fs::read_to_string(dir.path().join("sub/a.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(v["traceEvents"].is_array());
        assert!(!dir.path().join("sub/a.json.part").exists());
    }

    #[test]
    fn a_failed_write_is_counted_and_kept_for_the_summary() {
        let dir = tempfile::tempdir().unwrap();
        let w = Writer::start(dir.path(), Format::Json, false).unwrap();
        assert!(w.send(Job::Built { trace: Trace::default(), name: "gone/a.json".into() }));
        assert!(w.send(Job::Built { trace: Trace::default(), name: "gone/b.json".into() }));
        let done = w.finish();
        assert_eq!((done.written, done.failed), (0, 2));
        let e = done.first_error.unwrap();
        assert!(e.starts_with("cannot write the trace") && e.contains("gone/a.json"), "{e}");
    }
}
