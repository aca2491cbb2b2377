//! One VM: qemu with the kernel, the initramfs as its only file system and
//! the serial console written to a file. KVM when /dev/kvm can be opened;
//! else TCG on one thread (multi-threaded TCG oopsed in the kernel's code
//! patching), with `tsc=reliable` so the kernel keeps the TSC clocksource
//! that TCG's timing would otherwise get it to drop.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// vCPUs per VM. Four: three for housekeeping (the consumer, the shell,
/// doctor) and the last one to isolate. Under TCG every vCPU shares one host
/// thread, so each added vCPU slows the others; on CI's two cores two VMs
/// run side by side, one host core each.
pub const VCPUS: usize = 4;

/// The CPU watched (and isolated when tuned): the last one.
pub const CPU: usize = VCPUS - 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    Untuned,
    Tuned,
}

impl Mode {
    pub const ALL: [Mode; 2] = [Mode::Untuned, Mode::Tuned];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Untuned => "untuned",
            Mode::Tuned => "tuned",
        }
    }
}

/// The kernel command line: the serial console, the guest script's
/// arguments, the isolation when tuned, `noirqdebug` on PREEMPT_RT (its
/// threaded IRQs under TCG's slow timing otherwise trip the spurious-IRQ
/// detector and get disabled).
pub fn cmdline(mode: Mode, rt: bool) -> String {
    let mut c = format!("console=ttyS0 quiet panic=-1 tsc=reliable jw.cpu={CPU} jw.mode={}", mode.name());
    if mode == Mode::Tuned {
        let house = if CPU == 1 { "0".to_string() } else { format!("0-{}", CPU - 1) };
        c += &format!(" isolcpus={CPU} nohz_full={CPU} rcu_nocbs={CPU} irqaffinity={house}");
    }
    if rt {
        c += " noirqdebug";
    }
    c
}

/// Whether to try KVM: /dev/kvm opens, and JITTERWATCH_VMTEST_ACCEL does
/// not say `tcg`. A nested KVM can open and still fail to start a VM
/// (`failed to set MSR`): the caller then falls back to TCG.
pub fn kvm() -> bool {
    std::env::var("JITTERWATCH_VMTEST_ACCEL").map_or(true, |v| v != "tcg")
        && std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm").is_ok()
}

/// qemu's arguments.
pub fn args(kernel: &Path, initrd: &Path, serial: &Path, cmdline: &str, kvm: bool) -> Vec<String> {
    let (accel, cpu) = if kvm { ("kvm", "host") } else { ("tcg,thread=single", "max") };
    let mut a: Vec<String> = ["-accel", accel, "-cpu", cpu, "-m", "1024", "-smp"].map(String::from).to_vec();
    a.push(VCPUS.to_string());
    a.extend(["-display", "none", "-monitor", "none", "-nic", "none", "-no-reboot", "-serial"].map(String::from));
    a.push(format!("file:{}", serial.display()));
    a.extend(["-kernel".to_string(), kernel.display().to_string(), "-initrd".to_string(), initrd.display().to_string()]);
    a.extend(["-append".to_string(), cmdline.to_string()]);
    a
}

/// How a VM ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// qemu exited by itself, successfully or not.
    Exited(bool),
    /// Killed at the time limit.
    Killed,
}

/// Boots and waits for the guest to power off, killing qemu past `limit`.
/// qemu's own messages go to `qemu_log`.
pub fn boot(args: &[String], qemu_log: &Path, limit: Duration) -> Result<(End, Duration)> {
    let start = Instant::now();
    let mut child = Command::new("qemu-system-x86_64")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(qemu_log)?)
        .spawn()
        .context("running qemu-system-x86_64 (apt-get install qemu-system-x86)")?;
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok((End::Exited(st.success()), start.elapsed()));
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Ok((End::Killed, start.elapsed()));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuned_isolates_the_last_cpu_untuned_nothing() {
        let t = cmdline(Mode::Tuned, false);
        assert!(t.contains("isolcpus=3 nohz_full=3 rcu_nocbs=3 irqaffinity=0-2"), "{t}");
        assert!(t.contains("jw.cpu=3 jw.mode=tuned") && t.contains("tsc=reliable"));
        let u = cmdline(Mode::Untuned, true);
        assert!(!u.contains("isolcpus") && !u.contains("nohz_full"), "{u}");
        assert!(u.ends_with(" noirqdebug"));
    }

    #[test]
    fn tcg_runs_on_one_thread() {
        let a = args(Path::new("/k"), Path::new("/i"), Path::new("/s.log"), "x y", false);
        let s = a.join(" ");
        assert!(s.contains("-accel tcg,thread=single -cpu max"), "{s}");
        assert!(s.contains("-smp 4") && s.contains("-serial file:/s.log") && s.ends_with("-append x y"));
        assert!(args(Path::new("/k"), Path::new("/i"), Path::new("/s"), "", true).join(" ").contains("-accel kvm -cpu host"));
    }
}
