//! The view model: the latest snapshot, what the user chose (pause, pane,
//! sort, CPU filter, reset baseline, help), and the figures derived from
//! them. Pure: no terminal, no clock, no locks; `render.rs` draws it.

use crate::stats::{CauseKey, CauseStats, Stats};

use super::sysinfo::SysInfo;
use super::view;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    Cpus,
    Culprits,
    Stalls,
    Histogram,
}

impl Pane {
    const ALL: [Pane; 4] = [Pane::Cpus, Pane::Culprits, Pane::Stalls, Pane::Histogram];

    fn index(self) -> usize {
        Self::ALL.iter().position(|&p| p == self).unwrap_or(0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    Total,
    Count,
    Max,
    Recent,
    Name,
}

impl Sort {
    pub fn label(self) -> &'static str {
        match self {
            Sort::Total => "total",
            Sort::Count => "count",
            Sort::Max => "max",
            Sort::Recent => "last seen",
            Sort::Name => "name",
        }
    }

    fn next(self) -> Self {
        match self {
            Sort::Total => Sort::Count,
            Sort::Count => Sort::Max,
            Sort::Max => Sort::Recent,
            Sort::Recent => Sort::Name,
            Sort::Name => Sort::Total,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    Pause,
    NextPane,
    PrevPane,
    CycleSort,
    CycleCpu,
    Reset,
    Help,
    CloseHelp,
    Scroll(isize),
    Top,
}

/// Events and hiccups counted at a reference time, for rates over the
/// last second or so (the averages since start hide a burst).
#[derive(Clone)]
struct RateRef {
    now_ns: u64,
    events: u64,
    hiccups: Vec<u64>,
}

pub struct App {
    pub info: SysInfo,
    /// The isolation audit taken at start, to name a fix for the culprits.
    pub audit: Option<crate::doctor::Report>,
    pub color: bool,
    /// Latest snapshot from the collector (frozen while paused).
    raw: Stats,
    baseline: Option<Stats>,
    /// `raw` minus the baseline, after a reset.
    since_reset: Option<Stats>,
    pub paused: bool,
    pub focus: Pane,
    pub sort: Sort,
    pub cpu_filter: Option<u32>,
    pub help: bool,
    /// No new snapshot for a while (the collector stalled or ended).
    pub stale: bool,
    scroll: [usize; 4],
    rate_ref: Option<RateRef>,
    /// (events/s, hiccups/s per CPU in `view.cpus` order) over the last second.
    rates: Option<(f64, Vec<f64>)>,
}

impl App {
    pub fn new(info: SysInfo, stats: Stats, color: bool) -> Self {
        let mut app = Self {
            info,
            audit: None,
            color,
            raw: stats,
            since_reset: None,
            baseline: None,
            paused: false,
            focus: Pane::Culprits,
            sort: Sort::Total,
            cpu_filter: None,
            help: false,
            stale: false,
            scroll: [0; 4],
            rate_ref: None,
            rates: None,
        };
        app.note_rates();
        app
    }

    /// The collector's `now_ns` of the snapshot shown (to skip clones of
    /// an unchanged one).
    pub fn snapshot_ns(&self) -> u64 {
        self.raw.now_ns
    }

    /// A new snapshot. Ignored while paused: the view stays as it was.
    pub fn update(&mut self, stats: Stats) {
        if self.paused {
            return;
        }
        self.raw = stats;
        self.note_rates();
        self.derive();
    }

    fn derive(&mut self) {
        self.since_reset = self.baseline.as_ref().map(|b| view::since(&self.raw, b));
    }

    /// What is shown: the latest snapshot, or what came since the reset.
    pub fn view(&self) -> &Stats {
        self.since_reset.as_ref().unwrap_or(&self.raw)
    }

    fn note_rates(&mut self) {
        let hiccups: Vec<u64> = self.raw.cpus.iter().map(|c| c.hiccups).collect();
        let now = RateRef { now_ns: self.raw.now_ns, events: self.raw.events, hiccups };
        let Some(r) = &self.rate_ref else {
            self.rate_ref = Some(now);
            return;
        };
        let dt = now.now_ns.saturating_sub(r.now_ns);
        if now.events < r.events || now.hiccups.len() != r.hiccups.len() {
            self.rate_ref = Some(now);
            self.rates = None;
        } else if dt >= 1_000_000_000 {
            let per_s = |d: u64| d as f64 * 1e9 / dt as f64;
            let cpus = now.hiccups.iter().zip(&r.hiccups).map(|(a, b)| per_s(a.saturating_sub(*b))).collect();
            self.rates = Some((per_s(now.events - r.events), cpus));
            self.rate_ref = Some(now);
        }
    }

    /// Kernel events traced per second, lately (the average until a
    /// second has passed, or after a reset).
    pub fn events_per_sec(&self) -> f64 {
        match &self.rates {
            Some((e, _)) if self.view().elapsed_ns() >= 1_000_000_000 => *e,
            _ => self.view().per_sec(self.view().events),
        }
    }

    /// Hiccups per second on the `i`-th CPU, lately.
    pub fn hiccups_per_sec(&self, i: usize) -> f64 {
        match &self.rates {
            Some((_, c)) if self.view().elapsed_ns() >= 1_000_000_000 => c.get(i).copied().unwrap_or(0.0),
            _ => self.view().cpus.get(i).map_or(0.0, |c| self.view().per_sec(c.hiccups)),
        }
    }

    /// The CPU second the sparkline ends at, and where seconds count from.
    pub fn spark_clock(&self) -> (u64, u64) {
        (self.raw.start_ns, self.raw.now_ns.saturating_sub(self.raw.start_ns) / 1_000_000_000)
    }

    pub fn reset_active(&self) -> bool {
        self.baseline.is_some()
    }

    /// Causes of the chosen CPU (or all), in the chosen order.
    pub fn culprits(&self) -> Vec<(&CauseKey, &CauseStats)> {
        let mut v = self.view().top_causes(self.cpu_filter);
        match self.sort {
            Sort::Total => {}
            Sort::Count => v.sort_by(|a, b| b.1.count.cmp(&a.1.count).then_with(|| a.0.cmp(b.0))),
            Sort::Max => v.sort_by(|a, b| b.1.max_ns.cmp(&a.1.max_ns).then_with(|| a.0.cmp(b.0))),
            Sort::Recent => v.sort_by(|a, b| b.1.last_seen_ns.cmp(&a.1.last_seen_ns).then_with(|| a.0.cmp(b.0))),
            Sort::Name => v.sort_by(|a, b| (&a.0 .2, a.0 .1, a.0 .0).cmp(&(&b.0 .2, b.0 .1, b.0 .0))),
        }
        v
    }

    /// The audit's fix for the biggest culprits of the chosen CPU (or all),
    /// the first one that has one.
    pub fn hint(&self) -> Option<String> {
        let report = self.audit.as_ref()?;
        self.view()
            .top_causes(self.cpu_filter)
            .into_iter()
            .take(3)
            .find_map(|((_, kind, name), _)| crate::doctor::hints(report, kind.as_str(), name).into_iter().next())
    }

    /// Recent worst stalls of the chosen CPU (or all), largest first.
    pub fn stalls(&self) -> impl Iterator<Item = &crate::attribution::Hiccup> {
        self.view().worst.iter().filter(|h| self.cpu_filter.is_none_or(|c| h.cpu == c))
    }

    pub fn scroll(&self, pane: Pane) -> usize {
        self.scroll[pane.index()]
    }

    fn len(&self, pane: Pane) -> usize {
        match pane {
            Pane::Culprits => self.culprits().len(),
            Pane::Stalls => self.stalls().count(),
            Pane::Cpus | Pane::Histogram => 0,
        }
    }

    /// Applies a user action; true when the user asked to quit.
    pub fn apply(&mut self, a: Action) -> bool {
        match a {
            Action::Quit => return true,
            Action::Pause => self.paused = !self.paused,
            Action::NextPane => self.focus = Pane::ALL[(self.focus.index() + 1) % 4],
            Action::PrevPane => self.focus = Pane::ALL[(self.focus.index() + 3) % 4],
            Action::CycleSort => {
                self.sort = self.sort.next();
                self.scroll[Pane::Culprits.index()] = 0;
            }
            Action::CycleCpu => {
                let cpus: Vec<u32> = self.view().cpus.iter().map(|c| c.cpu).collect();
                self.cpu_filter = match self.cpu_filter.and_then(|f| cpus.iter().position(|&c| c == f)) {
                    None => cpus.first().copied(),
                    Some(i) => cpus.get(i + 1).copied(),
                };
                self.scroll = [0; 4];
            }
            Action::Reset => {
                self.baseline = Some(self.raw.clone());
                self.scroll = [0; 4];
                self.derive();
            }
            Action::Help => self.help = !self.help,
            Action::CloseHelp => self.help = false,
            Action::Scroll(d) => {
                let max = self.len(self.focus).saturating_sub(1);
                let s = &mut self.scroll[self.focus.index()];
                *s = s.saturating_add_signed(d).min(max);
            }
            Action::Top => self.scroll[self.focus.index()] = 0,
        }
        false
    }
}
