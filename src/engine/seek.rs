//! The partition point of a time-ordered window, searched from its back.
//! A stall is charged as soon as its CPU's events pass it, and the window
//! is pruned once per drain, so what a stall overlaps is nearly always
//! among the window's last few segments: galloping back from the end finds
//! it in a few steps on recently written, cached entries, where a binary
//! search over the whole window (thousands of segments at a busy CPU's
//! rate) took a tenth of the collector's time.

use std::collections::VecDeque;

/// The index of the first element for which `before` is false, `before`
/// being true for a prefix of `v` and false after it (as
/// `VecDeque::partition_point`), found by galloping from the back.
pub fn partition_from_back<T>(v: &VecDeque<T>, before: impl Fn(&T) -> bool) -> usize {
    let n = v.len();
    // v[hi..] are all past the point.
    let (mut hi, mut step) = (n, 1);
    let lo = loop {
        let lo = n.saturating_sub(step);
        if lo == 0 || before(&v[lo]) {
            break lo;
        }
        hi = lo;
        step *= 2;
    };
    // The point is in [lo, hi].
    let (mut a, mut b) = (lo, hi);
    while a < b {
        let m = a + (b - a) / 2;
        if before(&v[m]) {
            a = m + 1;
        } else {
            b = m;
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_finds_what_a_binary_search_finds_wherever_the_point_is() {
        for n in [0usize, 1, 2, 3, 7, 64, 1000] {
            // Ends that repeat, so equal keys straddle the point too.
            let v: VecDeque<u64> = (0..n as u64).map(|i| i / 3 * 10).collect();
            for t in 0..(n as u64 / 3 * 10 + 20) {
                let want = v.partition_point(|&e| e <= t);
                assert_eq!(partition_from_back(&v, |&e| e <= t), want, "n {n}, t {t}");
            }
        }
    }

    #[test]
    fn a_window_that_wrapped_round_its_buffer_is_searched_in_order() {
        let mut v: VecDeque<u64> = VecDeque::with_capacity(8);
        for e in 0..8 {
            v.push_back(e);
        }
        v.pop_front();
        v.pop_front();
        v.push_back(8);
        v.push_back(9);
        for t in 0..12 {
            assert_eq!(partition_from_back(&v, |&e| e <= t), v.partition_point(|&e| e <= t));
        }
    }
}
