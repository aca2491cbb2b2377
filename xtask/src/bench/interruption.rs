//! Figure 3b: what jitterwatch adds to one interruption of the watched CPU,
//! end to end, without relying on the kernel's BPF statistics. A plain C
//! loop spins on the watched CPU reading CLOCK_MONOTONIC and keeps every gap;
//! a second thread of the same process, on the housekeeping CPU, sends it a
//! function-call IPI every 2 ms (membarrier: one cross-CPU call) and keeps
//! when. The tick's gaps are found by their period (the comb of 1/HZ with
//! a gap in nearly every slot), the IPI's as the gaps that begin just after
//! a send (the C program: assets/interrupts.rs). Three runs, alternated:
//! nothing attached; jitterwatch in passive mode with every program
//! returning at once (JITTERWATCH_BPF_FLOOR=1: the kernel's hooks alone);
//! and the paired run, jitterwatch watching while the loop turns its
//! watching off and on every TOGGLE_MS, so what our programs' work adds is
//! read within one run. The host adds noise of its own, so each kind is
//! read at its 25th percentile and median, per run.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, Result};

use super::measure::Ctx;
use super::spread::Spread;
use super::util::{self, Bg};

/// The IPI period, µs: far from the tick's, so the two rarely meet.
const PERIOD_US: u64 = 2_000;
/// An IPI's gap begins this soon after its send, ns.
const IPI_WITHIN_NS: u64 = 60_000;
/// A tick's gap begins this close to its slot of the comb, ns.
const TICK_WITHIN_NS: u64 = 10_000;
/// How long each of the paired run's windows lasts, ms: long beside one
/// interruption, short beside the host's drift, so neighbouring windows
/// (one watched, one not) see the same host.
const TOGGLE_MS: u64 = 50;

/// A gap: (start, length), ns.
type Gap = (u64, u64);

/// One run's gaps: (start, length) in CLOCK_MONOTONIC ns, the IPI sends,
/// and (paired run) when watching was turned on (true) or off.
#[derive(Default)]
pub struct Gaps {
    pub gaps: Vec<(u64, u64)>,
    pub sent: Vec<u64>,
    pub toggles: Vec<(u64, bool)>,
}

pub fn parse(text: &str) -> Gaps {
    let mut g = Gaps::default();
    for line in text.lines() {
        let mut w = line.split(' ');
        match (w.next(), w.next().and_then(|x| x.parse().ok()), w.next().and_then(|x| x.parse::<u64>().ok())) {
            (Some("G"), Some(at), Some(len)) => g.gaps.push((at, len)),
            (Some("S"), Some(at), None) => g.sent.push(at),
            (Some("T"), Some(at), Some(on)) => g.toggles.push((at, on == 1)),
            _ => {}
        }
    }
    g
}

/// The tick's period and phase: of the periods 1/HZ can be (HZ 1000, 300,
/// 250, 100), the comb whose slots (±TICK_WITHIN_NS) hold a gap most often.
pub fn tick_comb(gaps: &[(u64, u64)]) -> Option<(u64, u64)> {
    let (first, last) = (gaps.first()?.0, gaps.last()?.0);
    let mut best: Option<(f64, u64, u64)> = None;
    for period in [1_000_000u64, 3_333_333, 4_000_000, 10_000_000] {
        let slots = ((last - first) / period).max(1) as f64;
        // Phases in steps of half the slot's width.
        let step = TICK_WITHIN_NS;
        let mut counts = vec![0u32; (period / step) as usize + 1];
        for &(at, _) in gaps {
            counts[((at % period) / step) as usize] += 1;
        }
        let n = counts.len();
        for i in 0..n {
            let hits = counts[i] + counts[(i + 1) % n];
            let share = f64::from(hits) / slots;
            if best.is_none_or(|b| share > b.0) {
                best = Some((share, period, (i as u64) * step + step));
            }
        }
    }
    // Nearly every slot holds a gap, or it is not the tick.
    best.filter(|b| b.0 >= 0.8).map(|b| (b.1, b.2))
}

/// The tick's gaps and the IPIs' gaps, (start, length), apart: a gap near
/// both is neither's.
fn classify_at(g: &Gaps) -> (Vec<Gap>, Vec<Gap>) {
    let after_send = |at: u64| {
        let i = g.sent.partition_point(|&s| s <= at);
        i > 0 && at - g.sent[i - 1] <= IPI_WITHIN_NS
    };
    // The sends are periodic too: the comb is looked for without them.
    let rest: Vec<(u64, u64)> = g.gaps.iter().copied().filter(|&(at, _)| !after_send(at)).collect();
    let comb = tick_comb(&rest);
    let on_tick = |at: u64| {
        comb.is_some_and(|(p, ph)| {
            let d = (at % p + p - ph % p) % p;
            d <= TICK_WITHIN_NS || p - d <= TICK_WITHIN_NS
        })
    };
    let (mut ticks, mut ipis) = (Vec::new(), Vec::new());
    for &gap in &g.gaps {
        match (on_tick(gap.0), after_send(gap.0)) {
            (true, false) => ticks.push(gap),
            (false, true) => ipis.push(gap),
            _ => {}
        }
    }
    (ticks, ipis)
}

/// The tick's gaps and the IPIs' gaps (lengths, ns), apart.
pub fn classify(g: &Gaps) -> (Vec<u64>, Vec<u64>) {
    let (t, i) = classify_at(g);
    (t.into_iter().map(|g| g.1).collect(), i.into_iter().map(|g| g.1).collect())
}

/// Whether watching was on when a gap began at `at` (None: before the
/// first toggle).
fn watching_at(toggles: &[(u64, bool)], at: u64) -> Option<bool> {
    let i = toggles.partition_point(|&(t, _)| t <= at);
    (i > 0).then(|| toggles[i - 1].1)
}

/// A paired run's ticks and IPIs (lengths), split by whether watching was
/// on when each began: ([ticks on, ticks off], [IPIs on, IPIs off]). Found
/// on the whole run first, so the tick's comb holds every slot.
pub fn classify_paired(g: &Gaps) -> ([Vec<u64>; 2], [Vec<u64>; 2]) {
    let (t, i) = classify_at(g);
    let split = |v: Vec<(u64, u64)>| {
        let mut by = [Vec::new(), Vec::new()];
        for (at, len) in v {
            if let Some(on) = watching_at(&g.toggles, at) {
                by[usize::from(!on)].push(len);
            }
        }
        by
    };
    (split(t), split(i))
}

/// The `q` quantile of `v` (sorted in place); None if empty.
pub fn quantile(v: &mut [u64], q: f64) -> Option<f64> {
    v.sort_unstable();
    (!v.is_empty()).then(|| v[((v.len() - 1) as f64 * q).round() as usize] as f64)
}

/// The two quantiles each kind is read at: 25th percentile, median.
const QS: [f64; 2] = [0.25, 0.5];

/// What one condition read: per run, each kind's 25th percentile and median.
#[derive(Default)]
pub struct Condition {
    pub tick: [Vec<f64>; 2],
    pub ipi: [Vec<f64>; 2],
    /// Gaps of each kind seen per run.
    pub ticks_seen: Vec<f64>,
    pub ipis_seen: Vec<f64>,
}

impl Condition {
    fn add(&mut self, g: &Gaps) {
        let (t, i) = classify(g);
        self.add_lengths(t, i);
    }

    fn add_lengths(&mut self, mut t: Vec<u64>, mut i: Vec<u64>) {
        self.ticks_seen.push(t.len() as f64);
        self.ipis_seen.push(i.len() as f64);
        for (k, q) in QS.into_iter().enumerate() {
            self.tick[k].extend(quantile(&mut t, q));
            self.ipi[k].extend(quantile(&mut i, q));
        }
    }
}

/// Per paired run, each kind's quantiles watched less not watched (ns).
#[derive(Default)]
pub struct Paired {
    pub tick: [Vec<f64>; 2],
    pub ipi: [Vec<f64>; 2],
}

impl Paired {
    /// One run's ticks and IPIs, each [watched, not].
    fn add(&mut self, t: &[Vec<u64>; 2], i: &[Vec<u64>; 2]) {
        let diff = |v: &[Vec<u64>; 2], q: f64| {
            let [mut on, mut off] = v.clone();
            quantile(&mut on, q).zip(quantile(&mut off, q)).map(|(a, b)| a - b)
        };
        for (k, q) in QS.into_iter().enumerate() {
            self.tick[k].extend(diff(t, q));
            self.ipi[k].extend(diff(i, q));
        }
    }
}

pub struct PerInterruption {
    pub reps: usize,
    pub secs: f64,
    /// Nothing attached, the hooks alone (separate runs).
    pub none: Condition,
    pub floor: Condition,
    /// The paired runs' windows: jitterwatch watching, and its programs
    /// attached but returning at their first test (the CPU not watched).
    pub watched: Condition,
    pub off: Condition,
    /// Each paired run's watched less not-watched quantiles.
    pub paired: Paired,
    /// jitterwatch's own time per tick and per IPI, by its `self` cause
    /// (ns; from the watched runs' CSVs).
    pub self_tick: Spread,
    pub self_ipi: Spread,
}

/// 3b: the three runs, alternated, `reps` times each.
pub fn measure(cx: &Ctx, exe: &Path) -> Result<PerInterruption> {
    let reps = cx.reps(8);
    let secs = if cx.quick { 1.5 } else { 3.0 };
    let (mut none, mut floor, mut watched, mut off) =
        (Condition::default(), Condition::default(), Condition::default(), Condition::default());
    let mut paired = Paired::default();
    let (mut self_tick, mut self_ipi) = (Vec::new(), Vec::new());
    let dir = tempfile_dir()?;
    for _ in 0..reps {
        none.add(&run(cx, exe, secs, None)?);
        floor.add(&run(cx, exe, secs, Some((true, &dir.join("floor.csv"))))?);
        let csv = dir.join("watched.csv");
        // Twice as long: half of it is not watched.
        let g = run(cx, exe, 2.0 * secs, Some((false, &csv)))?;
        let (t, i) = classify_paired(&g);
        paired.add(&t, &i);
        let [t_on, t_off] = t;
        let [i_on, i_off] = i;
        watched.add_lengths(t_on, i_on);
        off.add_lengths(t_off, i_off);
        let (t, i) = own_per_interruption(&std::fs::read_to_string(&csv).unwrap_or_default());
        self_tick.extend(t);
        self_ipi.extend(i);
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(PerInterruption {
        reps,
        secs,
        none,
        floor,
        watched,
        off,
        paired,
        self_tick: Spread::of(&self_tick),
        self_ipi: Spread::of(&self_ipi),
    })
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let d = std::env::temp_dir().join(format!("jw-bench-3b-{}", std::process::id()));
    std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    Ok(d)
}

/// One run of the loop; with `jw` = Some((floor, csv)), jitterwatch watches
/// it in passive mode: its programs returning at once if `floor`, else the
/// loop turns its watching off and on every TOGGLE_MS (the paired run).
fn run(cx: &Ctx, exe: &Path, secs: f64, jw: Option<(bool, &Path)>) -> Result<Gaps> {
    let mut args = vec![cx.watched.to_string(), cx.house.to_string(), format!("{secs}"), PERIOD_US.to_string()];
    let _jw = match jw {
        Some((floor, csv)) => {
            let mut c = Command::new(&cx.bin);
            c.args(["--comm", "jwgaps", "--cpus", &cx.watched.to_string(), "--no-tui", "--csv"]).arg(csv);
            c.args(["--duration", &format!("{}s", secs + 3.0)]).stdout(Stdio::null()).stderr(Stdio::null());
            if floor {
                c.env("JITTERWATCH_BPF_FLOOR", "1");
            }
            let bg = Bg::spawn(&mut c)?;
            std::thread::sleep(Duration::from_millis(1500));
            if !floor {
                let (map, offset) = watched_byte().context("finding jitterwatch's watched[] to turn it off and on")?;
                args.extend([map.to_string(), (offset + cx.watched as u64).to_string(), TOGGLE_MS.to_string()]);
            }
            Some(bg)
        }
        None => None,
    };
    let out = util::output(Command::new(exe).args(&args))?;
    Ok(parse(&out))
}

/// The running jitterwatch's .bss map (the newest of that name) and the
/// offset of `watched` in it, from bpftool.
fn watched_byte() -> Result<(u64, u64)> {
    let maps = util::output(Command::new("bpftool").args(["map", "show", "-j"]))?;
    let (map, btf) = bss_map(&maps).context("no jitterwatch .bss map is loaded")?;
    let dump = util::output(Command::new("bpftool").args(["btf", "dump", "id", &btf.to_string()]))?;
    let offset = var_offset(&dump, "watched").context("no `watched` in the .bss map's BTF")?;
    Ok((map, offset))
}

/// From `bpftool map show -j`: the newest map named jitterwatch's .bss
/// (names are cut to 15 bytes: "jitterwa.bss"), its id and BTF id.
pub fn bss_map(json: &str) -> Option<(u64, u64)> {
    let maps: Vec<serde_json::Value> = serde_json::from_str(json).ok()?;
    maps.iter().filter(|m| m["name"] == "jitterwa.bss").filter_map(|m| Some((m["id"].as_u64()?, m["btf_id"].as_u64()?))).max()
}

/// From `bpftool btf dump id N`: the offset of variable `name` in its
/// DATASEC ("type_id=479 offset=516 size=1024 (VAR 'watched')").
pub fn var_offset(dump: &str, name: &str) -> Option<u64> {
    let tag = format!("(VAR '{name}')");
    let line = dump.lines().find(|l| l.trim_end().ends_with(&tag))?;
    line.split_whitespace().find_map(|w| w.strip_prefix("offset=")).and_then(|o| o.parse().ok())
}

/// From a passive run's CSV: the `self:jitterwatch` ns of each row that is
/// one tick (its causes name the local timer) and of each that is one IPI
/// (a function call).
pub fn own_per_interruption(csv: &str) -> (Vec<f64>, Vec<f64>) {
    let (mut tick, mut ipi) = (Vec::new(), Vec::new());
    for row in csv.lines().skip(1) {
        let Some(own) = row.split(';').find_map(|c| c.split(',').find_map(|f| f.strip_prefix("self:jitterwatch="))) else {
            continue;
        };
        let Ok(ns) = own.trim_end_matches(|c: char| !c.is_ascii_digit()).parse::<f64>() else { continue };
        if row.contains("irq:local_timer=") && !row.contains("ipi:") {
            tick.push(ns);
        } else if row.contains("ipi:call_function") && !row.contains("local_timer") {
            ipi.push(ns);
        }
    }
    (tick, ipi)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run: a tick every 4 ms at phase 1.23 ms (13 µs each, 5 µs more
    /// with `extra`), an IPI sent every 2 ms whose gap follows by 20 µs, and
    /// stray gaps.
    fn run(extra: u64) -> Gaps {
        let mut g = Gaps::default();
        for k in 0..500u64 {
            g.gaps.push((1_230_000 + k * 4_000_000, 13_000 + extra));
        }
        for k in 0..1000u64 {
            let s = 500_000 + k * 2_000_000 + (k % 7) * 1000;
            g.sent.push(s);
            g.gaps.push((s + 20_000, 4_000 + extra));
        }
        for k in 0..300u64 {
            g.gaps.push((777_777 + k * 6_543_210, 30_000));
        }
        g.gaps.sort_unstable();
        g
    }

    #[test]
    fn the_tick_is_found_by_its_period_and_the_ipis_by_their_sends() {
        let g = run(0);
        let rest: Vec<(u64, u64)> = g.gaps.iter().copied().filter(|g| g.1 != 4_000).collect();
        assert_eq!(tick_comb(&rest).map(|c| c.0), Some(4_000_000));
        let (mut t, mut i) = classify(&g);
        assert!(t.len() >= 495 && i.len() >= 990, "{} ticks, {} ipis", t.len(), i.len());
        assert_eq!((quantile(&mut t, 0.5), quantile(&mut i, 0.5)), (Some(13_000.0), Some(4_000.0)));
        let (mut t5, _) = classify(&run(5_000));
        assert_eq!(quantile(&mut t5, 0.5), Some(18_000.0), "what was added shows in the median");
    }

    #[test]
    fn a_paired_run_splits_its_gaps_by_the_watching_at_their_start() {
        let mut g = run(0);
        // Off, then on, every 50 ms.
        g.toggles = (0..60u64).map(|k| (k * 50_000_000, k % 2 == 1)).collect();
        let on = |at: u64| (at / 50_000_000) % 2 == 1;
        for gap in &mut g.gaps {
            if on(gap.0) && gap.1 < 30_000 {
                gap.1 += 150;
            }
        }
        let ([t_on, t_off], [i_on, i_off]) = classify_paired(&g);
        assert!(t_on.len() > 100 && t_off.len() > 100 && i_on.len() > 200 && i_off.len() > 200);
        // A stray gap (30 µs) may fall on the tick's comb or after a send.
        let only = |v: &[u64], l: u64| v.iter().all(|&x| x == l || x == 30_000);
        assert!(only(&t_on, 13_150) && only(&t_off, 13_000), "{t_on:?}");
        assert!(only(&i_on, 4_150) && only(&i_off, 4_000));
        assert_eq!(watching_at(&g.toggles, 0), Some(false));
        assert_eq!(watching_at(&[(10, true)], 5), None, "before the first toggle: neither");
    }

    #[test]
    fn the_watched_byte_is_found_from_bpftool() {
        let maps = r#"[{"id":7,"name":"jitterwa.bss","btf_id":30},{"id":9,"name":"jitterwa.bss","btf_id":31},
                      {"id":12,"name":"other.bss","btf_id":40}]"#;
        assert_eq!(bss_map(maps), Some((9, 31)), "the newest of jitterwatch's");
        assert_eq!(bss_map("[]"), None);
        let dump = "[479] VAR 'watched' type_id=478, linkage=global\n[576] DATASEC '.bss' size=661312 vlen=15\n\
                    \ttype_id=471 offset=512 size=4 (VAR '_jw_sentinel')\n\ttype_id=479 offset=516 size=1024 (VAR 'watched')\n\
                    \ttype_id=491 offset=103948 size=256 (VAR 'watched_list')\n";
        assert_eq!(var_offset(dump, "watched"), Some(516));
        assert_eq!(var_offset(dump, "watched_list"), Some(103948));
        assert_eq!(var_offset(dump, "nests"), None);
    }

    #[test]
    fn without_a_period_there_is_no_tick() {
        let g = Gaps { gaps: (0..300u64).map(|k| (k * 6_543_210 + k * k, 30_000)).collect(), ..Gaps::default() };
        assert_eq!(tick_comb(&g.gaps), None);
        assert_eq!(classify(&g).0.len(), 0);
    }

    #[test]
    fn our_own_time_is_read_from_the_rows_of_each_kind() {
        let csv = "time_ns,cpu,gap_ns,explained_ns,unexplained_ns,top_kind,top_name,top_ns,causes,source\n\
                   1,1,9000,9000,0,irq,local_timer,5000,irq:local_timer=5000;timer:tick_nohz_handler=3600;self:jitterwatch=400,interrupted\n\
                   2,1,4000,4000,0,ipi,call_function_single,3000,ipi:call_function_single=3000;self:jitterwatch=250;ipi:ipi_mb=750,interrupted\n\
                   3,1,5000,5000,0,softirq,TIMER,5000,softirq:TIMER=5000,interrupted\n";
        assert_eq!(own_per_interruption(csv), (vec![400.0], vec![250.0]));
    }
}
