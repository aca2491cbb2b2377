//! The view model: the latest snapshot, what the user chose (pause, pane,
//! sort, CPU filter, help), and the figures derived from them. Pure: no
//! terminal, no clock, no channel; `render.rs` draws it, `mod.rs` carries
//! a reset to the collector, where the aggregates are kept.

use crate::doctor::Report;
use crate::interval::Hiccup;
use crate::snapshot::{Culprit, SenderLine, Snapshot, ThreadLine};

use super::sysinfo::SysInfo;

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

    /// Senders have no largest stall nor last-seen time of their own:
    /// those orders are skipped there.
    fn applies_to_senders(self) -> bool {
        matches!(self, Sort::Total | Sort::Count | Sort::Name)
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
    /// Culprits by cause, or by who sent them.
    BySender,
    Reset,
    Help,
    /// Closes the help or the stall overlay.
    CloseHelp,
    /// Opens (or closes) the selected stall in full.
    Detail,
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
    pub audit: Option<Report>,
    pub color: bool,
    /// Latest snapshot from the collector (frozen while paused).
    snap: Snapshot,
    pub paused: bool,
    pub focus: Pane,
    pub sort: Sort,
    pub cpu_filter: Option<u32>,
    /// The Culprits pane groups causes by sender instead of by cause.
    pub by_sender: bool,
    /// Origins are traced (not `--no-origins`): says why no sender shows.
    pub origins: bool,
    /// Passive mode: the threads found at start, (tid, `comm[tid]`); one
    /// that has not run on a watched CPU yet is in no snapshot.
    pub found: Vec<(u32, String)>,
    pub help: bool,
    /// The recent-stalls pane's selected stall (its top line) shown in full.
    pub detail: bool,
    /// No new snapshot for a while (the collector stalled or ended).
    pub stale: bool,
    scroll: [usize; 4],
    /// How far the open overlay (help, a stall) is scrolled, in rows: at
    /// 80×24 neither fits. Drawing stops it at the overlay's last row.
    pub overlay_scroll: u16,
    rate_ref: Option<RateRef>,
    /// (events/s, hiccups/s per CPU in `view.cpus` order) over the last second.
    rates: Option<(f64, Vec<f64>)>,
}

impl App {
    pub fn new(info: SysInfo, snap: Snapshot, color: bool) -> Self {
        let mut app = Self {
            info,
            audit: None,
            color,
            snap,
            paused: false,
            focus: Pane::Culprits,
            sort: Sort::Total,
            cpu_filter: None,
            by_sender: false,
            origins: true,
            found: Vec::new(),
            help: false,
            detail: false,
            stale: false,
            scroll: [0; 4],
            overlay_scroll: 0,
            rate_ref: None,
            rates: None,
        };
        app.note_rates();
        app
    }

    /// A new snapshot. Ignored while paused: the view stays as it was.
    pub fn update(&mut self, snap: Snapshot) {
        if self.paused {
            return;
        }
        self.snap = snap;
        self.note_rates();
    }

    /// What is shown.
    pub fn view(&self) -> &Snapshot {
        &self.snap
    }

    fn note_rates(&mut self) {
        let hiccups: Vec<u64> = self.snap.cpus.iter().map(|c| c.hiccups).collect();
        let now = RateRef { now_ns: self.snap.now_ns, events: self.snap.counters.events, hiccups };
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
            _ => self.view().per_sec(self.view().counters.events),
        }
    }

    /// Hiccups per second on the `i`-th CPU, lately.
    pub fn hiccups_per_sec(&self, i: usize) -> f64 {
        match &self.rates {
            Some((_, c)) if self.view().elapsed_ns() >= 1_000_000_000 => c.get(i).copied().unwrap_or(0.0),
            _ => self.view().cpus.get(i).map_or(0.0, |c| self.view().per_sec(c.hiccups)),
        }
    }

    /// The second since start the sparkline ends at.
    pub fn spark_now(&self) -> u64 {
        self.snap.elapsed_ns() / 1_000_000_000
    }

    pub fn reset_active(&self) -> bool {
        self.snap.was_reset
    }

    /// Causes of the chosen CPU (or all), in the chosen order.
    pub fn culprits(&self) -> Vec<&Culprit> {
        let mut v: Vec<&Culprit> = self.view().culprits_of(self.cpu_filter).collect();
        match self.sort {
            Sort::Total => {}
            Sort::Count => v.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key))),
            Sort::Max => v.sort_by(|a, b| b.max_ns.cmp(&a.max_ns).then_with(|| a.key.cmp(&b.key))),
            Sort::Recent => v.sort_by(|a, b| b.last_seen_ns.cmp(&a.last_seen_ns).then_with(|| a.key.cmp(&b.key))),
            Sort::Name => v.sort_by_cached_key(|c| (c.key.cause.name(), c.key.cause.kind(), c.key.cpu)),
        }
        v
    }

    /// Senders to the chosen CPU (or all), in the chosen order (most time
    /// first where the order does not apply to senders).
    pub fn senders(&self) -> Vec<&SenderLine> {
        let mut v: Vec<&SenderLine> = self.view().senders_of(self.cpu_filter).collect();
        fn key(s: &SenderLine) -> (&str, crate::cause::Kind, u32) {
            (&s.sender, s.kind, s.cpu)
        }
        match self.sort {
            Sort::Count => v.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| key(a).cmp(&key(b)))),
            Sort::Name => v.sort_by(|a, b| key(a).cmp(&key(b))),
            // Each CPU's come most time first; across CPUs, merged.
            _ => v.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(b.count.cmp(&a.count)).then_with(|| key(a).cmp(&key(b)))),
        }
        v
    }

    /// The fix for the biggest culprits of the chosen CPU (or all), the
    /// first one that has one: by cause, the audit's; by sender, what stops
    /// that sender (as the summary's hints).
    pub fn hint(&self) -> Option<String> {
        if self.by_sender {
            return self
                .senders()
                .into_iter()
                .take(3)
                .find_map(|s| crate::doctor::sender_hint_for(s.kind, &s.sender, s.cpu, s.count, self.sent_by(s).as_ref()));
        }
        let report = self.audit.as_ref()?;
        // Passive mode (watched threads) has no probe: no hint about parking one.
        let probe = self.watched().is_empty();
        self.view()
            .culprits_of(self.cpu_filter)
            .take(3)
            .find_map(|c| crate::doctor::hints_for(report, &c.key.cause.cause(), probe).into_iter().next())
    }

    /// Passive mode: every watched thread, those seen first (most time
    /// lost first), then those found at start not seen since, as (tid, name,
    /// its figures if seen).
    pub fn watched(&self) -> Vec<(u32, &str, Option<&ThreadLine>)> {
        let seen = self.view().threads.iter().map(|t| (t.tid, t.name.as_str(), Some(t)));
        let unseen = self
            .found
            .iter()
            .filter(|(tid, _)| !self.view().threads.iter().any(|t| t.tid == *tid))
            .map(|(tid, n)| (*tid, n.as_str(), None));
        seen.chain(unseen).collect()
    }

    /// What `s` sent, as far as the recent worst stalls show it: its
    /// largest cause of that kind there (an IPI's function names its fix).
    fn sent_by(&self, s: &SenderLine) -> Option<crate::cause::Cause> {
        use crate::stats::origins::SenderKey;
        self.view()
            .worst
            .iter()
            .filter(|h| h.cpu == s.cpu)
            .flat_map(|h| h.origins.iter().map(move |(c, o)| (h.causes.iter().find(|x| &x.0 == c).map_or(0, |x| x.1), c, o)))
            .filter(|(_, c, o)| c.kind() == s.kind && SenderKey::of(&o.sender).name() == s.sender)
            .max_by_key(|(ns, _, _)| *ns)
            .map(|(_, c, _)| c.cause())
    }

    /// Recent worst stalls of the chosen CPU (or all), largest first.
    pub fn stalls(&self) -> impl Iterator<Item = &Hiccup> {
        self.view().worst.iter().filter(|h| self.cpu_filter.is_none_or(|c| h.cpu == c))
    }

    /// The stall at the top of the recent-stalls pane (where it is
    /// scrolled to): the one Enter shows in full.
    pub fn selected_stall(&self) -> Option<&Hiccup> {
        let n = self.stalls().count();
        self.stalls().nth(self.scroll(Pane::Stalls).min(n.saturating_sub(1)))
    }

    /// An overlay is open (help, or a stall): Esc closes it.
    pub fn overlay_open(&self) -> bool {
        self.help || self.detail
    }

    pub fn scroll(&self, pane: Pane) -> usize {
        self.scroll[pane.index()]
    }

    fn len(&self, pane: Pane) -> usize {
        match pane {
            Pane::Culprits if self.by_sender => self.senders().len(),
            Pane::Culprits => self.culprits().len(),
            Pane::Stalls => self.stalls().count(),
            Pane::Cpus | Pane::Histogram => 0,
        }
    }

    /// Applies a user action; what the collector must do about it (quit,
    /// reset) is the caller's.
    pub fn apply(&mut self, a: Action) {
        match a {
            Action::Quit => {}
            Action::Pause => self.paused = !self.paused,
            Action::NextPane => self.focus = Pane::ALL[(self.focus.index() + 1) % 4],
            Action::PrevPane => self.focus = Pane::ALL[(self.focus.index() + 3) % 4],
            Action::CycleSort => {
                self.sort = self.sort.next();
                while self.by_sender && !self.sort.applies_to_senders() {
                    self.sort = self.sort.next();
                }
                self.scroll[Pane::Culprits.index()] = 0;
            }
            Action::BySender => {
                self.by_sender = !self.by_sender;
                if self.by_sender && !self.sort.applies_to_senders() {
                    self.sort = Sort::Total;
                }
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
            Action::Reset => self.scroll = [0; 4],
            Action::Help => {
                self.help = !self.help;
                self.overlay_scroll = 0;
            }
            Action::CloseHelp => {
                self.help = false;
                self.detail = false;
                self.overlay_scroll = 0;
            }
            Action::Detail => {
                self.detail = !self.detail;
                self.overlay_scroll = 0;
            }
            // An open overlay takes the scrolling keys; a bound far past
            // any overlay's rows (drawing stops it at its last).
            Action::Scroll(d) if self.overlay_open() => {
                self.overlay_scroll = (i64::from(self.overlay_scroll) + d as i64).clamp(0, 500) as u16;
            }
            Action::Top if self.overlay_open() => self.overlay_scroll = 0,
            Action::Scroll(d) => {
                let max = self.len(self.focus).saturating_sub(1);
                let s = &mut self.scroll[self.focus.index()];
                *s = s.saturating_add_signed(d).min(max);
            }
            Action::Top => self.scroll[self.focus.index()] = 0,
        }
    }
}
