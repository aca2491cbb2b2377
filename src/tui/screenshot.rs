//! The live screen as the README shows it: drawn through ratatui's
//! TestBackend from a scripted run (made-up host, CPUs and culprits of the
//! kinds a load test meets), never from a capture of this machine, so
//! `cargo xtask screenshots` draws the same picture everywhere.

use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::Terminal;

use super::app::App;
use super::sysinfo::{Isolation, SysInfo};
use crate::cause::{Cause, Symbol};
use crate::interval::Hiccup;
use crate::record::Vector;
use crate::snapshot::Snapshot;
use crate::stats::{Counters, SourceFigures, SpinFigures, Stats};

const S: u64 = 1_000_000_000;
const START: u64 = 1_000 * S;
/// How long the scripted run has been going when the screen is drawn.
const SECS: u64 = 47;
const CPUS: [usize; 2] = [2, 3];

/// A small linear congruential generator (Knuth's MMIX constants): the
/// same "random" stalls on every machine and every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    /// Uniform in lo..=hi.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

fn task(name: &[u8], pid: u32) -> Cause {
    // The kernel's comm: at most 15 bytes and a NUL (the names here fit).
    let mut comm = [0u8; crate::record::COMM_LEN];
    let n = name.len().min(comm.len() - 1);
    comm[..n].copy_from_slice(&name[..n]);
    Cause::Task { comm, pid: Some(pid) }
}

fn stall(cpu: u32, t0: u64, mut causes: Vec<(Cause, u64)>, unexplained: u64) -> Hiccup {
    causes.sort_by_key(|c| std::cmp::Reverse(c.1));
    let gap = causes.iter().map(|c| c.1).sum::<u64>() + unexplained;
    let causes = causes.iter().map(|(c, ns)| (crate::cause::CauseId::of(c), *ns)).collect();
    Hiccup { cpu, t0, gap, causes, unexplained, ..Hiccup::default() }
}

/// A scripted run's stalls on `cpu` over `secs` seconds from `start`.
/// Untuned: one each of the usual suspects (a stray batch job, vmstat's
/// per-CPU work, a device IRQ whose affinity was left open, TLB-shootdown
/// IPIs from a JVM elsewhere, the tick); tuned: those gone (nohz_full, the
/// IRQ moved, the job in a cpuset) but for the odd IPI. Host pauses under
/// both, unexplained, as on any VM.
pub(crate) fn stalls(cpu: u32, start: u64, secs: u64, tuned: bool, seed: u64) -> Vec<Hiccup> {
    let mut r = Lcg(seed);
    let mut out = Vec::new();
    let tick = || Cause::Timer(Symbol::from("tick_nohz_handler"));
    let local_timer = || Cause::Vector(Vector::LocalTimer);
    for sec in 0..secs {
        let at = |ms: u64| start + sec * S + ms * 1_000_000;
        let mut one = |r: &mut Lcg, causes: Vec<(Cause, u64)>, unexplained: u64| {
            let t0 = at(r.range(0, 999));
            out.push(stall(cpu, t0, causes, unexplained));
        };
        // Host pauses: no kernel event covers them.
        for _ in 0..r.range(20, 45) {
            let (lo, hi) = if r.range(0, 40) == 0 { (20_000, 180_000) } else { (1_100, 9_000) };
            let u = r.range(lo, hi);
            one(&mut r, vec![], u);
        }
        if tuned {
            // The tick, once a second (nohz_full's residual 1 Hz).
            let c = vec![(tick(), r.range(1_800, 4_200)), (local_timer(), r.range(700, 1_600))];
            let u = r.range(50, 900);
            one(&mut r, c, u);
            if sec % 7 == 0 {
                let c = vec![
                    (Cause::Csd(Symbol::from("flush_tlb_func")), r.range(2_500, 6_000)),
                    (Cause::Vector(Vector::CallFunction), r.range(900, 1_800)),
                ];
                let u = r.range(100, 400);
                one(&mut r, c, u);
            }
            continue;
        }
        // The tick, every 4 ms: short, frequent.
        for _ in 0..250 {
            let c = vec![(tick(), r.range(1_800, 4_200)), (local_timer(), r.range(700, 1_600))];
            let u = r.range(50, 900);
            one(&mut r, c, u);
        }
        // vmstat_update once a second, run by the CPU's kworker.
        let c = vec![
            (Cause::Work(Symbol::from("vmstat_update")), r.range(18_000, 42_000)),
            (task(format!("kworker/{cpu}:1").as_bytes(), 88), r.range(3_000, 7_000)),
        ];
        let u = r.range(200, 1_500);
        one(&mut r, c, u);
        // A virtio IRQ whose affinity still includes this CPU.
        for _ in 0..r.range(4, 9) {
            let irq = Cause::Irq { irq: 24, name: std::sync::Arc::from(&b"virtio0-input.0"[..]) };
            let c = vec![(irq, r.range(6_000, 14_000)), (Cause::Softirq(3), r.range(4_000, 21_000))];
            let u = r.range(100, 900);
            one(&mut r, c, u);
        }
        // TLB shootdowns from a JVM on the housekeeping CPUs.
        if sec % 3 == 0 {
            let c = vec![
                (Cause::Csd(Symbol::from("flush_tlb_func")), r.range(2_500, 6_000)),
                (Cause::Vector(Vector::CallFunction), r.range(900, 1_800)),
            ];
            let u = r.range(100, 400);
            one(&mut r, c, u);
        }
        // A batch job started without a cpuset: the milliseconds.
        if (12..=15).contains(&sec) || sec == 38 {
            for _ in 0..r.range(2, 4) {
                let c = vec![(task(b"backup.sh", 30817), r.range(1_200_000, 4_100_000)), (tick(), 3_100)];
                let u = r.range(2_000, 9_000);
                one(&mut r, c, u);
            }
        }
        // RCU callbacks now and then.
        if sec % 4 == 1 {
            let c = vec![(Cause::Softirq(9), r.range(9_000, 60_000)), (task(b"rcu_preempt", 16), r.range(2_000, 8_000))];
            let u = r.range(100, 700);
            one(&mut r, c, u);
        }
    }
    out.sort_by_key(|h| h.t0);
    out
}

/// The live screen's run: CPU 3 untuned, CPU 2 tuned.
fn stats() -> Stats {
    let mut s = Stats::new(&CPUS, START);
    let mut all = stalls(2, START, SECS, true, 2);
    all.extend(stalls(3, START, SECS, false, 3));
    all.sort_by_key(|h| h.t0);
    for h in &all {
        s.record(h);
    }
    let mut raw = Counters::new(&CPUS);
    for c in &mut raw.cpus {
        c.threshold_ns = 1_000;
        // The loop's own turns under the threshold, log2 buckets (k holds
        // 2^(k-1)..2^k ns); the stalls above it fill theirs below.
        let mut hist = [0; crate::probe::HIST_BUCKETS];
        for (k, n) in [(4, 9_800_000_000u64), (5, 5_100_000_000), (6, 4_300_000), (7, 610_000), (8, 88_000), (9, 21_000), (10, 6_400)] {
            hist[k] = n / if c.cpu == 2 { 3 } else { 1 };
        }
        for h in all.iter().filter(|h| h.cpu == c.cpu) {
            hist[(64 - h.gap.leading_zeros() as usize).min(crate::probe::HIST_BUCKETS - 1)] += 1;
        }
        c.own = SourceFigures::Spin(SpinFigures {
            floor_ns: 9,
            loop_mean_ns: 0.0,
            loop_quiet_mean_ns: 0.0,
            hist,
            tsc_drift_ns: None,
            counter: Some("tsc"),
        });
    }
    raw.events = 61_400;
    raw.lag_ns = 3_100_000;
    raw.consumer_cpu_ns = 240_000_000;
    raw.switch_hook = "tp_btf/sched_switch on every CPU (the default: the cheapest hook on the watched CPUs)".into();
    s.update_counters(raw, START + SECS * S);
    s
}

fn info() -> SysInfo {
    let iso = Isolation { isolcpus: true, nohz_full: true };
    SysInfo {
        host: "demo-host".into(),
        kernel: "6.1.0-50-amd64".into(),
        cpus: CPUS.iter().map(|&c| (c, iso)).collect(),
        topology: "node 0".into(),
        sibling_open: false,
    }
}

/// The live screen of the scripted run, `w`×`h` cells, in colour.
pub fn demo(w: u16, h: u16) -> Buffer {
    let app = App::new(info(), Snapshot::of(&stats()), true);
    let mut t = Terminal::new(TestBackend::new(w, h)).expect("a TestBackend cannot fail");
    t.draw(|f| f.render_widget(&app, f.area())).expect("a TestBackend cannot fail");
    t.backend().buffer().clone()
}

/// The live screen of `stats` (a scripted run's aggregates), `w`×`h`
/// cells, as text, on a made-up host whose watched CPUs are isolated.
#[cfg(test)]
pub(crate) fn screen_of(stats: &Stats, w: u16, h: u16) -> String {
    let iso = Isolation { isolcpus: true, nohz_full: true };
    let cpus = stats.cpus().iter().map(|c| (c.cpu as usize, iso)).collect();
    let info = SysInfo { host: "golden".into(), kernel: "6.18.0-golden".into(), cpus, topology: "node 0".into(), sibling_open: false };
    let app = App::new(info, Snapshot::of(stats), true);
    let mut t = Terminal::new(TestBackend::new(w, h)).expect("a TestBackend cannot fail");
    t.draw(|f| f.render_widget(&app, f.area())).expect("a TestBackend cannot fail");
    text(t.backend().buffer())
}

/// A drawn screen as text, one line a row of cells (colour dropped).
pub(crate) fn text(b: &Buffer) -> String {
    let w = b.area.width as usize;
    b.content.chunks(w).map(|row| row.iter().map(|c| c.symbol()).collect::<String>() + "\n").collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripted_run_names_its_culprits() {
        let s = text(&demo(120, 40));
        for name in ["backup.sh[30817]", "vmstat_update", "24:virtio0-input.0", "flush_tlb_func", "tick_nohz_handler", "Loop gaps"] {
            assert!(s.contains(name), "{name} not on\n{s}");
        }
        // The same screen every time.
        assert_eq!(demo(120, 40), demo(120, 40));
    }
}
