//! `--stacks-above`: where a long stall's culprit was. The kernel takes the
//! stack of a task that leaves a watched CPU after running that long in
//! one go (a JW_STACK record right after its switch, naming an entry of
//! the BPF stacks map); the engine reads its frames as the record comes
//! (which frees the entry for the next long run), keeps the last few per
//! CPU, and gives a stall of that length or more the stack of its largest
//! cause when that cause is a task whose stack was taken inside the stall.

use std::collections::VecDeque;

/// Reads (and frees) a stack by its id: its frames, innermost first.
pub type Take = Box<dyn FnMut(u32) -> Option<Vec<u64>> + Send>;

/// Stacks kept per CPU: one a long run, and a stall waits a few ms at
/// most to be explained.
const KEPT: usize = 8;

/// Where stacks come from and from which stall length they are given.
pub struct Stacks {
    pub above_ns: u64,
    take: Take,
}

impl Stacks {
    pub fn new(above_ns: u64, take: Take) -> Self {
        Self { above_ns, take }
    }

    /// The frames of stack `id`, read once.
    pub(super) fn take(&mut self, id: u32) -> Option<Vec<u64>> {
        (self.take)(id).filter(|f| !f.is_empty())
    }
}

/// A CPU's stacks as taken: (when, whose pid, frames), oldest first.
#[derive(Default)]
pub(super) struct StackLog {
    taken: VecDeque<(u64, u32, Vec<u64>)>,
}

impl StackLog {
    pub fn push(&mut self, ts: u64, pid: u32, frames: Vec<u64>) {
        if self.taken.len() == KEPT {
            self.taken.pop_front();
        }
        self.taken.push_back((ts, pid, frames));
    }

    /// The last stack of `pid` taken inside [t0, t1].
    pub fn find(&self, pid: u32, t0: u64, t1: u64) -> Option<&[u64]> {
        self.taken.iter().rev().find(|(ts, p, _)| *p == pid && (t0..=t1).contains(ts)).map(|(_, _, f)| f.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_last_stack_of_a_pid_inside_the_stall_and_keeps_a_few() {
        let mut log = StackLog::default();
        log.push(100, 7, vec![1]);
        log.push(200, 8, vec![2]);
        log.push(300, 7, vec![3]);
        assert_eq!(log.find(7, 0, 1000), Some(&[3][..]));
        assert_eq!(log.find(7, 0, 250), Some(&[1][..]));
        assert_eq!(log.find(7, 150, 250), None, "outside the stall");
        assert_eq!(log.find(9, 0, 1000), None);
        for i in 0..KEPT as u64 {
            log.push(1000 + i, 9, vec![i]);
        }
        assert_eq!(log.find(7, 0, 1000), None, "pushed out");
        assert_eq!(log.find(9, 0, 2000), Some(&[KEPT as u64 - 1][..]));
    }

    #[test]
    fn an_empty_or_missing_stack_is_none() {
        let mut s = Stacks::new(1, Box::new(|id| (id != 0).then(|| if id == 1 { vec![] } else { vec![5] })));
        assert_eq!(s.take(0), None);
        assert_eq!(s.take(1), None);
        assert_eq!(s.take(2), Some(vec![5]));
    }
}
