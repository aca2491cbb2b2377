//! Boot parameters and their sysfs/procfs reflections, judged against the
//! watched CPUs: isolcpus, irqaffinity, idle limits, lockup watchdogs and
//! the clocksource here; nohz_full and rcu_nocbs, which a kernel can take
//! on its command line and not hold, in nohz_rcu.rs. Reading the command
//! line's values (the CPU lists, isolcpus='s flags) is cmdline.rs's.

mod nohz_rcu;

use super::cmdline::parse_isolcpus;
use super::{finding, parse_list_file, Ctx, Status};
use crate::cpulist::{self, Display};
use crate::sanitize::visible;

const CHECK: &str = "boot";
pub(crate) fn check(cx: &mut Ctx) {
    let how = cx.boot_how();
    // A kernel without CONFIG_NO_HZ_FULL has no such file (and ignores nohz_full=).
    let nohz_capable = cx.exists("sys/devices/system/cpu/nohz_full");
    let w = cx.watched();
    let last = cx.nr_cpus() - 1;
    let iso = cx.cmdline.get("isolcpus").and_then(|v| parse_isolcpus(v, last));
    // Scheduler-domain isolation: isolcpus=domain, or an isolated cpuset partition.
    let sys_iso = cx.read("sys/devices/system/cpu/isolated").and_then(|s| parse_list_file(&s)).unwrap_or_default();
    let cg_iso = cx.read_opt("sys/fs/cgroup/cpuset.cpus.isolated").and_then(|s| parse_list_file(&s));
    let mut isolated: Vec<usize> = sys_iso.clone();
    if let Some(i) = iso.as_ref().filter(|i| i.flags.iter().any(|f| f == "domain")) {
        isolated.extend(&i.cpus);
    }
    isolated.extend(cg_iso.iter().flatten());
    let missing: Vec<usize> = cx.cpus.iter().copied().filter(|c| !isolated.contains(c)).collect();
    let mut all: Vec<usize> = iso.as_ref().map(|i| i.cpus.clone()).unwrap_or_default();
    all.extend(&cx.cpus);
    all.sort_unstable();
    all.dedup();
    let all = Display(&all).to_string();
    let mut ev = vec![match cx.cmdline.show("isolcpus") {
        Some(s) => format!("/proc/cmdline: {s}"),
        None => "/proc/cmdline: no isolcpus=".into(),
    }];
    ev.push(format!(
        "/sys/devices/system/cpu/isolated: {}",
        if sys_iso.is_empty() { "(empty)".into() } else { Display(&sys_iso).to_string() }
    ));
    if let Some(cg) = &cg_iso {
        ev.push(format!("/sys/fs/cgroup/cpuset.cpus.isolated: {}", if cg.is_empty() { "(empty)".into() } else { Display(cg).to_string() }));
    }
    let mut f = if missing.is_empty() {
        finding(
            CHECK,
            "isolcpus",
            Status::Ok,
            format!("{} isolated from the scheduler (isolcpus / isolated cpuset)", Ctx::cpu_word(&cx.cpus)),
        )
        .why("no load balancing onto the CPU; unbound kernel threads start on housekeeping CPUs")
    } else {
        let title = match &iso {
            None => format!("{} not isolated: no isolcpus= on the kernel command line", Ctx::cpu_word(&missing)),
            Some(_) => format!("{} not in isolcpus= (domain)", Ctx::cpu_word(&missing)),
        };
        finding(CHECK, "isolcpus", Status::Warn, title)
            .why("without isolcpus=domain (or an isolated cpuset partition) the scheduler load-balances other tasks onto the CPU and new kernel threads may start there")
            .fix(format!(
                "boot with: isolcpus=domain,managed_irq,{all}{} {how}; or at run time make an isolated cpuset partition (cpuset.cpus.partition=isolated)",
                // nohz_full= only where this kernel holds it (nohz_full's finding says which can).
                if nohz_capable { format!(" nohz_full={all} rcu_nocbs={all}") } else { format!(" rcu_nocbs={all}") }
            ))
    };
    f.evidence = ev;
    cx.push(f);

    // managed_irq keeps kernel-managed (multi-queue) IRQs off isolated CPUs.
    if let Some(i) = &iso {
        let in_list = cx.overlap(&i.cpus);
        if !in_list.is_empty() && !i.flags.iter().any(|f| f == "managed_irq") {
            let mut flags = i.flags.clone();
            flags.push("managed_irq".into());
            let f = finding(CHECK, "isolcpus:managed_irq", Status::Warn, "isolcpus= lacks managed_irq")
                .why("kernel-managed IRQs (NVMe, virtio-blk/net multiqueue) keep a vector on every CPU and refuse affinity writes; managed_irq steers them to housekeeping CPUs")
                .ev(format!("/proc/cmdline: {}", cx.cmdline.show("isolcpus").unwrap_or_default()))
                .fix(format!("boot with: isolcpus={},{all} {how}", flags.join(",")));
            cx.push(f);
        }
    }

    nohz_rcu::check(cx, iso.as_ref(), &w);
    irqaffinity(cx);
    idle(cx);
    watchdog(cx);
    clocksource(cx);
}

fn irqaffinity(cx: &mut Ctx) {
    let how = cx.boot_how();
    let hk = cx.hk_list();
    let f = match cx.cmdline.get("irqaffinity") {
        Some(v) => {
            let set = cpulist::parse(v).unwrap_or_default();
            let bad = cx.overlap(&set);
            let f = if bad.is_empty() {
                finding(CHECK, "irqaffinity", Status::Ok, "irqaffinity= keeps boot-time IRQs on housekeeping CPUs")
            } else {
                finding(CHECK, "irqaffinity", Status::Warn, format!("irqaffinity= includes {}", Ctx::cpu_word(&bad)))
                    .fix_opt(hk.map(|hk| format!("boot with: irqaffinity={hk} {how}")))
            };
            f.ev(format!("/proc/cmdline: irqaffinity={}", visible(v)))
        }
        None => finding(CHECK, "irqaffinity", Status::Info, "irqaffinity= not set")
            .ev("/proc/cmdline: no irqaffinity=")
            .fix_opt(hk.map(|hk| format!("boot with: irqaffinity={hk} {how}"))),
    };
    cx.push(f.why("the default affinity of IRQs set up at boot; see the irq findings for the current state"));
}

fn idle(cx: &mut Ctx) {
    let how = cx.boot_how();
    let driver = crate::doctor::power::idle_driver(cx);
    let keys = ["idle", "intel_idle.max_cstate", "processor.max_cstate", "cpuidle.off"];
    let set: Vec<String> = keys.iter().filter_map(|k| cx.cmdline.show(k)).collect();
    let title = match cx.cmdline.get("idle") {
        Some("poll") => "idle=poll: idle CPUs spin (lowest wake latency, most power)".to_string(),
        _ if !set.is_empty() => format!("idle limited: {}", set.join(" ")),
        _ => "no idle= / max_cstate limit on the command line".to_string(),
    };
    let mut f = finding(CHECK, "idle", Status::Info, title)
        .why("deep C-states add exit latency to every wake-up of an idle CPU; a busy-polling thread never idles, so this matters for interrupt-driven workloads (see the power findings)");
    f = if set.is_empty() {
        f.ev("/proc/cmdline: none of idle=, intel_idle.max_cstate=, processor.max_cstate=")
            .fix(format!("for wake-up latency, boot with: {} {how}", crate::doctor::power::idle_limit(driver.as_deref())))
    } else {
        f.ev(format!("/proc/cmdline: {}", set.join(" ")))
    };
    cx.push(f);
}

fn watchdog(cx: &mut Ctx) {
    let num = |s: Option<String>| s.and_then(|s| s.trim().parse::<i64>().ok());
    let wd = num(cx.read_opt("proc/sys/kernel/watchdog"));
    let soft = num(cx.read_opt("proc/sys/kernel/soft_watchdog"));
    let nmi = num(cx.read_opt("proc/sys/kernel/nmi_watchdog"));
    let mask_s = cx.read_opt("proc/sys/kernel/watchdog_cpumask");
    let mask = mask_s.as_deref().and_then(parse_list_file).unwrap_or_else(|| cx.online.clone());
    let c = &cx.cmdline;
    let soft_on = wd.unwrap_or(1) != 0 && soft.unwrap_or(1) != 0 && !c.has("nowatchdog") && !c.has("nosoftlockup");
    let nmi_on = nmi.unwrap_or(0) != 0 && wd.unwrap_or(1) != 0 && !c.has("nowatchdog") && c.get("nmi_watchdog") != Some("0");
    let mut ev: Vec<String> = ["nowatchdog", "nosoftlockup", "nmi_watchdog", "watchdog_thresh"]
        .iter()
        .filter_map(|k| c.show(k))
        .map(|s| format!("/proc/cmdline: {s}"))
        .collect();
    for (name, v) in [("watchdog", wd), ("soft_watchdog", soft), ("nmi_watchdog", nmi)] {
        if let Some(v) = v {
            ev.push(format!("/proc/sys/kernel/{name}: {v}"));
        }
    }
    if let Some(s) = &mask_s {
        ev.push(format!("/proc/sys/kernel/watchdog_cpumask: {}", visible(s.trim())));
    }
    let hit = cx.overlap(&mask);
    let mut f = if (soft_on || nmi_on) && !hit.is_empty() {
        let which = match (soft_on, nmi_on) {
            (true, true) => "softlockup and NMI watchdogs run",
            (true, false) => "softlockup watchdog runs",
            _ => "NMI watchdog runs",
        };
        finding(CHECK, "watchdog", Status::Warn, format!("{which} on {}", Ctx::cpu_word(&hit)))
            .fix_opt(cx.hk_list().map(|hk| format!("sysctl -w kernel.watchdog_cpumask={hk} (or boot with nowatchdog)")))
    } else if soft_on || nmi_on {
        finding(CHECK, "watchdog", Status::Ok, format!("lockup watchdogs kept off {}", Ctx::cpu_word(&cx.cpus)))
    } else {
        finding(CHECK, "watchdog", Status::Ok, "lockup watchdogs disabled")
    };
    f = f.why("the softlockup watchdog fires an hrtimer (watchdog_timer_fn) every few seconds on each CPU in watchdog_cpumask and wakes its stopper thread (migration/N); the NMI hardlockup detector adds a perf NMI");
    f.evidence = ev;
    cx.push(f);
}

fn clocksource(cx: &mut Ctx) {
    let base = "sys/devices/system/clocksource/clocksource0";
    let Some(cur) = cx.read(&format!("{base}/current_clocksource")) else { return };
    let cur = cur.trim().to_string();
    let avail = cx.read_opt(&format!("{base}/available_clocksource")).unwrap_or_default();
    let tsc = cx.cmdline.show("tsc");
    let good = matches!(cur.as_str(), "tsc" | "kvm-clock" | "arch_sys_counter" | "hyperv_clocksource_tsc_page");
    let mut f = if good {
        finding(CHECK, "clocksource", Status::Ok, format!("clocksource is {}", visible(&cur)))
            .why("clock reads stay in the vDSO (no system call, no trap to the hypervisor)")
    } else {
        let fix = if avail.split_whitespace().any(|s| s == "tsc") {
            format!("echo tsc > /{base}/current_clocksource (boot: clocksource=tsc tsc=reliable)")
        } else {
            "use a machine or VM type with a stable TSC (constant_tsc, nonstop_tsc); boot: clocksource=tsc".to_string()
        };
        finding(CHECK, "clocksource", Status::Warn, format!("slow clocksource {}", visible(&cur)))
            .why("every clock_gettime() goes through a system call or an emulated device, stretching each timing loop iteration")
            .fix(fix)
    };
    f = f.ev(format!("/{base}/current_clocksource: {}", visible(&cur)));
    if !avail.trim().is_empty() {
        f = f.ev(format!("available: {}", visible(avail.trim())));
    }
    f = f.ev(match tsc {
        Some(t) => format!("/proc/cmdline: {t}"),
        None => "/proc/cmdline: no tsc= (tsc=reliable also stops the clocksource watchdog timer)".into(),
    });
    cx.push(f);
}

#[cfg(test)]
mod tests {
    use super::super::{audit, fixture::Fx, Status};

    #[test]
    fn tuned_boot_is_ok() {
        let fx = Fx::tuned();
        let r = audit(fx.path(), &[3]);
        for key in ["isolcpus", "nohz_full", "rcu_nocbs", "irqaffinity", "watchdog", "clocksource"] {
            assert_eq!(r.find(key).unwrap().status, Status::Ok, "{key}: {:#?}", r.find(key));
        }
        assert!(r.find("isolcpus:managed_irq").is_none());
        assert!(r.find("rcu_nocb_poll").is_none());
    }

    #[test]
    fn untuned_boot_warns_with_fixes() {
        let fx = Fx::untuned();
        let r = audit(fx.path(), &[1]);
        let iso = r.find("isolcpus").unwrap();
        assert_eq!(iso.status, Status::Warn);
        // This kernel has no nohz_full mask (built without it): not advised.
        assert!(iso.fix.as_deref().unwrap().contains("isolcpus=domain,managed_irq,1 rcu_nocbs=1"));
        for key in ["nohz_full", "rcu_nocbs", "watchdog"] {
            let f = r.find(key).unwrap();
            assert_eq!(f.status, Status::Warn, "{key}");
            assert!(f.fix.is_some(), "{key}");
        }
        assert!(r.find("nohz_full").unwrap().evidence.iter().any(|e| e.contains("CONFIG_NO_HZ_FULL")));
        assert_eq!(r.find("watchdog").unwrap().fix.as_deref(), Some("sysctl -w kernel.watchdog_cpumask=0 (or boot with nowatchdog)"));
        assert_eq!(r.find("irqaffinity").unwrap().status, Status::Info);
    }

    #[test]
    fn isolcpus_without_managed_irq_and_bad_clocksource() {
        let fx = Fx::tuned();
        fx.write("proc/cmdline", "isolcpus=3 nohz_full=3 irqaffinity=0-3 nowatchdog\n");
        fx.write("sys/devices/system/clocksource/clocksource0/current_clocksource", "hpet\n");
        fx.write("sys/devices/system/clocksource/clocksource0/available_clocksource", "tsc hpet acpi_pm\n");
        let r = audit(fx.path(), &[3]);
        assert_eq!(r.find("isolcpus").unwrap().status, Status::Ok);
        let m = r.find("isolcpus:managed_irq").unwrap();
        assert_eq!(m.status, Status::Warn);
        assert!(m.fix.as_deref().unwrap().contains("isolcpus=domain,managed_irq,3"));
        assert_eq!(r.find("irqaffinity").unwrap().status, Status::Warn);
        assert_eq!(r.find("irqaffinity").unwrap().fix.as_deref().unwrap().split(' ').nth(2), Some("irqaffinity=0-2"));
        let c = r.find("clocksource").unwrap();
        assert_eq!(c.status, Status::Warn);
        assert!(c.fix.as_deref().unwrap().starts_with("echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource"));
        assert_eq!(r.find("rcu_nocb_poll").unwrap().status, Status::Info);
    }

    #[test]
    fn cpuset_partition_counts_as_isolation() {
        let fx = Fx::untuned();
        fx.write("sys/fs/cgroup/cpuset.cpus.isolated", "1\n");
        let r = audit(fx.path(), &[1]);
        assert_eq!(r.find("isolcpus").unwrap().status, Status::Ok);
    }

    /// A kernel without CONFIG_NO_HZ_FULL (no /sys/devices/system/cpu/nohz_full):
    /// isolcpus' fix does not advise nohz_full=, and nohz_full's finding says
    /// which kernels can; the boot mechanism is this machine's.
    #[test]
    fn no_nohz_full_advice_a_kernel_cannot_take() {
        let fx = Fx::untuned();
        let r = audit(fx.path(), &[1]);
        let iso = r.find("isolcpus").unwrap().fix.clone().unwrap();
        assert!(!iso.contains("nohz_full") && iso.contains("isolcpus=domain,managed_irq,1"), "{iso}");
        assert!(iso.contains("add it to the kernel command line"), "{iso}");
        let nohz = r.find("nohz_full").unwrap().fix.clone().unwrap();
        assert!(nohz.contains("CONFIG_NO_HZ_FULL") && nohz.contains("Debian 12"), "{nohz}");
        fx.write("sys/devices/system/cpu/nohz_full", "\n");
        let iso = audit(fx.path(), &[1]).find("isolcpus").unwrap().fix.clone().unwrap();
        assert!(iso.contains("nohz_full=1"), "{iso}");
    }
}
