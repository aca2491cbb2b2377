//! What the programs count, read by userspace: each CPU's drops and tick
//! verdicts, in their mapped .bss where they keep them (no system call,
//! so the collector can read them at every drain), and each program's run
//! counts and times, as the kernel keeps them.

use std::os::fd::{AsFd, AsRawFd};

use libbpf_rs::skel::Skel;
use libbpf_rs::{MapCore, MapFlags};

use super::{bpf, Tracer, TracerError};

/// Per-program BPF run statistics (needs kernel.bpf_stats_enabled=1).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ProgStat {
    pub name: String,
    pub run_cnt: u64,
    pub run_time_ns: u64,
}

impl Tracer<'_> {
    /// The kernel's tick_stop verdicts on each of `cpus` (tick.rs), as the
    /// programs tallied them so far (None where the CPU is out of range).
    pub fn ticks(&self, cpus: &[usize]) -> Vec<Option<crate::tick::Tally>> {
        let Some(bss) = self.skel.maps.bss_data.as_deref() else { return vec![None; cpus.len()] };
        cpus.iter()
            .map(|&c| {
                let t = bss.ticks.get(c)?;
                // SAFETY: a plain read of memory the kernel's programs write
                // to concurrently (mmap'ed .bss): volatile, so each read is
                // made; a torn tally is off by one verdict at most.
                let t = unsafe { std::ptr::read_volatile(t) };
                Some(crate::tick::Tally {
                    stops: t.stops,
                    refusals: t.refusals,
                    deps: t.deps,
                    last_success: t.last_success != 0,
                    last_dep: t.last_dep,
                    // The collector knows the host's nohz_full CPUs.
                    nohz_full: false,
                    nohz_capable: false,
                })
            })
            .collect()
    }

    /// Each CPU's failed reservations so far, low 32 bits (what its
    /// records carry), appended to `out` as (cpu, count) where non-zero.
    /// While the programs watch, read in their mapped memory: no system
    /// call per drain (the per-CPU map's lookup was 4% of the collector's
    /// time at figure 4c's passive TCP mix). Once `unwatch` has cleared
    /// that memory, from the drop map, which it leaves as it was.
    pub fn drop_counts(&self, out: &mut Vec<(u32, u64)>) -> Result<(), TracerError> {
        let bss = self.skel.maps.bss_data.as_deref().filter(|_| !self.unwatched.load(std::sync::atomic::Ordering::Relaxed));
        let Some(bss) = bss else {
            let all = self.drops()?;
            out.extend(all.into_iter().enumerate().filter(|&(_, n)| n > 0).map(|(cpu, n)| (cpu as u32, n & 0xffff_ffff)));
            return Ok(());
        };
        for (cpu, n) in bss.dropped.iter().enumerate() {
            // SAFETY: a plain read of memory the programs write to
            // concurrently (mmap'ed .bss): volatile, so each read is made.
            let n = unsafe { std::ptr::read_volatile(n) };
            if n > 0 {
                out.push((cpu as u32, u64::from(n)));
            }
        }
        Ok(())
    }

    /// Failed ring-buffer reservations, indexed by CPU.
    pub fn drops(&self) -> Result<Vec<u64>, TracerError> {
        let per_cpu = self
            .skel
            .maps
            .drops
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf("reading the drop counters"))?
            .unwrap_or_default();
        Ok(per_cpu.iter().map(|v| v.get(..8).map_or(0, |b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))).collect())
    }

    /// Run counts and times of each loaded program, as the kernel keeps them
    /// (non-zero only while kernel.bpf_stats_enabled=1).
    pub fn prog_stats(&self) -> Vec<ProgStat> {
        self.skel
            .object()
            .progs()
            .filter_map(|p| {
                let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
                let mut len = std::mem::size_of_val(&info) as u32;
                // SAFETY: info is a properly sized, zeroed bpf_prog_info and len says so.
                let rc = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(p.as_fd().as_raw_fd(), &mut info, &mut len) };
                (rc == 0).then(|| ProgStat {
                    name: p.name().to_string_lossy().into_owned(),
                    run_cnt: info.run_cnt,
                    run_time_ns: info.run_time_ns,
                })
            })
            .collect()
    }
}
