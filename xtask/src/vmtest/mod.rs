//! `cargo xtask vmtest [--kernel NAME]... [--mode tuned|untuned]`: the
//! binary of `cargo xtask dist`, booted in qemu on the stock kernels users
//! run (kernels.rs: fetched with apt, cached in target/vmtest-cache), each
//! untuned and tuned (the last vCPU isolated: qemu.rs), with the checks of
//! guest.sh run inside; then one table of kernel × mode × check, with the
//! ticks jitterwatch counted on the watched CPU beside the kernel's own LOC
//! count (report.rs). VMs run side by side, one per host core. The serial
//! logs stay in target/vmtest-cache/logs, the table in results.md there.
//! `--arch arm64` does the same with the arm64 dist binary on Debian's
//! arm64 kernels in qemu-system-aarch64 (TCG), the guest's userspace from
//! Debian's arm64 packages (userland.rs), everything in
//! target/vmtest-cache-arm64; its rtla comparison stays there too
//! (BENCHMARKS.md's section 9 is x86's).

mod apt;
mod check;
mod clock;
mod initramfs;
mod kernels;
mod qemu;
mod report;
mod rtla;
mod userland;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::cross::Arch;
use crate::{bench, deps, dist, proc};
pub use qemu::Mode;

/// A VM past this is killed (and its row says it did not finish). Under TCG
/// here one takes about a minute (x86_64).
const LIMIT: Duration = Duration::from_secs(600);

/// Under KVM, a VM whose console is still empty after this never ran.
const KVM_SILENT: Duration = Duration::from_secs(90);

#[derive(Clone)]
pub struct Options {
    /// Whose kernels, binary and guest.
    pub arch: Arch,
    /// Kernel names (kernels::KERNELS); empty: all.
    pub kernels: Vec<String>,
    pub modes: Vec<Mode>,
    /// VMs at a time; None: one per host core.
    pub jobs: Option<usize>,
    /// Build the dist binary first (else use the one in target/dist).
    pub build: bool,
    /// Another binary than the dist one.
    pub bin: Option<PathBuf>,
}

impl Options {
    /// The one VM `cargo xtask test` boots: Debian 12's stock 6.1, tuned.
    pub fn for_test() -> Self {
        Self { arch: Arch::X86_64, kernels: vec!["debian12".to_string()], modes: vec![Mode::Tuned], jobs: Some(1), build: false, bin: None }
    }

    /// Every kernel in every mode: only such a run redraws the project's
    /// tables (docs/rtla-comparison.md, arm64's clock in BENCHMARKS.md); a
    /// part of the matrix would replace the whole's rows with its own few.
    pub fn whole(&self) -> bool {
        self.kernels.is_empty() && Mode::ALL.iter().all(|m| self.modes.contains(m))
    }
}

/// Parses `--mode`.
pub fn modes(mode: Option<&str>) -> Vec<Mode> {
    match mode {
        Some("tuned") => vec![Mode::Tuned],
        Some("untuned") => vec![Mode::Untuned],
        _ => Mode::ALL.to_vec(),
    }
}

struct Vm {
    kernel: kernels::Kernel,
    mode: Mode,
    initrd: PathBuf,
    /// It carries rtla: the guest compares with it.
    rtla: bool,
}

/// What differs between the architectures' runs, apart from qemu's own
/// (qemu.rs) and the kernels (kernels.rs).
struct Setup {
    /// The dist binary, and the command that builds it.
    bin: &'static str,
    dist: &'static str,
    /// Everything fetched, built and logged.
    cache: &'static str,
    /// What the kernel's own tick count is, for the table's heading.
    tick_count: &'static str,
}

fn setup(arch: Arch) -> Setup {
    match arch {
        Arch::X86_64 => Setup { bin: "dist/out/jitterwatch", dist: "cargo xtask dist", cache: "vmtest-cache", tick_count: "kernel LOC" },
        Arch::Arm64 => Setup {
            bin: "dist-arm64/out/jitterwatch",
            dist: "cargo xtask dist --arch arm64",
            cache: "vmtest-cache-arm64",
            tick_count: "kernel arch_timer",
        },
    }
}

pub fn run(opts: &Options) -> Result<()> {
    let arch = opts.arch;
    let setup = setup(arch);
    deps::ensure(false)?;
    if arch == Arch::Arm64 {
        deps::ensure_these(deps::VMTEST_ARM64, false)?;
    }
    let specs = kernels::select(arch, &opts.kernels)?;
    if opts.build {
        dist::run_for(arch, false)?;
    }
    let bin = opts.bin.clone().unwrap_or_else(|| proc::target_dir().join(setup.bin));
    if !bin.is_file() {
        bail!("{} is missing: run `{}` first", bin.display(), setup.dist);
    }
    let cache = proc::target_dir().join(setup.cache);
    // x86_64's guests share the host's userspace; arm64's take their
    // suite's (userland.rs).
    let base = match arch {
        Arch::X86_64 => Some(initramfs::base(&bin)?),
        Arch::Arm64 => None,
    };
    let run_dir = cache.join("run");
    let logs = cache.join("logs");
    std::fs::create_dir_all(&run_dir)?;
    std::fs::create_dir_all(&logs)?;
    let mut vms = Vec::new();
    for spec in specs {
        let kernel = kernels::fetch(spec, &cache)?;
        let mut files = match &base {
            Some(b) => b.clone(),
            None => userland::guest(arch, &bin, &userland::root(&spec, &cache)?)?,
        };
        let config = std::fs::read(&kernel.config)?;
        files.push((format!("boot/config-{}", kernel.release), initramfs::Entry::File { data: config, mode: 0o644 }));
        let with_rtla = rtla::root(&kernel, &cache)?;
        if let Some(root) = &with_rtla {
            let tree = initramfs::tree(root)?;
            let paths: Vec<String> = tree.iter().map(|(p, _)| p.clone()).collect();
            let links = rtla::usr_links(&paths);
            // The host's /lib files (setpriv's libraries, its libc and
            // loader) would stand where the links go, and their older
            // libc would be rtla's: they move under /usr, the suite's
            // own copy kept where it has one.
            files = initramfs::under_usr(files, &links, &paths);
            files.extend(tree);
            files.extend(links.into_iter().map(|(l, t)| (l, initramfs::Entry::Symlink(t))));
        }
        let initrd = run_dir.join(format!("{}.cpio", spec.name));
        std::fs::write(&initrd, initramfs::archive(&files)).with_context(|| format!("writing {}", initrd.display()))?;
        for &mode in &opts.modes {
            vms.push(Vm { kernel: kernel.clone(), mode, initrd: initrd.clone(), rtla: with_rtla.is_some() });
        }
    }
    drop(base);

    // KVM runs the host's architecture only.
    let kvm = arch == Arch::X86_64 && qemu::kvm();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let jobs = opts.jobs.unwrap_or(cores).clamp(1, vms.len().max(1));
    const TCG: &str = "TCG, one host thread per VM: its timings mean nothing, its function does";
    let accel = if kvm { "KVM (TCG if KVM cannot start a VM)" } else { TCG };
    println!("vmtest: {} VM(s), {jobs} at a time, {accel}", vms.len());
    let results = run_all(arch, &vms, jobs, kvm, &logs);
    // What the VMs ran under, said again at the end: KVM may have failed
    // on the first VM and left every one to TCG.
    let ran_under = if kvm && !KVM_BROKEN.load(Ordering::Relaxed) { "KVM" } else { TCG };

    let rows: Vec<report::Row<'_>> = vms
        .iter()
        .zip(&results)
        .map(|(vm, (r, secs))| report::Row { kernel: vm.kernel.spec.name, mode: vm.mode.name(), result: r, secs: *secs })
        .collect();
    let table = report::table(&rows, setup.tick_count);
    println!("\n{table}");
    println!("vmtest: the VMs ran under {ran_under}");
    let saved = cache.join("results.md");
    std::fs::write(&saved, &table)?;
    write_rtla(arch, &vms, &results, &cache, opts.whole())?;
    if arch == Arch::Arm64 {
        write_arm64_clock(&vms, &results, &cache, opts.whole())?;
    }
    let failed = results.iter().filter(|(r, _)| !r.passed()).count();
    if failed > 0 {
        bail!("vmtest: {failed} of {} VM(s) failed a check (serial logs in {})", vms.len(), logs.display());
    }
    println!("vmtest: every check passed on {} VM(s) (table in {})", vms.len(), saved.display());
    Ok(())
}

/// The rtla comparison of the VMs that made one, into its file and
/// BENCHMARKS.md's section 9 (nothing when none did); arm64's, or a part
/// of the matrix's (`whole` false), into rtla.md in its cache.
fn write_rtla(arch: Arch, vms: &[Vm], results: &[(report::VmResult, f64)], cache: &Path, whole: bool) -> Result<()> {
    let runs: Vec<rtla::Run<'_>> = vms
        .iter()
        .zip(results)
        .filter(|(vm, (r, _))| vm.rtla && !r.rtla.is_empty())
        .map(|(vm, (r, _))| rtla::Run {
            kernel: vm.kernel.spec.name,
            release: r.release.as_deref().unwrap_or("?"),
            mode: vm.mode.name(),
            classes: &r.rtla,
            gaps: r.rtla_gaps.as_ref(),
        })
        .collect();
    if runs.is_empty() {
        return Ok(());
    }
    let md = rtla::markdown(&runs, &bench::utc_now(), &bench::commit());
    println!("\n{md}");
    if arch != Arch::X86_64 || !whole {
        let file = cache.join("rtla.md");
        std::fs::write(&file, md).with_context(|| format!("writing {}", file.display()))?;
        let kept = if whole { String::new() } else { format!(" ({} keeps the whole matrix's)", bench::RTLA_FILE) };
        println!("vmtest: the rtla comparison is in {}{kept}", file.display());
        return Ok(());
    }
    let file = proc::root().join(bench::RTLA_FILE);
    std::fs::write(&file, md).with_context(|| format!("writing {}", file.display()))?;
    println!("vmtest: the rtla comparison is in {}; BENCHMARKS.md's section 9 redrawn from it", file.display());
    bench::redraw()
}

/// Figure 1's arm64 part, into its file and BENCHMARKS.md (redrawn); a part
/// of the matrix's (`whole` false) into its cache only.
fn write_arm64_clock(vms: &[Vm], results: &[(report::VmResult, f64)], cache: &Path, whole: bool) -> Result<()> {
    let rows: Vec<clock::Row<'_>> = vms
        .iter()
        .zip(results)
        .map(|(vm, (r, _))| clock::Row {
            kernel: vm.kernel.spec.name,
            release: r.release.as_deref().unwrap_or("?"),
            mode: vm.mode.name(),
            check: r.check("clock"),
        })
        .collect();
    let Some(md) = clock::markdown(&rows, bench::ARM64_CLOCK_HEADING, &bench::utc_now(), &bench::commit()) else {
        return Ok(());
    };
    println!("\n{md}");
    if !whole {
        let file = cache.join("arm64-probe-clock.md");
        std::fs::write(&file, md).with_context(|| format!("writing {}", file.display()))?;
        println!("vmtest: the probe's clock on arm64 is in {} ({} keeps the whole matrix's)", file.display(), bench::ARM64_CLOCK_FILE);
        return Ok(());
    }
    let file = proc::root().join(bench::ARM64_CLOCK_FILE);
    std::fs::write(&file, md).with_context(|| format!("writing {}", file.display()))?;
    println!("vmtest: the probe's clock on arm64 is in {}; BENCHMARKS.md's figure 1 redrawn with it", file.display());
    bench::redraw()
}

/// Boots every VM, `jobs` at a time; each one's result and wall time, in order.
fn run_all(arch: Arch, vms: &[Vm], jobs: usize, kvm: bool, logs: &Path) -> Vec<(report::VmResult, f64)> {
    let next = AtomicUsize::new(0);
    let out = Mutex::new(vec![(report::VmResult::default(), 0.0); vms.len()]);
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(vm) = vms.get(i) else { break };
                let r = boot_one(arch, vm, kvm, logs);
                out.lock().expect("no worker panics holding it")[i] = r;
            });
        }
    });
    out.into_inner().expect("no worker panics holding it")
}

/// Set once KVM failed to start a VM: the rest use TCG.
static KVM_BROKEN: AtomicBool = AtomicBool::new(false);

fn boot_one(arch: Arch, vm: &Vm, kvm: bool, logs: &Path) -> (report::VmResult, f64) {
    let name = vm.kernel.spec.name;
    let serial = logs.join(format!("{name}-{}.log", vm.mode.name()));
    let qemu_log = logs.join(format!("{name}-{}.qemu.log", vm.mode.name()));
    let cmdline = qemu::cmdline(arch, vm.mode, vm.kernel.spec.is_rt());
    let mut kvm = kvm && !KVM_BROKEN.load(Ordering::Relaxed);
    let (end, took, r) = loop {
        let _ = std::fs::remove_file(&serial);
        let args = qemu::args(arch, &vm.kernel.vmlinuz, &vm.initrd, &serial, &cmdline, kvm);
        // Under KVM a guest prints within seconds; one silent this long
        // never ran (seen: a nested KVM that starts the VM and runs
        // nothing, 600 s of an empty console): TCG then.
        let silent = kvm.then_some((serial.as_path(), KVM_SILENT));
        let (end, took) = match qemu::boot(arch, &args, &qemu_log, LIMIT, silent) {
            Ok(r) => r,
            Err(e) => {
                println!("vmtest: {name} {}: {e:#}", vm.mode.name());
                return (report::VmResult::default(), 0.0);
            }
        };
        let text = std::fs::read(&serial).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
        let r = report::parse(&text);
        if kvm && matches!(end, qemu::End::Exited(false) | qemu::End::Silent) && r.release.is_none() {
            if !KVM_BROKEN.swap(true, Ordering::Relaxed) {
                let why = std::fs::read_to_string(&qemu_log).unwrap_or_default();
                let why = match end {
                    qemu::End::Silent => "its console stayed empty for 90 s",
                    _ => why.lines().find(|l| l.contains("error")).unwrap_or("no message"),
                };
                println!("vmtest: KVM could not start a VM ({}): TCG from now on", why.trim());
            }
            kvm = false;
            continue;
        }
        break (end, took, r);
    };
    let mut r = r;
    let nohz_full = vm.mode == Mode::Tuned && vm.kernel.nohz_full;
    if let Some(c) = report::ticks_check(nohz_full, &r) {
        r.checks.push(c);
    }
    if vm.rtla && r.ended {
        r.checks.push(rtla::check(&r.rtla));
    }
    let passed = r.checks.iter().filter(|c| c.pass).count();
    // The rtla check applies only where the kernel has rtla's tracers; a
    // check that applies but never ran counts as not passed.
    let apply = report::CHECKS.len() - usize::from(!vm.rtla);
    let how = match end {
        qemu::End::Exited(true) => "",
        qemu::End::Exited(false) => ", qemu failed (see its .qemu.log)",
        qemu::End::Killed => ", killed at the time limit",
        qemu::End::Silent => ", killed: its console stayed empty",
    };
    println!(
        "vmtest: {name} ({}) {}: {passed}/{} checks passed in {:.0} s{how} (serial: {})",
        r.release.as_deref().unwrap_or("no boot line"),
        vm.mode.name(),
        apply,
        took.as_secs_f64(),
        serial.display()
    );
    (r, took.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_every_kernel_in_every_mode_is_the_whole_matrix() {
        let all = Options { arch: Arch::X86_64, kernels: vec![], modes: modes(None), jobs: None, build: true, bin: None };
        assert!(all.whole());
        assert!(!Options { modes: modes(Some("tuned")), ..all.clone() }.whole(), "one mode");
        assert!(!Options { kernels: vec!["debian12-rt".into()], ..all.clone() }.whole(), "one kernel");
        assert!(!Options::for_test().whole(), "the test's VM");
    }
}
