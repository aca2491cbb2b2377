//! cyclictest's output read, and the figure's text.

use super::*;

#[test]
fn reads_cyclictests_histogram() {
    let out = "# /dev/cpu_dma_latency set to 0us\n000030 000000\n000031 000002\n000050 000097\n000900 000001\n# Total: 000000100\n\
               # Min Latencies: 00031\n# Avg Latencies: 00052\n# Max Latencies: 00900\n";
    let l = parse_cyclictest(out).unwrap();
    assert_eq!((l.min, l.max), (31.0, 900.0));
    // The histogram's mean, each sample at the middle of its µs:
    // (2 × 31.5 + 97 × 50.5 + 900.5) / 100, not the summary's whole 52.
    assert!((l.avg - 58.62).abs() < 1e-9, "{}", l.avg);
    // The 50th sample is the 48th of the 97 in [50, 51); the 99th the bucket's last.
    assert!((l.p50 - (50.0 + 48.0 / 97.0)).abs() < 1e-9, "{}", l.p50);
    assert!((l.p99 - 51.0).abs() < 1e-9, "{}", l.p99);
    assert!(parse_cyclictest("# Min Latencies: 00031\n").is_err(), "an empty histogram is not a measurement");
}

#[test]
fn each_round_is_paired_with_the_alone_run_beside_it() {
    let lat = |avg: f64| Lat { min: 1.0, avg, p50: avg, p99: 2.0 * avg, max: 100.0 };
    // The host drifts from 10 to 20 µs over the rounds; watching adds 10% in the first, 0 in the second.
    let p = paired(&[lat(10.0), lat(20.0)], &[lat(11.0), lat(20.0)]);
    assert!((p[1].median - 5.0).abs() < 1e-9 && (p[1].min - 0.0).abs() < 1e-9 && (p[1].max - 10.0).abs() < 1e-9, "{:?}", p[1]);
    assert_eq!(p[0].median, 0.0);
    // Not the medians' change, which the drift sets: (15.5 / 15 - 1) is 3.3%.
    assert!((spreads(&[lat(11.0), lat(20.0)])[1].median / spreads(&[lat(10.0), lat(20.0)])[1].median - 1.0 - 0.0333).abs() < 1e-3);
}

#[test]
fn the_gap_to_cyclictest_is_set_beside_the_observer_effect() {
    let sp = |avg: f64| -> [Spread; 5] { std::array::from_fn(|i| Spread::of(&[if i == 1 { avg } else { 1.0 }])) };
    let rows = [Row { condition: "idle, FIFO 80", cyclictest: sp(15.0), jitterwatch: sp(16.0) }];
    let obs = Observer {
        alone: sp(14.0),
        watched: sp(16.0),
        paired: sp(14.3),
        wakeups_seen: Spread::of(&[5498.0]),
        in_run: paired::example(&|x| Spread::of(&[x])),
    };
    let why = why_they_differ(&rows, &obs).unwrap();
    assert!(why.contains("+1.0 µs from cyclictest") && why.contains("within the 1 µs"), "{why}");
    let rows = [Row { condition: "idle, FIFO 80", cyclictest: sp(14.0), jitterwatch: sp(16.0) }];
    let why = why_they_differ(&rows, &obs).unwrap();
    assert!(why.contains("+2.0 µs, 100% of the gap: the gap is mostly what our programs add"), "{why}");
    // paired::example: 550 ns of work at p50, 400 ns of a second set of hooks.
    assert!(
        why.contains(
            "adds 0.6 µs to a wake-up and the hooks alone, returning at once, 0.4 µs (a second set of them within the run): 0.9 µs in all"
        ),
        "{why}"
    );
    // Where the kernel refused the second links: 18000 less 17900 ns, across runs.
    let refused = Observer { in_run: paired::InRun { hooks: Default::default(), ..obs.in_run.clone() }, ..obs.clone() };
    let why = why_they_differ(&rows, &refused).unwrap();
    assert!(why.contains("the hooks alone, returning at once, 0.1 µs (separate runs): 0.7 µs in all"), "{why}");
    let still = Observer { watched: sp(14.0), ..obs.clone() };
    let why = why_they_differ(&rows, &still).unwrap();
    assert!(why.contains("+0.0 µs, 0% of the gap: this run does not account"), "{why}");
    let other = [Row { condition: "pipe load, FIFO 80", ..rows[0].clone() }];
    assert!(why_they_differ(&other, &obs).is_none());
}
