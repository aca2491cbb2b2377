//! A thread known to run without a switch into it: read running from
//! /proc at attach (a seed, applied once the stream reaches the reading),
//! or renamed into the watched name where it runs (exec, prctl).

use crate::record::Task;

use super::super::thread::{Found, State, Thread, ThreadInfo};
use super::Tracker;

impl Tracker {
    /// Threads /proc showed running on a watched CPU, read at `read_at`
    /// (after tracing began): each runs there from `read_at`, unless the
    /// events up to then say otherwise. The events before the read are
    /// still in the ring when it is taken, so each seed waits on its CPU
    /// until the stream gets there ([`Self::settle`]).
    pub fn seed(&mut self, seeds: &[super::super::Seed], read_at: u64) {
        for s in seeds {
            if self.watched(s.cpu) {
                self.cpus[s.cpu as usize].seed = Some((*s, read_at));
            }
        }
    }

    /// The seed waiting on `cpu`, once the events up to its reading have
    /// been read (`upto`): a switch seen there, or the thread already
    /// known, says more than /proc did.
    pub(super) fn settle(&mut self, cpu: u32, upto: u64) {
        let c = self.cpus[cpu as usize];
        let Some((s, read_at)) = c.seed.filter(|&(_, at)| at <= upto) else { return };
        self.cpus[cpu as usize].seed = None;
        if c.switched || self.threads.contains_key(&s.tid) {
            return;
        }
        let mut info = ThreadInfo::new(s.tid, s.tgid, s.comm, Found::RunningAtAttach);
        info.last_cpu = Some(cpu);
        self.threads.insert(s.tid, Thread { info, state: State::Running { cpu, since: read_at, whole: false } });
        self.cpus[cpu as usize].running = Some(s.tid);
    }

    /// The task running on `cpu` took a new name (exec, prctl): a thread
    /// that now matches runs there from `ts` (on an isolated CPU it may
    /// never switch again).
    pub(super) fn rename(&mut self, cpu: u32, ts: u64, task: &Task) {
        let c = self.cpus[cpu as usize];
        if c.running.is_some() || !self.watched(cpu) {
            if let Some(t) = self.threads.get_mut(&task.pid) {
                t.info.comm = task.comm;
            }
            return;
        }
        let Some(t) = self.thread(task, cpu, Found::Rename) else { return };
        if !matches!(t.state, State::Running { .. }) {
            t.state = State::Running { cpu, since: ts, whole: false };
        }
        t.info.last_cpu = Some(cpu);
        self.cpus[cpu as usize].running = Some(task.pid);
    }
}
