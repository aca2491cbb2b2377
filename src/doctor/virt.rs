//! Virtualisation: is there a hypervisor underneath, and has it taken time
//! from the watched CPUs (steal)?

use super::{finding, Ctx, Status};
use crate::sanitize::visible;

const CHECK: &str = "virt";
/// Steal above this share of a CPU's time since boot is a WARN; below, INFO.
const STEAL_WARN_PCT: f64 = 0.1;

/// Per-CPU steal and total ticks from /proc/stat (`cpuN user nice system
/// idle iowait irq softirq steal ...`).
pub(crate) fn steal(stat: &str, cpu: usize) -> Option<(u64, u64)> {
    let label = format!("cpu{cpu}");
    let line = stat.lines().find(|l| l.split_whitespace().next() == Some(label.as_str()))?;
    let v: Vec<u64> = line.split_whitespace().skip(1).map(|t| t.parse().unwrap_or(0)).collect();
    let steal = *v.get(7)?;
    Some((steal, v.iter().take(8).sum()))
}

/// The first `flags` line of /proc/cpuinfo. Reading stops there: the kernel
/// formats each CPU's record only when it is read.
fn cpu0_flags(cx: &mut Ctx) -> Option<String> {
    use std::io::BufRead;
    let rel = "proc/cpuinfo";
    let file = match std::fs::File::open(cx.root.join(rel)) {
        Ok(f) => f,
        Err(e) => {
            cx.note_unreadable(rel, &e);
            return None;
        }
    };
    let found = std::io::BufReader::new(file).lines().map_while(Result::ok).find(|l| l.starts_with("flags") || l.starts_with("Features"));
    Some(found.unwrap_or_default())
}

pub(crate) fn check(cx: &mut Ctx) {
    let flag = cpu0_flags(cx).map(|l| l.split_whitespace().any(|w| w == "hypervisor"));
    let mut ev = Vec::new();
    if let Some(f) = flag {
        ev.push(format!("/proc/cpuinfo flags: {}", if f { "hypervisor" } else { "no hypervisor flag" }));
    }
    let mut named = Vec::new();
    for rel in ["sys/hypervisor/type", "sys/class/dmi/id/sys_vendor", "sys/class/dmi/id/product_name"] {
        if let Some(s) = cx.read_opt(rel).map(|s| s.trim().to_string()).filter(|s| !s.is_empty()) {
            ev.push(format!("/{rel}: {}", visible(&s)));
            named.push(visible(&s).into_owned());
        }
    }
    let vm_vendor = named.iter().any(|n| {
        let n = n.to_ascii_lowercase();
        [
            "qemu",
            "kvm",
            "vmware",
            "virtualbox",
            "xen",
            "microsoft corporation",
            "amazon ec2",
            "google",
            "firecracker",
            "cloud hypervisor",
            "bochs",
        ]
        .iter()
        .any(|v| n.contains(v))
    });
    let vm = flag == Some(true) || cx.read_opt("sys/hypervisor/type").is_some() || vm_vendor;
    let mut f = if vm {
        let what = if named.is_empty() { String::new() } else { format!(" ({})", named.join(", ")) };
        finding(CHECK, "hypervisor", Status::Info, format!("running under a hypervisor{what}"))
            .why("the host can pause a vCPU (preemption by other host work, VM exits, host interrupts) and no guest event covers that time: jitterwatch reports it as \"unexplained\", and only the host side can remove it (dedicated, pinned host cores)")
    } else {
        finding(CHECK, "hypervisor", Status::Ok, "no hypervisor detected")
            .why("remaining unexplained stalls are SMIs, firmware or hardware")
    };
    f.evidence = ev;
    cx.push(f);

    let Some(stat) = cx.read("proc/stat") else { return };
    // SAFETY: sysconf reads a constant and has no preconditions.
    let hz = match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
        n if n > 0 => n as u64,
        _ => 100,
    };
    let mut stolen = Vec::new();
    let mut some = Vec::new();
    let mut ev = Vec::new();
    for &c in &cx.cpus {
        let Some((st, total)) = steal(&stat, c) else { continue };
        let pct = if total > 0 { st as f64 * 100.0 / total as f64 } else { 0.0 };
        ev.push(format!("/proc/stat cpu{c} steal: {st} ticks = {:.2} s, {pct:.3}% of its time since boot", st as f64 / hz as f64));
        if pct >= STEAL_WARN_PCT {
            stolen.push(c);
        } else if st > 0 {
            some.push(c);
        }
    }
    if ev.is_empty() {
        return;
    }
    let mut f = if stolen.is_empty() && !some.is_empty() {
        finding(
            CHECK,
            "steal",
            Status::Info,
            format!("a little steal time on {} (under {STEAL_WARN_PCT}% since boot)", Ctx::cpu_word(&some)),
        )
        .why("the hypervisor ran something else while this vCPU wanted to run; it shows up in jitterwatch as \"unexplained\"")
    } else if stolen.is_empty() {
        let f = finding(CHECK, "steal", Status::Ok, "no steal time on the watched CPUs");
        if vm {
            f.why("steal is only counted when the host reports it (KVM steal-time); zero does not rule out host pauses")
        } else {
            f
        }
    } else {
        finding(CHECK, "steal", Status::Warn, format!("the host has taken time from {} (steal)", Ctx::cpu_word(&stolen)))
            .why("steal time is time the hypervisor ran something else while this vCPU wanted to run; it shows up in jitterwatch as \"unexplained\"")
            .fix("nothing in the guest removes it: use dedicated (pinned, not overcommitted) host cores, e.g. a dedicated-CPU instance type, or on your own host pin the vCPU threads to isolated host CPUs")
    };
    f.evidence = ev;
    cx.push(f);
}

#[cfg(test)]
mod tests {
    use super::super::{audit, fixture::Fx, test_hints as hints, Status};
    use super::steal;

    #[test]
    fn steal_column() {
        let s = "cpu  8955 0 1798 38450 276 0 31 11 0 0\ncpu0 3823 0 746 20131 41 0 5 5 0 0\ncpu1 5131 0 1051 18319 234 0 25 6 0 0\n";
        assert_eq!(steal(s, 1), Some((6, 5131 + 1051 + 18319 + 234 + 25 + 6)));
        assert_eq!(steal(s, 2), None);
    }

    #[test]
    fn bare_metal_ok() {
        let fx = Fx::tuned();
        let r = audit(fx.path(), &[3]);
        assert_eq!(r.find("hypervisor").unwrap().status, Status::Ok);
        assert_eq!(r.find("steal").unwrap().status, Status::Ok);
    }

    #[test]
    fn vm_with_steal() {
        let fx = Fx::untuned();
        let r = audit(fx.path(), &[1]);
        let h = r.find("hypervisor").unwrap();
        assert_eq!(h.status, Status::Info);
        assert!(h.why.contains("unexplained"));
        let s = r.find("steal").unwrap();
        assert_eq!(s.status, Status::Warn);
        assert!(s.fix.is_some());
        let hs = hints(&r, "unexplained", "");
        assert!(hs.iter().any(|l| l.contains("hypervisor")), "{hs:?}");
        assert!(hs.iter().any(|l| l.contains("steal")), "{hs:?}");
    }

    #[test]
    fn little_steal_is_info() {
        let fx = Fx::untuned();
        fx.write("proc/stat", "cpu  1 0 1 1 0 0 0 0 0 0\ncpu1 5131 0 1051 18319 234 0 25 6 0 0\n");
        let r = audit(fx.path(), &[1]);
        assert_eq!(r.find("steal").unwrap().status, Status::Info);
    }
}
