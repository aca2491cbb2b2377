//! The exporter's counters from synthetic stalls, their encoding (parsed
//! back, hostile names included), the label bound, and the endpoint's
//! answers.

use super::*;
use crate::cause::comm;
use crate::interval::Source;
use crate::stats::CpuCounters;

const CPU: u32 = 6;

fn hiccup(gap: u64, causes: Vec<(Cause, u64)>, victim: Option<Victim>) -> Hiccup {
    let named: u64 = causes.iter().map(|c| c.1).sum();
    Hiccup {
        cpu: CPU,
        t0: 1_000,
        gap,
        source: Source::Probe,
        victim,
        causes: causes.iter().map(|(c, ns)| (c.into(), *ns)).collect(),
        unexplained: gap - named,
        parts: None,
        freq: None,
        origins: Vec::new(),
        stack: None,
    }
}

fn task(name: &[u8], pid: u32) -> Cause {
    Cause::Task { comm: comm(name), pid: Some(pid) }
}

fn raw() -> Counters {
    let mut c = Counters::new(&[CPU as usize]);
    c.events = 1234;
    c.consumer_cpu_ns = 5_000_000;
    let own = crate::stats::SourceFigures::Spin(crate::stats::SpinFigures { floor_ns: 8, ..Default::default() });
    c.cpus = vec![CpuCounters { threshold_ns: 72, drops: 3, overflow: 1, own, ..CpuCounters::new(CPU) }];
    c
}

fn exporter(top: usize) -> (Exporter, Slot) {
    let slot = Slot::default();
    (Exporter::new(&[CPU as usize], top, "probe", slot.clone(), 0), slot)
}

fn published(slot: &Slot) -> Arc<View> {
    slot.lock().unwrap().clone().expect("a view")
}

/// A sample: its name, labels and value.
type Sample = (String, Vec<(String, String)>, f64);

/// The samples of an OpenMetrics text: (name, labels, value), with the
/// label values unescaped; panics on a line that is not well formed.
fn parse(text: &str) -> Vec<Sample> {
    assert!(text.ends_with("# EOF\n"), "no # EOF");
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (name, rest) = line.split_at(line.find(['{', ' ']).expect("a sample"));
        let mut labels = Vec::new();
        let mut chars = rest.chars().peekable();
        if chars.peek() == Some(&'{') {
            chars.next();
            loop {
                let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
                assert_eq!(chars.next(), Some('"'), "{line}");
                let mut val = String::new();
                loop {
                    match chars.next().expect("unterminated value") {
                        '\\' => match chars.next() {
                            Some('\\') => val.push('\\'),
                            Some('"') => val.push('"'),
                            Some('n') => val.push('\n'),
                            other => panic!("bad escape {other:?} in {line}"),
                        },
                        '"' => break,
                        '\n' => panic!("raw newline"),
                        c => val.push(c),
                    }
                }
                labels.push((key.trim_start_matches(',').to_string(), val));
                match chars.next() {
                    Some(',') => {}
                    Some('}') => break,
                    other => panic!("{other:?} in {line}"),
                }
            }
        }
        let value: String = chars.collect();
        out.push((name.to_string(), labels, value.trim().parse().unwrap_or_else(|_| panic!("value in {line}"))));
    }
    out
}

fn sample<'a>(s: &'a [Sample], name: &str, want: &[(&str, &str)]) -> Option<&'a f64> {
    s.iter().find(|(n, l, _)| n == name && want.iter().all(|(k, v)| l.iter().any(|(a, b)| a == k && b == v))).map(|x| &x.2)
}

#[test]
fn counts_stalls_causes_and_buckets_exactly() {
    let (mut e, slot) = exporter(10);
    e.record(&hiccup(3_000, vec![(task(b"hog", 10), 2_000)], None));
    e.record(&hiccup(700_000, vec![(task(b"hog", 11), 500_000), (Cause::Softirq(1), 100_000)], None));
    e.publish(&raw(), 1_000_000_000);
    let v = published(&slot);
    let c = &v.cpus[0];
    assert_eq!(
        (c.hiccups, c.stolen_ns, c.counters.own.floor_ns(), c.counters.threshold_ns, c.counters.drops, c.counters.overflow),
        (2, 703_000, 8, 72, 3, 1)
    );
    // 3 µs is in the 5 µs bucket, 700 µs in the 1 ms one.
    assert_eq!(c.counts[2], 1);
    assert_eq!(c.counts[9], 1);
    assert_eq!(c.counts.iter().sum::<u64>(), 2);
    let hog = c.causes.iter().find(|s| s.kind == "task").unwrap();
    assert_eq!((hog.name.as_str(), hog.ns, hog.hiccups), ("hog", 502_000, 2), "a task's pids are one program");
    let un = c.causes.iter().find(|s| s.kind == "unexplained").unwrap();
    assert_eq!((un.ns, un.hiccups), (101_000, 2));

    let text = encode(v);
    let s = parse(&text);
    assert_eq!(sample(&s, "jitterwatch_hiccups_total", &[("cpu", "6")]), Some(&2.0));
    assert_eq!(sample(&s, "jitterwatch_stolen_seconds_total", &[("cpu", "6")]), Some(&703e-6));
    assert_eq!(
        sample(&s, "jitterwatch_gap_seconds_bucket", &[("cpu", "6"), ("le", "5e-6")]).or(sample(
            &s,
            "jitterwatch_gap_seconds_bucket",
            &[("cpu", "6"), ("le", "0.000005")]
        )),
        Some(&1.0)
    );
    assert_eq!(sample(&s, "jitterwatch_gap_seconds_bucket", &[("cpu", "6"), ("le", "+Inf")]), Some(&2.0));
    assert_eq!(sample(&s, "jitterwatch_gap_seconds_count", &[("cpu", "6")]), Some(&2.0));
    assert_eq!(sample(&s, "jitterwatch_cause_stolen_seconds_total", &[("kind", "task"), ("name", "hog")]), Some(&502e-6));
    assert_eq!(sample(&s, "jitterwatch_cause_hiccups_total", &[("kind", "softirq"), ("name", "TIMER")]), Some(&1.0));
    assert_eq!(sample(&s, "jitterwatch_events_total", &[]), Some(&1234.0));
    assert_eq!(sample(&s, "jitterwatch_build_info", &[("mode", "probe")]), Some(&1.0));
}

#[test]
fn senders_have_their_own_bounded_series() {
    use crate::cause::{Origin, Sender};
    let (mut e, slot) = exporter(10);
    let ipi = Cause::Csd("flush_tlb_func".into());
    let mut h = hiccup(5_000, vec![(ipi.clone(), 4_000)], None);
    h.origins = vec![(ipi.into(), Origin { sender: Sender::Task { comm: comm(b"java"), pid: 42, tgid: 42, cpu: 0 }, via: None })];
    e.record(&h);
    e.record(&h);
    e.publish(&raw(), 1_000_000_000);
    let s = parse(&encode(published(&slot)));
    assert_eq!(sample(&s, "jitterwatch_origin_stolen_seconds_total", &[("cpu", "6"), ("kind", "ipi"), ("sender", "java")]), Some(&8e-6));
    assert_eq!(sample(&s, "jitterwatch_origin_hiccups_total", &[("sender", "java")]), Some(&2.0));
}

#[test]
fn hostile_names_round_trip_escaped() {
    let (mut e, slot) = exporter(10);
    let evil = b"a\"b\\c\x1b[2J\n";
    e.record(&hiccup(10_000, vec![(task(evil, 1), 9_000)], Some(Victim { tid: 7, comm: comm(b"x\"}y") })));
    // A task really named like the folded rest stays apart from it.
    e.record(&hiccup(10_000, vec![(task(b"(others)", 2), 9_000)], None));
    e.publish(&raw(), 1_000_000_000);
    let text = encode(published(&slot));
    assert!(!text.contains('\x1b'), "a raw escape reached the exposition");
    let s = parse(&text);
    let want = crate::sanitize::visible_bytes(evil);
    assert!(want.contains('"') && want.contains('\\'));
    assert_eq!(sample(&s, "jitterwatch_cause_stolen_seconds_total", &[("name", &want)]), Some(&9e-6));
    assert_eq!(sample(&s, "jitterwatch_cause_stolen_seconds_total", &[("name", "\\(others)")]), Some(&9e-6));
    assert_eq!(sample(&s, "jitterwatch_thread_stolen_seconds_total", &[("thread", "x\"}y[7]")]), Some(&10e-6));
}

/// The softirqs a watched thread's own system calls ran are counted per
/// thread and softirq, apart from its stalls (they took nothing from it).
#[test]
fn in_syscall_softirqs_are_their_own_series() {
    let (mut e, slot) = exporter(10);
    let redis = Some(Victim { tid: 23769, comm: comm(b"redis-server") });
    for _ in 0..3 {
        let mut h = hiccup(4_000, vec![(Cause::Softirq(3), 4_000)], redis);
        h.source = Source::InSyscall;
        e.record(&h);
    }
    e.record(&hiccup(10_000, vec![(task(b"kdamond.0", 9), 10_000)], redis));
    e.publish(&raw(), 1_000_000_000);
    let s = parse(&encode(published(&slot)));
    let who = [("thread", "redis-server[23769]"), ("softirq", "NET_RX")];
    assert_eq!(sample(&s, "jitterwatch_thread_in_syscall_softirqs_total", &who), Some(&3.0));
    assert_eq!(sample(&s, "jitterwatch_thread_in_syscall_seconds_total", &who), Some(&12e-6));
    assert_eq!(sample(&s, "jitterwatch_thread_hiccups_total", &[("thread", "redis-server[23769]")]), Some(&1.0), "not its stalls");
}

#[test]
fn a_storm_of_unique_names_keeps_the_series_bounded() {
    let (mut e, slot) = exporter(5);
    for i in 0..20_000u32 {
        let name = format!("churn{i}");
        e.record(&hiccup(5_000, vec![(task(name.as_bytes(), i), 4_000)], None));
        if i % 2_000 == 0 {
            e.publish(&raw(), i as u64 * 1_000_000);
        }
    }
    e.publish(&raw(), 30_000_000_000);
    let v = published(&slot);
    let c = &v.cpus[0];
    // 5 of their own (unexplained among them), then (others) of task.
    assert!(c.causes.len() <= 5 + 1, "{} series", c.causes.len());
    let total: u64 = c.causes.iter().map(|s| s.ns).sum();
    assert!(total <= 20_000 * 5_000);
    let text = encode(v);
    assert!(parse(&text).len() < 100, "{} samples", parse(&text).len());
}

#[test]
fn the_endpoint_answers_and_refuses() {
    let slot = Slot::default();
    assert_eq!(http::respond("GET /metrics HTTP/1.1", true, &slot).0, "503 Service Unavailable");
    let (mut e, _) = exporter(3);
    e.slot = slot.clone();
    e.publish(&raw(), 1);
    let (status, ty, body) = http::respond("GET /metrics?x=1 HTTP/1.1", true, &slot);
    assert_eq!((status, ty), ("200 OK", http::CONTENT_TYPE));
    assert!(body.contains("# TYPE jitterwatch_hiccups counter\n") && body.ends_with("# EOF\n"), "{body}");
    assert!(body.contains("jitterwatch_hiccups_total{cpu=\"6\"} 0"), "{body}");
    // Without OpenMetrics asked for: the classic format, counters named whole.
    let (status, ty, body) = http::respond("GET /metrics HTTP/1.1", false, &slot);
    assert_eq!((status, ty), ("200 OK", http::CLASSIC_TYPE));
    assert!(
        body.contains("# HELP jitterwatch_hiccups_total Stalls over the threshold\n# TYPE jitterwatch_hiccups_total counter\n"),
        "{body}"
    );
    assert!(body.contains("# TYPE jitterwatch_gap_seconds histogram\n"), "{body}");
    assert!(!body.contains("# UNIT") && !body.contains("# EOF"), "{body}");
    assert!(body.contains("jitterwatch_hiccups_total{cpu=\"6\"} 0\n"), "{body}");
    assert_eq!(http::respond("GET /nope HTTP/1.1", true, &slot).0, "404 Not Found");
    assert_eq!(http::respond("POST /metrics HTTP/1.1", true, &slot).0, "405 Method Not Allowed");
    assert_eq!(http::respond("POST /metrics HTTP/1.1", true, &slot).2, "only GET, HEAD\n");
}

#[test]
fn a_bad_address_or_a_taken_port_is_one_line() {
    let e = Endpoint::bind("localhost-ish").err().unwrap().to_string();
    assert!(e.contains("not an address") && e.contains("127.0.0.1:9464"), "{e}");
    let first = Endpoint::bind("127.0.0.1:0").unwrap();
    let e = Endpoint::bind(&first.addr.to_string()).err().unwrap().to_string();
    assert!(e.contains("in use"), "{e}");
    assert!(!e.contains('\n'));
}

/// An endpoint reachable from beyond this machine is said in one line
/// (/metrics names processes and threads); loopback, however written, is
/// quiet.
#[test]
fn an_address_beyond_loopback_is_warned_of() {
    for a in ["127.0.0.1:9464", "127.0.0.2:9464", "[::1]:9464", "[::ffff:127.0.0.1]:9464"] {
        assert_eq!(http::exposure(a.parse().unwrap()), None, "{a}");
    }
    for a in ["0.0.0.0:9464", "[::]:9464", "192.168.1.5:9464", "[::ffff:10.0.0.1]:9464"] {
        let w = http::exposure(a.parse().unwrap()).expect(a);
        assert!(w.starts_with(&format!("--prometheus {a}: ")) && w.contains("process and thread names"), "{w}");
        assert!(!w.contains('\n'), "{w}");
    }
}

/// Two CPUs with 50 causes each (`--prometheus-top 50`): the exposition
/// stays small, and what encoding one costs is printed (the closing
/// figure; timing is the bench's business, the size bound is this test's).
#[test]
fn two_cpus_of_fifty_causes_encode_small() {
    let slot = Slot::default();
    let mut e = Exporter::new(&[2, 3], 50, "probe", slot.clone(), 0);
    for cpu in [2u32, 3] {
        for i in 0..50u32 {
            let mut h = hiccup(10_000 + i as u64, vec![(Cause::Work(format!("some_kernel_function_{i}").into()), 9_000)], None);
            h.cpu = cpu;
            e.record(&h);
        }
    }
    e.publish(&raw(), 1_000_000_000);
    let v = published(&slot);
    assert_eq!(v.cpus.iter().map(|c| c.causes.len()).sum::<usize>(), 2 * 50 + 2, "50 of their own and one (others) per CPU");
    let n = 200;
    let t = std::time::Instant::now();
    let mut len = 0;
    for _ in 0..n {
        len = encode(v.clone()).len();
    }
    let om = t.elapsed() / n;
    let t = std::time::Instant::now();
    let mut classic = 0;
    for _ in 0..n {
        classic = classic_text(&encode(v.clone())).len();
    }
    eprintln!("2 CPUs × 50 causes: OpenMetrics {len} bytes in {om:?}; classic text {classic} bytes in {:?}", t.elapsed() / n);
    assert!(len < 64 * 1024 && classic < 64 * 1024, "{len} / {classic} bytes");
}
