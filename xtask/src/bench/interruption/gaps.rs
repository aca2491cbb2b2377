//! Figure 3b's gaps: what the C loop printed, the kinds of interruption,
//! and which kind each gap is (the tick by its period, the others by
//! their sends), also split by the paired run's watching.

/// A tick's gap begins this close to its slot of the comb, ns.
const TICK_WITHIN_NS: u64 = 10_000;
/// A paired run's gaps that begin this soon after a window opens are left
/// out, ns: opening or closing links leaves work on the CPU (the wake-up
/// loop's first wake-up after them is tens of µs late).
pub const SETTLE_NS: u64 = 3_000_000;
/// The same for the window with no hook, whose links the loop closed just
/// before it on its own CPU: what the kernel frees after them runs there
/// later (3b's loop saw 30-50% more gap time from 3 ms to about 20 ms into
/// that window, over 77 windows, and not in the others; the tick takes it).
pub const SETTLE_UNATTACHED_NS: u64 = 25_000_000;

impl Window {
    /// How long after it opens this window's gaps are left out.
    pub fn settle_ns(self) -> u64 {
        match self {
            Window::Unattached => SETTLE_UNATTACHED_NS,
            _ => SETTLE_NS,
        }
    }
}

/// A paired run's windows: jitterwatch watching; not watching (its programs
/// attached, returning at their first test); no hook at all, the loop's
/// links to our programs closed (jitterwatch attached none). Their index
/// in [`classify_paired`]'s arrays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    Watched = 0,
    NotWatched = 1,
    Unattached = 2,
}

/// How many windows a paired run has.
pub const WINDOWS: usize = 3;

impl Window {
    /// From the code the loops print (3b's "T time code", 8b's "L late
    /// code pos"; 8b's code 2, a run without toggling, is no window; 3,
    /// a second link to each program, no loop opens since v8).
    pub fn from_code(code: u64) -> Option<Window> {
        match code {
            1 => Some(Window::Watched),
            0 => Some(Window::NotWatched),
            4 => Some(Window::Unattached),
            _ => None,
        }
    }
}

/// A gap: (start, length), ns.
type Gap = (u64, u64);

/// The interruptions 3b reads, in its tables' order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Tick,
    Ipi,
    Irq,
    Resched,
    Work,
    /// The function-call IPI again, 20 µs after another: warm caches.
    IpiWarm,
}

impl Kind {
    pub const ALL: [Kind; 6] = [Kind::Tick, Kind::Ipi, Kind::Irq, Kind::Resched, Kind::Work, Kind::IpiWarm];
    /// The kinds the target is for: the warm IPI only says how much of the
    /// cold one's cost is its cold caches.
    pub const TARGETED: [Kind; 5] = [Kind::Tick, Kind::Ipi, Kind::Irq, Kind::Resched, Kind::Work];

    /// Its name in the figure's keys (`tick_paired_p50_ns`).
    pub fn key(self) -> &'static str {
        match self {
            Kind::Tick => "tick",
            Kind::Ipi => "ipi",
            Kind::Irq => "irq",
            Kind::Resched => "resched",
            Kind::Work => "work",
            Kind::IpiWarm => "ipi_warm",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Kind::Tick => "a tick with one hrtimer",
            Kind::Ipi => "a function-call IPI with one call",
            Kind::Irq => "a device IRQ (a NIC's send completion) with its NET_RX softirq",
            Kind::Resched => "a reschedule IPI (a signal's kick, no switch)",
            Kind::Work => "a workqueue item (kworker preempts)",
            Kind::IpiWarm => "the same IPI 20 µs after another (warm caches; no target)",
        }
    }

    /// Our programs one interruption of this kind runs on the watched CPU,
    /// for the kernel's BPF statistics beside the end-to-end figure; None for
    /// the warm IPI, whose programs are the cold one's (their statistics
    /// mix both). "switch" is the context-switch program, by whichever
    /// name was loaded (measure::is_prog). The workqueue item's kworker is woken from the other CPU
    /// with a reschedule IPI, then preempts the loop and gives the CPU back.
    pub fn programs(self) -> Option<&'static [&'static str]> {
        Some(match self {
            Kind::Tick => &["on_local_timer_entry", "on_hrtimer_entry", "on_hrtimer_exit", "on_local_timer_exit"],
            Kind::Ipi => &["on_call_function_single_entry", "on_csd_entry", "on_csd_exit", "on_call_function_single_exit"],
            Kind::Irq => &["on_irq_entry", "on_irq_exit", "on_softirq_entry", "on_softirq_exit"],
            Kind::Resched => &["on_reschedule_entry", "on_reschedule_exit"],
            Kind::Work => &["on_reschedule_entry", "on_reschedule_exit", "switch", "on_work_start", "on_work_end", "switch"],
            Kind::IpiWarm => return None,
        })
    }

    /// The C program's letter for a send of this kind (the tick has none).
    fn letter(self) -> Option<&'static str> {
        match self {
            Kind::Tick => None,
            Kind::Ipi => Some("S"),
            Kind::Irq => Some("U"),
            Kind::Resched => Some("R"),
            Kind::Work => Some("W"),
            Kind::IpiWarm => Some("D"),
        }
    }

    /// How soon after its send a gap of this kind begins, ns: the IPIs and
    /// the kworker at once (all within 50 µs here); the NIC's completion
    /// once the host has sent the datagram (50–150 µs here). Each far below
    /// the slot, so no two kinds' windows meet.
    pub(super) fn within(self) -> u64 {
        match self {
            Kind::Tick => 0,
            Kind::Ipi | Kind::Resched | Kind::Work | Kind::IpiWarm => 60_000,
            Kind::Irq => 400_000,
        }
    }
}

/// Per kind, in Kind::ALL's order.
pub type ByKind<T> = [T; 6];

/// One run's gaps: (start, length) in CLOCK_MONOTONIC ns, the sends of
/// each kind, and (paired run) when each window opened.
#[derive(Default)]
pub struct Gaps {
    pub gaps: Vec<(u64, u64)>,
    pub sends: ByKind<Vec<u64>>,
    /// The first IPI of each warm pair ("P"): the gap just after it is
    /// no kind's (not the tick's either).
    pub primers: Vec<u64>,
    pub toggles: Vec<(u64, Window)>,
    /// The tick's (period, phase) by the kernel's books (tick.rs), when
    /// they were read; else it is looked for in the gaps (tick_comb).
    pub tick: Option<(u64, u64)>,
}

pub fn parse(text: &str) -> Gaps {
    let mut g = Gaps::default();
    for line in text.lines() {
        let mut w = line.split(' ');
        match (w.next(), w.next().and_then(|x| x.parse().ok()), w.next().and_then(|x| x.parse::<u64>().ok())) {
            (Some("G"), Some(at), Some(len)) => g.gaps.push((at, len)),
            (Some("P"), Some(at), None) => g.primers.push(at),
            (Some(k), Some(at), None) => {
                if let Some(i) = Kind::ALL.iter().position(|x| x.letter() == Some(k)) {
                    g.sends[i].push(at);
                }
            }
            (Some("T"), Some(at), Some(code)) => g.toggles.extend(Window::from_code(code).map(|w| (at, w))),
            _ => {}
        }
    }
    g
}

/// The tick's period and phase: of the periods 1/HZ can be (HZ 1000, 300,
/// 250, 100), the comb whose slots (±TICK_WITHIN_NS) hold a gap most often.
/// `gaps` are those no send explains; a slot in `masked` time (just after a
/// send, where a gap would be the send's) is not counted either way.
pub fn tick_comb(gaps: &[(u64, u64)], masked: &dyn Fn(u64) -> bool) -> Option<(u64, u64)> {
    let (first, last) = (gaps.first()?.0, gaps.last()?.0);
    let mut best: Option<(f64, u64, u64)> = None;
    for period in [1_000_000u64, 3_333_333, 4_000_000, 10_000_000] {
        // Phases in steps of half the slot's width.
        let step = TICK_WITHIN_NS;
        let mut counts = vec![0u32; (period / step) as usize + 1];
        for &(at, _) in gaps {
            counts[((at % period) / step) as usize] += 1;
        }
        let n = counts.len();
        let base = first - first % period;
        for i in 0..n {
            let hits = counts[i] + counts[(i + 1) % n];
            if hits == 0 {
                continue;
            }
            let phase = (i as u64) * step + step;
            let all = (0..).map(|k| base + phase + k * period).take_while(|&t| t <= last).filter(|&t| t >= first);
            let (total, slots) = all.fold((0usize, 0usize), |(n, free), t| (n + 1, free + usize::from(!masked(t))));
            // A phase mostly masked says too little to be the tick's.
            if 2 * slots < total {
                continue;
            }
            let share = f64::from(hits) / slots.max(1) as f64;
            if best.is_none_or(|b| share > b.0) {
                best = Some((share, period, phase));
            }
        }
    }
    // Nearly every slot holds a gap, or it is not the tick.
    best.filter(|b| b.0 >= 0.8).map(|b| (b.1, b.2))
}

/// Whether `at` is within `within` after one of `sends` (sorted).
pub(super) fn follows(sends: &[u64], at: u64, within: u64) -> bool {
    let i = sends.partition_point(|&s| s <= at);
    i > 0 && at - sends[i - 1] <= within
}

/// Each kind's gaps, (start, length), apart: a gap that could be two
/// kinds' is neither's.
fn classify_at(g: &Gaps) -> ByKind<Vec<Gap>> {
    let after = |k: Kind, at: u64| follows(&g.sends[k as usize], at, k.within());
    // The sends are periodic too: the comb is looked for without the gaps
    // just after them, and without its slots there.
    // A warm pair's first IPI: its gap begins at once, well within the
    // 20 µs before the second is sent.
    let primed = |at: u64| follows(&g.primers, at, 20_000);
    let after_any = |at: u64| primed(at) || Kind::ALL[1..].iter().any(|&k| after(k, at));
    let rest: Vec<(u64, u64)> = g.gaps.iter().copied().filter(|&(at, _)| !after_any(at)).collect();
    let comb = g.tick.or_else(|| tick_comb(&rest, &after_any));
    // A gap is the tick's if it begins near a tick, or began before one
    // and lasted past it (a host pause the tick merged with).
    let on_tick = |at: u64, len: u64| {
        comb.is_some_and(|(p, ph)| {
            let d = (at % p + p - ph % p) % p;
            d <= TICK_WITHIN_NS || p - d <= TICK_WITHIN_NS || len >= p - d
        })
    };
    let windows = |at: u64| Kind::ALL[1..].iter().filter(|&&k| after(k, at)).count();
    let mut by: ByKind<Vec<Gap>> = Default::default();
    by[0] = g.gaps.iter().copied().filter(|&(at, len)| on_tick(at, len) && windows(at) == 0 && !primed(at)).collect();
    // A send's interruption is the longest gap in its window: the host's
    // short pauses fall there too. A window that also holds the tick or
    // another kind's window gives nothing: the two may have merged.
    for k in Kind::ALL[1..].iter().copied() {
        for &s in &g.sends[k as usize] {
            let from = g.gaps.partition_point(|&(at, _)| at < s);
            let to = g.gaps.partition_point(|&(at, _)| at <= s + k.within());
            let mine = &g.gaps[from..to];
            if mine.iter().any(|&(at, len)| on_tick(at, len) || windows(at) > 1) {
                continue;
            }
            by[k as usize].extend(mine.iter().copied().max_by_key(|&(_, len)| len));
        }
    }
    by.iter_mut().for_each(|v| v.sort_unstable());
    by
}

/// Each kind's gaps (lengths, ns), apart.
pub fn classify(g: &Gaps) -> ByKind<Vec<u64>> {
    classify_at(g).map(|v| v.into_iter().map(|g| g.1).collect())
}

/// The window a gap that began at `at` is in, and when it opened (None:
/// before the first toggle).
pub(super) fn window_at(toggles: &[(u64, Window)], at: u64) -> Option<(u64, Window)> {
    let i = toggles.partition_point(|&(t, _)| t <= at);
    (i > 0).then(|| toggles[i - 1])
}

/// A paired run's gaps of each kind (lengths), split by the window each
/// began in (by `Window`) per kind; those within
/// [`Window::settle_ns`] of a window's opening left out. Found on the whole run
/// first, so the tick's comb holds every slot.
pub fn classify_paired(g: &Gaps) -> ByKind<[Vec<u64>; WINDOWS]> {
    classify_at(g).map(|v| {
        let mut by: [Vec<u64>; WINDOWS] = Default::default();
        for (at, len) in v {
            if let Some((opened, w)) = window_at(&g.toggles, at) {
                if at - opened >= w.settle_ns() {
                    by[w as usize].push(len);
                }
            }
        }
        by
    })
}
