//! The hiccups CSV (docs/ARCHITECTURE.md, Contracts): one row per hiccup,
//! header first. Names are escaped inside `causes`; the csv crate quotes
//! fields per RFC 4180. Rows collect in memory and reach the file once per
//! drain, in one write, so the file ends on a whole row whenever the
//! process is stopped, killed included (but for a kill inside that write).

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use crate::cause::Cause;
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
fn push_name(cause: &Cause, scratch: &mut String, out: &mut String) {
    scratch.clear();
    cause.push_name(scratch);
    push_field_escaped(scratch, out);
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
        if h.source == crate::interval::Source::InSyscall && !self.in_syscall {
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
        static NONE: Cause = Cause::Unexplained;
        let (top, top_ns) = h.all_causes().next().unwrap_or((&NONE, 0));
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
            push_name(cause, &mut self.scratch, &mut self.origins);
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
mod tests {
    use super::*;
    use crate::cause::{comm, Symbol};
    use crate::interval::hiccup;

    /// A comm with every byte a hostile process can set: CSV quoting, the
    /// cause separators, a backslash, an escape, a newline, a byte that is
    /// not UTF-8 and a bidi override (15 bytes and the NUL: the kernel's limit).
    fn hostile() -> Hiccup {
        let evil = Cause::Task { comm: comm(b"a,b\";d=e\\\x1b\n\xff\xe2\x80\xae"), pid: Some(7) };
        hiccup(1, 1_000, vec![(evil, 60), (Cause::Work(Symbol::from("vmstat_update")), 10)], 30)
    }

    #[test]
    fn rows_round_trip_with_hostile_names() {
        let mut sink = CsvSink::new(Vec::new()).unwrap();
        sink.write(&hostile()).unwrap();
        let bytes = sink.into_inner();
        assert!(!bytes.contains(&0x1b) && !bytes.contains(&0xff), "raw byte reached the file");
        assert!(!String::from_utf8(bytes.clone()).unwrap().contains('\u{202e}'), "raw bidi override reached the file");
        let mut r = csv::ReaderBuilder::new().has_headers(true).from_reader(&bytes[..]);
        assert_eq!(r.headers().unwrap().iter().collect::<Vec<_>>(), HEADER);
        let rows: Vec<csv::StringRecord> = r.records().map(|x| x.unwrap()).collect();
        assert_eq!(rows.len(), 1);
        let row = &rows[0];
        assert_eq!(&row[0], "1000");
        assert_eq!((&row[2], &row[3], &row[4]), ("100", "70", "30"));
        assert_eq!((&row[5], &row[7]), ("task", "60"));
        assert_eq!(&row[6], "a,b\"\\;d\\=e\\\\\\x1b\\x0a\\xff\\u{202e}[7]");
        let causes: Vec<(String, String, u64)> =
            split_causes(&row[8]).map(|c| c.map(|(k, n, ns)| (k.to_string(), n, ns))).collect::<Result<_, _>>().unwrap();
        assert_eq!(causes.len(), 3);
        // `top_name` is the first cause's name as written, `;` and `=` escaped.
        assert_eq!(causes[0].1, row[6].replace("\\;", ";").replace("\\=", "="));
        assert_eq!((causes[1].0.as_str(), causes[1].2), ("unexplained", 30));
        assert_eq!(causes[2], ("work".into(), "vmstat_update".into(), 10));
        let sum: u64 = causes.iter().filter(|c| c.0 != "unexplained").map(|c| c.2).sum();
        assert_eq!(sum, 70);
    }

    #[test]
    fn all_unexplained_row() {
        let mut sink = CsvSink::new(Vec::new()).unwrap();
        sink.write(&hiccup(0, 5, vec![], 9)).unwrap();
        let s = String::from_utf8(sink.into_inner()).unwrap();
        assert_eq!(s.lines().nth(1).unwrap(), "5,0,9,0,9,unexplained,,9,unexplained:=9,probe,,,,,");
    }

    /// Passive mode's rows say what kind of hiccup and whose, the victim's
    /// name escaped like any name (and quoted where the CSV needs it).
    #[test]
    fn passive_rows_name_the_source_and_the_victim() {
        use crate::interval::{Source, Victim};
        let mut h = hiccup(0, 5, vec![(Cause::Work(Symbol::from("vmstat_update")), 9)], 0);
        h.source = Source::Preempted;
        h.victim = Some(Victim { tid: 42, comm: comm(b"a,pp\\\xe2\x80\xae") });
        let mut sink = CsvSink::new(Vec::new()).unwrap();
        sink.write(&h).unwrap();
        let s = String::from_utf8(sink.into_inner()).unwrap();
        assert!(
            s.starts_with(
                "time_ns,cpu,gap_ns,explained_ns,unexplained_ns,top_kind,top_name,top_ns,causes,source,victim,parts,freq_khz,origins,stack\n"
            ),
            "{s}"
        );
        assert_eq!(
            s.lines().nth(1).unwrap(),
            "5,0,9,9,0,work,vmstat_update,9,work:vmstat_update=9,preempted,\"a,pp\\\\\\u{202e}[42]\",,,,"
        );
    }

    /// The origins column: each origin escaped as names are, then for the
    /// field (`;` and `=`), so it splits back whatever the sender's name.
    #[test]
    fn origins_are_escaped_like_names() {
        use crate::cause::{Origin, Sender};
        let ipi = Cause::Csd(Symbol::from("flush_tlb_func"));
        let mut h = hiccup(0, 5, vec![(ipi.clone(), 9)], 0);
        let sender = Sender::Task { comm: comm(b"a;b=c\\\x1b"), pid: 7, tgid: 7, cpu: 0 };
        h.origins = vec![(ipi, Origin { sender, via: Some(Symbol::from("flush_tlb_mm_range")) })];
        let mut sink = CsvSink::new(Vec::new()).unwrap();
        sink.write(&h).unwrap();
        let s = String::from_utf8(sink.into_inner()).unwrap();
        let origins = s.lines().nth(1).unwrap().rsplit(',').nth(1).unwrap().to_string();
        assert_eq!(origins, r"ipi:flush_tlb_func=a\;b\=c\\\x1b[7] on cpu 0 via flush_tlb_mm_range");
    }

    /// The stack column: frames innermost first, joined by `;`, each escaped
    /// as names are (a module's symbol is anyone's text).
    #[test]
    fn the_stack_column_lists_frames_escaped() {
        let hog = Cause::Task { comm: comm(b"hog"), pid: Some(50) };
        let mut h = hiccup(0, 5, vec![(hog.clone(), 9)], 0);
        h.stack = Some(std::sync::Arc::new(crate::interval::Stack {
            cause: hog,
            frames: vec![Symbol::from("__schedule+0x2c4"), Symbol::from("evil;x=1\u{1b}"), Symbol::from("0xdead")].into(),
        }));
        let mut sink = CsvSink::new(Vec::new()).unwrap();
        sink.write(&h).unwrap();
        let s = String::from_utf8(sink.into_inner()).unwrap();
        let stack = s.lines().nth(1).unwrap().rsplit(',').next().unwrap().to_string();
        assert_eq!(stack, r"__schedule+0x2c4;evil\;x\=1\x1b;0xdead");
    }
}
