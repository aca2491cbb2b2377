//! The guard that keeps unit tests off the host. Unit tests (the `--lib`
//! and `--bins` test binaries) must give pure code its host facts as
//! values; a test that reads the machine instead passes on one host and
//! fails on another (a cpuidle driver named differently, one CPU, not
//! root). So `cargo xtask test` runs them once more on made-up hosts: in a
//! private mount namespace, /sys/devices/system/cpu, the clocksource,
//! /proc/cpuinfo, /proc/cmdline and the kernel release are replaced by
//! fakes (another cpuidle driver or none, 256 or 1 CPUs), the process sees
//! another user id (a user namespace), one CPU of affinity, and another
//! terminal environment. Any test whose result depends on those facts
//! fails here, and the run names the host it failed on.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::proc;

/// One made-up host: what the unit tests see instead of this machine.
pub struct Host {
    pub name: &'static str,
    /// The cpuidle driver and its state names; None: no cpuidle at all.
    pub cpuidle: Option<(&'static str, &'static [&'static str])>,
    pub cpus: usize,
    pub clocksource: &'static str,
    pub cpu_flags: &'static str,
    pub cmdline: &'static str,
    pub release: &'static str,
    /// The user id the tests run as (mapped by a user namespace).
    pub uid: u32,
    pub env: &'static [(&'static str, &'static str)],
}

/// Two hosts unlike each other and unlike ours (haltpoll, 2 CPUs, root).
pub const HOSTS: &[Host] = &[
    Host {
        name: "intel_idle, 256 CPUs, uid 4242",
        cpuidle: Some(("intel_idle", &["POLL", "C1", "C1E", "C6"])),
        cpus: 256,
        clocksource: "hpet",
        cpu_flags: "fpu tsc msr",
        cmdline: "BOOT_IMAGE=/vmlinuz-fake root=/dev/fake isolcpus=200-255 nohz_full=200-255",
        release: "5.10.0-99-fake",
        uid: 4242,
        env: &[("TERM", "dumb"), ("NO_COLOR", "1"), ("COLUMNS", "7"), ("LINES", "3"), ("SUDO_UID", "4242"), ("SUDO_GID", "4242")],
    },
    Host {
        name: "no cpuidle, 1 CPU, root",
        cpuidle: None,
        cpus: 1,
        clocksource: "tsc",
        cpu_flags: "fpu tsc constant_tsc nonstop_tsc",
        cmdline: "",
        release: "7.2.0-fake",
        uid: 0,
        env: &[("TERM", "xterm-256color"), ("COLUMNS", "300"), ("LINES", "100")],
    },
];

/// The files of a host's fake /sys/devices/system/cpu, relative to it.
pub fn cpu_tree(h: &Host) -> Vec<(String, String)> {
    let last = h.cpus - 1;
    let range = if last == 0 { "0".to_string() } else { format!("0-{last}") };
    let mut files = vec![
        ("online".to_string(), format!("{range}\n")),
        ("possible".to_string(), format!("{range}\n")),
        ("present".to_string(), format!("{range}\n")),
        ("isolated".to_string(), "\n".to_string()),
        ("nohz_full".to_string(), "(null)\n".to_string()),
        ("kernel_max".to_string(), "8191\n".to_string()),
    ];
    if let Some((driver, _)) = h.cpuidle {
        files.push(("cpuidle/current_driver".into(), format!("{driver}\n")));
        files.push(("cpuidle/current_governor".into(), "menu\n".into()));
    }
    for c in 0..h.cpus {
        files.push((format!("cpu{c}/online"), "1\n".into()));
        files.push((format!("cpu{c}/topology/core_id"), format!("{c}\n")));
        files.push((format!("cpu{c}/topology/thread_siblings_list"), format!("{c}\n")));
        if let Some((_, states)) = h.cpuidle {
            for (i, s) in states.iter().enumerate() {
                files.push((format!("cpu{c}/cpuidle/state{i}/name"), format!("{s}\n")));
                files.push((format!("cpu{c}/cpuidle/state{i}/latency"), format!("{}\n", i * i * 10)));
                files.push((format!("cpu{c}/cpuidle/state{i}/disable"), "0\n".into()));
            }
        }
    }
    files
}

/// The shell script run as root in a new mount namespace: bind the fakes
/// (made under `dir`) over the host's files, then run each test binary
/// (cwd, path) as the host's user with one CPU and the host's environment.
pub fn script(h: &Host, dir: &Path, bins: &[(PathBuf, PathBuf)]) -> String {
    let d = dir.display();
    let mut s = String::from("set -e\n");
    for (fake, real) in [
        ("cpu", "/sys/devices/system/cpu"),
        ("clocksource", "/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        ("cpuinfo", "/proc/cpuinfo"),
        ("cmdline", "/proc/cmdline"),
        ("osrelease", "/proc/sys/kernel/osrelease"),
    ] {
        let _ = writeln!(s, "mount --bind '{d}/{fake}' '{real}'");
    }
    let mut env = String::from("env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin TMPDIR=/tmp HOME=/nonexistent");
    for (k, v) in h.env {
        let _ = write!(env, " {k}='{v}'");
    }
    let user = if h.uid == 0 { String::new() } else { format!("unshare --user --map-user={0} --map-group={0} ", h.uid) };
    for (cwd, bin) in bins {
        let _ = writeln!(
            s,
            "(cd '{}' && {user}taskset -c 0 {env} CARGO_MANIFEST_DIR='{}' '{}' --quiet --test-threads=2)",
            cwd.display(),
            cwd.display(),
            bin.display()
        );
    }
    s
}

/// Writes a host's fakes under `dir`.
fn make_fakes(h: &Host, dir: &Path) -> Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    for (rel, body) in cpu_tree(h) {
        let p = dir.join("cpu").join(rel);
        std::fs::create_dir_all(p.parent().expect("has a parent"))?;
        std::fs::write(&p, body)?;
    }
    std::fs::create_dir_all(dir.join("cpu"))?;
    std::fs::write(dir.join("clocksource"), format!("{}\n", h.clocksource))?;
    let mut cpuinfo = String::new();
    for c in 0..h.cpus {
        let _ = write!(cpuinfo, "processor\t: {c}\nmodel name\t: Fake CPU\nflags\t\t: {}\n\n", h.cpu_flags);
    }
    std::fs::write(dir.join("cpuinfo"), cpuinfo)?;
    std::fs::write(dir.join("cmdline"), format!("{}\n", h.cmdline))?;
    std::fs::write(dir.join("osrelease"), format!("{}\n", h.release))?;
    Ok(())
}

/// The unit-test binaries of the workspace, built, with the directory each
/// runs in (its package's, as cargo test does).
fn unit_test_binaries() -> Result<Vec<(PathBuf, PathBuf)>> {
    let out = proc::cargo()
        .args(["test", "--workspace", "--lib", "--bins", "--no-run", "--message-format=json"])
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("cannot run cargo test --no-run")?;
    if !out.status.success() {
        bail!("building the unit tests failed");
    }
    let mut bins = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let (Some(exe), Some(manifest)) = (v["executable"].as_str(), v["manifest_path"].as_str()) else { continue };
        if v["profile"]["test"].as_bool() == Some(true) {
            bins.push((Path::new(manifest).parent().unwrap_or(Path::new(".")).to_path_buf(), PathBuf::from(exe)));
        }
    }
    if bins.is_empty() {
        bail!("no unit-test binaries found in cargo's output");
    }
    Ok(bins)
}

/// Runs every unit test on each made-up host; fails naming the host.
/// Needs root (mount namespaces): through sudo when not root.
pub fn run() -> Result<()> {
    let sudo = if proc::is_root() { None } else { Some(proc::sudo()?) };
    for tool in ["unshare", "taskset", "mount"] {
        if proc::which(tool).is_none() {
            bail!("the host-variation guard needs `{tool}` (util-linux): apt-get install -y util-linux mount");
        }
    }
    let bins = unit_test_binaries()?;
    let base = proc::target_dir().join("hermetic");
    for h in HOSTS {
        let dir = base.join(h.name.split(',').next().unwrap_or("host").replace(' ', "-"));
        make_fakes(h, &dir)?;
        let mut cmd = match &sudo {
            None => Command::new("unshare"),
            Some(s) => {
                let mut c = Command::new(s.get_program());
                c.args(s.get_args()).arg("unshare");
                c
            }
        };
        cmd.args(["--mount", "--propagation", "private", "sh", "-c", &script(h, &dir, &bins)]);
        let st = proc::status(&mut cmd)?;
        if !st.success() {
            bail!(
                "unit tests fail on a made-up host ({}): a unit test reads the machine it runs on; give the pure code that fact as a value (see the test named above)",
                h.name
            );
        }
        println!("hermetic: {} unit-test binaries pass on a made-up host: {}", bins.len(), h.name);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fake_cpu_trees_differ_from_each_other() {
        let big = cpu_tree(&HOSTS[0]);
        assert!(big.contains(&("online".into(), "0-255\n".into())));
        assert!(big.contains(&("cpu255/cpuidle/state3/name".into(), "C6\n".into())));
        assert!(big.contains(&("cpuidle/current_driver".into(), "intel_idle\n".into())));
        let small = cpu_tree(&HOSTS[1]);
        assert!(small.contains(&("online".into(), "0\n".into())));
        assert!(!small.iter().any(|(p, _)| p.contains("cpuidle")), "no cpuidle at all");
    }

    #[test]
    fn the_script_binds_every_fake_and_runs_each_binary_as_the_hosts_user() {
        let bins = [(PathBuf::from("/src"), PathBuf::from("/t/unit-1"))];
        let s = script(&HOSTS[0], Path::new("/fake"), &bins);
        for real in ["/sys/devices/system/cpu", "/proc/cpuinfo", "/proc/cmdline", "current_clocksource", "osrelease"] {
            assert!(s.lines().any(|l| l.starts_with("mount --bind") && l.contains(real)), "{real} not faked:\n{s}");
        }
        let run = s.lines().last().unwrap();
        assert!(run.contains("--map-user=4242") && run.contains("taskset -c 0") && run.contains("NO_COLOR='1'"), "{run}");
        assert!(run.contains("'/t/unit-1'") && run.starts_with("(cd '/src'"), "{run}");
        assert!(!script(&HOSTS[1], Path::new("/fake"), &bins).contains("--map-user"), "root stays root");
    }
}
