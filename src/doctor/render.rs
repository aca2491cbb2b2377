//! Plain-text rendering (no colour, so NO_COLOR holds trivially). Findings
//! are built from escaped parts; every line still goes through
//! `sanitize::guard`, so nothing raw reaches a terminal even if a check
//! forgot, without escaping the escapes twice.

use std::io::{self, Write};

use super::{Report, Status};
use crate::cpulist::Display;
use crate::sanitize::guard;

fn tag(s: Status) -> &'static str {
    match s {
        Status::Ok => "[ OK ]",
        Status::Warn => "[WARN]",
        Status::Info => "[INFO]",
    }
}

pub(crate) fn text(r: &Report, out: &mut dyn Write) -> io::Result<()> {
    let word = if r.cpus.len() == 1 { "CPU" } else { "CPUs" };
    writeln!(out, "jitterwatch doctor: isolation audit of {word} {}", Display(&r.cpus))?;
    let mut groups: Vec<&str> = Vec::new();
    for f in &r.findings {
        if !groups.contains(&f.check.as_str()) {
            groups.push(&f.check);
        }
    }
    for g in groups {
        writeln!(out)?;
        writeln!(out, "{}", guard(g))?;
        let mut last_why = "";
        for f in r.findings.iter().filter(|f| f.check == g) {
            writeln!(out, "  {} {}", tag(f.status), guard(&f.title))?;
            // Per-IRQ and per-workqueue findings share their why: say it once.
            if !f.why.is_empty() && f.why != last_why {
                writeln!(out, "         why: {}", guard(&f.why))?;
            }
            last_why = &f.why;
            for e in &f.evidence {
                writeln!(out, "         evidence: {}", guard(e))?;
            }
            if let Some(fix) = &f.fix {
                writeln!(out, "         fix: {}", guard(fix))?;
            }
        }
    }
    if !r.unreadable.is_empty() {
        writeln!(out)?;
        writeln!(out, "could not read ({}; findings that depend on them are missing):", r.unreadable.len())?;
        for u in &r.unreadable {
            writeln!(out, "  {}", guard(u))?;
        }
    }
    writeln!(out)?;
    writeln!(out, "{} WARN, {} INFO, {} OK", r.count(Status::Warn), r.count(Status::Info), r.count(Status::Ok))
}
