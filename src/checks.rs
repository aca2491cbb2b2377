//! Start-up checks. Each failure is one line that says what is wrong and
//! what to do; they run before anything is attached or spun.

use std::fs;
use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::cpulist;

use crate::caps::{self, Caps, Host, Wants};

/// The effective capability set of this process.
pub fn cap_eff() -> Result<Caps> {
    let status = fs::read_to_string("/proc/self/status").context("cannot read /proc/self/status")?;
    Caps::from_status(&status).context("/proc/self/status has no readable CapEff line")
}

fn rlimit(resource: libc::__rlimit_resource_t) -> libc::rlimit {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a valid rlimit to fill.
    unsafe { libc::getrlimit(resource, &mut r) };
    r
}

/// What `caps::check` reads of this host and process.
fn host() -> Host {
    let memlock = rlimit(libc::RLIMIT_MEMLOCK).rlim_max;
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    Host {
        // SAFETY: geteuid cannot fail.
        euid: unsafe { libc::geteuid() },
        rtprio: rlimit(libc::RLIMIT_RTPRIO).rlim_cur,
        memlock_max: (memlock != libc::RLIM_INFINITY).then_some(memlock),
        // Unknown: taken as new (memory-cgroup accounting, no memlock).
        kernel: caps::kernel_version(&release).unwrap_or((u32::MAX, 0)),
    }
}

/// Loading tracing programs takes CAP_BPF + CAP_PERFMON (or
/// CAP_SYS_ADMIN), and what `wants` asks for its own capability: the
/// first missing one is one line. Returns the set, for later checks.
pub fn privileges(wants: Wants) -> Result<Caps> {
    let caps = cap_eff()?;
    caps::check(caps, host(), wants).map_err(anyhow::Error::msg)?;
    Ok(caps)
}

pub fn btf(root: &Path) -> Result<()> {
    if !root.join("sys/kernel/btf/vmlinux").exists() {
        bail!(
            "this kernel has no BTF (/sys/kernel/btf/vmlinux is missing): jitterwatch needs a kernel built with CONFIG_DEBUG_INFO_BTF=y, Linux 5.4 or later (Debian 11, Ubuntu 20.10, RHEL 8.2 and later ship one)"
        );
    }
    Ok(())
}

fn read_list(root: &Path, rel: &str) -> Result<Vec<usize>> {
    cpulist::read_file(&root.join(rel))
}

pub fn online_cpus(root: &Path) -> Result<Vec<usize>> {
    read_list(root, "sys/devices/system/cpu/online")
}

/// The CPUs to watch: `--cpus` if given, else the isolated ones. Each must
/// exist and be online, and one online CPU must stay unwatched for the
/// collector and the UI.
pub fn watched_cpus(root: &Path, arg: Option<&str>) -> Result<Vec<usize>> {
    let cpus = existing_cpus(root, arg)?;
    let online = online_cpus(root)?;
    if cpulist::housekeeping(&online, &cpus).is_empty() {
        bail!("--cpus {} covers every online CPU: leave at least one unwatched for jitterwatch's own threads", cpulist::Display(&cpus));
    }
    Ok(cpus)
}

/// `--cpus` (or the isolated CPUs), each existing and online.
pub fn existing_cpus(root: &Path, arg: Option<&str>) -> Result<Vec<usize>> {
    let cpus = match arg {
        Some(list) => cpulist::parse(list).map_err(|e| anyhow::anyhow!("--cpus: {e}"))?,
        None => {
            let iso = read_list(root, "sys/devices/system/cpu/isolated")?;
            if iso.is_empty() {
                bail!("no --cpus given and no isolated CPUs (/sys/devices/system/cpu/isolated is empty): pass --cpus, e.g. --cpus 1");
            }
            iso
        }
    };
    let online = online_cpus(root)?;
    let possible = read_list(root, "sys/devices/system/cpu/possible").unwrap_or_else(|_| online.clone());
    for &c in &cpus {
        if !possible.contains(&c) {
            bail!("CPU {c} does not exist (this machine has CPUs {}): pick CPUs from that list", cpulist::Display(&possible));
        }
        if !online.contains(&c) {
            bail!("CPU {c} is offline: bring it online (echo 1 > /sys/devices/system/cpu/cpu{c}/online) or pick another");
        }
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(online: &str, isolated: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let cpu = d.path().join("sys/devices/system/cpu");
        fs::create_dir_all(&cpu).unwrap();
        fs::write(cpu.join("online"), online).unwrap();
        fs::write(cpu.join("possible"), "0-3\n").unwrap();
        fs::write(cpu.join("isolated"), isolated).unwrap();
        d
    }

    #[test]
    fn watched_cpus_checks_existence_online_and_housekeeping() {
        let r = root("0-2\n", "\n");
        assert_eq!(watched_cpus(r.path(), Some("1,2")).unwrap(), vec![1, 2]);
        let e = |a| watched_cpus(r.path(), a).unwrap_err().to_string();
        assert!(e(Some("7")).contains("CPU 7 does not exist"));
        assert!(e(Some("3")).contains("CPU 3 is offline"));
        assert!(e(Some("0-2")).contains("leave at least one unwatched"));
        assert!(e(Some("1-x")).starts_with("--cpus: malformed CPU list"));
        assert!(e(None).contains("no isolated CPUs"));
        let r = root("0-3\n", "2-3\n");
        assert_eq!(watched_cpus(r.path(), None).unwrap(), vec![2, 3]);
    }

    #[test]
    fn btf_missing_is_named() {
        let r = root("0-1", "");
        let e = btf(r.path()).unwrap_err().to_string();
        assert!(e.contains("no BTF") && e.contains("Linux 5.4 or later"), "{e}");
    }
}
