//! What one firing of a hook costs before our program's first clock read
//! and after its last: the kernel's dispatch (the tracepoint's static call,
//! `__bpf_trace_run`, the program's prologue and return). Our programs
//! time themselves from their first clock read on (`own_ns`), so this part
//! of what watching adds would land in the interrupted cause's time. It is
//! priced here, once, before tracing starts: on a housekeeping CPU, a
//! system call that fires `task_rename` is timed with a program that does
//! nothing attached there and without it, its lines evicted before each
//! call (an interruption finds them cold: the host ran between), in
//! alternating rounds, and the difference of the two medians is one
//! firing's dispatch; the same calls with nothing evicted price a warm
//! one. The engine moves that much of the time before each of our records
//! into `self` (engine/timeline.rs, price.rs). Its error against what the
//! hooks alone add on a real interruption is figure 3b's.

use std::time::{Duration, Instant};

use libbpf_rs::Link;

use super::skel::JitterwatchSkel;

/// Rounds of each kind (with the program, without), alternating: a drift
/// of the machine's speed over the calibration falls on both alike.
const ROUNDS: usize = 5;
/// Timed calls a round, at most.
const CALLS: usize = 500;
/// And at least: a median of fewer would be one call's luck.
const MIN_CALLS: usize = 25;
/// What the evictions may take of every start, together: where one pass
/// is slow (an emulator: vmtest's TCG guests ran each start's 5,000 4 MiB
/// passes for tens of seconds, and its arm64 VMs overran their time
/// limit), each round has fewer calls. Here one pass takes ~40 µs: 500.
const EVICT_BUDGET: Duration = Duration::from_millis(250);
/// Touched before each call, a line in each 64 bytes: past L2 on our
/// machines, so the call's kernel lines come from L3 or memory, as after a
/// VM exit.
const EVICT_BYTES: usize = 4 << 20;

/// One firing's dispatch, as calibrated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Dispatch {
    /// The estimate, cold (the lines evicted before each call): the
    /// median call with the program attached less the median without (0
    /// if not above).
    pub ns: u64,
    /// How far the rounds' own cold estimates spread (largest less
    /// smallest): the calibration's error on this machine at that moment.
    pub spread_ns: u64,
    /// The same with nothing evicted between calls (a firing right after
    /// another of ours: engine/timeline/price.rs).
    pub warm_ns: u64,
}

/// The estimate from each round's call times, `with[i]` and `without[i]`
/// taken side by side, and the spread of the rounds' own. Pure: the
/// timing is `calibrate`'s.
pub fn estimate(with: &mut [Vec<u64>], without: &mut [Vec<u64>]) -> (u64, u64) {
    let median = |v: &mut Vec<u64>| -> Option<u64> {
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        Some(v[v.len() / 2])
    };
    let mut rounds: Vec<u64> = Vec::new();
    let (mut all_with, mut all_without) = (Vec::new(), Vec::new());
    for (w, wo) in with.iter_mut().zip(without.iter_mut()) {
        all_with.extend_from_slice(w);
        all_without.extend_from_slice(wo);
        if let (Some(a), Some(b)) = (median(w), median(wo)) {
            rounds.push(a.saturating_sub(b));
        }
    }
    let ns = match (median(&mut all_with), median(&mut all_without)) {
        (Some(a), Some(b)) => a.saturating_sub(b),
        _ => 0,
    };
    let spread_ns = match (rounds.iter().min(), rounds.iter().max()) {
        (Some(lo), Some(hi)) => hi - lo,
        _ => 0,
    };
    (ns, spread_ns)
}

/// Prices one firing on the calling thread's CPU (a housekeeping one),
/// attaching `dispatch_calib` and detaching it between rounds. None where
/// the program did not load (no task_rename tracepoint) or would not
/// attach: then nothing is moved into `self`.
pub(super) fn calibrate(skel: &JitterwatchSkel<'_>) -> Option<Dispatch> {
    let prog = &skel.progs.dispatch_calib;
    let mut evict = vec![0u8; EVICT_BYTES];
    let name = current_name()?;
    // One pass timed (after a first that faults the pages in) sets how
    // many calls a round the budget allows.
    evict_pass(&mut evict, 0);
    let t = Instant::now();
    evict_pass(&mut evict, 1);
    let calls = calls_within(t.elapsed());
    // [cold, warm] rounds, with the program and without.
    let mut with: [Vec<Vec<u64>>; 2] = Default::default();
    let mut without: [Vec<Vec<u64>>; 2] = Default::default();
    for round in 0..ROUNDS * 2 {
        let attached = round % 2 == 0;
        let link: Option<Link> = if attached { Some(prog.attach().ok()?) } else { None };
        for (cold, side) in [true, false].into_iter().zip(0..) {
            let mut times = Vec::with_capacity(calls);
            for i in 0..calls {
                if cold {
                    evict_pass(&mut evict, i as u8);
                }
                let t0 = Instant::now();
                rename(&name);
                times.push(t0.elapsed().as_nanos() as u64);
            }
            let kept = if attached { &mut with[side] } else { &mut without[side] };
            kept.push(times);
        }
        drop(link);
    }
    let (ns, spread_ns) = estimate(&mut with[0], &mut without[0]);
    let (warm_ns, _) = estimate(&mut with[1], &mut without[1]);
    Some(Dispatch { ns, spread_ns, warm_ns })
}

/// A line in each 64 bytes of `evict` written: the call's lines go.
fn evict_pass(evict: &mut [u8], i: u8) {
    for b in evict.iter_mut().step_by(64) {
        *b = b.wrapping_add(i);
    }
    std::hint::black_box(&evict);
}

/// Calls a round when one eviction pass takes `pass`: the rounds' passes
/// (one a call, on the cold side of each round) within EVICT_BUDGET,
/// between MIN_CALLS and CALLS.
fn calls_within(pass: Duration) -> usize {
    let per_call = pass.as_nanos().max(1) * (ROUNDS as u128 * 2);
    ((EVICT_BUDGET.as_nanos() / per_call) as usize).clamp(MIN_CALLS, CALLS)
}

/// The thread's own name, which renaming to keeps it.
fn current_name() -> Option<[u8; 16]> {
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes into the buffer given.
    (unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) } == 0).then_some(name)
}

/// The system call that fires task_rename once (on Linux 5.10 to 7.2).
fn rename(name: &[u8; 16]) {
    // SAFETY: PR_SET_NAME reads a NUL-terminated name of at most 16 bytes;
    // `name` came from PR_GET_NAME, which NUL-terminates it.
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_difference_of_the_medians_with_the_rounds_spread() {
        let mut with = vec![vec![300, 310, 900], vec![320, 330, 340]];
        let mut without = vec![vec![200, 210, 220], vec![200, 205, 5_000]];
        // All calls: medians 330 and 210; rounds: 310 - 210, 330 - 205.
        assert_eq!(estimate(&mut with, &mut without), (120, 25));
    }

    #[test]
    fn a_slow_eviction_takes_fewer_calls_never_too_few() {
        // Here: ~40 µs a pass, the whole 500.
        assert_eq!(calls_within(Duration::from_micros(40)), CALLS);
        // 1 ms a pass (an emulator): 25 calls, 10 rounds, 250 ms.
        assert_eq!(calls_within(Duration::from_millis(1)), 25);
        assert_eq!(calls_within(Duration::from_micros(500)), 50);
        // Slower still: never under MIN_CALLS.
        assert_eq!(calls_within(Duration::from_millis(20)), MIN_CALLS);
        assert_eq!(calls_within(Duration::ZERO), CALLS);
    }

    #[test]
    fn never_below_nothing() {
        assert_eq!(estimate(&mut [vec![100]], &mut [vec![150]]).0, 0);
        assert_eq!(estimate(&mut [], &mut []), (0, 0));
    }
}
