//! Power management (cpufreq governor, cpuidle states) and memory
//! management background work (THP, KSM, NUMA balancing).

use super::{finding, Ctx, Status};
use crate::sanitize::visible;

pub(crate) fn check(cx: &mut Ctx) {
    cpufreq(cx);
    cpuidle(cx);
    mm(cx);
}

fn cpufreq(cx: &mut Ctx) {
    let mut ev = Vec::new();
    let mut slow = Vec::new();
    for c in cx.cpus.clone() {
        let rel = format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor");
        if let Some(g) = cx.read_opt(&rel) {
            let g = g.trim().to_string();
            ev.push(format!("/{rel}: {}", visible(&g)));
            if g != "performance" {
                slow.push((c, g));
            }
        }
    }
    let f = if ev.is_empty() {
        finding("power", "cpufreq", Status::Info, "no cpufreq driver (frequency set by firmware or the host)")
            .ev("/sys/devices/system/cpu/cpuN/cpufreq: absent")
    } else if slow.is_empty() {
        finding("power", "cpufreq", Status::Ok, "cpufreq governor is performance")
    } else {
        let cpus: Vec<usize> = slow.iter().map(|(c, _)| *c).collect();
        let fix = slow
            .iter()
            .map(|(c, _)| format!("echo performance > /sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"))
            .collect::<Vec<_>>()
            .join("; ");
        finding("power", "cpufreq", Status::Warn, format!("{} not on the performance governor", Ctx::cpu_word(&cpus))).fix(fix)
    };
    let mut f = f.why(
        "frequency changes stall the CPU briefly and make the same loop take different times; dynamic governors also sample from timers",
    );
    f.evidence.extend(ev);
    cx.push(f);
}

/// The cpuidle driver in use (`haltpoll`, `intel_idle`, `acpi_idle`...).
pub(crate) fn idle_driver(cx: &mut Ctx) -> Option<String> {
    cx.read_opt("sys/devices/system/cpu/cpuidle/current_driver").map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// The boot parameter that limits idle depth for `driver`.
pub(crate) fn idle_limit(driver: Option<&str>) -> &'static str {
    match driver {
        Some("intel_idle") => "intel_idle.max_cstate=1",
        Some("acpi_idle") => "processor.max_cstate=1",
        _ => "idle=poll",
    }
}

/// A KVM guest's haltpoll driver: an idle vCPU polls for at most
/// guest_halt_poll_ns, then halts to the host, and a wake-up after that
/// costs a VM exit and entry, whatever exit latency its states claim (1 us
/// here, while idle exit was 41% of a run's delayed time).
fn haltpoll(cx: &mut Ctx) {
    let p = "sys/module/haltpoll/parameters";
    let poll = cx.read_opt(&format!("{p}/guest_halt_poll_ns")).and_then(|s| s.trim().parse::<u64>().ok());
    let mut ev = vec!["/sys/devices/system/cpu/cpuidle/current_driver: haltpoll".to_string()];
    for k in ["guest_halt_poll_ns", "guest_halt_poll_grow", "guest_halt_poll_shrink", "guest_halt_poll_allow_shrink"] {
        if let Some(v) = cx.read_opt(&format!("{p}/{k}")) {
            ev.push(format!("/{p}/{k}: {}", visible(v.trim())));
        }
    }
    let on_cmdline = cx.cmdline.show("haltpoll.guest_halt_poll_ns");
    if let Some(c) = &on_cmdline {
        ev.push(format!("/proc/cmdline: {c}"));
    }
    let title = match poll {
        Some(0) => "cpuidle driver haltpoll with guest_halt_poll_ns=0: an idle vCPU halts to the host at once, and each wake-up costs a VM exit and entry".to_string(),
        Some(ns) => format!("cpuidle driver haltpoll: an idle vCPU polls up to {ns} ns, then halts to the host; a wake-up after that costs a VM exit and entry"),
        None => "cpuidle driver haltpoll: an idle vCPU halts to the host after polling; a wake-up then costs a VM exit and entry".to_string(),
    };
    let keep = if on_cmdline.is_some() { " (the command line sets it: change haltpoll.guest_halt_poll_ns= there to keep it)" } else { "" };
    let how = cx.boot_how();
    let mut f = finding("power", "cpuidle", Status::Info, title)
        .why("its states' exit latencies are the guest's guess: the time to leave a halt is the host's, measured in the run as idle exit")
        .fix(format!(
            "echo 200000 > /{p}/guest_halt_poll_ns: poll up to 200 us before halting, at the cost of that CPU's time{keep}; or boot with idle=poll {how}"
        ));
    f.evidence.extend(ev);
    cx.push(f);
}

fn cpuidle(cx: &mut Ctx) {
    let driver = idle_driver(cx);
    if driver.as_deref() == Some("haltpoll") {
        return haltpoll(cx);
    }
    let mut ev = Vec::new();
    let mut deep = Vec::new();
    for c in cx.cpus.clone() {
        let base = format!("sys/devices/system/cpu/cpu{c}/cpuidle");
        if !cx.exists(&base) {
            continue;
        }
        let mut states: Vec<(usize, String)> =
            cx.list_dir(&base).iter().filter_map(|s| Some((s.strip_prefix("state")?.parse().ok()?, s.clone()))).collect();
        states.sort();
        for (_, st) in states {
            let name = cx.read_opt(&format!("{base}/{st}/name")).map(|s| s.trim().to_string()).unwrap_or_default();
            let lat: u64 = cx.read_opt(&format!("{base}/{st}/latency")).and_then(|s| s.trim().parse().ok()).unwrap_or(0);
            let disabled = cx.read_opt(&format!("{base}/{st}/disable")).is_some_and(|s| s.trim() == "1");
            ev.push(format!("cpu{c} {st} {}: exit latency {lat} us{}", visible(&name), if disabled { ", disabled" } else { "" }));
            if !disabled && lat > 10 {
                deep.push(format!("echo 1 > /{base}/{st}/disable"));
            }
        }
    }
    let f = if ev.is_empty() {
        finding("power", "cpuidle", Status::Info, "no cpuidle states exposed (idle=poll/halt, or a VM halting to the host)")
    } else if deep.is_empty() {
        finding("power", "cpuidle", Status::Ok, "no idle state with an exit latency above 10 us enabled")
    } else {
        finding("power", "cpuidle", Status::Info, format!("{} idle states with an exit latency above 10 us enabled", deep.len())).fix(
            format!(
                "{} (only matters if the workload sleeps; a busy-polling thread never idles); or boot with {}",
                deep.join("; "),
                idle_limit(driver.as_deref())
            ),
        )
    };
    let mut f = f.why("an idle CPU in a deep C-state takes that long to start handling the next interrupt or wake-up");
    f.evidence.extend(ev);
    cx.push(f);
}

fn mm(cx: &mut Ctx) {
    if let Some(s) = cx.read_opt("sys/kernel/mm/transparent_hugepage/enabled") {
        let mode = s
            .split_whitespace()
            .find(|w| w.starts_with('['))
            .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string())
            .unwrap_or_default();
        let f = if mode == "always" {
            finding("mm", "thp", Status::Warn, "transparent hugepages: always")
                .fix("echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (or never)")
        } else {
            finding("mm", "thp", Status::Ok, format!("transparent hugepages: {}", visible(&mode)))
        };
        cx.push(
            f.why("with THP always, khugepaged collapses and compaction migrates pages under running threads: page faults on huge pages, and TLB shootdown IPIs to every CPU running the process")
                .ev(format!("/sys/kernel/mm/transparent_hugepage/enabled: {}", visible(s.trim()))),
        );
    }
    if let Some(s) = cx.read_opt("sys/kernel/mm/ksm/run") {
        let f = if s.trim() == "0" {
            finding("mm", "ksm", Status::Ok, "KSM off")
        } else {
            finding("mm", "ksm", Status::Warn, "KSM page merging is running").fix("echo 0 > /sys/kernel/mm/ksm/run (echo 2 also unmerges)")
        };
        cx.push(
            f.why("ksmd scans and merges pages, write-protecting them: copy-on-write faults and TLB shootdowns in the workload")
                .ev(format!("/sys/kernel/mm/ksm/run: {}", visible(s.trim()))),
        );
    }
    if let Some(s) = cx.read_opt("proc/sys/kernel/numa_balancing") {
        let f = if s.trim() == "0" {
            finding("mm", "numa_balancing", Status::Ok, "automatic NUMA balancing off")
        } else {
            finding("mm", "numa_balancing", Status::Warn, "automatic NUMA balancing on").fix("sysctl -w kernel.numa_balancing=0")
        };
        cx.push(
            f.why("NUMA balancing periodically unmaps the workload's memory (task_numa_work) to sample its accesses: hinting page faults and TLB shootdowns on the watched CPU")
                .ev(format!("/proc/sys/kernel/numa_balancing: {}", visible(s.trim()))),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::{audit, fixture::Fx, test_hints as hints, Status};

    #[test]
    fn power_and_mm_ok() {
        let fx = Fx::tuned();
        let r = audit(fx.path(), &[3]);
        for k in ["cpufreq", "cpuidle", "thp", "ksm", "numa_balancing"] {
            assert_eq!(r.find(k).unwrap().status, Status::Ok, "{k}: {:#?}", r.find(k));
        }
        assert!(r.find("cpuidle").unwrap().evidence.iter().any(|e| e.contains("C6: exit latency 133 us, disabled")));
    }

    #[test]
    fn power_and_mm_warn() {
        let fx = Fx::tuned();
        fx.write("sys/devices/system/cpu/cpu3/cpufreq/scaling_governor", "schedutil\n");
        fx.write("sys/devices/system/cpu/cpu3/cpuidle/state2/disable", "0\n");
        fx.write("sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never\n");
        fx.write("sys/kernel/mm/ksm/run", "1\n");
        fx.write("proc/sys/kernel/numa_balancing", "1\n");
        let r = audit(fx.path(), &[3]);
        let c = r.find("cpufreq").unwrap();
        assert_eq!(
            (c.status, c.fix.as_deref()),
            (Status::Warn, Some("echo performance > /sys/devices/system/cpu/cpu3/cpufreq/scaling_governor"))
        );
        let i = r.find("cpuidle").unwrap();
        assert_eq!(i.status, Status::Info);
        assert!(i.fix.as_deref().unwrap().starts_with("echo 1 > /sys/devices/system/cpu/cpu3/cpuidle/state2/disable"));
        for k in ["thp", "ksm", "numa_balancing"] {
            let f = r.find(k).unwrap();
            assert_eq!(f.status, Status::Warn, "{k}");
            assert!(f.fix.is_some());
        }
        assert!(hints(&r, "ipi", "flush_tlb_func").iter().any(|h| h.contains("numa_balancing=0")));
    }

    #[test]
    fn vm_without_cpufreq_or_cpuidle() {
        let fx = Fx::untuned();
        let r = audit(fx.path(), &[1]);
        assert_eq!(r.find("cpufreq").unwrap().status, Status::Info);
        assert_eq!(r.find("cpuidle").unwrap().status, Status::Info);
    }

    /// A KVM guest on haltpoll (this VM: guest_halt_poll_ns=0 from its
    /// command line): never "OK, no deep state" while idle exit is a run's
    /// top cause; the advice names haltpoll's knob, where it is set, and
    /// the machine's boot mechanism, never intel_idle's; the idle cause's
    /// hint carries it.
    #[test]
    fn a_haltpoll_guest_gets_haltpoll_advice() {
        let fx = Fx::untuned();
        fx.write("sys/devices/system/cpu/cpuidle/current_driver", "haltpoll\n")
            .write("sys/module/haltpoll/parameters/guest_halt_poll_ns", "0\n")
            .write("sys/devices/system/cpu/cpu1/cpuidle/state0/name", "poll\n")
            .write("sys/devices/system/cpu/cpu1/cpuidle/state0/latency", "0\n")
            .write("sys/devices/system/cpu/cpu1/cpuidle/state1/name", "haltpoll\n")
            .write("sys/devices/system/cpu/cpu1/cpuidle/state1/latency", "1\n")
            .write("proc/cmdline", "console=ttyS0 cpuidle_haltpoll.force=1 haltpoll.guest_halt_poll_ns=0\n");
        let r = audit(fx.path(), &[1]);
        let i = r.find("cpuidle").unwrap();
        assert_ne!(i.status, Status::Ok);
        assert!(i.title.contains("haltpoll") && i.title.contains("guest_halt_poll_ns=0"), "{i:#?}");
        let fix = i.fix.as_deref().unwrap();
        assert!(
            fix.contains("/sys/module/haltpoll/parameters/guest_halt_poll_ns") && fix.contains("haltpoll.guest_halt_poll_ns= there"),
            "{fix}"
        );
        assert!(fix.contains("add it to the kernel command line") && !fix.contains("/etc/default/grub"), "no GRUB here: {fix}");
        let h = hints(&r, "idle", "haltpoll");
        assert!(h.iter().any(|l| l.contains("guest_halt_poll_ns")) && !h.iter().any(|l| l.contains("intel_idle")), "{h:?}");
        // With GRUB's defaults file, its way.
        fx.write("etc/default/grub", "GRUB_CMDLINE_LINUX=\"\"\n");
        let r = audit(fx.path(), &[1]);
        assert!(r.find("cpuidle").unwrap().fix.as_deref().unwrap().contains("/etc/default/grub"));
        // On metal, the driver's own limit.
        fx.write("sys/devices/system/cpu/cpuidle/current_driver", "acpi_idle\n");
        let r = audit(fx.path(), &[1]);
        let idle = r.find("idle").unwrap().fix.clone().unwrap_or_default();
        assert!(idle.contains("processor.max_cstate=1") && !idle.contains("intel_idle"), "{idle}");
    }
}
