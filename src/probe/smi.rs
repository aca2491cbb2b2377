//! System management interrupts: firmware that takes the CPU without the
//! kernel seeing it. Intel CPUs count them in MSR_SMI_COUNT (0x34), which
//! the `msr` driver exposes as `/dev/cpu/N/msr`. The spin probe reads it on
//! its own CPU after a gap (the driver then reads the MSR locally: no IPI),
//! so a stall that coincides with an SMI can say so.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// The MSR's address, which is its offset in the msr device.
pub const MSR_SMI_COUNT: u64 = 0x34;

/// Entering and leaving SMM alone takes microseconds: a shorter gap holds
/// no SMI, and is not worth a read (a syscall and an rdmsr).
pub const SMI_MIN_GAP_NS: u64 = 1_000;

/// One CPU's SMI counter and its value at the last read.
#[derive(Debug)]
pub struct SmiCounter {
    file: File,
    last: AtomicU32,
}

/// Why a CPU's SMIs go uncounted, as the run says it in one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Uncounted {
    /// Not an x86 CPU (`std::env::consts::ARCH`'s name of it): it has no
    /// System Management Mode, so no SMI and no counter to read.
    NotX86(&'static str),
    /// x86, but the counter cannot be read (why).
    Unread(String),
}

impl Uncounted {
    /// Where `arch` (as `std::env::consts::ARCH` names it) has no SMIs.
    pub fn on(arch: &'static str) -> Option<Self> {
        (arch != "x86" && arch != "x86_64").then_some(Self::NotX86(arch))
    }

    pub fn line(&self) -> String {
        match self {
            // arm64's firmware runs at EL3 (TF-A, SDEI, RAS handled
            // firmware-first), and no counter says when it took the CPU.
            Self::NotX86(arch) => {
                format!("no SMI counter: SMIs are x86's and {arch} has none; time its firmware takes (EL3) stays unexplained, uncounted")
            }
            Self::Unread(why) => format!("SMI count not read: {why}; SMIs stay unexplained"),
        }
    }
}

impl SmiCounter {
    /// The counter of `cpu`, or why there is none to read.
    pub fn for_cpu(cpu: u32) -> Result<Self, Uncounted> {
        if let Some(none) = Uncounted::on(std::env::consts::ARCH) {
            return Err(none);
        }
        Self::open(Path::new(&format!("/dev/cpu/{cpu}/msr"))).map_err(Uncounted::Unread)
    }

    /// Opens `path` (an msr device, or a fixture laid out like one) and
    /// reads the count once, as the base.
    pub fn open(path: &Path) -> Result<Self, String> {
        let file = File::open(path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => format!("no {} (the msr driver: modprobe msr; x86 only)", path.display()),
            io::ErrorKind::PermissionDenied => format!("{} not readable (needs root with CAP_SYS_RAWIO)", path.display()),
            _ => format!("{}: {e}", path.display()),
        })?;
        let c = Self { file, last: AtomicU32::new(0) };
        let n = c.read().map_err(|e| {
            format!("MSR_SMI_COUNT (0x34) not readable through {} ({e}): Intel CPUs only, and most hypervisors hide it", path.display())
        })?;
        c.last.store(n, Relaxed);
        Ok(c)
    }

    /// The count now (its low 32 bits are the count).
    pub fn read(&self) -> io::Result<u32> {
        let mut b = [0u8; 8];
        self.file.read_exact_at(&mut b, MSR_SMI_COUNT)?;
        Ok(u64::from_le_bytes(b) as u32)
    }

    /// SMIs since the previous call (0 when the read fails).
    pub fn since_last(&self) -> u32 {
        let Ok(n) = self.read() else { return 0 };
        n.wrapping_sub(self.last.swap(n, Relaxed))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A file laid out like an msr device with `count` at 0x34.
    pub(crate) fn fixture(dir: &Path, count: u64) -> std::path::PathBuf {
        let p = dir.join("msr");
        set(&p, count);
        p
    }

    pub(crate) fn set(p: &Path, count: u64) {
        let mut b = vec![0u8; MSR_SMI_COUNT as usize + 8];
        b[MSR_SMI_COUNT as usize..].copy_from_slice(&count.to_le_bytes());
        std::fs::write(p, b).unwrap();
    }

    #[test]
    fn counts_smis_since_the_last_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = fixture(dir.path(), 41);
        let c = SmiCounter::open(&p).unwrap();
        assert_eq!(c.since_last(), 0, "the count at open is the base");
        set(&p, 44);
        assert_eq!(c.since_last(), 3);
        assert_eq!(c.since_last(), 0);
        // The low 32 bits wrap.
        set(&p, 0xffff_ffff);
        c.since_last();
        set(&p, 0x1_0000_0001);
        assert_eq!(c.since_last(), 2);
    }

    #[test]
    fn arm64_has_no_smis_to_count_and_says_so_in_one_line() {
        assert_eq!(Uncounted::on("x86_64"), None);
        let arm = Uncounted::on("aarch64").expect("no SMM there");
        assert_eq!(arm, Uncounted::NotX86("aarch64"));
        let line = arm.line();
        assert!(line.starts_with("no SMI counter: SMIs are x86's and aarch64 has none"), "{line}");
        assert!(!line.contains('\n') && !line.contains("modprobe"), "{line}");
        let x86 = Uncounted::Unread("no /dev/cpu/3/msr".into()).line();
        assert_eq!(x86, "SMI count not read: no /dev/cpu/3/msr; SMIs stay unexplained");
    }

    #[test]
    fn says_why_it_cannot_read() {
        let dir = tempfile::tempdir().unwrap();
        let missing = SmiCounter::open(&dir.path().join("nope")).unwrap_err();
        assert!(missing.contains("modprobe msr"), "{missing}");
        // A device whose MSR read fails (EIO on AMD): here, a short file.
        let short = dir.path().join("short");
        std::fs::write(&short, [0u8; 4]).unwrap();
        let e = SmiCounter::open(&short).unwrap_err();
        assert!(e.contains("MSR_SMI_COUNT (0x34) not readable"), "{e}");
    }
}
