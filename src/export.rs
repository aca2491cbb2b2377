//! The hiccups CSV (docs/ARCHITECTURE.md, Contracts): one row per hiccup,
//! header first. Names are escaped inside `causes`; the csv crate quotes
//! fields per RFC 4180. Rows collect in memory and reach the file once per
//! drain, in one write, so the file ends on a whole row whenever the
//! process is stopped, killed included (but for a kill inside that write).

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use crate::cause::{Cause, CauseId};
use crate::interval::Hiccup;

/// The nine columns of the contract, then those appended since: `source`
/// (probe, interrupted, preempted, wakeup) and `victim` (passive mode's
/// watched thread as `comm[tid]`, escaped as names are; empty for a probe).
/// Then `parts`: the wake-up probe's latency split as
/// `timer=NS;sched=NS;user=NS` (adding up to gap_ns; empty for other rows);
/// and `freq_khz`: the CPU's frequency changed inside the row, `FROM>TO`
/// (`?>TO` when it was not known before), empty without a change. Then
/// `origins`: who caused some of the causes, `kind:name=ORIGIN;...` with
/// ORIGIN `comm[pid] on cpu N` (a task elsewhere, or this CPU's), or
/// `(kind:name)` for this CPU's own interrupt-level code, then ` via
/// FUNCTION` for an IPI's call site; escaped as names are, empty when none
/// was seen. Then `stack` (`--stacks-above`): the kernel stack of the
/// row's largest cause, a task that left the CPU inside it, innermost
/// frame first, `function+0xoffset` joined by `;` (escaped as names are);
/// empty without one.
pub const HEADER: [&str; 15] = [
    "time_ns",
    "cpu",
    "gap_ns",
    "explained_ns",
    "unexplained_ns",
    "top_kind",
    "top_name",
    "top_ns",
    "causes",
    "source",
    "victim",
    "parts",
    "freq_khz",
    "origins",
    "stack",
];

/// A cause's name as it appears in the CSV: as every view shows it
/// (`Cause::push_name`: `\` doubled, control and format characters
/// written visibly, never raw), with `;` and `=` escaped as `\;` and `\=`
/// so that `causes` splits unambiguously.
fn push_name(cause: CauseId, scratch: &mut String, out: &mut String) {
    scratch.clear();
    cause.push_name(scratch);
    push_field_escaped(scratch, out);
}

/// `kind:name`, the name as the CSV's `causes` writes it (`;` and `=`
/// escaped too): what `--on-stall` gets as `JW_CAUSE`.
pub fn cause_label(cause: CauseId) -> String {
    let (mut scratch, mut out) = (String::new(), String::from(cause.kind().as_str()));
    out.push(':');
    push_name(cause, &mut scratch, &mut out);
    out
}

/// `comm[pid] on cpu N via FUNCTION`, as the `origins` column and the
/// views write an origin (escaped as names are, before the CSV's own).
pub fn push_origin(o: &crate::cause::Origin, out: &mut String) {
    match &o.sender {
        crate::cause::Sender::Task { comm, pid, cpu, .. } => {
            Cause::Task { comm: *comm, pid: Some(*pid) }.push_name(out);
            out.push_str(" on cpu ");
            out.push_str(itoa::Buffer::new().format(*cpu));
        }
        crate::cause::Sender::Local(c) => {
            out.push('(');
            out.push_str(c.kind().as_str());
            out.push(':');
            c.push_name(out);
            out.push(')');
        }
    }
    if let Some(via) = &o.via {
        out.push_str(" via ");
        out.push_str(&crate::sanitize::visible(via));
    }
}

/// `;` and `=` escaped, as inside `causes`.
fn push_field_escaped(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            ';' => out.push_str("\\;"),
            '=' => out.push_str("\\="),
            c => out.push(c),
        }
    }
}

pub struct CsvSink<W: Write> {
    w: csv::Writer<W>,
    /// Write the rows of a watched thread's own system calls' softirqs
    /// (`in-syscall`): off by default, they are its own work and can be
    /// most rows (a loopback server: 9 of 10).
    pub in_syscall: bool,
    origins: String,
    causes: String,
    top_name: String,
    victim: String,
    parts: String,
    freq: String,
    stack: String,
    scratch: String,
}

/// The file under the CSV writer: takes rows as they come, writes them
/// out only when flushed (the end of a drain), whole.
pub struct Rows {
    file: File,
    buf: Vec<u8>,
    /// Bytes written whole so far: a write that fails midway (a full disk)
    /// is cut back to here, so the file still ends on a whole row.
    written: u64,
    /// Named in its errors.
    path: std::path::PathBuf,
}

impl Write for Rows {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let r = self.file.write_all(&self.buf);
        match &r {
            Ok(()) => self.written += self.buf.len() as u64,
            Err(_) => {
                let _ = self.file.set_len(self.written);
            }
        }
        self.buf.clear();
        r.map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.path.display())))
    }
}

impl CsvSink<Rows> {
    pub fn create(path: &Path) -> io::Result<Self> {
        let file = crate::output::create(path, "the CSV")?;
        let mut sink = Self::new(Rows { file, buf: Vec::with_capacity(1 << 16), written: 0, path: path.to_path_buf() })?;
        // The header reaches the file now: a path that cannot take it fails
        // before anything runs.
        sink.flush()?;
        Ok(sink)
    }
}

impl<W: Write> CsvSink<W> {
    pub fn new(inner: W) -> io::Result<Self> {
        let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(inner);
        w.write_record(HEADER)?;
        Ok(Self {
            w,
            in_syscall: true,
            origins: String::new(),
            causes: String::new(),
            top_name: String::new(),
            victim: String::new(),
            parts: String::new(),
            freq: String::new(),
            stack: String::new(),
            scratch: String::new(),
        })
    }

    pub fn write(&mut self, h: &Hiccup) -> io::Result<()> {
        if !h.source.is_stall() && !self.in_syscall {
            return Ok(());
        }
        let mut itoa = itoa::Buffer::new();
        self.causes.clear();
        for (i, (cause, ns)) in h.all_causes().enumerate() {
            if i > 0 {
                self.causes.push(';');
            }
            self.causes.push_str(cause.kind().as_str());
            self.causes.push(':');
            push_name(cause, &mut self.scratch, &mut self.causes);
            self.causes.push('=');
            self.causes.push_str(itoa.format(ns));
        }
        let (top, top_ns) = h.all_causes().next().unwrap_or((CauseId::UNEXPLAINED, 0));
        self.top_name.clear();
        push_name(top, &mut self.scratch, &mut self.top_name);
        let mut nums = [itoa::Buffer::new(), itoa::Buffer::new(), itoa::Buffer::new(), itoa::Buffer::new(), itoa::Buffer::new()];
        let [a, b, c, d, e] = &mut nums;
        let mut top_buf = itoa::Buffer::new();
        self.victim.clear();
        if let Some(v) = &h.victim {
            v.push_name(&mut self.victim);
        }
        self.parts.clear();
        if let Some(p) = &h.parts {
            for (i, (name, ns)) in [("timer", p.timer_ns), ("sched", p.sched_ns), ("user", p.user_ns)].into_iter().enumerate() {
                if i > 0 {
                    self.parts.push(';');
                }
                self.parts.push_str(name);
                self.parts.push('=');
                self.parts.push_str(itoa::Buffer::new().format(ns));
            }
        }
        self.freq.clear();
        if let Some((from, to)) = h.freq {
            match from {
                Some(f) => self.freq.push_str(itoa::Buffer::new().format(f)),
                None => self.freq.push('?'),
            }
            self.freq.push('>');
            self.freq.push_str(itoa::Buffer::new().format(to));
        }
        self.origins.clear();
        for (i, (cause, o)) in h.origins.iter().enumerate() {
            if i > 0 {
                self.origins.push(';');
            }
            self.origins.push_str(cause.kind().as_str());
            self.origins.push(':');
            push_name(*cause, &mut self.scratch, &mut self.origins);
            self.origins.push('=');
            self.scratch.clear();
            push_origin(o, &mut self.scratch);
            push_field_escaped(&self.scratch, &mut self.origins);
        }
        self.stack.clear();
        if let Some(st) = &h.stack {
            for (i, f) in st.frames.iter().enumerate() {
                if i > 0 {
                    self.stack.push(';');
                }
                push_field_escaped(&crate::sanitize::visible(f), &mut self.stack);
            }
        }
        self.w.write_record([
            a.format(h.t0),
            b.format(h.cpu),
            c.format(h.gap),
            d.format(h.explained()),
            e.format(h.unexplained),
            top.kind().as_str(),
            self.top_name.as_str(),
            top_buf.format(top_ns),
            self.causes.as_str(),
            h.source.as_str(),
            self.victim.as_str(),
            self.parts.as_str(),
            self.freq.as_str(),
            self.origins.as_str(),
            self.stack.as_str(),
        ])?;
        Ok(())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    #[cfg(test)]
    pub fn into_inner(self) -> W {
        self.w.into_inner().map_err(|e| e.into_error()).expect("flushed")
    }
}

/// Reads a `causes` field back (for `compare`): each `kind:name=ns` with
/// the name unescaped of what only the field needed (`\;`, `\=`); the
/// other escapes stay, being how every view shows a name. An `Err` names
/// the entry that does not parse.
pub fn split_causes(field: &str) -> impl Iterator<Item = Result<(&str, String, u64), String>> + '_ {
    let mut rest = field;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        // The entry ends at the first `;` not escaped.
        let bytes = rest.as_bytes();
        let mut i = 0;
        let mut end = rest.len();
        while i < bytes.len() {
            match bytes[i] {
                b'\\' => i += 2,
                b';' => {
                    end = i;
                    break;
                }
                _ => i += 1,
            }
        }
        let entry = &rest[..end];
        rest = rest.get(end + 1..).unwrap_or("");
        Some(parse_entry(entry).ok_or_else(|| format!("`{}` is not kind:name=ns", crate::sanitize::visible(entry))))
    })
}

fn parse_entry(entry: &str) -> Option<(&str, String, u64)> {
    let (kind, rest) = entry.split_once(':')?;
    // The value follows the last `=`; a name's own `=` is escaped.
    let eq = rest.rfind('=')?;
    let (raw, ns) = (&rest[..eq], rest[eq + 1..].parse().ok()?);
    let mut name = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            name.push(c);
            continue;
        }
        match chars.next()? {
            e @ (';' | '=') => name.push(e),
            e => {
                name.push('\\');
                name.push(e);
            }
        }
    }
    Some((kind, name, ns))
}

#[cfg(test)]
mod tests;
