//! The watched CPUs' regions (x86; bpf/region.bpf.h), mapped into this
//! process and read in place: each record between the collector's tail and
//! the CPU's head is handed over as the kernel wrote it, then the tail is
//! moved past it, which gives its room back to the CPU.

use std::sync::atomic::{AtomicU64, Ordering};

use libbpf_rs::MapCore;

use super::framing::{header_at, place, BYTES, SLACK};
use super::types::jw_region;

/// Where regions are used: x86 only. The CPU publishes a record by a plain
/// store of its head after the record's, which x86 keeps in order; arm64
/// would need a store-release, which BPF programs gained in 6.15 only.
pub const USED: bool = cfg!(target_arch = "x86_64");

/// The `regions` map's values, mmapped.
pub struct Regions {
    base: *mut u8,
    len: usize,
    n: usize,
    /// A value's size in the map (the kernel's elem_size: rounded to 8).
    stride: usize,
    /// Each region's CPU.
    cpus: Vec<usize>,
    /// Per region, the reads that gave up on a header (none from our
    /// programs): counted as that CPU's drops, never lost silently.
    bad: Vec<u64>,
}

const HEAD: usize = std::mem::offset_of!(jw_region, head);
const TAIL: usize = std::mem::offset_of!(jw_region, tail);
const DATA: usize = std::mem::offset_of!(jw_region, data);

impl Regions {
    /// Maps the regions of `map` (an mmapable array of jw_region), one per
    /// CPU of `cpus`, in that order.
    pub(super) fn map(map: &impl MapCore, cpus: &[usize]) -> std::io::Result<Self> {
        let n = cpus.len();
        use std::os::fd::AsRawFd;
        let stride = (map.value_size() as usize).div_ceil(8) * 8;
        assert_eq!(stride, std::mem::size_of::<jw_region>().div_ceil(8) * 8, "the regions map holds jw_region");
        assert!(DATA + (BYTES + SLACK) as usize <= stride);
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = (n * stride).div_ceil(page) * page;
        // SAFETY: a new shared mapping of the map's values (BPF_F_MMAPABLE),
        // within its size; the fd outlives the call.
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, map.as_fd().as_raw_fd(), 0)
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Regions { base: base.cast(), len, n, stride, cpus: cpus.to_vec(), bad: vec![0; n] })
    }

    /// Hands each whole record of every region to `f`, at most `max` in all
    /// (what is left waits for the next read); returns how many.
    pub fn read(&mut self, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let mut got = 0;
        for i in 0..self.n {
            // SAFETY: region i lies within the mapping (n * stride <= len);
            // head and tail are 8-byte aligned u64s (the value starts on a
            // page, the stride is a multiple of 8), shared with the kernel:
            // atomics, so each read and write is made as written.
            let (r, head, tail) = unsafe {
                let r = self.base.add(i * self.stride);
                (r, &*(r.add(HEAD) as *const AtomicU64), &*(r.add(TAIL) as *const AtomicU64))
            };
            // Acquire: the records before the head are whole once it is read.
            let head = head.load(Ordering::Acquire);
            let start = tail.load(Ordering::Relaxed);
            let mut at = start;
            while at < head && got < max {
                // SAFETY: within the region's data; the CPU writes no byte
                // between the tail and the head until the tail moves past it.
                let header = unsafe { std::ptr::read(r.add(DATA + header_at(at)) as *const u64) };
                let Some(p) = place(at, head, header) else {
                    self.bad[i] += 1;
                    at = head;
                    break;
                };
                // SAFETY: as above; `place` keeps the record within the slack.
                f(unsafe { std::slice::from_raw_parts(r.add(DATA + p.start), p.len) });
                at = p.next;
                got += 1;
            }
            // Release: the CPU reuses the room only after the records are
            // read. Stored only when it moved: the CPU reads the tail with
            // every record, and a store takes the line from its cache.
            if at != start {
                tail.store(at, Ordering::Release);
            }
        }
        got
    }
}

impl Regions {
    /// The reads that gave up on a header, by CPU (see `bad`).
    pub fn refused(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.cpus.iter().copied().zip(self.bad.iter().copied()).filter(|&(_, n)| n > 0)
    }
}

impl Drop for Regions {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}
