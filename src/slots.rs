//! CPU number → the index of its per-CPU state, for the watched CPUs in
//! the order given: one table lookup per event, whatever the CPU count.

#[derive(Debug, Clone, Default)]
pub struct CpuSlots(Vec<Option<usize>>);

impl CpuSlots {
    pub fn new(cpus: &[usize]) -> Self {
        let mut slots = vec![None; cpus.iter().copied().max().map_or(0, |m| m + 1)];
        for (i, &c) in cpus.iter().enumerate() {
            slots[c] = Some(i);
        }
        CpuSlots(slots)
    }

    /// `cpu`'s index, None if it is not watched.
    pub fn get(&self, cpu: u32) -> Option<usize> {
        self.0.get(cpu as usize).copied().flatten()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn indexes_the_watched_cpus_in_order() {
        let s = super::CpuSlots::new(&[6, 2]);
        assert_eq!((s.get(6), s.get(2), s.get(3), s.get(99)), (Some(0), Some(1), None, None));
    }
}
