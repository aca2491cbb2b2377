//! A watched thread as passive mode knows it: where it is (running,
//! preempted, woken, asleep), how it was found, and what the summary says
//! of it besides its hiccups. The tracker (tracker.rs) keeps one per thread.

use crate::record::Comm;

use super::classes::Classes;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    Running {
        cpu: u32,
        since: u64,
    },
    /// `from`: where its gap began (an interruption that led to the
    /// preemption), at most `since`.
    Preempted {
        cpu: u32,
        since: u64,
        from: u64,
    },
    Woken {
        cpu: u32,
        at: u64,
    },
    Sleeping,
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

/// What passive mode knows of a watched thread besides its hiccups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadInfo {
    pub tid: u32,
    pub tgid: u32,
    pub comm: Comm,
    /// Time it ran or wanted to (running, preempted, waiting after a
    /// wake-up), ns: what "% of its runnable time lost" divides by.
    pub runnable_ns: u64,
    /// (from CPU, to CPU, times), in the order first seen.
    pub migrations: Vec<(u32, u32, u64)>,
    pub last_cpu: Option<u32>,
    pub found: Found,
    /// What reached it, counted as rtla osnoise counts (classes.rs).
    pub classes: Classes,
}

pub(super) struct Thread {
    pub(super) info: ThreadInfo,
    pub(super) state: State,
}

impl Thread {
    /// Its runnable time so far, up to `now` (the stretch it is in counted).
    pub(super) fn runnable_until(&self, now: u64) -> u64 {
        self.info.runnable_ns
            + match self.state {
                State::Running { since, .. } | State::Preempted { since, .. } => now.saturating_sub(since),
                State::Woken { at, .. } => now.saturating_sub(at),
                State::Sleeping => 0,
            }
    }
}
