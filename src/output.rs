//! Files a root process writes for its user (the CSV; later traces and
//! summaries). The path may sit in a world-writable directory where
//! anyone can plant a link to a file root owns, so: a symlink as the last
//! component is refused (O_NOFOLLOW), so is anything but a regular file
//! or a file with other hard links, and the file is truncated only after
//! those checks. New files are 0644 and, under sudo, belong to the user
//! who ran sudo, as if they had written them.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// The one check for a path jitterwatch writes at (a file or the trace
/// directory): a symbolic link as its last component is refused, because
/// anyone can plant one in /tmp pointing at what root owns. `what` names
/// the path in the error ("the CSV", "--trace-dir").
pub fn refuse_link(path: &Path, what: &str) -> io::Result<()> {
    match path.symlink_metadata() {
        Ok(m) if m.file_type().is_symlink() => Err(link_refused(path, what)),
        _ => Ok(()),
    }
}

fn link_refused(path: &Path, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("cannot write {what} {}: it is a symbolic link (refused: write to the real path)", path.display()),
    )
}

/// Whether `path` can be written at the end of the run, as `create`
/// checks it, without touching it: not a link, a regular file with no other
/// hard link if it exists, in a directory that exists. Written later by
/// [`write_whole`], so no empty or half file is ever left behind.
pub fn check_writable(path: &Path, what: &str) -> io::Result<()> {
    let fail = |why: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("cannot write {what} {}: {why}", path.display()));
    refuse_link(path, what)?;
    match path.symlink_metadata() {
        Ok(m) if !m.file_type().is_file() => return Err(fail("not a regular file")),
        Ok(m) if m.nlink() > 1 => return Err(fail("it has other hard links (refused: it may be another file)")),
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail(&e.to_string())),
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    match dir.metadata() {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(fail("its directory is not a directory")),
        Err(e) => Err(fail(&format!("its directory: {e}"))),
    }
}

/// Opens `path` for writing from the start, as described above; `what`
/// names it in errors ("the CSV").
pub fn create(path: &Path, what: &str) -> io::Result<File> {
    let fail = |e: io::Error, why: &str| io::Error::new(e.kind(), format!("cannot write {what} {}: {why}", path.display()));
    refuse_link(path, what)?;
    let existed = path.symlink_metadata().is_ok();
    // O_NONBLOCK: a FIFO with no reader fails at once (ENXIO) instead of
    // waiting in open() for one; with a reader it opens, and is refused
    // below as every non-file is. Cleared once the file is known regular.
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            // A link planted after the check above.
            Some(libc::ELOOP) => link_refused(path, what),
            // A FIFO with no reader (O_NONBLOCK says so instead of waiting).
            Some(libc::ENXIO) => fail(e, "not a regular file (a FIFO, or a device with nothing behind it)"),
            _ => {
                let why = e.to_string();
                fail(e, &why)
            }
        })?;
    let m = f.metadata().map_err(|e| {
        let why = e.to_string();
        fail(e, &why)
    })?;
    if !m.file_type().is_file() {
        return Err(fail(io::Error::from(io::ErrorKind::InvalidInput), "not a regular file"));
    }
    if m.nlink() > 1 {
        return Err(fail(io::Error::from(io::ErrorKind::InvalidInput), "it has other hard links (refused: it may be another file)"));
    }
    blocking(&f).map_err(|e| {
        let why = e.to_string();
        fail(e, &why)
    })?;
    f.set_len(0).map_err(|e| {
        let why = e.to_string();
        fail(e, &why)
    })?;
    if !existed {
        give_to_sudo_user(&f);
    }
    Ok(f)
}

/// Clears O_NONBLOCK, set to open without waiting: I/O on a regular file
/// ignores it on the usual filesystems, not on every one (FUSE passes it
/// on), and a write or read must never answer EAGAIN.
pub fn blocking(f: &File) -> io::Result<()> {
    let fd = std::os::fd::AsRawFd::as_raw_fd(f);
    // SAFETY: fcntl on a descriptor the caller owns.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above, with the flags it returned.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Under sudo, a new file goes to the user who ran it (best effort: an
/// unset or unparsable SUDO_UID leaves it root's).
fn give_to_sudo_user(f: &File) {
    if let Some((uid, gid)) = sudo_user() {
        let _ = std::os::unix::fs::fchown(f, Some(uid), Some(gid));
    }
}

fn sudo_user() -> Option<(u32, u32)> {
    let id = |var: &str| std::env::var(var).ok().and_then(|v| v.parse::<u32>().ok());
    Some((id("SUDO_UID")?, id("SUDO_GID")?))
}

/// A directory jitterwatch created (the flight recorder's), given to the
/// sudo user like the files in it; never following a link.
pub fn give_dir_to_sudo_user(dir: &Path) {
    if let Some((uid, gid)) = sudo_user() {
        let _ = std::os::unix::fs::lchown(dir, Some(uid), Some(gid));
    }
}

/// Writes `bytes` as `path` whole: into `path.part` (created new, never
/// through a link: a stale one is removed first), then renamed over
/// `path`, which replaces a link there rather than writing through it. A
/// reader never sees half a file.
pub fn write_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".part");
    let tmp = std::path::PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let write = || -> io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NOCTTY)
            .open(&tmp)?;
        give_to_sudo_user(&f);
        io::Write::write_all(&mut f, bytes)?;
        std::fs::rename(&tmp, path)
    };
    let r = write();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_links_and_non_files_and_leaves_targets_alone() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("precious");
        std::fs::write(&target, "keep me").unwrap();
        let sym = d.path().join("sym.csv");
        std::os::unix::fs::symlink(&target, &sym).unwrap();
        let e = create(&sym, "the CSV").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let hard = d.path().join("hard.csv");
        std::fs::hard_link(&target, &hard).unwrap();
        let e = create(&hard, "the CSV").unwrap_err();
        assert!(e.to_string().contains("hard links"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
        let e = create(d.path(), "the CSV").unwrap_err();
        assert!(e.to_string().starts_with("cannot write the CSV"), "{e}");
    }

    /// A FIFO with no reader fails at once; with one it is refused as a
    /// non-file. Neither waits in open().
    #[test]
    fn a_fifo_is_refused_without_waiting() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("chart.svg");
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let e = create(&p, "the chart").unwrap_err();
        assert!(e.to_string().ends_with("chart.svg: not a regular file (a FIFO, or a device with nothing behind it)"), "{e}");
        let reader = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&p).unwrap();
        let e = create(&p, "the chart").unwrap_err();
        assert!(e.to_string().ends_with("chart.svg: not a regular file"), "{e}");
        drop(reader);
    }

    #[test]
    fn whole_files_replace_a_link_and_leave_its_target_alone() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("precious");
        std::fs::write(&target, "keep me").unwrap();
        let p = d.path().join("t.trace");
        std::os::unix::fs::symlink(&target, &p).unwrap();
        std::os::unix::fs::symlink(&target, d.path().join("t.trace.part")).unwrap();
        write_whole(&p, b"trace").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "trace");
        assert!(!p.symlink_metadata().unwrap().file_type().is_symlink());
        assert!(!d.path().join("t.trace.part").exists());
    }

    #[test]
    fn writes_new_and_truncates_old_regular_files() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.csv");
        std::fs::write(&p, "old old old").unwrap();
        let mut f = create(&p, "the CSV").unwrap();
        io::Write::write_all(&mut f, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        let q = d.path().join("fresh.csv");
        create(&q, "the CSV").unwrap();
        assert_eq!(q.metadata().unwrap().mode() & 0o777, 0o644);
    }
}

/// A file as the kernel knows it where it exists (device and inode: a
/// link or another spelling of the path is the same file), else as its
/// canonical path (two outputs not yet written).
#[derive(Debug)]
pub struct Ident {
    pub inode: Option<(u64, u64)>,
    path: std::path::PathBuf,
}

impl Ident {
    pub fn of(p: &Path) -> Ident {
        let inode = std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
        let path = p.canonicalize().unwrap_or_else(|_| match (p.parent(), p.file_name()) {
            (Some(dir), Some(name)) => {
                let dir = if dir.as_os_str().is_empty() { std::path::Path::new(".") } else { dir };
                dir.canonicalize().map_or_else(|_| p.to_path_buf(), |d| d.join(name))
            }
            _ => p.to_path_buf(),
        });
        Ident { inode, path }
    }

    pub fn same(&self, other: &Ident) -> bool {
        match (self.inode, other.inode) {
            (Some(a), Some(b)) => a == b,
            _ => self.path == other.path,
        }
    }
}

/// Refuses, in one line, two outputs that lead to one file: the second
/// written would silently replace the first (a CSV overwritten by the
/// summary's JSON). `outputs`: (the option that named it, the path).
pub fn refuse_shared(outputs: &[(&str, &Path)]) -> Result<(), String> {
    let keys: Vec<Ident> = outputs.iter().map(|(_, p)| Ident::of(p)).collect();
    for i in 0..outputs.len() {
        for j in i + 1..outputs.len() {
            if keys[i].same(&keys[j]) {
                return Err(format!(
                    "{} and {} both write {}: give each output a file of its own",
                    outputs[i].0,
                    outputs[j].0,
                    crate::sanitize::visible(&outputs[j].1.display().to_string())
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod shared_tests {
    use super::*;

    #[test]
    fn two_outputs_naming_one_file_are_refused_however_it_is_spelled() {
        let d = tempfile::tempdir().unwrap();
        let csv = d.path().join("ok.csv");
        let dotted = d.path().join(".").join("sub").join("..").join("ok.csv");
        std::fs::create_dir(d.path().join("sub")).unwrap();
        let e = refuse_shared(&[("--csv", &csv), ("--summary-json", &dotted)]).unwrap_err();
        assert!(e.starts_with("--csv and --summary-json both write "), "{e}");
        // Through a symbolic link to the directory, too.
        std::os::unix::fs::symlink(d.path(), d.path().join("link")).unwrap();
        let linked = d.path().join("link").join("ok.csv");
        assert!(refuse_shared(&[("--csv", &csv), ("--record", &linked)]).is_err());
        // Different files pass.
        assert!(refuse_shared(&[("--csv", &csv), ("--record", &d.path().join("run.pftrace"))]).is_ok());
    }
}
