//! Why the tick runs on a CPU, as the kernel says it: `timer:tick_stop`
//! fires on a nohz_full CPU at each attempt to stop the scheduler tick,
//! with the dependency that kept it running (TICK_DEP_MASK_*), and when it
//! stops. The BPF side tallies the verdicts per watched CPU
//! (`struct jw_tick`); this is what they mean. Pure: no BPF.

use serde::Serialize;

/// The kernel's tick dependencies by bit (include/linux/tick.h's
/// TICK_DEP_BIT_*), what stands behind each, and what removes it.
pub const DEPENDENCIES: [(&str, &str, &str); 6] = [
    (
        "POSIX_TIMER",
        "a POSIX CPU timer (timer_create on a CPU clock, setitimer ITIMER_PROF/VIRTUAL, RLIMIT_CPU) of a task here",
        "find it (`jitterwatch doctor` lists the CPU-clock timers in /proc/PID/timers of the tasks here; setitimer's are not listed) and time on CLOCK_MONOTONIC instead",
    ),
    (
        "PERF_EVENTS",
        "a perf event that needs the tick (a frequency-based sampling event: perf record/top without -c)",
        "stop the frequency-based perf session on this CPU, or sample by count (perf record -c N)",
    ),
    (
        "SCHED",
        "more than one runnable task on the CPU (or a SCHED_RR task): the scheduler needs the tick to share it",
        "leave one runnable task on the CPU: move the others to the housekeeping CPUs (taskset -pc CPUS PID, or CPUAffinity= in systemd), use SCHED_FIFO rather than SCHED_RR",
    ),
    (
        "CLOCK_UNSTABLE",
        "the sched clock is unstable (the TSC not trusted)",
        "see why the kernel distrusts the TSC (dmesg | grep -i tsc); tsc=reliable only where it truly is (an invariant TSC, one socket or synchronised sockets)",
    ),
    (
        "RCU",
        "RCU needs this CPU for a grace period (a callback queued here, rcu_nocbs= not covering it)",
        "boot with rcu_nocbs= covering the nohz_full CPUs (nohz_full= implies it since 5.x only where CONFIG_RCU_NOCB_CPU=y), and avoid system calls that queue RCU callbacks on them",
    ),
    (
        "RCU_EXP",
        "an expedited RCU grace period waits on this CPU",
        "find what expedites grace periods (module loads, network namespace teardown); rcupdate.rcu_normal=1 on the kernel command line makes them normal ones",
    ),
];

/// Why the tick runs on a CPU the kernel never tries to stop it on while
/// busy. There its only verdicts come from idle moments (the idle path
/// fires `timer:tick_stop` too), so the last one goes stale the moment a
/// task runs: a probe's CPU read "stopped" while its tick fired every 4 ms.
pub const NOT_NOHZ_FULL: &str = "not a nohz_full CPU: the kernel stops its tick only while the CPU idles, so it runs whenever a task does";

/// One CPU's tally, as read from the BPF side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub stops: u64,
    pub refusals: u64,
    pub deps: [u64; 8],
    pub last_success: bool,
    pub last_dep: u32,
    /// The CPU is in nohz_full (a host fact, read once): only there does
    /// the kernel try to stop a busy CPU's tick, so only there is the last
    /// verdict the tick's state.
    pub nohz_full: bool,
    /// The kernel can have nohz_full CPUs at all (CONFIG_NO_HZ_FULL: its
    /// sysfs file exists), so `nohz_full=` is advice worth giving.
    pub nohz_capable: bool,
}

impl Tally {
    /// Verdicts so far.
    pub fn verdicts(&self) -> u64 {
        self.stops + self.refusals
    }
}

/// What the tally says, for the summary and the screen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct State {
    /// `stopped` (the last attempt stopped it), `running` (the last one
    /// could not: `dependencies` say why; or not a nohz_full CPU, `reason`
    /// says so), or `no verdict` (a nohz_full CPU the kernel never tried
    /// to stop: one that never left its task and had nothing to stop).
    pub state: &'static str,
    /// Why it runs where no verdict applies: [`NOT_NOHZ_FULL`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// Every dependency that kept the tick during the run, most often first.
    pub dependencies: Vec<&'static str>,
    /// The one that kept it last (None when it stopped, or no verdict).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last: Option<&'static str>,
    pub stops: u64,
    pub refusals: u64,
    /// For SCHED: what ran beside the watched task (its largest task
    /// culprit), when one was seen; else for POSIX_TIMER the processes
    /// with CPU-clock timers, for PERF_EVENTS those holding perf events,
    /// that the audit at start found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub behind: Option<String>,
    /// What removes the dependency that kept it last, else the one that
    /// kept it most often (None when none did).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<&'static str>,
}

/// The name of a dependency mask's lowest bit set (the kernel reports one).
pub fn name_of(mask: u32) -> Option<&'static str> {
    (0..DEPENDENCIES.len()).find(|&i| mask & (1 << i) != 0).map(|i| DEPENDENCIES[i].0)
}

/// What stands behind a dependency, by its name.
pub fn why(name: &str) -> Option<&'static str> {
    DEPENDENCIES.iter().find(|d| d.0 == name).map(|d| d.1)
}

/// What removes a dependency, by its name.
pub fn fix(name: &str) -> Option<&'static str> {
    DEPENDENCIES.iter().find(|d| d.0 == name).map(|d| d.2)
}

pub fn state(t: &Tally, behind: Option<String>) -> State {
    let mut deps: Vec<(u64, usize)> = (0..DEPENDENCIES.len()).filter(|&i| t.deps[i] > 0).map(|i| (t.deps[i], i)).collect();
    deps.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let dependencies: Vec<&'static str> = deps.iter().map(|&(_, i)| DEPENDENCIES[i].0).collect();
    let (state, last) = match (t.verdicts(), t.last_success) {
        _ if !t.nohz_full => ("running", None),
        (0, _) => ("no verdict", None),
        (_, true) => ("stopped", None),
        (_, false) => ("running", name_of(t.last_dep)),
    };
    let behind = behind.filter(|_| dependencies.contains(&"SCHED"));
    let fix = last.or(dependencies.first().copied()).and_then(fix);
    let reason = (!t.nohz_full).then_some(NOT_NOHZ_FULL);
    State { state, reason, dependencies, last, stops: t.stops, refusals: t.refusals, behind, fix }
}

/// A tally worth saying: any verdict, or a CPU where none applies.
pub fn worth_saying(t: &Tally) -> bool {
    t.verdicts() > 0 || !t.nohz_full
}

/// The screen's words: `off`, `on (SCHED)`, or None without a verdict.
pub fn words(t: &Tally) -> Option<String> {
    let s = state(t, None);
    match s.state {
        _ if s.reason.is_some() => Some("on (not nohz_full)".to_string()),
        "stopped" => Some("off".to_string()),
        "running" => Some(format!("on ({})", s.last.unwrap_or("?"))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdicts_read_as_the_kernel_means_them() {
        let none = Tally { nohz_full: true, ..Tally::default() };
        assert_eq!(state(&none, None).state, "no verdict");
        assert_eq!(words(&none), None);
        // Two busy tasks: SCHED at every attempt.
        let mut t = Tally { refusals: 900, last_dep: 1 << 2, nohz_full: true, ..Tally::default() };
        t.deps[2] = 900;
        t.deps[4] = 3;
        let s = state(&t, Some("task:stress[42]".into()));
        assert_eq!((s.state, s.last), ("running", Some("SCHED")));
        assert_eq!(s.dependencies, ["SCHED", "RCU"]);
        assert_eq!(s.behind.as_deref(), Some("task:stress[42]"));
        assert_eq!(words(&t).as_deref(), Some("on (SCHED)"));
        // One task alone: the tick stopped at the last attempt.
        let t = Tally { stops: 3, refusals: 1, last_success: true, ..t };
        assert_eq!(state(&t, None).state, "stopped");
        assert_eq!(words(&t).as_deref(), Some("off"));
        // A task behind is said only where SCHED kept the tick.
        let mut p = Tally { refusals: 5, last_dep: 1, nohz_full: true, ..Tally::default() };
        p.deps[0] = 5;
        let s = state(&p, Some("task:x".into()));
        assert_eq!((s.last, s.behind), (Some("POSIX_TIMER"), None));
        assert_eq!(name_of(1 << 5), Some("RCU_EXP"));
        assert_eq!(name_of(0), None);
        assert!(why("SCHED").unwrap().contains("runnable task"));
    }

    /// The fix named is for the dependency that kept the tick last, else
    /// for the most frequent one; none without a dependency.
    #[test]
    fn the_fix_follows_the_dependency() {
        let mut t = Tally { refusals: 9, last_dep: 1 << 4, nohz_full: true, ..Tally::default() };
        t.deps[2] = 8;
        t.deps[4] = 1;
        assert_eq!(state(&t, None).fix, fix("RCU"));
        assert!(fix("RCU").unwrap().contains("rcu_nocbs="));
        let t = Tally { stops: 1, last_success: true, ..t };
        assert_eq!(state(&t, None).fix, fix("SCHED"));
        assert_eq!(state(&Tally { stops: 4, last_success: true, nohz_full: true, ..Tally::default() }, None).fix, None);
        assert!(DEPENDENCIES.iter().all(|d| !d.2.is_empty()));
    }

    /// Off nohz_full the kernel tries to stop the tick only at idle: an
    /// idle moment's "stopped" before a probe spun is not the tick's state
    /// (it fired every 4 ms while the screen said "off").
    #[test]
    fn a_cpu_not_in_nohz_full_runs_its_tick_whatever_its_idle_moments_said() {
        let idle_stops = Tally { stops: 4, last_success: true, nohz_full: false, ..Tally::default() };
        let s = state(&idle_stops, Some("task:x".into()));
        assert_eq!((s.state, s.reason, s.last, s.fix, s.behind), ("running", Some(NOT_NOHZ_FULL), None, None, None));
        assert_eq!(s.stops, 4);
        assert_eq!(words(&idle_stops).as_deref(), Some("on (not nohz_full)"));
        let never = Tally::default();
        assert!(worth_saying(&never), "said even without a verdict");
        assert_eq!(state(&never, None).state, "running");
        assert!(!worth_saying(&Tally { nohz_full: true, ..Tally::default() }));
        assert_eq!(state(&Tally { stops: 4, last_success: true, nohz_full: true, ..Tally::default() }, None).reason, None);
    }
}
