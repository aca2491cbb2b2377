//! Finding a time in a CPU's history near where the last search found one.
//! The engine attributes stalls in the order they ended, so each one's
//! segments lie at or just after the previous one's, a few hundred
//! segments before the end of a window that holds up to 65,536 (2 MiB). A
//! binary search from the middle touched about 16 cold cache lines for
//! each (the collector's largest single cost at figure 4c's passive TCP
//! mix, 9% of its time); from the last answer, strides that double until
//! they pass the answer, then a search within the last stride, touch a few
//! warm ones.

/// The first index in `0..len` at which `before(i)` is false, where
/// `before` is true on a prefix of the indices and false after it (what
/// `partition_point` returns), searched from `hint` out: any hint gives the
/// right answer, a near one gives it in a few reads.
pub fn first_not_before(len: usize, hint: usize, before: impl Fn(usize) -> bool) -> usize {
    let hint = hint.min(len);
    // The answer lies in lo..=hi: every index below lo is before, hi is
    // not (or is len).
    let (mut lo, mut hi) = (0, len);
    let mut stride = 1;
    if hint < len && before(hint) {
        lo = hint + 1;
        while lo < len {
            let probe = (lo - 1).saturating_add(stride).min(len - 1);
            if !before(probe) {
                hi = probe;
                break;
            }
            lo = probe + 1;
            stride *= 2;
        }
    } else {
        hi = hint;
        while hi > 0 {
            let probe = hi.saturating_sub(stride);
            if before(probe) {
                lo = probe + 1;
                break;
            }
            hi = probe;
            stride *= 2;
        }
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_finds_what_a_binary_search_finds_from_any_hint() {
        for len in 0..40usize {
            // Sorted with repeats, as segment ends are (a segment may be empty).
            let ends: Vec<u64> = (0..len).map(|i| (i as u64 / 3) * 10).collect();
            for t in 0..=(len as u64 / 3 + 2) * 10 {
                let want = ends.partition_point(|&e| e <= t);
                for hint in 0..len + 3 {
                    assert_eq!(first_not_before(len, hint, |i| ends[i] <= t), want, "len {len}, t {t}, hint {hint}");
                }
            }
        }
    }

    #[test]
    fn a_time_near_the_last_answer_reads_a_few_entries() {
        let ends: Vec<u64> = (0..65_536u64).collect();
        let reads = |hint: usize, t: u64| {
            let read = std::cell::Cell::new(0);
            let at = first_not_before(ends.len(), hint, |i| {
                read.set(read.get() + 1);
                ends[i] <= t
            });
            (at, read.get())
        };
        // 40 segments on from the last answer, and 40 back.
        let (at, n) = reads(60_000, 60_040);
        assert_eq!(at, 60_041);
        assert!(n <= 13, "{n} entries read forwards");
        let (at, n) = reads(60_000, 59_960);
        assert_eq!(at, 59_961);
        assert!(n <= 13, "{n} entries read backwards");
        // A binary search from the middle would read 16 or 17.
        assert!(reads(60_000, 60_000).1 <= 3);
    }
}
