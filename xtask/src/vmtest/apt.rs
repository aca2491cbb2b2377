//! A private apt root per suite of deb.debian.org (its own sources.list,
//! lists and empty dpkg status, so the host's apt configuration and
//! installed packages are left alone), and reading what `apt-cache show`
//! says: what vmtest fetches its kernels, rtla and arm64's userland with.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::cross::Arch;
use crate::proc;

/// Runs `cmd`, piped into the shell command `then` when given; its stdout.
pub(super) fn run_out(cmd: &mut Command, then: Option<&str>) -> Result<String> {
    let Some(then) = then else {
        let out = cmd.output().with_context(|| format!("running {}", proc::show(cmd)))?;
        if !out.status.success() {
            bail!("{} failed: {}", proc::show(cmd), String::from_utf8_lossy(&out.stderr).trim());
        }
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    };
    let mut first = cmd.spawn().with_context(|| format!("running {}", proc::show(cmd)))?;
    let input = first.stdout.take().context("no pipe")?;
    let out = Command::new("sh").args(["-c", then]).stdin(input).output()?;
    let st = first.wait()?;
    if !st.success() || !out.status.success() {
        bail!("{} | {then} failed: {}", proc::show(cmd), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// How long a suite's package lists are used before apt-get update.
const LISTS_FRESH_FOR: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// A private apt configuration for one suite of deb.debian.org.
pub(super) struct AptRoot {
    opts: Vec<String>,
}

impl AptRoot {
    pub(super) fn new(dir: &Path, suite: &str, arch: Arch) -> Result<Self> {
        for sub in ["lists/partial", "cache/archives/partial"] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        let sources = dir.join("sources.list");
        std::fs::write(&sources, sources_list(suite))?;
        let status = dir.join("status");
        if !status.exists() {
            std::fs::write(&status, "")?;
        }
        let d = |p: &str| dir.join(p).display().to_string();
        let mut opts = vec![
            format!("Dir::Etc::SourceList={}", sources.display()),
            "Dir::Etc::SourceParts=/dev/null".to_string(),
            format!("Dir::State::Lists={}", d("lists")),
            format!("Dir::State::status={}", status.display()),
            format!("Dir::Cache={}", d("cache")),
            "Acquire::Languages=none".to_string(),
            // Only the package lists: not the AppStream data the host's
            // apt.conf.d may ask for.
            "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false".to_string(),
            "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false".to_string(),
            "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false".to_string(),
            "DPkg::Lock::Timeout=120".to_string(),
        ];
        opts.extend(arch_options(arch));
        let opts = opts.into_iter().flat_map(|o| ["-o".to_string(), o]).collect();
        let apt = Self { opts };
        // Lists a day old at most: the archive drops superseded versions
        // (sid's, the security suites'), which older lists still name. Their
        // age is our update's (a stamp), not the files': apt dates a list
        // by the archive's Last-Modified.
        let stamp = dir.join("updated");
        let age = std::fs::metadata(&stamp).and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok());
        let listed = std::fs::read_dir(dir.join("lists"))?.flatten().any(|e| is_package_list(&e.file_name().to_string_lossy()));
        if !(listed && age.is_some_and(|a| a < LISTS_FRESH_FOR)) {
            println!("vmtest: apt-get update for {suite} (private lists in {})", dir.display());
            proc::check(Command::new("apt-get").args(&apt.opts).args(["-q", "update"]).stdout(Stdio::null()))?;
            std::fs::write(&stamp, "")?;
        }
        Ok(apt)
    }

    pub(super) fn show(&self, pkg: &str) -> Result<String> {
        run_out(Command::new("apt-cache").args(&self.opts).args(["show", "--no-all-versions", pkg]), None)
    }

    /// Downloads `pkg` into `dir`; the .deb's path.
    pub(super) fn download(&self, pkg: &str, dir: &Path) -> Result<PathBuf> {
        // apt's sandbox user cannot write into root's target/: download as
        // root (it warns, that is all).
        proc::check(Command::new("apt-get").args(&self.opts).args(["-q", "download", pkg]).current_dir(dir).stdout(Stdio::null()))?;
        std::fs::read_dir(dir)?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&format!("{pkg}_"))))
            .with_context(|| format!("apt-get download {pkg} left no .deb in {}", dir.display()))
    }
}

/// What an apt root for `arch` adds: none for x86_64 (the host's own). For
/// arm64, that architecture alone, so the lists, `show` and `download` are
/// its packages; and sid's lists taken past their Valid-Until (its Release
/// file here is often stale: the archive serves what it has, and a fresh
/// root has no lists to fall back on).
pub fn arch_options(arch: Arch) -> Vec<String> {
    match arch {
        Arch::X86_64 => Vec::new(),
        Arch::Arm64 => {
            ["APT::Architecture=arm64", "APT::Architectures=arm64", "Acquire::Check-Valid-Until=false"].map(String::from).to_vec()
        }
    }
}

impl AptRoot {
    /// `pkgs` downloaded into `debs` and unpacked together into `dir`
    /// (replacing it whole; the .debs go), `why` said with each: the
    /// guest's trees (rtla's, arm64's userland).
    pub(super) fn unpack(&self, pkgs: &[String], debs: &Path, dir: &Path, why: &str) -> Result<()> {
        std::fs::create_dir_all(debs)?;
        let tmp = dir.with_extension("part");
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp)?;
        for pkg in pkgs {
            println!("vmtest: fetching {pkg} ({why})");
            let deb = self.download(pkg, debs)?;
            proc::check(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tmp))?;
        }
        // Documentation and locales: megabytes the guest never reads.
        let _ = std::fs::remove_dir_all(tmp.join("usr/share"));
        let _ = std::fs::remove_dir_all(dir);
        std::fs::rename(&tmp, dir)?;
        let _ = std::fs::remove_dir_all(debs);
        Ok(())
    }
}

/// Whether `name`, in apt's lists directory, is a suite's package list:
/// `..._Packages`, or compressed as apt keeps it when the host's apt.conf
/// says so (Debian's does: `_Packages.lz4`), which each run missed and so
/// updated the lists again.
fn is_package_list(name: &str) -> bool {
    name.rsplit_once("_Packages").is_some_and(|(_, ext)| ext.is_empty() || matches!(ext, ".lz4" | ".gz" | ".xz" | ".zst" | ".bz2"))
}

/// The one-line sources.list of a suite.
pub fn sources_list(suite: &str) -> String {
    format!("deb http://deb.debian.org/debian {suite} main\n")
}

/// The package names in the Depends field of `apt-cache show` output
/// (alternatives and versions dropped; the first stanza only).
pub fn depends(show: &str) -> Vec<String> {
    relations(show, "Depends")
}

/// [`depends`] for another field (`Pre-Depends`: what Essential packages
/// such as util-linux need their libraries in).
pub fn relations(show: &str, field: &str) -> Vec<String> {
    let stanza = show.split("\n\n").next().unwrap_or("");
    let Some(line) = stanza.lines().find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':'))) else { return Vec::new() };
    line.split(',').filter_map(|alt| alt.split('|').next()).filter_map(|d| d.split_whitespace().next()).map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arm64_apt_root_sees_arm64_alone() {
        assert!(arch_options(Arch::X86_64).is_empty(), "x86's roots stay as they were");
        let o = arch_options(Arch::Arm64);
        assert!(o.contains(&"APT::Architecture=arm64".to_string()) && o.contains(&"APT::Architectures=arm64".to_string()), "{o:?}");
    }

    #[test]
    fn reads_depends() {
        let show = "Package: linux-image-amd64\nVersion: 6.1.176-1\n\
                    Depends: linux-image-6.1.0-50-amd64 (= 6.1.176-1)\nDescription: x\n\n\
                    Package: linux-image-amd64\nDepends: other\n";
        assert_eq!(depends(show), ["linux-image-6.1.0-50-amd64"]);
        assert!(depends("Package: x\n").is_empty());
        let util = "Package: util-linux\nPre-Depends: libblkid1 (>= 2.37.2), libc6 (>= 2.34)\nDepends: util-linux-extra\n";
        assert_eq!(relations(util, "Pre-Depends"), ["libblkid1", "libc6"]);
        assert_eq!(depends(util), ["util-linux-extra"]);
    }

    #[test]
    fn a_compressed_package_list_is_a_list() {
        let lists = |names: &[&str]| names.iter().any(|n| is_package_list(n));
        assert!(lists(&["deb.debian.org_debian_dists_sid_main_binary-amd64_Packages"]));
        assert!(lists(&["deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages.lz4"]));
        assert!(!lists(&["deb.debian.org_debian_dists_sid_InRelease", "partial", "lock", "auxfiles"]));
        assert!(!lists(&["deb.debian.org_debian_dists_sid_main_binary-amd64_Packages.diff_Index"]));
    }

    #[test]
    fn one_suite_per_sources_list() {
        assert_eq!(sources_list("bookworm-backports"), "deb http://deb.debian.org/debian bookworm-backports main\n");
    }
}
