//! The VM's whole root file system: an initramfs (newc cpio, written here)
//! with busybox-static, the dist binary and the shared libraries `ldd` says
//! it needs (the host's glibc: the binary links it dynamically), the guest
//! script as /init (its part beside rtla as /guest_rtla.sh, which it
//! sources), a busy loop named `jwbusy` for passive mode, util-linux's
//! setpriv with its libraries (busybox's cannot change the uid and keep
//! capabilities: the run without root needs both), and the
//! kernel's config in /boot, where doctor looks for it. No disk, no modules:
//! the serial console and everything jitterwatch reads are built in. An
//! arm64 guest gets the same, its busybox, setpriv and libraries from
//! Debian's arm64 packages instead of the host (userland.rs).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The script run as PID 1.
pub const GUEST: &str = include_str!("guest.sh");
/// Its part beside rtla, which it sources (`. /guest_rtla.sh`).
pub const GUEST_RTLA: &str = include_str!("guest_rtla.sh");

/// A thread whose name (the script's file name) passive mode can watch.
const JWBUSY: &str = "#!/bin/sh\nwhile :; do :; done\n";

/// Where busybox-static puts its binary.
const BUSYBOX: &str = "/bin/busybox";

/// util-linux's setpriv, at the same path in the guest.
const SETPRIV: &str = "/usr/bin/setpriv";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File {
        data: Vec<u8>,
        mode: u32,
    },
    Symlink(String),
    /// A character device (major, minor).
    CharDev(u32, u32),
}

fn exe(data: Vec<u8>) -> Entry {
    Entry::File { data, mode: 0o755 }
}

/// What every guest holds, whatever its architecture: the script, the
/// shell (`busybox`'s bytes), the busy loop, jitterwatch, the console;
/// then setpriv (at [`SETPRIV`]) and its libraries.
pub fn guest(jitterwatch: &Path, busybox: Vec<u8>, setpriv: Vec<u8>) -> Result<Vec<(String, Entry)>> {
    Ok(vec![
        ("init".to_string(), exe(GUEST.as_bytes().to_vec())),
        ("guest_rtla.sh".to_string(), Entry::File { data: GUEST_RTLA.as_bytes().to_vec(), mode: 0o644 }),
        ("bin/busybox".to_string(), exe(busybox)),
        ("bin/sh".to_string(), Entry::Symlink("busybox".to_string())),
        ("bin/jwbusy".to_string(), exe(JWBUSY.as_bytes().to_vec())),
        ("bin/jitterwatch".to_string(), exe(std::fs::read(jitterwatch).with_context(|| format!("reading {}", jitterwatch.display()))?)),
        ("dev/console".to_string(), Entry::CharDev(5, 1)),
        (SETPRIV.trim_start_matches('/').to_string(), exe(setpriv)),
    ])
}

/// The files every x86_64 VM shares, as (path without the leading /,
/// entry): the host's busybox and setpriv.
pub fn base(jitterwatch: &Path) -> Result<Vec<(String, Entry)>> {
    let busybox = Path::new(BUSYBOX);
    if !busybox.is_file() {
        bail!("{BUSYBOX} is missing: install busybox-static (cargo xtask deps)");
    }
    let setpriv = std::fs::read(SETPRIV).with_context(|| format!("reading {SETPRIV} (util-linux)"))?;
    let mut files = guest(jitterwatch, std::fs::read(busybox)?, setpriv)?;
    let mut libs = BTreeSet::new();
    for bin in [jitterwatch, Path::new(SETPRIV)] {
        let out = Command::new("ldd").arg(bin).output().context("running ldd")?;
        libs.extend(needed_libs(&String::from_utf8_lossy(&out.stdout)));
    }
    for lib in libs {
        let data = std::fs::read(&lib).with_context(|| format!("reading {lib}"))?;
        files.push((lib.trim_start_matches('/').to_string(), exe(data)));
    }
    Ok(files)
}

/// `files` with those under each `links` name (a top directory such as
/// `lib` that becomes a link into /usr) moved to the link's target, and
/// dropped where the tree to be added (`theirs`) has the same path.
pub fn under_usr(files: Vec<(String, Entry)>, links: &[(String, String)], theirs: &[String]) -> Vec<(String, Entry)> {
    files
        .into_iter()
        .filter_map(|(path, e)| {
            let moved = links.iter().find_map(|(top, target)| path.strip_prefix(&format!("{top}/")).map(|rest| format!("{target}/{rest}")));
            match moved {
                Some(p) if theirs.contains(&p) => None,
                Some(p) => Some((p, e)),
                None => Some((path, e)),
            }
        })
        .collect()
}

/// Every file and symbolic link under `root`, at its path below it (the
/// directories come with them: `archive` adds the parents).
pub fn tree(root: &Path) -> Result<Vec<(String, Entry)>> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let path = e?.path();
            let rel = path.strip_prefix(root)?.to_string_lossy().into_owned();
            let meta = std::fs::symlink_metadata(&path)?;
            if meta.file_type().is_symlink() {
                out.push((rel, Entry::Symlink(std::fs::read_link(&path)?.to_string_lossy().into_owned())));
            } else if meta.is_dir() {
                todo.push(path);
            } else {
                use std::os::unix::fs::PermissionsExt;
                out.push((rel, Entry::File { data: std::fs::read(&path)?, mode: meta.permissions().mode() & 0o7777 }));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The libraries (and the loader) in `ldd` output, by the path the loader
/// will look them up at; none for a static binary.
pub fn needed_libs(ldd: &str) -> Vec<String> {
    ldd.lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = match l.split_once("=>") {
                Some((_, right)) => right.trim(),
                None => l,
            };
            let path = path.split_whitespace().next()?;
            path.starts_with('/').then(|| path.to_string())
        })
        .collect()
}

/// `files` with the directories they need, as a newc cpio archive.
pub fn archive(files: &[(String, Entry)]) -> Vec<u8> {
    let mut dirs = BTreeSet::new();
    for d in ["dev", "proc", "sys", "run", "tmp", "boot"] {
        dirs.insert(d.to_string());
    }
    for (path, _) in files {
        let mut p = Path::new(path).parent();
        while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
            dirs.insert(d.to_string_lossy().into_owned());
            p = d.parent();
        }
    }
    let mut out = Vec::new();
    let mut ino = 1;
    // BTreeSet order puts a parent before its children.
    for d in &dirs {
        header(&mut out, ino, d, &Entry::Dir);
        ino += 1;
    }
    for (path, e) in files {
        header(&mut out, ino, path, e);
        ino += 1;
    }
    header(&mut out, 0, "TRAILER!!!", &Entry::File { data: Vec::new(), mode: 0 });
    out
}

fn pad4(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// One newc record: the header, the name, the data.
fn header(out: &mut Vec<u8>, ino: u32, name: &str, e: &Entry) {
    let (mode, data, rdev): (u32, &[u8], (u32, u32)) = match e {
        Entry::Dir => (0o040755, &[], (0, 0)),
        Entry::File { data, mode } => (0o100000 | mode, data, (0, 0)),
        Entry::Symlink(target) => (0o120777, target.as_bytes(), (0, 0)),
        Entry::CharDev(maj, min) => (0o020600, &[], (*maj, *min)),
    };
    let nlink = if matches!(e, Entry::Dir) { 2 } else { 1 };
    let fields = [ino, mode, 0, 0, nlink, 0, data.len() as u32, 0, 0, rdev.0, rdev.1, name.len() as u32 + 1, 0];
    out.extend_from_slice(b"070701");
    for f in fields {
        out.extend_from_slice(format!("{f:08x}").as_bytes());
    }
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    pad4(out);
    out.extend_from_slice(data);
    pad4(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host's /lib files go under /usr when /lib becomes a link there,
    /// and the tree's own copy wins (trixie's rtla needs its glibc 2.38+,
    /// not a bookworm host's 2.36 that setpriv brought).
    #[test]
    fn host_libraries_move_under_usr_and_the_suites_win() {
        let f = |p: &str| (p.to_string(), Entry::File { data: p.as_bytes().to_vec(), mode: 0o755 });
        let base = vec![
            f("bin/jitterwatch"),
            f("lib/x86_64-linux-gnu/libc.so.6"),
            f("lib/x86_64-linux-gnu/libcap-ng.so.0"),
            f("lib64/ld-linux-x86-64.so.2"),
        ];
        let links = [("lib".to_string(), "usr/lib".to_string()), ("lib64".to_string(), "usr/lib64".to_string())];
        let theirs = ["usr/lib/x86_64-linux-gnu/libc.so.6".to_string(), "usr/lib64/ld-linux-x86-64.so.2".to_string()];
        let got: Vec<String> = under_usr(base.clone(), &links, &theirs).into_iter().map(|(p, _)| p).collect();
        assert_eq!(got, ["bin/jitterwatch", "usr/lib/x86_64-linux-gnu/libcap-ng.so.0"]);
        // Without links (a tree with its own /lib), nothing moves.
        assert_eq!(under_usr(base.clone(), &[], &theirs).len(), base.len());
    }

    #[test]
    fn ldd_lines_give_paths() {
        let ldd = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                   \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f34)\n\
                   \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f34)\n\
                   \t/lib64/ld-linux-x86-64.so.2 (0x00007f346df15000)\n";
        assert_eq!(
            needed_libs(ldd),
            ["/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libgcc_s.so.1", "/lib64/ld-linux-x86-64.so.2"]
        );
        assert!(needed_libs("\tnot a dynamic executable\n").is_empty());
        assert!(needed_libs("\tstatically linked\n").is_empty());
    }

    #[test]
    fn newc_records_are_aligned_and_parents_come_first() {
        let files = vec![
            ("lib/x86_64-linux-gnu/libc.so.6".to_string(), Entry::File { data: b"abcde".to_vec(), mode: 0o755 }),
            ("bin/sh".to_string(), Entry::Symlink("busybox".to_string())),
            ("dev/console".to_string(), Entry::CharDev(5, 1)),
        ];
        let a = archive(&files);
        assert_eq!(a.len() % 4, 0);
        assert!(a.starts_with(b"070701"));
        let text = String::from_utf8_lossy(&a);
        let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s} missing"));
        assert!(at("lib\0") < at("lib/x86_64-linux-gnu\0"));
        assert!(at("lib/x86_64-linux-gnu\0") < at("lib/x86_64-linux-gnu/libc.so.6\0"));
        assert!(at("proc\0") > 0 && at("boot\0") > 0);
        assert!(text.ends_with("TRAILER!!!\0\0\0\0") || text.contains("TRAILER!!!\0"));
        // The console's header: mode 020600, rdev 5:1.
        let dev = at("dev/console\0") - 110;
        assert_eq!(&text[dev..dev + 6], "070701");
        assert_eq!(&text[dev + 14..dev + 22], "00002180");
        assert_eq!(&text[dev + 78..dev + 94], "0000000500000001");
        // The file's size field and its data.
        let f = at("lib/x86_64-linux-gnu/libc.so.6\0") - 110;
        assert_eq!(&text[f + 54..f + 62], "00000005");
        assert!(text.contains("abcde"));
    }
}
