//! A watched thread as passive mode knows it: where it is (running,
//! preempted, woken, asleep), how it was found, and what the summary says
//! of it besides its hiccups. The tracker (tracker.rs) keeps one per thread.

use crate::record::Comm;

use super::classes::Classes;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// On `cpu` since `since`. `whole`: its switch in was seen (or placed
    /// by the kernel's count), so the kernel's count of this run began
    /// inside the window; else (found running at attach, renamed) it began
    /// before, and only the part from `since` is the window's.
    Running {
        cpu: u32,
        since: u64,
        whole: bool,
    },
    /// On the runqueue since `since` (its switch out). `from`: where its
    /// gap began (an interruption that led to the preemption), at most
    /// `since`.
    Preempted {
        cpu: u32,
        since: u64,
        from: u64,
    },
    /// Queued on a runqueue at `at` by a wake-up that began at `from`
    /// (its `sched_waking`, at most `at`: the delivery before the enqueue).
    Woken {
        cpu: u32,
        at: u64,
        from: u64,
    },
    /// Its switch out was not seen (another task was next seen switching
    /// out there): preempted or asleep since `since`, not known which. A
    /// wake-up says asleep; a switch in without one, preempted.
    Unseen {
        cpu: u32,
        since: u64,
    },
    Sleeping,
    /// Switched out dead: its books are closed.
    Exited,
}
/// How passive mode learnt of a thread: said in the summary, so a user
/// knows why a thread is (or is not yet) watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Found {
    /// Running on a watched CPU when tracing began (read from /proc): on
    /// an isolated CPU it may never switch.
    RunningAtAttach,
    /// At a context switch into or out of it.
    Switch,
    /// At its wake-up.
    Wakeup,
    /// Running, when it took the watched name (exec, prctl).
    Rename,
}

impl Found {
    pub fn words(self) -> &'static str {
        match self {
            Found::RunningAtAttach => "found running at attach (from /proc)",
            Found::Switch => "found at a context switch",
            Found::Wakeup => "found at a wake-up",
            Found::Rename => "found running when it took the name (exec or prctl)",
        }
    }
}

/// The part of a thread's books every view shows as it is (the summary's
/// thread rows carry it whole): the hypervisor's share of its runs, its
/// waits by the clock, and what the kernel booked of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Booked {
    /// Of its time on a CPU by the clock (`Books::ran_ns`), the part the
    /// hypervisor ran something else (the steal clock's advance while it
    /// was on the CPU): the kernel leaves it out of the thread's run time,
    /// so schedstat's first field is `ran_ns - stolen_ns`. Counted from
    /// the CPU's first steal reading on.
    pub stolen_ns: u64,
    /// On a runqueue, wanting a CPU, by the clock: from a preemption (its
    /// switch out), or from a wake-up (sched_wakeup fires once the thread
    /// is queued), to its switch in.
    pub queued_ns: u64,
    /// The part of `queued_ns` after wake-ups.
    pub woken_queued_ns: u64,
    /// What the kernel booked to its run_delay over the same window
    /// (schedstat's second field), from its own count read at each switch.
    pub kernel_queued_ns: u64,
    /// The part of the kernel's run_delay that ran by the clock: a
    /// preemption that a wake-up decided (the woken task's, on another CPU
    /// as often as not) is switched at the runqueue clock of that wake-up,
    /// which the switch does not read again (`wakeup_preempt()` asks it to
    /// skip the update); the thread ran on until the switch (the resched
    /// IPI's way, here), and the kernel books that stretch as waiting. Per
    /// preemption: the kernel's run time of the tasks that ran meanwhile
    /// (each switch record's `prev_ran`, on that clock) less the clock's
    /// wait, where every one of them is known.
    pub kernel_stale_ns: u64,
    /// The other way: the part of the clock's wait after a preemption that
    /// the kernel booked as the run of the tasks that ran meanwhile. Their
    /// run ends where `__schedule()` read the runqueue clock, the wait at
    /// the switch's tracepoint after it; a host pause between the two is
    /// on one side in each book. Per preemption: the clock's wait less the
    /// kernel's, where every run in it is known.
    pub kernel_short_ns: u64,
}

/// A thread's time as the kernel books it in `/proc/PID/task/TID/schedstat`
/// (time on a CPU, time waiting on a runqueue), counted from the context
/// switches and wake-ups over the window in which passive mode saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Books {
    /// On a CPU, by the clock (from switch in to switch out).
    pub ran_ns: u64,
    /// On a CPU as the kernel books it (schedstat's first field, the
    /// steal clock's advance left out): each run's `se.sum_exec_runtime`
    /// as the thread came in and as it left, which every switch record
    /// carries. The kernel starts a run where `__schedule()` last read its
    /// runqueue clock, and after a wake-up that preempts (always, onto an
    /// idle CPU) that is the wake-up's own reading, at the enqueue
    /// (`wakeup_preempt()` asks the switch to skip its update): the wait
    /// for the switch, which our clock books as `woken_queued_ns`, is run
    /// time in the kernel's books. A run whose switch in was not read
    /// (found running, renamed, placed) counts by the clock, and
    /// `kernel_on_cpu_ns()` leaves the steal read in it out.
    pub kernel_ran_ns: u64,
    /// The kernel's run time (low 32 bits) read as the thread came in.
    pub(super) runtime_seen: Option<u32>,
    /// What the summary shows of the books as they are (its thread rows
    /// carry this whole).
    pub booked: Booked,
    /// The part of `stolen_ns` inside runs counted by the clock (no kernel
    /// count of them): `kernel_ran_ns` has it, the kernel's books do not.
    pub clock_stolen_ns: u64,
    /// The last run ended was counted by the clock: a steal reading taken
    /// with its switch out is left out of it.
    pub(super) last_run_by_clock: bool,
    /// The last run ended, by the clock (from, to): the steal reading
    /// taken with its switch out belongs to it.
    pub(super) last_run: (u64, u64),
    /// The run the steal last booked here was part of (its start), and how
    /// much was booked to it: a run's share of the hypervisor's time is at
    /// most its length (Books::stole).
    pub(super) run_stolen: (u64, u64),
    /// The kernel's run_delay (low 32 bits) as last read, while the
    /// window's bookings are being summed (None: no reading yet, or the
    /// last one came before the window).
    pub(super) delay_seen: Option<u32>,
    /// The window these books cover: from when the thread was first known
    /// to run or to wait, to its last switch out (or the last look).
    pub from_ns: Option<u64>,
    pub to_ns: u64,
    /// Switches into it no program saw, placed by how long it had run when
    /// it next switched out (the kernel's own count, from BPF).
    pub placed: u64,
    /// Switches into it no program saw and that could not be placed (the
    /// kernel gave no run time): their run and wait are missing here.
    pub unplaced: u64,
    /// Waits no hook saw begin (a wake-up and the switch in both unseen),
    /// taken from the kernel's books at the next switch out.
    pub from_kernel: u64,
    /// Such a wait is open: the next reading of the kernel's books gives it.
    pub(super) unseen_wait: bool,
}

impl Books {
    /// Ran or waited to, by the clock: what "% of its runnable time lost"
    /// divides by.
    pub fn runnable_ns(&self) -> u64 {
        self.ran_ns + self.booked.queued_ns
    }

    /// On a CPU as the kernel books it (schedstat's first field): the
    /// hypervisor's share left out.
    pub fn on_cpu_ns(&self) -> u64 {
        self.ran_ns.saturating_sub(self.booked.stolen_ns)
    }

    /// On a CPU as the kernel books it (schedstat's first field): the
    /// hypervisor's share of the runs only the clock counted left out.
    pub fn kernel_on_cpu_ns(&self) -> u64 {
        self.kernel_ran_ns.saturating_sub(self.clock_stolen_ns)
    }

    /// The steal clock moved by `ns` while it ran from `since`, read at
    /// `now`; `by_clock`: in a run the clock counts (else the kernel's
    /// count has it left out). A reading is taken with the next record
    /// after the runqueue's clock moved, and that update may have closed
    /// the stretch before the run (the switch into it, or a remote
    /// wake-up's, while the CPU idled through a host pause): what the run
    /// cannot hold is not its own.
    pub(super) fn stole(&mut self, ns: u64, by_clock: bool, (since, now): (u64, u64)) {
        if self.run_stolen.0 != since {
            self.run_stolen = (since, 0);
        }
        let ns = ns.min(now.saturating_sub(since).saturating_sub(self.run_stolen.1));
        self.run_stolen.1 += ns;
        self.booked.stolen_ns += ns;
        if by_clock {
            self.clock_stolen_ns += ns;
        }
    }

    fn open(&mut self, at: u64) {
        if self.from_ns.is_none() {
            self.from_ns = Some(at);
        }
        self.to_ns = self.to_ns.max(at);
    }

    /// A run from `since` to `until` by the clock, `kernel` ns of it as
    /// the kernel books it (None: not known; the clock's length counts).
    pub(super) fn ran(&mut self, since: u64, until: u64, kernel: Option<u64>) {
        self.open(since);
        let ns = until.saturating_sub(since);
        self.ran_ns += ns;
        self.kernel_ran_ns += kernel.unwrap_or(ns);
        self.last_run_by_clock = kernel.is_none();
        self.last_run = (since, until);
        self.to_ns = self.to_ns.max(until);
    }

    /// A wait on a runqueue from `since` to `until`; `woken`: it began
    /// at a wake-up (else a preemption).
    pub(super) fn queued(&mut self, since: u64, until: u64, woken: bool) {
        self.open(since);
        let ns = until.saturating_sub(since);
        self.booked.queued_ns += ns;
        if woken {
            self.booked.woken_queued_ns += ns;
        }
        self.to_ns = self.to_ns.max(until);
    }

    /// The kernel's run_delay read at a switch (`delay`, low 32 bits):
    /// what it booked since the last reading joins the window's sum.
    /// `baseline`: the reading comes before a wait of the window (else the
    /// next reading starts the sum afresh).
    pub(super) fn kernel_delay(&mut self, delay: Option<u32>, baseline: bool) {
        let Some(d) = delay else { return };
        if let Some(seen) = self.delay_seen {
            let booked = u64::from(d.wrapping_sub(seen));
            self.booked.kernel_queued_ns += booked;
            if std::mem::take(&mut self.unseen_wait) {
                // No clock of ours saw that wait: the kernel's count is all
                // there is (it began at a wake-up, the wait no hook saw).
                self.booked.queued_ns += booked;
                self.booked.woken_queued_ns += booked;
                self.from_kernel += 1;
            }
        }
        self.unseen_wait = false;
        self.delay_seen = baseline.then_some(d);
    }

    /// Known to exist from `at` on, neither running nor waiting yet (found
    /// asleep): the window begins.
    pub(super) fn seen(&mut self, at: u64) {
        self.open(at);
        // No run of it is in the books: no steal either.
        self.last_run = (at, at);
    }
}

/// A 32-bit count of ns that wrapped, `low`, near `estimate`: the value
/// with those low bits closest to it (exact while the two differ by less
/// than 2.1 s).
pub(super) fn unwrap32(low: u32, estimate: u64) -> u64 {
    let base = estimate & !0xffff_ffff;
    [base.wrapping_sub(1 << 32), base, base + (1 << 32)]
        .into_iter()
        .map(|b| b.wrapping_add(u64::from(low)))
        .filter(|&v| v < 1 << 63)
        .min_by_key(|&v| v.abs_diff(estimate))
        .unwrap_or(u64::from(low))
}

/// What passive mode knows of a watched thread besides its hiccups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadInfo {
    pub tid: u32,
    pub tgid: u32,
    pub comm: Comm,
    /// Its time on a CPU and on a runqueue, as known at the last look.
    pub books: Books,
    /// (from CPU, to CPU, times), in the order first seen.
    pub migrations: Vec<(u32, u32, u64)>,
    pub last_cpu: Option<u32>,
    pub found: Found,
    /// What reached it, counted as rtla osnoise counts (classes.rs).
    pub classes: Classes,
}

impl ThreadInfo {
    pub(super) fn new(tid: u32, tgid: u32, comm: Comm, found: Found) -> Self {
        ThreadInfo { tid, tgid, comm, books: Books::default(), migrations: Vec::new(), last_cpu: None, found, classes: Classes::default() }
    }

    /// Ran or waited to, ns.
    pub fn runnable_ns(&self) -> u64 {
        self.books.runnable_ns()
    }
}

pub(super) struct Thread {
    pub(super) info: ThreadInfo,
    pub(super) state: State,
}

impl Thread {
    /// Its books as they stand at `now`, the stretch it is in counted.
    pub(super) fn books_until(&self, now: u64) -> Books {
        let mut b = self.info.books;
        match self.state {
            State::Running { since, .. } => b.ran(since, now, None),
            // The kernel books a wait at its end: ours alone counts it so far.
            State::Preempted { since, .. } => b.queued(since, now, false),
            State::Woken { at, .. } => b.queued(at, now, true),
            // Asleep, its books are complete to now: sleep adds nothing.
            State::Sleeping => b.to_ns = b.to_ns.max(now),
            // Running or waiting elsewhere, or asleep: not known.
            State::Unseen { .. } | State::Exited => {}
        }
        b
    }
}
