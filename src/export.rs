//! The hiccups CSV (DESIGN.md): one row per hiccup, header first. Names are
//! escaped inside `causes`; the csv crate quotes fields per RFC 4180.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::attribution::Hiccup;
use crate::cause::Kind;

pub const HEADER: [&str; 9] = ["time_ns", "cpu", "gap_ns", "explained_ns", "unexplained_ns", "top_kind", "top_name", "top_ns", "causes"];

/// A name as it appears in `causes`: `\`, `;`, `=` backslash-escaped and
/// control characters written visibly (`\x1b`), never raw.
pub fn escape_name(name: &str, out: &mut String) {
    for c in name.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            ';' => out.push_str("\\;"),
            '=' => out.push_str("\\="),
            c if c.is_control() => out.push_str(&crate::sanitize::visible(c.encode_utf8(&mut [0; 4]))),
            c => out.push(c),
        }
    }
}

pub struct CsvSink<W: Write> {
    w: csv::Writer<W>,
    causes: String,
    top_name: String,
    pub rows: u64,
}

impl CsvSink<BufWriter<File>> {
    pub fn create(path: &Path) -> io::Result<Self> {
        let f = File::create(path).map_err(|e| io::Error::new(e.kind(), format!("cannot write the CSV {}: {e}", path.display())))?;
        Self::new(BufWriter::with_capacity(1 << 16, f))
    }
}

impl<W: Write> CsvSink<W> {
    pub fn new(inner: W) -> io::Result<Self> {
        let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(inner);
        w.write_record(HEADER)?;
        Ok(Self { w, causes: String::new(), top_name: String::new(), rows: 0 })
    }

    pub fn write(&mut self, h: &Hiccup) -> io::Result<()> {
        let all = h.all_causes();
        self.causes.clear();
        for (i, (kind, name, ns)) in all.iter().enumerate() {
            if i > 0 {
                self.causes.push(';');
            }
            self.causes.push_str(kind.as_str());
            self.causes.push(':');
            escape_name(name, &mut self.causes);
            self.causes.push('=');
            self.causes.push_str(itoa(*ns).as_str());
        }
        let (top_kind, top, top_ns) = all.first().copied().unwrap_or((Kind::Unexplained, "", 0));
        self.top_name.clear();
        escape_name(top, &mut self.top_name);
        self.w.write_record([
            itoa(h.t0).as_str(),
            itoa(h.cpu as u64).as_str(),
            itoa(h.gap).as_str(),
            itoa(h.explained()).as_str(),
            itoa(h.unexplained).as_str(),
            top_kind.as_str(),
            self.top_name.as_str(),
            itoa(top_ns).as_str(),
            self.causes.as_str(),
        ])?;
        self.rows += 1;
        Ok(())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    pub fn into_inner(self) -> W {
        self.w.into_inner().map_err(|e| e.into_error()).expect("flushed")
    }
}

/// A number formatted on the stack.
fn itoa(n: u64) -> Num {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    Num { buf, start: i }
}

struct Num {
    buf: [u8; 20],
    start: usize,
}

impl Num {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[self.start..]).expect("digits")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn hostile() -> Hiccup {
        Hiccup {
            cpu: 1,
            t0: 1_000,
            gap: 100,
            causes: vec![(Kind::Task, Arc::from("a,b\"c;d=e\\f\x1b[31m\n[7]"), 60), (Kind::Work, Arc::from("vmstat_update"), 10)],
            unexplained: 30,
        }
    }

    /// The inverse of escape_name, splitting `causes` as a consumer would.
    fn parse_causes(field: &str) -> Vec<(String, String, u64)> {
        let mut out = Vec::new();
        let mut part = String::new();
        let mut chars = field.chars().chain([';']).peekable();
        let mut eq = None;
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    part.push(c);
                    part.extend(chars.next());
                }
                '=' => {
                    eq = Some(part.len());
                    part.push(c);
                }
                ';' => {
                    let e = eq.take().unwrap();
                    let (kn, ns) = (&part[..e], &part[e + 1..]);
                    let (k, n) = kn.split_once(':').unwrap();
                    out.push((k.to_string(), n.to_string(), ns.parse().unwrap()));
                    part.clear();
                }
                c => part.push(c),
            }
        }
        out
    }

    #[test]
    fn rows_round_trip_with_hostile_names() {
        let mut sink = CsvSink::new(Vec::new()).unwrap();
        sink.write(&hostile()).unwrap();
        let bytes = sink.into_inner();
        assert!(!bytes.contains(&0x1b), "raw escape reached the file");
        let mut r = csv::ReaderBuilder::new().has_headers(true).from_reader(&bytes[..]);
        assert_eq!(r.headers().unwrap().iter().collect::<Vec<_>>(), HEADER);
        let rows: Vec<csv::StringRecord> = r.records().map(|x| x.unwrap()).collect();
        assert_eq!(rows.len(), 1);
        let row = &rows[0];
        assert_eq!(&row[0], "1000");
        assert_eq!((&row[2], &row[3], &row[4]), ("100", "70", "30"));
        assert_eq!((&row[5], &row[7]), ("task", "60"));
        assert_eq!(&row[6], "a,b\"c\\;d\\=e\\\\f\\x1b[31m\\x0a[7]");
        let causes = parse_causes(&row[8]);
        assert_eq!(causes.len(), 3);
        assert_eq!(causes[0].1, row[6].to_string());
        assert_eq!((causes[1].0.as_str(), causes[1].2), ("unexplained", 30));
        assert_eq!(causes[2], ("work".into(), "vmstat_update".into(), 10));
        let sum: u64 = causes.iter().filter(|c| c.0 != "unexplained").map(|c| c.2).sum();
        assert_eq!(sum, 70);
    }

    #[test]
    fn all_unexplained_row() {
        let mut sink = CsvSink::new(Vec::new()).unwrap();
        sink.write(&Hiccup { cpu: 0, t0: 5, gap: 9, causes: vec![], unexplained: 9 }).unwrap();
        let s = String::from_utf8(sink.into_inner()).unwrap();
        assert_eq!(s.lines().nth(1).unwrap(), "5,0,9,0,9,unexplained,,9,unexplained:=9");
    }

    #[test]
    fn numbers() {
        assert_eq!(itoa(0).as_str(), "0");
        assert_eq!(itoa(u64::MAX).as_str(), "18446744073709551615");
    }
}
