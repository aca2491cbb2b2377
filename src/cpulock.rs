//! One owner per watched CPU, held by the kernel: a `flock` on
//! `/run/jitterwatch/cpuN.lock`, taken before anything spins and released
//! when the process ends, however it ends. Two instances started together
//! cannot both win, and a thread merely named like a probe blocks nothing.
//! The lock files also tell other instances which CPUs are watched, so
//! their housekeeping threads stay off them.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

pub const DIR: &str = "/run/jitterwatch";

/// The locks of this run's CPUs; dropping them (or exiting) releases them.
pub struct CpuLocks {
    _files: Vec<File>,
}

fn lock_path(dir: &Path, cpu: usize) -> PathBuf {
    dir.join(format!("cpu{cpu}.lock"))
}

/// The directory must be root's and not writable by others, or anyone
/// could swap a lock file: made if missing, checked if there.
fn ensure_dir(dir: &Path) -> Result<()> {
    match fs::DirBuilder::new().mode(0o755).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
    }
    let m = fs::symlink_metadata(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if !m.file_type().is_dir() || m.uid() != me || m.mode() & 0o022 != 0 {
        bail!("{} is not a directory owned by uid {me} and writable only by it: remove it and run again", dir.display());
    }
    Ok(())
}

fn try_flock(f: &File, op: i32) -> io::Result<bool> {
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), op | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    match io::Error::last_os_error() {
        e if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(false),
        e => Err(e),
    }
}

fn open(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).create(true).mode(0o644).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(path)
}

/// Takes every CPU's lock in `dir`, or fails naming the CPU and the pid
/// that holds it.
pub fn take(dir: &Path, cpus: &[usize]) -> Result<CpuLocks> {
    ensure_dir(dir)?;
    let mut files = Vec::with_capacity(cpus.len());
    for &cpu in cpus {
        let path = lock_path(dir, cpu);
        let mut f = open(&path).with_context(|| format!("cannot open the lock {}", path.display()))?;
        if !try_flock(&f, libc::LOCK_EX).with_context(|| format!("cannot lock {}", path.display()))? {
            // The holder writes its pid just after locking: give it a moment.
            let mut pid = String::new();
            for _ in 0..5 {
                pid.clear();
                let _ = f.rewind().and_then(|()| f.read_to_string(&mut pid));
                if !pid.trim().is_empty() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            let pid = pid.trim();
            let who = if pid.chars().all(|c| c.is_ascii_digit()) && !pid.is_empty() { format!(" (pid {pid})") } else { String::new() };
            bail!("CPU {cpu} is already watched by another jitterwatch{who}: stop it first, or watch other CPUs");
        }
        // Who holds it, for the message above; the lock is what counts.
        f.set_len(0)?;
        f.rewind()?;
        write!(f, "{}", std::process::id())?;
        files.push(f);
    }
    Ok(CpuLocks { _files: files })
}

/// CPUs another process holds the lock of: watched by another instance.
pub fn held_by_others(dir: &Path, except: &[usize]) -> Vec<usize> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    let mut cpus: Vec<usize> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.strip_suffix(".lock")?.parse().ok())
        .filter(|c| !except.contains(c))
        .filter(|&c| {
            // Busy for a shared lock: someone holds it exclusively.
            OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(lock_path(dir, c)).is_ok_and(|f| {
                let free = try_flock(&f, libc::LOCK_SH).unwrap_or(true);
                !free
            })
        })
        .collect();
    cpus.sort_unstable();
    cpus
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_has_one_owner_and_others_see_it() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("jw");
        let held = take(&dir, &[1, 3]).unwrap();
        // flock locks belong to the open file: a second open, as a second
        // process would make, is refused.
        let e = take(&dir, &[2, 3]).err().unwrap().to_string();
        assert!(e.contains("CPU 3 is already watched by another jitterwatch"), "{e}");
        assert!(e.contains(&format!("(pid {})", std::process::id())), "{e}");
        assert_eq!(held_by_others(&dir, &[1]), vec![3]);
        drop(held);
        assert_eq!(held_by_others(&dir, &[]), Vec::<usize>::new());
        let again = take(&dir, &[2, 3]).unwrap();
        drop(again);
    }

    #[test]
    fn a_directory_others_can_write_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("jw");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        let e = take(&dir, &[1]).err().unwrap().to_string();
        assert!(e.contains("writable only by it"), "{e}");
    }
}
