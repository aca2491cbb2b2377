//! `cargo xtask vmtest [--kernel NAME]... [--mode tuned|untuned]`: the
//! binary of `cargo xtask dist`, booted in qemu on the stock kernels users
//! run (kernels.rs: fetched with apt, cached in target/vmtest-cache), each
//! untuned and tuned (the last vCPU isolated: qemu.rs), with the checks of
//! guest.sh run inside; then one table of kernel × mode × check, with the
//! ticks jitterwatch counted on the watched CPU beside the kernel's own LOC
//! count (report.rs). VMs run side by side, one per host core. The serial
//! logs stay in target/vmtest-cache/logs, the table in results.md there.

mod check;
mod initramfs;
mod kernels;
mod qemu;
mod report;
mod rtla;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::{bench, deps, dist, proc};
pub use qemu::Mode;

/// A VM past this is killed (and its row says it did not finish). Under TCG
/// here one takes about a minute.
const LIMIT: Duration = Duration::from_secs(600);

pub struct Options {
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
        Self { kernels: vec!["debian12".to_string()], modes: vec![Mode::Tuned], jobs: Some(1), build: false, bin: None }
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

pub fn run(opts: &Options) -> Result<()> {
    deps::ensure(false)?;
    let specs = kernels::select(&opts.kernels)?;
    if opts.build {
        dist::run(false)?;
    }
    let bin = opts.bin.clone().unwrap_or_else(|| proc::target_dir().join("dist/out/jitterwatch"));
    if !bin.is_file() {
        bail!("{} is missing: run `cargo xtask dist` first", bin.display());
    }
    let cache = proc::target_dir().join("vmtest-cache");
    let base = initramfs::base(&bin)?;
    let run_dir = cache.join("run");
    let logs = cache.join("logs");
    std::fs::create_dir_all(&run_dir)?;
    std::fs::create_dir_all(&logs)?;
    let mut vms = Vec::new();
    for spec in specs {
        let kernel = kernels::fetch(spec, &cache)?;
        let mut files = base.clone();
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

    let kvm = qemu::kvm();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let jobs = opts.jobs.unwrap_or(cores).clamp(1, vms.len().max(1));
    let accel = if kvm { "KVM" } else { "TCG, one host thread per VM: its timings mean nothing, its function does" };
    println!("vmtest: {} VM(s), {jobs} at a time, {accel}", vms.len());
    let results = run_all(&vms, jobs, kvm, &logs);

    let rows: Vec<report::Row<'_>> = vms
        .iter()
        .zip(&results)
        .map(|(vm, (r, secs))| report::Row { kernel: vm.kernel.spec.name, mode: vm.mode.name(), result: r, secs: *secs })
        .collect();
    let table = report::table(&rows);
    println!("\n{table}");
    let saved = cache.join("results.md");
    std::fs::write(&saved, &table)?;
    write_rtla(&vms, &results)?;
    let failed = results.iter().filter(|(r, _)| !r.passed()).count();
    if failed > 0 {
        bail!("vmtest: {failed} of {} VM(s) failed a check (serial logs in {})", vms.len(), logs.display());
    }
    println!("vmtest: every check passed on {} VM(s) (table in {})", vms.len(), saved.display());
    Ok(())
}

/// The rtla comparison of the VMs that made one, into its file and
/// BENCHMARKS.md's section 9 (nothing when none did).
fn write_rtla(vms: &[Vm], results: &[(report::VmResult, f64)]) -> Result<()> {
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
    let file = proc::root().join(bench::RTLA_FILE);
    std::fs::write(&file, md).with_context(|| format!("writing {}", file.display()))?;
    println!("vmtest: the rtla comparison is in {}; BENCHMARKS.md's section 9 redrawn from it", file.display());
    bench::redraw()
}

/// Boots every VM, `jobs` at a time; each one's result and wall time, in order.
fn run_all(vms: &[Vm], jobs: usize, kvm: bool, logs: &Path) -> Vec<(report::VmResult, f64)> {
    let next = AtomicUsize::new(0);
    let out = Mutex::new(vec![(report::VmResult::default(), 0.0); vms.len()]);
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(vm) = vms.get(i) else { break };
                let r = boot_one(vm, kvm, logs);
                out.lock().expect("no worker panics holding it")[i] = r;
            });
        }
    });
    out.into_inner().expect("no worker panics holding it")
}

/// Set once KVM failed to start a VM: the rest use TCG.
static KVM_BROKEN: AtomicBool = AtomicBool::new(false);

fn boot_one(vm: &Vm, kvm: bool, logs: &Path) -> (report::VmResult, f64) {
    let name = vm.kernel.spec.name;
    let serial = logs.join(format!("{name}-{}.log", vm.mode.name()));
    let qemu_log = logs.join(format!("{name}-{}.qemu.log", vm.mode.name()));
    let cmdline = qemu::cmdline(vm.mode, vm.kernel.spec.is_rt());
    let mut kvm = kvm && !KVM_BROKEN.load(Ordering::Relaxed);
    let (end, took, r) = loop {
        let _ = std::fs::remove_file(&serial);
        let args = qemu::args(&vm.kernel.vmlinuz, &vm.initrd, &serial, &cmdline, kvm);
        let (end, took) = match qemu::boot(&args, &qemu_log, LIMIT) {
            Ok(r) => r,
            Err(e) => {
                println!("vmtest: {name} {}: {e:#}", vm.mode.name());
                return (report::VmResult::default(), 0.0);
            }
        };
        let text = std::fs::read(&serial).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
        let r = report::parse(&text);
        if kvm && end == qemu::End::Exited(false) && r.release.is_none() {
            if !KVM_BROKEN.swap(true, Ordering::Relaxed) {
                let why = std::fs::read_to_string(&qemu_log).unwrap_or_default();
                let why = why.lines().find(|l| l.contains("error")).unwrap_or("no message");
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
