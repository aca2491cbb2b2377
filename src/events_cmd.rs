//! `jitterwatch events`: attach, drain on a short period, print one line
//! per event (event_lines.rs), or keep them and write them as one trace
//! (`--format perfetto FILE` or `--format json FILE`). A closed pipe
//! (`| head`) ends it through the one BrokenPipe path, at the end of
//! `jitterwatch::main` in lib.rs.

use crate::say::say;
use std::cell::RefCell;
use std::io::{BufWriter, Write};
use std::mem::MaybeUninit;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use std::path::Path;

use crate::bpf::{Programs, Tracer};
use crate::cli::EventsFormat;
use crate::clock::now_ns;
use crate::event_lines::Printer;
use crate::record::{in_time_order, Decoder};
use crate::trace::{Format, Whole};
use crate::{collector, lifecycle, startup};

pub fn run(cpus: Option<&str>, duration: Option<Duration>, format: EventsFormat, file: Option<&Path>) -> Result<i32> {
    let trace_format = match (format, file) {
        (EventsFormat::Text, None) => None,
        (EventsFormat::Text, Some(_)) => anyhow::bail!("a FILE is for --format perfetto or json: text goes to stdout"),
        (_, None) => anyhow::bail!("--format perfetto and json write a trace file: give its path after the options"),
        (EventsFormat::Perfetto, Some(_)) => Some(Format::Perfetto),
        (EventsFormat::Json, Some(_)) => Some(Format::Json),
    };
    let prep = startup::prepare(cpus, false, crate::caps::Wants::default())?;
    // Checked before attaching: a file that cannot be written fails first.
    // (No stall is shown: the method only names a stall track, never drawn.)
    let whole = match (trace_format, file) {
        (Some(f), Some(path)) => {
            Some(RefCell::new(Whole::new(path, "the events trace", f, &prep.cpus, crate::interval::Method::Spin, now_ns())?))
        }
        _ => None,
    };
    let mut storage = MaybeUninit::uninit();
    // Every sending onto the CPUs and every idle transition, and nothing
    // passive mode alone needs.
    let programs = Programs { origins: true, wake_origins: true, every_idle: true, ..Programs::default() };
    let tracer = Tracer::attach(&mut storage, &prep.cpus, programs)?;
    startup::say_missing(&tracer.missing);
    let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut printer = Printer::new(prep.namer);
    let mut decoder = Decoder::default();
    // The events read, printed in time order once 1 ms old: the rings are
    // read before the regions, and a record written while a CPU's batch
    // was open (a wake-up inside a tick) comes before the batch's earlier
    // events, in the same poll or the next (record/order.rs). Reused:
    // nothing allocated per poll once warm.
    let pending = RefCell::new(Vec::with_capacity(1 << 12));
    let handle = |data: &[u8]| {
        // A record that does not decode is skipped.
        let _ = decoder.decode(data, &mut pending.borrow_mut());
    };
    let handle = RefCell::new(handle);
    let rb = tracer.ring_buffer(|data| {
        (handle.borrow_mut())(data);
        0
    })?;
    let mut regions = tracer.regions()?;
    let started = Instant::now();
    let (mut from_regions, mut count) = (0, 0u64);
    let mut last = false;
    while !last {
        last = lifecycle::stop_requested() || duration.is_some_and(|d| started.elapsed() >= d);
        if last {
            // What was stamped before the stop still gets printed.
            tracer.unwatch()?;
        }
        // Bounded, but for the last read: a storm could produce faster than
        // lines can be printed.
        let max = if last { usize::MAX } else { 1 << 14 };
        let r = if last { rb.consume().map(|()| 0).map_err(|e| std::io::Error::other(e.to_string())) } else { Ok(rb.consume_raw_n(max)) };
        if let Some(regions) = &mut regions {
            from_regions += regions.read(max, |data| (handle.borrow_mut())(data));
        }
        let r = r.context("reading the ring buffer")?;
        if r < 0 {
            return Err(std::io::Error::from_raw_os_error(-r)).context("reading the ring buffer");
        }
        let mut events = pending.borrow_mut();
        in_time_order(&mut events);
        // Events of the last millisecond wait for the next poll: a CPU's
        // batch still open now holds events earlier than some just read.
        let cutoff = if last { u64::MAX } else { now_ns().saturating_sub(collector::MARGIN_NS) };
        let ready = events.partition_point(|e| e.ts <= cutoff);
        count += ready as u64;
        for ev in events.drain(..ready) {
            match &whole {
                Some(w) => w.borrow_mut().on_event(&ev),
                None => printer.print(&ev, &mut out).context("writing events")?,
            }
        }
        drop(events);
        out.flush().context("writing events")?;
        if !last {
            thread::sleep(collector::POLL);
        }
    }
    let drops: u64 = tracer.drops()?.iter().sum::<u64>() + regions.as_ref().map_or(0, |r| r.refused().map(|(_, n)| n).sum());
    drop(rb);
    if let Some(w) = whole {
        let r = w.into_inner().finish(now_ns(), &mut printer.into_namer())?;
        say!(
            "{} events written to {} ({}){}",
            r.events,
            crate::sanitize::visible(&r.path),
            crate::units::bytes(r.bytes),
            match r.cut_at {
                Some(_) => format!("; cut at its cap ({} MiB of events)", crate::trace::RECORD_CAP_BYTES >> 20),
                None => String::new(),
            }
        );
    }
    // Where the records came from, so a test sees the regions in use (x86).
    let via = if regions.is_some() { format!("; {from_regions} records through the CPUs' own regions") } else { String::new() };
    say!(
        "{} events from CPU {} in {:.1}s, {drops} dropped (ring buffer full){via}",
        count,
        crate::cpulist::Display(&prep.cpus),
        started.elapsed().as_secs_f64()
    );
    Ok(0)
}
