//! The loop floor: how long one iteration of the probe's loop takes when
//! nothing takes the CPU — the loop's period, never less.
//!
//! The smallest delta between two clock reads is not that figure: the CPU
//! may execute two `rdtsc`s closer together than the loop's period (they
//! are not serialising), and a clock coarser than the loop steps by 0 one
//! iteration and by two periods the next. On a VM here the TSC loop's
//! period is ≈9.6 ns while its smallest delta read 1 ns (and the threshold
//! of 8 × it, 8 ns, reported the loop). So the floor is measured over
//! blocks of [`BLOCK`] iterations (reordering and the clock's steps move
//! only a block's ends, spreading their error over the whole block), and
//! is a low percentile ([`PERCENTILE`]) of the blocks' mean iteration time:
//! a block that something interrupted, or that missed the cache, is slow
//! and lies above it. The histogram is a fixed array on the probe's stack:
//! adding a block is an index computation and an increment, no allocation.

/// Iterations per block.
pub const BLOCK: u32 = 64;
/// The percentile of the blocks' mean iteration time taken as the floor.
pub const PERCENTILE: u64 = 5;

/// Block lengths below this are counted exactly.
const LINEAR: usize = 128;
/// Above, each octave has 2^SUB_BITS buckets (1.6% wide at most).
const SUB_BITS: u32 = 6;
/// Octaves counted above the linear part (up to 2^40 clock units a block:
/// minutes at a few GHz); longer blocks land in the last bucket.
const OCTAVES: usize = 34;
const BUCKETS: usize = LINEAR + (OCTAVES << SUB_BITS);

/// Counts of blocks by length, in the clock's units.
pub struct FloorMeter {
    counts: [u32; BUCKETS],
    blocks: u64,
}

impl Default for FloorMeter {
    fn default() -> Self {
        Self::new()
    }
}

/// The bucket of a block of `v` clock units.
#[inline(always)]
fn index(v: u64) -> usize {
    if v < LINEAR as u64 {
        return v as usize;
    }
    // e >= 7: the top SUB_BITS + 1 bits of v, the first of them always 1.
    let e = 63 - v.leading_zeros();
    let sub = (v >> (e - SUB_BITS)) as usize - (1 << SUB_BITS);
    (LINEAR + (((e - 7) as usize) << SUB_BITS) + sub).min(BUCKETS - 1)
}

/// The smallest block length of bucket `i`.
fn lower_bound(i: usize) -> u64 {
    if i < LINEAR {
        return i as u64;
    }
    let j = i - LINEAR;
    let e = 7 + (j >> SUB_BITS) as u32;
    let m = (1u64 << SUB_BITS) + (j & ((1 << SUB_BITS) - 1)) as u64;
    m << (e - SUB_BITS)
}

impl FloorMeter {
    pub const fn new() -> Self {
        FloorMeter { counts: [0; BUCKETS], blocks: 0 }
    }

    /// One block of [`BLOCK`] iterations took `units` of the clock.
    #[inline(always)]
    pub fn add_block(&mut self, units: u64) {
        let c = &mut self.counts[index(units)];
        *c = c.saturating_add(1);
        self.blocks += 1;
    }

    /// The floor as the length of a block of [`BLOCK`] iterations, in the
    /// clock's units: the [`PERCENTILE`]th percentile of the blocks, the
    /// lower bound of its bucket (so it may read up to 1.6% low, never
    /// high). None before any block.
    pub fn block_units(&self) -> Option<u64> {
        if self.blocks == 0 {
            return None;
        }
        // The nearest rank: the smallest length with at least p% of the
        // blocks at or below it.
        let rank = (self.blocks * PERCENTILE).div_ceil(100).max(1);
        let mut seen = 0u64;
        for (i, &n) in self.counts.iter().enumerate() {
            seen += u64::from(n);
            if seen >= rank {
                return Some(lower_bound(i));
            }
        }
        Some(lower_bound(BUCKETS - 1))
    }

    /// The floor in ns, given how the clock converts a difference of its
    /// readings to ns; at least 1 ns (a clock that never moved in a block
    /// still took time). None before any block.
    pub fn floor_ns(&self, delta_ns: impl Fn(u64) -> u64) -> Option<u64> {
        self.block_units().map(|b| (delta_ns(b) / u64::from(BLOCK)).max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The floor of a run of loop deltas, in the clock's units (rounded down),
    /// as the probe measures it: the deltas summed in blocks of [`BLOCK`], a
    /// last partial block left out.
    pub fn floor_of_deltas(deltas: impl IntoIterator<Item = u64>) -> Option<u64> {
        let mut m = FloorMeter::new();
        let (mut sum, mut n) = (0u64, 0u32);
        for d in deltas {
            sum += d;
            n += 1;
            if n == BLOCK {
                m.add_block(sum);
                (sum, n) = (0, 0);
            }
        }
        m.floor_ns(|u| u)
    }

    /// A deterministic stream of small pseudo-random numbers (no host, no time).
    fn lcg(seed: u64) -> impl Iterator<Item = u64> {
        let mut x = seed;
        std::iter::repeat_with(move || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            x >> 33
        })
    }

    #[test]
    fn buckets_cover_every_length_in_order() {
        let mut last = 0;
        for v in (0..5000u64).chain([1 << 20, (1 << 20) + 12345, 1 << 39, u64::MAX]) {
            let i = index(v);
            assert!(i >= last, "{v}");
            last = i;
            assert!(lower_bound(i) <= v, "{v}: bucket {i} starts at {}", lower_bound(i));
            if i < BUCKETS - 1 {
                // Within 1/64 of the value: the resolution promised.
                assert!(v - lower_bound(i) <= v >> SUB_BITS, "{v}: {}", lower_bound(i));
                assert_eq!(index(lower_bound(i)), i, "{v}");
            }
        }
        assert_eq!(index(127), 127);
        assert_eq!((index(128), lower_bound(128)), (128, 128));
        assert_eq!(index(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn a_steady_loop_has_its_period_as_floor() {
        assert_eq!(floor_of_deltas(std::iter::repeat_n(10, 1 << 20)), Some(10));
        assert_eq!(floor_of_deltas(std::iter::repeat_n(21, 1 << 20)), Some(21));
    }

    /// Two reads the CPU ran closer than the loop's period (rdtsc is not
    /// serialising): 1-unit deltas beside 19-unit ones. The smallest delta
    /// says 1; the loop's period is 10.
    #[test]
    fn reordered_reads_do_not_lower_the_floor() {
        let deltas = [1u64, 19].into_iter().cycle().take(1 << 20);
        assert_eq!(floor_of_deltas(deltas), Some(10));
    }

    /// A clock that steps by 26 units (a TSC that moves in ~10 ns steps)
    /// under a loop of 24 units a turn: most deltas are 26, some 0. The
    /// floor is the period, not 0 and not the step.
    #[test]
    fn a_coarse_clock_gives_the_period_not_its_step() {
        let reads = (0..(1u64 << 20) + 1).map(|i| i * 24 / 26 * 26);
        let deltas: Vec<u64> = reads.clone().zip(reads.skip(1)).map(|(a, b)| b - a).collect();
        assert!(deltas.contains(&0) && deltas.iter().min() == Some(&0));
        let f = floor_of_deltas(deltas).unwrap();
        assert!((23..=24).contains(&f), "{f}");
    }

    /// A clock that stays put for three turns and then moves by 30: zero
    /// deltas three times in four.
    #[test]
    fn zero_deltas_do_not_make_a_zero_floor() {
        let deltas = [0u64, 0, 0, 30].into_iter().cycle().take(1 << 20);
        assert_eq!(floor_of_deltas(deltas), Some(7));
        // A clock that never moved: the floor still is not 0.
        assert_eq!(floor_of_deltas(std::iter::repeat_n(0, 1 << 16)), Some(1));
    }

    /// Interruptions (one block in five holds a 50 µs gap) and cache misses
    /// (one delta in a thousand) make blocks slower, never faster: the
    /// floor stays the period.
    #[test]
    fn stolen_time_does_not_raise_the_floor() {
        let deltas = (0..1u64 << 20).map(|i| {
            if i % (5 * BLOCK as u64) == 0 {
                50_000
            } else if i % 1009 == 0 {
                200
            } else {
                20
            }
        });
        assert_eq!(floor_of_deltas(deltas), Some(20));
    }

    /// Jitter around a period, with reordered pairs: the floor lies within
    /// a few % under the mean delta of the quiet loop, never above it, and
    /// far above the smallest delta.
    #[test]
    fn the_floor_is_just_under_the_quiet_mean() {
        let deltas: Vec<u64> = lcg(7)
            .take(1 << 20)
            .map(|r| match r % 100 {
                0 => 1,                // read early
                1 => 39,               // its neighbour
                k if k < 10 => 30 + k, // a cache miss
                _ => 18 + r % 5,       // 18..=22
            })
            .collect();
        let mean = deltas.iter().sum::<u64>() as f64 / deltas.len() as f64;
        let f = floor_of_deltas(deltas.iter().copied()).unwrap() as f64;
        assert!(f <= mean && f >= 0.9 * mean, "floor {f}, mean {mean}");
        assert_eq!(deltas.iter().min(), Some(&1));
    }

    #[test]
    fn the_percentile_is_the_nearest_rank() {
        let mut m = FloorMeter::new();
        assert_eq!(m.block_units(), None);
        // 100 blocks: 5 fast ones, 95 slow.
        for _ in 0..5 {
            m.add_block(64);
        }
        for _ in 0..95 {
            m.add_block(100);
        }
        assert_eq!(m.block_units(), Some(64));
        m.add_block(100);
        // 101 blocks: the 6th is a slow one.
        assert_eq!(m.block_units(), Some(100));
        assert_eq!(m.blocks, 101);
        // ns from units: a clock of 2.5 units a ns.
        assert_eq!(m.floor_ns(|u| u * 2 / 5), Some(1));
        let mut m = FloorMeter::new();
        m.add_block(64 * 2_600);
        // 1 µs an iteration, read up to 1.6% low (the bucket's lower bound).
        let f = m.floor_ns(|u| u * 10 / 26).unwrap();
        assert!((984..=1_000).contains(&f), "{f}");
    }
}
