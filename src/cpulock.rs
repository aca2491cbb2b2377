//! One owner per watched CPU, held by the kernel: a `flock` on a
//! `cpuN.lock` file, taken before anything spins and released when the
//! process ends, however it ends. Two instances started together cannot
//! both win, and a thread merely named like a probe blocks nothing. The
//! lock files also tell other instances which CPUs are watched, so their
//! housekeeping threads stay off them.
//!
//! Where: root's runs lock in `/run/jitterwatch` itself; a run without root
//! (CAP_BPF and CAP_PERFMON, e.g. the service's user) cannot write there,
//! so it locks in a subdirectory root made for its uid
//! (`/run/jitterwatch/NAME`, owned by it: the unit's `RuntimeDirectory=`,
//! a tmpfiles.d line, or `install -d -o USER`). Only root can add to
//! `/run/jitterwatch`, so every directory in it is one root made for
//! someone: a user without that cannot plant a lock to hold a CPU, and a
//! user with one cannot touch another's files. A run takes its own locks
//! first and then checks every other directory's for the same CPUs, so two
//! runs of different users started together never both win (at worst both
//! are refused).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

pub const DIR: &str = "/run/jitterwatch";

/// Where a run locks its CPUs and whose directories it trusts. Host facts
/// (the euid) come in as values, so the rules are tested without root.
#[derive(Debug, Clone)]
pub struct Place {
    /// `/run/jitterwatch`, or a test's directory.
    pub base: PathBuf,
    /// Who must own `base`: root (0) on a real system.
    pub admin: u32,
    /// This process's effective uid.
    pub euid: u32,
    /// Lock in `base` itself (root), or in the subdirectory `euid` owns.
    pub in_base: bool,
}

impl Place {
    /// The system's: root locks in /run/jitterwatch, anyone else in its
    /// subdirectory there.
    pub fn system(euid: u32) -> Self {
        Self { base: PathBuf::from(DIR), admin: 0, euid, in_base: euid == 0 }
    }
}

/// The locks of this run's CPUs; dropping them (or exiting) releases them.
pub struct CpuLocks {
    _files: Vec<File>,
}

fn lock_path(dir: &Path, cpu: usize) -> PathBuf {
    dir.join(format!("cpu{cpu}.lock"))
}

/// A directory only `owner` can change: a real directory (not a link),
/// theirs, writable by no group or other. Anyone else could swap a lock
/// file in it.
fn safe_dir(m: &fs::Metadata, owner: u32) -> bool {
    m.file_type().is_dir() && m.uid() == owner && m.mode() & 0o022 == 0
}

/// The base directory: made (by root) if missing, checked if there.
fn ensure_base(p: &Place) -> Result<()> {
    let dir = &p.base;
    if p.in_base {
        match fs::DirBuilder::new().mode(0o755).create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
        }
    }
    let m = match fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => bail!(
            "{} does not exist: without root, jitterwatch locks its CPUs in a directory root makes for its uid: as root, `install -d -m 0755 {} && install -d -m 0755 -o {} {}/{}` (the service's unit makes its own)",
            dir.display(),
            dir.display(),
            p.euid,
            dir.display(),
            p.euid
        ),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
    };
    if !safe_dir(&m, p.admin) {
        bail!("{} is not a directory owned by uid {} and writable only by it: remove it and run again", dir.display(), p.admin);
    }
    Ok(())
}

/// The subdirectories of `base` that may hold locks: real directories
/// writable only by their owner (root made them; only root can), by name.
fn subdirs(base: &Path) -> Vec<(PathBuf, u32)> {
    let Ok(entries) = fs::read_dir(base) else { return Vec::new() };
    let mut dirs: Vec<(PathBuf, u32)> = entries
        .flatten()
        .filter_map(|e| {
            let m = fs::symlink_metadata(e.path()).ok()?;
            safe_dir(&m, m.uid()).then(|| (e.path(), m.uid()))
        })
        .collect();
    dirs.sort();
    dirs
}

/// A directory of `base` that `uid` owns but others can write: the lock
/// directory the user made, too open to be used (said as such, not as a
/// missing one). With its mode.
fn unsafe_own(base: &Path, uid: u32) -> Option<(PathBuf, u32)> {
    fs::read_dir(base).ok()?.flatten().find_map(|e| {
        let m = fs::symlink_metadata(e.path()).ok()?;
        (m.file_type().is_dir() && m.uid() == uid && !safe_dir(&m, uid)).then(|| (e.path(), m.mode()))
    })
}

/// Where this run takes its locks.
fn own_dir(p: &Place) -> Result<PathBuf> {
    if p.in_base {
        return Ok(p.base.clone());
    }
    if let Some((dir, _)) = subdirs(&p.base).into_iter().find(|(_, uid)| *uid == p.euid) {
        return Ok(dir);
    }
    match unsafe_own(&p.base, p.euid) {
        Some((dir, mode)) => bail!(
            "{} is uid {}'s lock directory but others can write it (mode {:04o}): anyone could swap a lock file in it; `chmod go-w {}`",
            dir.display(),
            p.euid,
            mode & 0o7777,
            dir.display()
        ),
        None => bail!(
            "no lock directory for uid {} in {}: without root, jitterwatch locks its CPUs in a directory root makes for its uid: as root, `install -d -m 0755 -o {} {}/{}` (the service's unit makes its own)",
            p.euid,
            p.base.display(),
            p.euid,
            p.base.display(),
            p.euid
        ),
    }
}

/// Every directory whose locks count, this run's own included.
fn lock_dirs(p: &Place) -> Vec<PathBuf> {
    let mut dirs = vec![p.base.clone()];
    dirs.extend(subdirs(&p.base).into_iter().map(|(d, _)| d));
    dirs
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

/// Opens a lock file without following a link and without blocking on a
/// planted FIFO, and only if it is a regular file.
fn open_lock(path: &Path, create: bool) -> io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .write(create)
        .create(create)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.file_type().is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(f)
}

/// The pid the holder wrote, for the message; the lock is what counts.
fn holder(f: &mut File) -> String {
    // The holder writes its pid just after locking: give it a moment.
    let mut pid = String::new();
    for _ in 0..5 {
        pid.clear();
        let _ = f.rewind().and_then(|()| f.take(32).read_to_string(&mut pid));
        if !pid.trim().is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let pid = pid.trim();
    if pid.chars().all(|c| c.is_ascii_digit()) && !pid.is_empty() {
        format!(" (pid {pid})")
    } else {
        String::new()
    }
}

fn taken(cpu: usize, who: &str) -> anyhow::Error {
    anyhow::anyhow!("CPU {cpu} is already watched by another jitterwatch{who}: stop it first, or watch other CPUs")
}

/// Whether another run holds `cpu`'s lock in `dir` (and its pid). A lock
/// file that is there but cannot be read counts as held: its directory's
/// owner is someone root trusted to watch CPUs.
fn held_in(dir: &Path, cpu: usize) -> Option<String> {
    match open_lock(&lock_path(dir, cpu), false) {
        Ok(mut f) => match try_flock(&f, libc::LOCK_SH) {
            Ok(false) => Some(holder(&mut f)),
            _ => None,
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(_) => Some(format!(" (its lock {} is unreadable)", lock_path(dir, cpu).display())),
    }
}

/// Takes every CPU's lock, or fails naming the CPU and the pid that holds
/// it.
pub fn take(p: &Place, cpus: &[usize]) -> Result<CpuLocks> {
    ensure_base(p)?;
    let own = own_dir(p)?;
    let mut files = Vec::with_capacity(cpus.len());
    for &cpu in cpus {
        let path = lock_path(&own, cpu);
        let mut f = open_lock(&path, true).with_context(|| format!("cannot open the lock {}", path.display()))?;
        if !try_flock(&f, libc::LOCK_EX).with_context(|| format!("cannot lock {}", path.display()))? {
            return Err(taken(cpu, &holder(&mut f)));
        }
        // Readable by every run that checks it, whatever the umask (the
        // unit's is 0077): one that cannot read it must take it as held.
        f.set_permissions(fs::Permissions::from_mode(0o644))?;
        // Who holds it, for the message above; the lock is what counts.
        f.set_len(0)?;
        f.rewind()?;
        write!(f, "{}", std::process::id())?;
        files.push(f);
    }
    // Ours are held: a run elsewhere that checks after this sees them, and
    // one that took its locks before this check is seen here.
    for dir in lock_dirs(p).into_iter().filter(|d| *d != own) {
        if let Some((cpu, who)) = cpus.iter().find_map(|&c| held_in(&dir, c).map(|w| (c, w))) {
            return Err(taken(cpu, &who));
        }
    }
    Ok(CpuLocks { _files: files })
}

/// CPUs another process holds the lock of, in any lock directory:
/// watched by another instance.
pub fn held_by_others(p: &Place, except: &[usize]) -> Vec<usize> {
    let mut cpus: Vec<usize> = lock_dirs(p)
        .iter()
        .flat_map(|dir| {
            let names: Vec<usize> = fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.strip_suffix(".lock")?.parse().ok())
                .filter(|c| !except.contains(c))
                .collect();
            names.into_iter().filter(|&c| held_in(dir, c).is_some())
        })
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A base owned by whoever runs the test: `in_base` plays root, the
    /// other plays a user with its subdirectory.
    fn place(base: &Path, in_base: bool) -> Place {
        // SAFETY: geteuid cannot fail.
        let me = unsafe { libc::geteuid() };
        Place { base: base.to_path_buf(), admin: me, euid: me, in_base }
    }

    fn base() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().join("jw");
        (d, base)
    }

    #[test]
    fn a_cpu_has_one_owner_and_others_see_it() {
        let (_d, dir) = base();
        let p = place(&dir, true);
        let held = take(&p, &[1, 3]).unwrap();
        // flock locks belong to the open file: a second open, as a second
        // process would make, is refused.
        let e = take(&p, &[2, 3]).err().unwrap().to_string();
        assert!(e.contains("CPU 3 is already watched by another jitterwatch"), "{e}");
        assert!(e.contains(&format!("(pid {})", std::process::id())), "{e}");
        assert_eq!(held_by_others(&p, &[1]), vec![3]);
        drop(held);
        assert_eq!(held_by_others(&p, &[]), Vec::<usize>::new());
        let again = take(&p, &[2, 3]).unwrap();
        drop(again);
    }

    #[test]
    fn a_directory_others_can_write_is_refused() {
        let (_d, dir) = base();
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let e = take(&place(&dir, true), &[1]).err().unwrap().to_string();
        assert!(e.contains("writable only by it"), "{e}");
    }

    #[test]
    fn without_root_a_run_locks_in_its_own_subdirectory_and_sees_root_s() {
        let (_d, dir) = base();
        let (root, user) = (place(&dir, true), place(&dir, false));
        // No base, or no subdirectory: one line with what root must make.
        let e = take(&user, &[1]).err().unwrap().to_string();
        assert!(e.contains("does not exist") && e.contains("install -d"), "{e}");
        let r = take(&root, &[1]).unwrap();
        let e = take(&user, &[2]).err().unwrap().to_string();
        assert!(e.contains("no lock directory for uid") && e.contains("install -d -m 0755 -o"), "{e}");
        // One of one's own that others can write: said as such.
        fs::DirBuilder::new().mode(0o755).create(dir.join("svc")).unwrap();
        fs::set_permissions(dir.join("svc"), fs::Permissions::from_mode(0o777)).unwrap();
        let e = take(&user, &[2]).err().unwrap().to_string();
        assert!(e.contains("svc is uid") && e.contains("others can write it (mode 0777)") && e.contains("chmod go-w"), "{e}");
        fs::set_permissions(dir.join("svc"), fs::Permissions::from_mode(0o755)).unwrap();
        // Root's run holds CPU 1: refused, naming it; CPU 2 is free.
        let e = take(&user, &[2, 1]).err().unwrap().to_string();
        assert!(e.contains("CPU 1 is already watched") && e.contains(&format!("(pid {})", std::process::id())), "{e}");
        let u = take(&user, &[2]).unwrap();
        assert!(dir.join("svc/cpu2.lock").exists() && !dir.join("cpu2.lock").exists());
        assert_eq!(fs::metadata(dir.join("svc/cpu2.lock")).unwrap().mode() & 0o777, 0o644, "readable by the others' checks");
        // And the other way round: root is refused the user's CPU, and
        // both see each other's.
        let e = take(&root, &[2]).err().unwrap().to_string();
        assert!(e.contains("CPU 2 is already watched"), "{e}");
        assert_eq!(held_by_others(&root, &[1]), vec![2]);
        assert_eq!(held_by_others(&user, &[2]), vec![1]);
        drop((r, u));
        assert_eq!(held_by_others(&root, &[]), Vec::<usize>::new());
    }

    #[test]
    fn a_subdirectory_others_can_write_holds_nothing() {
        let (_d, dir) = base();
        let root = place(&dir, true);
        fs::create_dir_all(dir.join("open")).unwrap();
        fs::set_permissions(dir.join("open"), fs::Permissions::from_mode(0o777)).unwrap();
        // Anyone could have put a held lock there: it blocks nothing, and a
        // user with only that directory has none of its own (told so).
        let f = open_lock(&dir.join("open/cpu4.lock"), true).unwrap();
        assert!(try_flock(&f, libc::LOCK_EX).unwrap());
        take(&root, &[4]).unwrap();
        let e = take(&place(&dir, false), &[5]).err().unwrap().to_string();
        assert!(e.contains("open is uid") && e.contains("others can write it"), "{e}");
    }

    #[test]
    fn a_planted_link_or_fifo_is_not_followed() {
        let (d, dir) = base();
        let user = place(&dir, false);
        fs::DirBuilder::new().mode(0o755).recursive(true).create(dir.join("u")).unwrap();
        let precious = d.path().join("precious");
        fs::write(&precious, "keep\n").unwrap();
        std::os::unix::fs::symlink(&precious, dir.join("u/cpu1.lock")).unwrap();
        let e = format!("{:#}", take(&user, &[1]).err().unwrap());
        assert!(e.contains("cannot open the lock"), "{e}");
        assert_eq!(fs::read_to_string(&precious).unwrap(), "keep\n");
        let fifo = std::ffi::CString::new(dir.join("u/cpu2.lock").to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let e = format!("{:#}", take(&user, &[2]).err().unwrap());
        assert!(e.contains("not a regular file"), "{e}");
    }
}
