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

fn cpuidle(cx: &mut Ctx) {
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
        finding("power", "cpuidle", Status::Info, format!("{} idle states with an exit latency above 10 us enabled", deep.len()))
            .fix(format!("{} (only matters if the workload sleeps; a busy-polling thread never idles)", deep.join("; ")))
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
}
