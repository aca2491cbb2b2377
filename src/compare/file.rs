//! Reading one input of `compare`/`report`: a regular file only, opened so
//! that nothing blocks (a FIFO would wait in open() for a writer forever),
//! and no more than a cap (a device such as /dev/zero never ends, and a
//! summary may name any file as its CSV).

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use anyhow::Result;

/// A CSV: 1 GiB, about 10 million rows (a row is ~100 bytes): 3 hours at
/// 1,000 hiccups/s. compare holds the file and its rows in memory, about
/// 2.5 times the file; a larger run is better split than compared whole.
pub const CSV_CAP: u64 = 1 << 30;
/// A summary: 64 MiB. jitterwatch writes a few KiB, ~200 bytes per CPU
/// (under 2 MiB for the kernel's largest 8192 CPUs).
pub const SUMMARY_CAP: u64 = 64 << 20;

/// What a file holds, as its first byte says (a summary is a JSON object).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Csv,
    Summary,
}

impl Kind {
    fn cap(self) -> u64 {
        match self {
            Kind::Csv => CSV_CAP,
            Kind::Summary => SUMMARY_CAP,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Csv => "a CSV",
            Kind::Summary => "a run summary",
        }
    }
}

/// The bytes of `path`, which errors call `shown` (escaped by the caller),
/// and what they are: `kind` where the caller knows it, else its first
/// bytes say. One line for a file that is not a regular one or is over
/// its kind's cap.
pub fn read(path: &Path, shown: &str, kind: Option<Kind>) -> Result<(Kind, Vec<u8>)> {
    let cannot = |why: String| anyhow::anyhow!("cannot read {shown}: {why}");
    // O_NONBLOCK: opening a FIFO returns at once, writer or not; fstat
    // then refuses it. O_NOCTTY: a terminal named here never becomes ours.
    let f = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| cannot(e.to_string()))?;
    let m = f.metadata().map_err(|e| cannot(e.to_string()))?;
    if !m.file_type().is_file() {
        return Err(cannot(format!("it is {}, not a regular file", what(&m.file_type()))));
    }
    crate::output::blocking(&f).map_err(|e| cannot(e.to_string()))?;
    let mut head = Vec::with_capacity(4096);
    (&f).take(4096).read_to_end(&mut head).map_err(|e| cannot(e.to_string()))?;
    let kind = kind.unwrap_or(if head.trim_ascii_start().starts_with(b"{") { Kind::Summary } else { Kind::Csv });
    let over = || cannot(format!("it holds more than the {} {} may hold here", crate::units::bytes(kind.cap()), kind.name()));
    if m.len() > kind.cap() {
        return Err(over());
    }
    let mut bytes = head;
    bytes.reserve(m.len().saturating_sub(bytes.len() as u64) as usize);
    if !within(&mut &f, &mut bytes, kind.cap()).map_err(|e| cannot(e.to_string()))? {
        return Err(over());
    }
    Ok((kind, bytes))
}

/// Reads the rest of `r` onto `buf` unless that makes more than `cap`
/// bytes: false then. The size fstat said is no bound (a file in /proc
/// says 0, one being written grows): one byte past the cap is read to know.
fn within(r: &mut impl Read, buf: &mut Vec<u8>, cap: u64) -> io::Result<bool> {
    r.take((cap + 1).saturating_sub(buf.len() as u64)).read_to_end(buf)?;
    Ok(buf.len() as u64 <= cap)
}

/// A file type, as a refusal names it.
pub fn what(t: &std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "something else"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(path: &Path, kind: Option<Kind>) -> String {
        read(path, &path.display().to_string(), kind).err().map(|e| format!("{e:#}")).unwrap_or_default()
    }

    #[test]
    fn only_regular_files_and_a_fifo_does_not_block() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("f.csv");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        assert!(err(&fifo, None).ends_with("f.csv: it is a FIFO, not a regular file"), "{}", err(&fifo, None));
        assert_eq!(err(Path::new("/dev/zero"), None), "cannot read /dev/zero: it is a character device, not a regular file");
        assert!(err(d.path(), None).ends_with("it is a directory, not a regular file"));
        let ok = d.path().join("ok.csv");
        std::fs::write(&ok, "a,b\n").unwrap();
        assert_eq!(read(&ok, "ok.csv", None).unwrap(), (Kind::Csv, b"a,b\n".to_vec()));
        std::fs::write(&ok, " \n{\"mode\":1}").unwrap();
        assert_eq!(read(&ok, "ok.csv", None).unwrap().0, Kind::Summary);
    }

    /// Sparse files: their size is over the cap, their blocks are not on disk.
    #[test]
    fn files_over_their_cap_are_refused_before_they_are_read() {
        let d = tempfile::tempdir().unwrap();
        let big = d.path().join("big.csv");
        let f = File::create(&big).unwrap();
        f.set_len(CSV_CAP + 1).unwrap();
        assert!(err(&big, None).ends_with("big.csv: it holds more than the 1.00 GiB a CSV may hold here"), "{}", err(&big, None));
        let json = d.path().join("big.summary.json");
        std::fs::write(&json, "{").unwrap();
        File::options().write(true).open(&json).unwrap().set_len(SUMMARY_CAP + 1).unwrap();
        assert!(err(&json, None).ends_with("it holds more than the 64.0 MiB a run summary may hold here"), "{}", err(&json, None));
        // Named as the summary beside a CSV, whatever its first byte.
        std::fs::write(&json, "x").unwrap();
        File::options().write(true).open(&json).unwrap().set_len(SUMMARY_CAP + 1).unwrap();
        assert!(err(&json, Some(Kind::Summary)).contains("64.0 MiB a run summary"));
        // At the cap exactly: read.
        File::options().write(true).open(&json).unwrap().set_len(SUMMARY_CAP).unwrap();
        assert_eq!(read(&json, "j", Some(Kind::Summary)).unwrap().1.len() as u64, SUMMARY_CAP);
    }

    /// A reader that never ends (a file whose size said 0, then grew) is
    /// read no further than one byte past the cap.
    #[test]
    fn a_read_stops_one_byte_past_the_cap() {
        let mut buf = b"head".to_vec();
        assert!(!within(&mut io::repeat(b'x'), &mut buf, 100).unwrap());
        assert_eq!(buf.len(), 101);
        let mut buf = b"head".to_vec();
        assert!(within(&mut &b"tail"[..], &mut buf, 8).unwrap());
        assert_eq!(buf, b"headtail");
    }
}
