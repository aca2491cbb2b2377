//! The hiccups CSV read back, with the contract checked on every row.

use std::fs;

/// One CSV row, with its causes split back out.
#[derive(Debug)]
pub struct Row {
    pub time_ns: u64,
    pub cpu: u32,
    pub gap_ns: u64,
    pub explained_ns: u64,
    pub unexplained_ns: u64,
    pub top_kind: String,
    pub causes: Vec<(String, String, u64)>,
    /// probe, interrupted, preempted or wakeup.
    pub source: String,
    /// Passive mode's watched thread, `comm[tid]`; empty for a probe.
    pub victim: String,
    /// The wake-up probe's split: timer latency, scheduling delay, return to user.
    pub parts: Option<(u64, u64, u64)>,
    /// Who caused some causes: (kind, name, origin), unescaped.
    pub origins: Vec<(String, String, String)>,
    /// `--stacks-above`: the largest cause's kernel stack, innermost frame first.
    pub stack: Vec<String>,
}

/// Splits `kind:name=ORIGIN;...` as `causes` is split.
pub fn parse_origins(field: &str) -> Vec<(String, String, String)> {
    split_unescaped(field, ';')
        .into_iter()
        .filter(|p| !p.is_empty())
        .map(|part| {
            let parts = split_unescaped(&part, '=');
            assert_eq!(parts.len(), 2, "{part}");
            let (k, n) = parts[0].split_once(':').expect("origin without kind");
            (k.to_string(), unescape(n), unescape(&parts[1]))
        })
        .collect()
}

/// Splits `kind:name=ns;...`, undoing the `\\` `\;` `\=` escapes.
pub fn parse_causes(field: &str) -> Vec<(String, String, u64)> {
    let mut out = Vec::new();
    for part in split_unescaped(field, ';') {
        if part.is_empty() {
            continue;
        }
        let eq = part.rfind('=').expect("cause without =");
        let (kn, ns) = (&part[..eq], &part[eq + 1..]);
        let (k, n) = kn.split_once(':').expect("cause without kind");
        out.push((k.to_string(), unescape(n), ns.parse().expect("ns")));
    }
    out
}

fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            parts.last_mut().unwrap().push(c);
            parts.last_mut().unwrap().extend(it.next());
        } else if c == sep {
            parts.push(String::new());
        } else {
            parts.last_mut().unwrap().push(c);
        }
    }
    parts
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some(n @ ('\\' | ';' | '=')) => out.push(n),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `timer=NS;sched=NS;user=NS`, or None for an empty field.
fn parse_parts(field: &str) -> Option<(u64, u64, u64)> {
    if field.is_empty() {
        return None;
    }
    let v: Vec<u64> = field.split(';').map(|p| p.split_once('=').expect("name=ns").1.parse().expect("ns")).collect();
    assert_eq!(v.len(), 3, "{field}");
    Some((v[0], v[1], v[2]))
}

/// Reads a hiccups CSV and checks the contract on every row.
pub fn read_csv(path: &std::path::Path) -> Vec<Row> {
    let raw = fs::read(path).expect("read csv");
    assert!(!raw.iter().any(|&b| b < 0x20 && b != b'\n' && b != b'\r'), "raw control byte in the CSV");
    let mut r = csv::Reader::from_reader(&raw[..]);
    assert_eq!(
        r.headers().unwrap().iter().collect::<Vec<_>>(),
        [
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
            "stack"
        ]
    );
    r.records()
        .map(|rec| {
            let rec = rec.expect("csv record");
            let n = |i: usize| rec[i].parse::<u64>().unwrap_or_else(|_| panic!("field {i} of {rec:?}"));
            let row = Row {
                time_ns: n(0),
                cpu: n(1) as u32,
                gap_ns: n(2),
                explained_ns: n(3),
                unexplained_ns: n(4),
                top_kind: rec[5].to_string(),
                causes: parse_causes(&rec[8]),
                source: rec[9].to_string(),
                victim: rec[10].to_string(),
                parts: parse_parts(&rec[11]),
                origins: parse_origins(&rec[13]),
                stack: if rec[14].is_empty() { Vec::new() } else { split_unescaped(&rec[14], ';') },
            };
            // A stack is its largest cause's, a task's or an IRQ's.
            assert!(row.stack.is_empty() || row.causes.first().is_some_and(|c| c.0 == "task" || c.0 == "irq"), "{rec:?}");
            // Every origin is for one of the row's causes.
            for (k, n, _) in &row.origins {
                assert!(row.causes.iter().any(|c| &c.0 == k && &c.1 == n), "origin of a cause not in the row: {rec:?}");
            }
            // FROM>TO kHz (FROM `?` when not known), or empty.
            if let Some((from, to)) = rec[12].split_once('>') {
                assert!((from == "?" || from.parse::<u32>().is_ok()) && to.parse::<u32>().is_ok(), "{rec:?}");
            } else {
                assert!(rec[12].is_empty(), "{rec:?}");
            }
            // The wake-up probe's rows, and only they, are split in parts that add up.
            assert_eq!(row.parts.is_some(), row.source == "wakeup-probe", "{rec:?}");
            if let Some((timer, sched, user)) = row.parts {
                assert_eq!(timer + sched + user, row.gap_ns, "{rec:?}");
            }
            assert_eq!(row.explained_ns + row.unexplained_ns, row.gap_ns, "{rec:?}");
            let named: u64 = row.causes.iter().filter(|c| c.0 != "unexplained").map(|c| c.2).sum();
            assert_eq!(named, row.explained_ns, "{rec:?}");
            assert!(row.causes.windows(2).all(|w| w[0].2 >= w[1].2), "not largest first: {rec:?}");
            if let Some(top) = row.causes.first() {
                assert_eq!((top.0.as_str(), top.2), (row.top_kind.as_str(), n(7)), "{rec:?}");
            }
            row
        })
        .collect()
}
