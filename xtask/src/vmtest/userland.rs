//! An arm64 guest's userspace: the host's busybox and setpriv are x86-64
//! binaries, so the guest carries those of Debian's arm64 packages of the
//! kernel's own suite (the same suite as its rtla, so both want the same
//! libc): busybox-static, util-linux's setpriv (its own package from
//! trixie on) and what setpriv's package depends on directly (Depends and
//! Pre-Depends: util-linux is Essential and pre-depends), fetched with
//! the suite's arm64 apt root and unpacked into
//! target/vmtest-cache-arm64/userland/SUITE. The guest takes busybox,
//! setpriv and the libraries setpriv needs (readelf's NEEDED, followed
//! through the libraries themselves, and its loader) from that tree, not
//! the whole of it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::apt::{self, AptRoot};
use super::initramfs::{self, Entry};
use super::kernels::KernelSpec;
use crate::cross::Arch;

/// Written last into a tree whose unpacking finished.
const DONE: &str = "jitterwatch-userland";

/// The unpacked tree of `spec`'s suite, fetched first if it is not there.
pub fn root(spec: &KernelSpec, cache: &Path) -> Result<PathBuf> {
    let dir = cache.join("userland").join(spec.suite);
    if dir.join(DONE).is_file() {
        return Ok(dir);
    }
    let apt = AptRoot::new(&cache.join("apt").join(spec.suite), spec.suite, spec.arch)?;
    // util-linux ships setpriv itself up to bookworm; later its own package.
    let setpriv = if apt.show("setpriv").is_ok() { "setpriv" } else { "util-linux" };
    let mut pkgs: BTreeSet<String> = ["busybox-static", "libc6", setpriv].map(String::from).into();
    let show = apt.show(setpriv)?;
    pkgs.extend(apt::depends(&show));
    pkgs.extend(apt::relations(&show, "Pre-Depends"));
    let pkgs: Vec<String> = pkgs.into_iter().collect();
    let why = format!("{} {}, the guest's userspace", spec.suite, spec.arch.debian());
    apt.unpack(&pkgs, &cache.join("debs").join(format!("userland-{}", spec.suite)), &dir, &why)?;
    std::fs::write(dir.join(DONE), pkgs.join("\n") + "\n")?;
    Ok(dir)
}

/// The guest's files from the tree `dir` (root's): [`initramfs::guest`]
/// with the tree's busybox and setpriv, and the libraries setpriv needs at
/// the paths the loader looks them up at.
pub fn guest(arch: Arch, jitterwatch: &Path, dir: &Path) -> Result<Vec<(String, Entry)>> {
    let busybox = read_in(dir, &["bin/busybox", "usr/bin/busybox"])?.1;
    let (setpriv_at, setpriv) = read_in(dir, &["usr/bin/setpriv", "bin/setpriv"])?;
    let mut files = initramfs::guest(jitterwatch, busybox, setpriv)?;
    let mut seen = BTreeSet::new();
    let mut todo = vec![dir.join(setpriv_at)];
    while let Some(elf) = todo.pop() {
        let (libs, interp) = dynamic(&elf)?;
        let mut wanted: Vec<(String, Vec<String>)> = libs.iter().map(|l| (lib_path(arch, l), lib_candidates(arch, l))).collect();
        if let Some(i) = interp {
            let bare = i.trim_start_matches('/').to_string();
            wanted.push((bare.clone(), vec![bare.clone(), format!("usr/{bare}")]));
        }
        for (at, candidates) in wanted {
            if !seen.insert(at.clone()) {
                continue;
            }
            let refs: Vec<&str> = candidates.iter().map(String::as_str).collect();
            let (found, data) = read_in(dir, &refs).with_context(|| format!("{} needs {at}", elf.display()))?;
            todo.push(dir.join(found));
            files.push((at, Entry::File { data, mode: 0o755 }));
        }
    }
    Ok(files)
}

/// The first of `candidates` (paths below `dir`) that is there, and its
/// bytes (a link followed, but never out of `dir`).
fn read_in(dir: &Path, candidates: &[&str]) -> Result<(String, Vec<u8>)> {
    let top = dir.canonicalize().with_context(|| format!("reading {}", dir.display()))?;
    for c in candidates {
        let Ok(real) = dir.join(c).canonicalize() else { continue };
        if !real.starts_with(&top) {
            bail!("{c} in {} links out of it, to {}", dir.display(), real.display());
        }
        let rel = real.strip_prefix(&top)?.to_string_lossy().into_owned();
        return Ok((rel, std::fs::read(&real)?));
    }
    bail!("none of {} in {}", candidates.join(", "), dir.display())
}

/// An ELF file's NEEDED libraries and its loader, as `readelf` says.
fn dynamic(elf: &Path) -> Result<(Vec<String>, Option<String>)> {
    let out = Command::new("readelf").args(["-d", "-l", "-W"]).arg(elf).output().context("running readelf (binutils)")?;
    if !out.status.success() {
        bail!("readelf {} failed: {}", elf.display(), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(parse_dynamic(&String::from_utf8_lossy(&out.stdout)))
}

/// [`dynamic`]'s reading of `readelf -d -l -W` output.
pub fn parse_dynamic(readelf: &str) -> (Vec<String>, Option<String>) {
    let between = |l: &str, open: &str| -> Option<String> {
        let rest = &l[l.find(open)? + open.len()..];
        Some(rest[..rest.find(']')?].to_string())
    };
    let libs = readelf.lines().filter(|l| l.contains("(NEEDED)")).filter_map(|l| between(l, "Shared library: [")).collect();
    let interp = readelf.lines().find_map(|l| between(l, "[Requesting program interpreter: "));
    (libs, interp)
}

/// Where the guest holds library `name`: its multiarch directory under
/// /lib, which the loader searches without a cache.
pub fn lib_path(arch: Arch, name: &str) -> String {
    format!("lib/{}/{name}", arch.multiarch())
}

/// Where a Debian tree may have it: under /lib up to bookworm, /usr/lib
/// from trixie on.
pub fn lib_candidates(arch: Arch, name: &str) -> Vec<String> {
    let m = arch.multiarch();
    vec![format!("lib/{m}/{name}"), format!("usr/lib/{m}/{name}"), format!("lib/{name}"), format!("usr/lib/{name}")]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_needed_libraries_and_the_loader() {
        let out = "Elf file type is DYN (Position-Independent Executable file)\n\
                   Program Headers:\n  INTERP         0x000238 0x0000000000000238 0x0000000000000238 0x00001b 0x00001b R   0x1\n\
                   \x20     [Requesting program interpreter: /lib/ld-linux-aarch64.so.1]\n\
                   Dynamic section at offset 0xfd58 contains 28 entries:\n\
                   \x20 0x0000000000000001 (NEEDED)             Shared library: [libcap-ng.so.0]\n\
                   \x20 0x0000000000000001 (NEEDED)             Shared library: [libc.so.6]\n\
                   \x20 0x000000000000000c (INIT)               0x1a00\n";
        let (libs, interp) = parse_dynamic(out);
        assert_eq!(libs, ["libcap-ng.so.0", "libc.so.6"]);
        assert_eq!(interp.as_deref(), Some("/lib/ld-linux-aarch64.so.1"));
        assert_eq!(parse_dynamic("There is no dynamic section in this file.\n"), (Vec::new(), None));
    }

    #[test]
    fn libraries_go_where_the_loader_looks_and_come_from_either_layout() {
        assert_eq!(lib_path(Arch::Arm64, "libc.so.6"), "lib/aarch64-linux-gnu/libc.so.6");
        let c = lib_candidates(Arch::Arm64, "libc.so.6");
        assert_eq!(c[0], "lib/aarch64-linux-gnu/libc.so.6");
        assert_eq!(c[1], "usr/lib/aarch64-linux-gnu/libc.so.6");
    }
}
