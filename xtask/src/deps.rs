//! `cargo xtask deps`: the Debian 12 packages the build, tests and benches
//! need. Detected with dpkg-query (or the binary on PATH); the missing ones
//! are installed with apt-get when root, else we say what to run.

use std::collections::HashSet;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::proc;

/// Debian package, and the binary it provides (None for libraries).
const DEPS: &[(&str, Option<&str>)] = &[
    ("clang", Some("clang")),
    ("libelf-dev", None),
    ("zlib1g-dev", None),
    ("pkg-config", Some("pkg-config")),
    ("bpftool", Some("bpftool")),
    ("tmux", Some("tmux")),
    ("python3", Some("python3")),
    ("linux-perf", Some("perf")),
    ("bpftrace", Some("bpftrace")),
    ("gcc", Some("gcc")),
    // The libc.a `cargo xtask dist` links in (gcc only recommends it).
    ("libc6-dev", None),
    // libbpf-sys's vendored libbpf, libelf and zlib build with make.
    ("make", Some("make")),
    // `cargo xtask dist` checks with `file` that its binary is static.
    ("file", Some("file")),
    // The network server whose books passive_server_e2e checks.
    ("sockperf", Some("sockperf")),
    // cyclictest, the anchor beside the wake-up probe in the bench.
    ("rt-tests", Some("cyclictest")),
    // The Prometheus server and promtool the metrics test scrapes with.
    ("prometheus", Some("promtool")),
    // `cargo xtask vmtest`: the VMs, and the shell inside them.
    ("qemu-system-x86", Some("qemu-system-x86_64")),
    ("busybox-static", None),
];

/// What only the arm64 builds need (`dist --arch arm64`, `vmlinux --arch
/// arm64`): installed on their first run, not by every command. debootstrap
/// makes their Debian sid root; qemu runs the aarch64 binary here.
pub const ARM64: &[(&str, Option<&str>)] = &[("debootstrap", Some("debootstrap")), ("qemu-user-static", Some("qemu-aarch64-static"))];

/// What `vmtest --arch arm64` needs besides [`DEPS`]: the arm64 emulator
/// (the guest's userspace comes from Debian's arm64 packages, not the host).
pub const VMTEST_ARM64: &[(&str, Option<&str>)] = &[("qemu-system-arm", Some("qemu-system-aarch64"))];

/// Wait for a dpkg lock held by someone else instead of failing at once.
const LOCK_WAIT: &str = "DPkg::Lock::Timeout=120";

pub fn run() -> Result<()> {
    ensure(true)
}

/// Make sure every package is there. `verbose`: say so even when nothing
/// had to be done (the other commands stay quiet then).
pub fn ensure(verbose: bool) -> Result<()> {
    ensure_these(DEPS, verbose)
}

/// [`ensure`] for another list ([`ARM64`]).
pub fn ensure_these(deps: &[(&str, Option<&str>)], verbose: bool) -> Result<()> {
    let missing = missing(deps);
    if missing.is_empty() {
        if verbose {
            println!("deps: all {} packages present", deps.len());
        }
        return Ok(());
    }
    let list = missing.join(" ");
    if proc::which("apt-get").is_none() {
        bail!("missing system packages: {list} (no apt-get here: install them with your package manager)");
    }
    if !proc::is_root() {
        bail!("missing system packages; run: sudo apt-get install -y {list}");
    }

    println!("deps: installing {list}");
    proc::check(Command::new("apt-get").args(["-q", "-o", LOCK_WAIT, "update"]).stdout(Stdio::null()))?;
    proc::check(
        Command::new("apt-get")
            .args(["-q", "-y", "--no-install-recommends", "-o", LOCK_WAIT, "install"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )?;

    let still = self::missing(deps);
    if !still.is_empty() {
        bail!("apt-get finished but these are still missing: {}", still.join(" "));
    }
    println!("deps: installed {list}");
    Ok(())
}

/// The packages of `deps` that are not installed, in table order.
fn missing<'a>(deps: &[(&'a str, Option<&str>)]) -> Vec<&'a str> {
    let installed = dpkg_installed(deps).unwrap_or_default();
    deps.iter()
        .filter(|(pkg, bin)| !installed.contains(*pkg) && !bin.is_some_and(|b| proc::which(b).is_some()))
        .map(|(pkg, _)| *pkg)
        .collect()
}

/// The packages of `deps` dpkg reports as "install ok installed", from
/// one dpkg-query call. None when there is no dpkg.
fn dpkg_installed(deps: &[(&str, Option<&str>)]) -> Option<HashSet<String>> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Package}\t${Status}\n"])
        .args(deps.iter().map(|d| d.0))
        .stderr(Stdio::null()) // "no packages found matching X" for absent ones
        .output()
        .context("dpkg-query")
        .ok()?;
    // Exit status is 1 when some package is unknown; the rest still print.
    Some(parse_dpkg(&String::from_utf8_lossy(&out.stdout)))
}

fn parse_dpkg(out: &str) -> HashSet<String> {
    out.lines()
        .filter_map(|l| l.split_once('\t'))
        .filter(|(_, status)| status.trim() == "install ok installed")
        // Multi-arch packages may come back as name:arch.
        .map(|(pkg, _)| pkg.split(':').next().unwrap_or(pkg).to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_dpkg_status() {
        let out = "clang\tinstall ok installed\n\
                   libelf-dev:amd64\tinstall ok installed\n\
                   bpftrace\tdeinstall ok config-files\n\
                   tmux\tunknown ok not-installed\n";
        let got = parse_dpkg(out);
        assert!(got.contains("clang"));
        assert!(got.contains("libelf-dev"));
        assert!(!got.contains("bpftrace"));
        assert!(!got.contains("tmux"));
    }
}
