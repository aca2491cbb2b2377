//! nohz_full and rcu_nocbs: whether the tick and RCU's callbacks still run
//! on the watched CPUs. Both are read as the kernel holds them (its
//! nohz_full mask, the rcuo kthreads of offloaded CPUs), the command line
//! only where the kernel cannot be asked: a kernel built without
//! CONFIG_NO_HZ_FULL or CONFIG_RCU_NOCB_CPU takes the parameters and
//! ignores them.

use super::super::cmdline::Isolcpus;
use super::super::{finding, parse_list_file, Ctx, Status};
use super::CHECK;
use crate::cpulist;
use crate::sanitize::visible;

/// The CPUs whose RCU callbacks the kernel offloads: those with an
/// `rcuop/N`, `rcuos/N` or `rcuob/N` kthread. None: /proc not listable.
fn rcuo_cpus(cx: &mut Ctx) -> Option<Vec<usize>> {
    let pids = cx.list_dir("proc");
    if pids.is_empty() {
        return None;
    }
    let mut cpus = Vec::new();
    for p in pids.iter().filter(|p| p.bytes().all(|b| b.is_ascii_digit())) {
        let Some(comm) = cx.read_quiet(&format!("proc/{p}/comm")) else { continue };
        let comm = comm.trim();
        if let Some(n) = ["rcuop/", "rcuos/", "rcuob/"].iter().find_map(|pre| comm.strip_prefix(pre)) {
            if let Ok(c) = n.parse() {
                cpus.push(c);
            }
        }
    }
    Some(cpus)
}

pub(super) fn check(cx: &mut Ctx, iso: Option<&Isolcpus>, w: &str) {
    let how = cx.boot_how();
    let last = cx.nr_cpus() - 1;
    let cmd_nohz = cx.cmdline.cpus("nohz_full", last);
    let sys = cx.read_opt("sys/devices/system/cpu/nohz_full");
    let sys_nohz = sys.as_deref().and_then(parse_list_file);
    // The kernel's own mask, never the command line: a kernel built without
    // CONFIG_NO_HZ_FULL has no such file and ignores nohz_full= (5.10 on
    // Debian 11). isolcpus=nohz feeds the same mask.
    let mut tickless = sys_nohz.clone().unwrap_or_default();
    if let Some(i) = iso.filter(|i| sys.is_some() && i.flags.iter().any(|f| f == "nohz")) {
        tickless.extend(&i.cpus);
    }
    let missing: Vec<usize> = cx.cpus.iter().copied().filter(|c| !tickless.contains(c)).collect();
    let mut f = if missing.is_empty() {
        finding(CHECK, "nohz_full", Status::Ok, format!("{} tickless when one task runs (nohz_full)", Ctx::cpu_word(&cx.cpus)))
            .why("the periodic tick stops while a single task runs")
    } else {
        let fix = if sys.is_none() {
            format!("this kernel cannot stop the tick (built without CONFIG_NO_HZ_FULL): boot one built with CONFIG_NO_HZ_FULL=y (Debian 12's and later stock kernels are; Debian 11's 5.10 is not), with: nohz_full={w} {how}")
        } else {
            format!("boot with: nohz_full={w} {how}")
        };
        let asked = missing.iter().all(|c| cmd_nohz.contains(c));
        let title = if asked {
            format!(
                "scheduler tick still runs on {}: nohz_full= is on the command line, but this kernel does not hold it",
                Ctx::cpu_word(&missing)
            )
        } else {
            format!("scheduler tick still runs on {} (no nohz_full)", Ctx::cpu_word(&missing))
        };
        finding(CHECK, "nohz_full", Status::Warn, title)
            .why("with a periodic tick the CPU takes a local timer interrupt every 1-10 ms (CONFIG_HZ) even with a single task running")
            .fix(fix)
    };
    f = f.ev(match cx.cmdline.show("nohz_full") {
        Some(s) => format!("/proc/cmdline: {s}"),
        None => "/proc/cmdline: no nohz_full=".into(),
    });
    f = f.ev(match (&sys, &sys_nohz) {
        (None, _) => "/sys/devices/system/cpu/nohz_full: absent (kernel without CONFIG_NO_HZ_FULL)".into(),
        (Some(_), Some(v)) if v.is_empty() => "/sys/devices/system/cpu/nohz_full: (none)".into(),
        (Some(s), _) => format!("/sys/devices/system/cpu/nohz_full: {}", visible(s.trim())),
    });
    cx.push(f);

    // Offloaded as the kernel holds it: each offloaded CPU N has its
    // callback kthread rcuop/N (rcuos/N, rcuob/N on older kernels); a
    // kernel without CONFIG_RCU_NOCB_CPU has none whatever the command line
    // says. Only when /proc cannot be listed does the command line stand in.
    let rcuo = rcuo_cpus(cx);
    let mut offloaded = match &rcuo {
        Some(cpus) => cpus.clone(),
        None => {
            let mut v = cx.cmdline.cpus("rcu_nocbs", last);
            v.extend(&tickless);
            v
        }
    };
    offloaded.sort_unstable();
    offloaded.dedup();
    let missing: Vec<usize> = cx.cpus.iter().copied().filter(|c| !offloaded.contains(c)).collect();
    let mut f = if missing.is_empty() {
        finding(CHECK, "rcu_nocbs", Status::Ok, format!("RCU callbacks of {} offloaded (rcu_nocbs / nohz_full)", Ctx::cpu_word(&cx.cpus)))
            .why("callbacks run in rcuo kthreads on housekeeping CPUs")
    } else {
        finding(CHECK, "rcu_nocbs", Status::Warn, format!("RCU callbacks run on {} (no rcu_nocbs)", Ctx::cpu_word(&missing)))
            .why("RCU callbacks then run on the CPU itself in RCU softirq context")
            .fix(format!("boot with: rcu_nocbs={w} (nohz_full={w} implies it) {how}"))
    };
    f = f.ev(format!("/proc/cmdline: {}", cx.cmdline.show("rcu_nocbs").unwrap_or_else(|| "no rcu_nocbs=".into())));
    f = f.ev(match &rcuo {
        Some(c) if c.is_empty() => "rcuo kthreads: none (no CPU offloaded, or a kernel without CONFIG_RCU_NOCB_CPU)".to_string(),
        Some(c) => format!("rcuo kthreads for CPUs {}", cpulist::Display(c)),
        None => "/proc unreadable: offloading taken from the command line".to_string(),
    });
    cx.push(f);
    if missing.is_empty() && !cx.cmdline.has("rcu_nocb_poll") {
        let f = finding(CHECK, "rcu_nocb_poll", Status::Info, "rcu_nocb_poll not set")
            .why("without it an offloaded CPU wakes its rcuog kthread when it queues callbacks; with it the kthreads poll from housekeeping CPUs")
            .ev("/proc/cmdline: no rcu_nocb_poll")
            .fix(format!("boot with: rcu_nocb_poll {how}"));
        cx.push(f);
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::{audit, fixture::Fx, Status};

    /// Debian 11's 5.10: nohz_full= and rcu_nocbs= on the command line of
    /// a kernel built without them. The kernel's state decides, not the
    /// command line.
    #[test]
    fn the_command_line_alone_is_not_in_force() {
        let fx = Fx::tuned();
        std::fs::remove_file(fx.path().join("sys/devices/system/cpu/nohz_full")).unwrap();
        std::fs::remove_dir_all(fx.path().join("proc/32")).unwrap();
        let r = audit(fx.path(), &[3]);
        let n = r.find("nohz_full").unwrap();
        assert_eq!(n.status, Status::Warn);
        assert!(n.title.contains("on the command line, but this kernel does not hold it"), "{}", n.title);
        assert!(n.fix.as_deref().unwrap().contains("CONFIG_NO_HZ_FULL=y"));
        let rcu = r.find("rcu_nocbs").unwrap();
        assert_eq!(rcu.status, Status::Warn, "{rcu:#?}");
        assert!(rcu.evidence.iter().any(|e| e.starts_with("rcuo kthreads: none")), "{:?}", rcu.evidence);
        // The kernel offloads CPU 3 (its rcuop/3 runs) without rcu_nocbs= on
        // the command line: OK, by the kernel's word.
        let fx = Fx::tuned();
        fx.write("proc/cmdline", "isolcpus=domain,managed_irq,3 irqaffinity=0-2\n");
        let r = audit(fx.path(), &[3]);
        assert_eq!(r.find("rcu_nocbs").unwrap().status, Status::Ok);
        assert!(r.find("rcu_nocbs").unwrap().evidence.contains(&"rcuo kthreads for CPUs 3".to_string()));
    }
}
