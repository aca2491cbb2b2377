//! The `events` subcommand: attach, drain on a short period, print.

use std::cell::RefCell;
use std::io::{BufWriter, Write};
use std::mem::MaybeUninit;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::bpf::Tracer;
use crate::eventlog::Printer;
use crate::events::Event;
use crate::kallsyms::Kallsyms;
use crate::{checks, collector, lifecycle, sys};

pub fn run(cpus: Option<&str>, duration: Option<Duration>) -> Result<i32> {
    let root = Path::new("/");
    let cpus = checks::watched_cpus(root, cpus)?;
    checks::privileges()?;
    checks::btf(root)?;
    // Keep this reader off the traced CPUs.
    sys::pin_to(&checks::housekeeping(&checks::online_cpus(root)?, &cpus))?;
    let syms = Kallsyms::load(Path::new("/proc/kallsyms")).unwrap_or_else(|_| Kallsyms::empty());
    let mut storage = MaybeUninit::uninit();
    let tracer = Tracer::attach(&mut storage, &cpus)?;
    if !tracer.missing.is_empty() {
        eprintln!("jitterwatch: not traced, this kernel lacks: {}", tracer.missing.join(", "));
    }
    let out = RefCell::new(BufWriter::with_capacity(1 << 16, std::io::stdout().lock()));
    let printer = RefCell::new(Printer::new(syms));
    let failed = RefCell::new(None);
    let count = std::cell::Cell::new(0u64);
    let rb = tracer.ring_buffer(|data| {
        let Ok(ev) = Event::decode(data) else { return 0 };
        count.set(count.get() + 1);
        if let Err(e) = printer.borrow_mut().print(&ev, &mut *out.borrow_mut()) {
            *failed.borrow_mut() = Some(e);
            return -1;
        }
        0
    })?;
    let started = Instant::now();
    let mut broken_pipe = false;
    while !(lifecycle::stop_requested() || duration.is_some_and(|d| started.elapsed() >= d)) {
        // Bounded: a storm could produce faster than lines can be printed.
        let r = rb.consume_raw_n(1 << 14);
        if let Some(e) = failed.borrow_mut().take() {
            // A closed pipe (`| head`) is a normal way to stop.
            broken_pipe = e.kind() == std::io::ErrorKind::BrokenPipe;
            if broken_pipe {
                break;
            }
            return Err(e).context("writing events");
        }
        if r < 0 {
            return Err(std::io::Error::from_raw_os_error(-r)).context("reading the ring buffer");
        }
        if let Err(e) = out.borrow_mut().flush() {
            broken_pipe = e.kind() == std::io::ErrorKind::BrokenPipe;
            if broken_pipe {
                break;
            }
            return Err(e).context("writing events");
        }
        thread::sleep(collector::POLL);
    }
    if !broken_pipe {
        tracer.unwatch()?;
        rb.consume().context("reading the ring buffer")?;
        out.borrow_mut().flush().ok();
    }
    let drops: u64 = tracer.drops()?.iter().sum();
    eprintln!(
        "jitterwatch: {} events from CPU {} in {:.1}s, {drops} dropped (ring buffer full)",
        count.get(),
        crate::cpulist::Display(&cpus),
        started.elapsed().as_secs_f64()
    );
    Ok(0)
}
