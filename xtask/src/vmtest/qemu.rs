//! One VM: qemu with the kernel, the initramfs as its only file system and
//! the serial console written to a file. x86_64: KVM when /dev/kvm can be
//! opened; else TCG on one thread (multi-threaded TCG oopsed in the
//! kernel's code patching), with `tsc=reliable` so the kernel keeps the TSC
//! clocksource that TCG's timing would otherwise get it to drop. arm64: the
//! `virt` machine under TCG on one thread (no KVM for another
//! architecture), its console the PL011 UART.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::cross::Arch;

/// vCPUs per VM. x86_64: four, three for housekeeping (the consumer, the
/// shell, doctor) and the last one to isolate; under TCG every vCPU shares
/// one host thread, so each added vCPU slows the others; on CI's two cores
/// two VMs run side by side, one host core each. arm64: two, one for
/// housekeeping: emulating another architecture costs several times more a
/// vCPU, and its VMs run on a 2-CPU host beside other work.
pub fn vcpus(arch: Arch) -> usize {
    match arch {
        Arch::X86_64 => 4,
        Arch::Arm64 => 2,
    }
}

/// The CPU watched (and isolated when tuned): the last one.
pub fn cpu(arch: Arch) -> usize {
    vcpus(arch) - 1
}

/// The emulator of `arch`, and the Debian package that has it.
pub fn program(arch: Arch) -> (&'static str, &'static str) {
    match arch {
        Arch::X86_64 => ("qemu-system-x86_64", "qemu-system-x86"),
        Arch::Arm64 => ("qemu-system-aarch64", "qemu-system-arm"),
    }
}

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
pub fn cmdline(arch: Arch, mode: Mode, rt: bool) -> String {
    let cpu = self::cpu(arch);
    let console = match arch {
        Arch::X86_64 => "console=ttyS0 quiet panic=-1 tsc=reliable",
        Arch::Arm64 => "console=ttyAMA0 quiet panic=-1",
    };
    let mut c = format!("{console} jw.cpu={cpu} jw.mode={}", mode.name());
    if mode == Mode::Tuned {
        let house = if cpu == 1 { "0".to_string() } else { format!("0-{}", cpu - 1) };
        c += &format!(" isolcpus={cpu} nohz_full={cpu} rcu_nocbs={cpu} irqaffinity={house}");
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
pub fn args(arch: Arch, kernel: &Path, initrd: &Path, serial: &Path, cmdline: &str, kvm: bool) -> Vec<String> {
    let (accel, cpu) = match arch {
        _ if kvm => ("kvm", "host"),
        Arch::X86_64 => ("tcg,thread=single", "max"),
        // pauth-impdef: pointer authentication by qemu's own cheap hash,
        // not the architected QARMA, which is most of an emulated arm64
        // kernel's time otherwise (qemu's documentation).
        Arch::Arm64 => ("tcg,thread=single", "max,pauth-impdef=on"),
    };
    let mut a: Vec<String> = Vec::new();
    if arch == Arch::Arm64 {
        a.extend(["-M", "virt"].map(String::from));
    }
    a.extend(["-accel", accel, "-cpu", cpu, "-m", "1024", "-smp"].map(String::from));
    a.push(vcpus(arch).to_string());
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
    /// Killed because its serial console stayed empty past the deadline
    /// it was given (a nested KVM that opens, starts, and never runs it).
    Silent,
}

/// Boots and waits for the guest to power off, killing qemu past `limit`,
/// or past `silent` (the serial log and how long it may stay empty).
/// qemu's own messages go to `qemu_log`.
pub fn boot(arch: Arch, args: &[String], qemu_log: &Path, limit: Duration, silent: Option<(&Path, Duration)>) -> Result<(End, Duration)> {
    let start = Instant::now();
    let (qemu, package) = program(arch);
    let mut child = Command::new(qemu)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(qemu_log)?)
        .spawn()
        .with_context(|| format!("running {qemu} (apt-get install {package})"))?;
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok((End::Exited(st.success()), start.elapsed()));
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Ok((End::Killed, start.elapsed()));
        }
        if let Some((serial, after)) = silent {
            if start.elapsed() > after && std::fs::metadata(serial).map_or(true, |m| m.len() == 0) {
                let _ = child.kill();
                let _ = child.wait();
                return Ok((End::Silent, start.elapsed()));
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuned_isolates_the_last_cpu_untuned_nothing() {
        let t = cmdline(Arch::X86_64, Mode::Tuned, false);
        assert!(t.contains("isolcpus=3 nohz_full=3 rcu_nocbs=3 irqaffinity=0-2"), "{t}");
        assert!(t.starts_with("console=ttyS0 ") && t.contains("jw.cpu=3 jw.mode=tuned") && t.contains("tsc=reliable"));
        let u = cmdline(Arch::X86_64, Mode::Untuned, true);
        assert!(!u.contains("isolcpus") && !u.contains("nohz_full"), "{u}");
        assert!(u.ends_with(" noirqdebug"));
    }

    #[test]
    fn arm64_isolates_the_second_of_two_cpus_on_the_pl011_console() {
        let t = cmdline(Arch::Arm64, Mode::Tuned, true);
        assert!(t.starts_with("console=ttyAMA0 quiet panic=-1 jw.cpu=1 jw.mode=tuned"), "{t}");
        assert!(t.contains(" isolcpus=1 nohz_full=1 rcu_nocbs=1 irqaffinity=0 ") && !t.contains("tsc="), "{t}");
        assert!(t.ends_with(" noirqdebug"));
    }

    #[test]
    fn tcg_runs_on_one_thread() {
        let a = args(Arch::X86_64, Path::new("/k"), Path::new("/i"), Path::new("/s.log"), "x y", false);
        let s = a.join(" ");
        assert!(s.starts_with("-accel tcg,thread=single -cpu max -m 1024"), "{s}");
        assert!(s.contains("-smp 4") && s.contains("-serial file:/s.log") && s.ends_with("-append x y"));
        let kvm = args(Arch::X86_64, Path::new("/k"), Path::new("/i"), Path::new("/s"), "", true).join(" ");
        assert!(kvm.contains("-accel kvm -cpu host"), "{kvm}");
        let arm = args(Arch::Arm64, Path::new("/k"), Path::new("/i"), Path::new("/s.log"), "x", false).join(" ");
        assert!(arm.starts_with("-M virt -accel tcg,thread=single -cpu max,pauth-impdef=on -m 1024 -smp 2 "), "{arm}");
        assert_eq!(program(Arch::Arm64).0, "qemu-system-aarch64");
    }
}
