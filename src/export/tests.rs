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
    assert_eq!(s.lines().nth(1).unwrap(), "5,0,9,9,0,work,vmstat_update,9,work:vmstat_update=9,preempted,\"a,pp\\\\\\u{202e}[42]\",,,,");
}

/// The origins column: each origin escaped as names are, then for the
/// field (`;` and `=`), so it splits back whatever the sender's name.
#[test]
fn origins_are_escaped_like_names() {
    use crate::cause::{Origin, Sender};
    let ipi = Cause::Csd(Symbol::from("flush_tlb_func"));
    let mut h = hiccup(0, 5, vec![(ipi.clone(), 9)], 0);
    let sender = Sender::Task { comm: comm(b"a;b=c\\\x1b"), pid: 7, tgid: 7, cpu: 0 };
    h.origins = vec![(ipi.into(), Origin { sender, via: Some(Symbol::from("flush_tlb_mm_range")) })];
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
        cause: hog.into(),
        frames: vec![Symbol::from("__schedule+0x2c4"), Symbol::from("evil;x=1\u{1b}"), Symbol::from("0xdead")].into(),
    }));
    let mut sink = CsvSink::new(Vec::new()).unwrap();
    sink.write(&h).unwrap();
    let s = String::from_utf8(sink.into_inner()).unwrap();
    let stack = s.lines().nth(1).unwrap().rsplit(',').next().unwrap().to_string();
    assert_eq!(stack, r"__schedule+0x2c4;evil\;x\=1\x1b;0xdead");
}
