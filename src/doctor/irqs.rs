//! Device IRQs whose affinity reaches a watched CPU, the default IRQ
//! affinity, per-CPU vector counts, and irqbalance.

use std::collections::BTreeMap;

use super::{bounded, finding, parse_list_file, parse_mask, Ctx, Status};
use crate::cpulist::{self, Display};
use crate::sanitize::visible;

const CHECK: &str = "irq";

/// One line of /proc/interrupts.
#[derive(Debug, Default, Clone)]
pub(crate) struct IrqLine {
    /// Per-CPU counts, indexed by CPU.
    pub counts: Vec<u64>,
    /// Action name(s), or the description of a per-CPU vector.
    pub name: String,
}

/// Parses /proc/interrupts into (label, line); labels are `24` or `LOC`.
pub(crate) fn parse_interrupts(s: &str) -> BTreeMap<String, IrqLine> {
    let mut lines = s.lines();
    let header: Vec<usize> = lines.next().unwrap_or("").split_whitespace().filter_map(|t| t.strip_prefix("CPU")?.parse().ok()).collect();
    let mut out = BTreeMap::new();
    for l in lines {
        let Some((label, rest)) = l.split_once(':') else { continue };
        let label = label.trim().to_string();
        let toks: Vec<&str> = rest.split_whitespace().collect();
        let mut counts = Vec::new();
        let mut i = 0;
        while i < toks.len() && i < header.len() && toks[i].bytes().all(|b| b.is_ascii_digit()) {
            let cpu = header[i];
            if counts.len() <= cpu {
                counts.resize(cpu + 1, 0);
            }
            counts[cpu] = toks[i].parse().unwrap_or(0);
            i += 1;
        }
        let tail = &toks[i..];
        let name = if label.bytes().all(|b| b.is_ascii_digit()) {
            // chip, hwirq[-type], [type], then the action names.
            let mut j = 1.min(tail.len());
            while j < tail.len()
                && (tail[j].bytes().next().is_some_and(|b| b.is_ascii_digit()) || matches!(tail[j], "Level" | "Edge" | "edge" | "level"))
            {
                j += 1;
            }
            tail[j..].join(" ")
        } else {
            tail.join(" ")
        };
        out.insert(label, IrqLine { counts, name });
    }
    out
}

pub(crate) fn check(cx: &mut Ctx) {
    let ints = cx.read("proc/interrupts").map(|s| parse_interrupts(&s)).unwrap_or_default();
    let mut irqs: Vec<u32> = cx.list_dir("proc/irq").iter().filter_map(|n| n.parse().ok()).collect();
    irqs.sort_unstable();
    let hk = cx.hk_list();
    let w = cx.watched();
    let mut clean = Vec::new();
    for n in irqs {
        let Some(aff) = cx.read(&format!("proc/irq/{n}/smp_affinity_list")).and_then(|s| parse_list_file(&s)) else { continue };
        let eff = cx.read_opt(&format!("proc/irq/{n}/effective_affinity_list")).and_then(|s| parse_list_file(&s));
        let mut reach = aff.clone();
        reach.extend(eff.iter().flatten());
        let hit = cx.overlap(&reach);
        if hit.is_empty() {
            clean.push(n.to_string());
            continue;
        }
        let line = ints.get(&n.to_string());
        let name = cx
            .read_quiet(&format!("sys/kernel/irq/{n}/actions"))
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .or_else(|| line.map(|l| l.name.clone()).filter(|s| !s.is_empty()));
        let managed = cx.read_quiet(&format!("sys/kernel/debug/irq/irqs/{n}")).map(|s| s.contains("AFFINITY_MANAGED"));
        let fires_here = eff.as_ref().map(|e| cx.overlap(e)).filter(|v| !v.is_empty());
        let label = match &name {
            Some(nm) => format!("IRQ {n} ({})", visible(nm)),
            None => format!("IRQ {n} (no handler)"),
        };
        let title = match &fires_here {
            Some(on) => format!("{label} is delivered to {}", Ctx::cpu_word(on)),
            None => format!("{label} may be delivered to {} (in its affinity)", Ctx::cpu_word(&hit)),
        };
        let status = if name.is_some() { Status::Warn } else { Status::Info };
        let mut f = finding(CHECK, &format!("irq:{n}"), status, title)
            .why("the handler, and the softirq it raises, run on the CPU the interrupt is delivered to; kernel-managed IRQs refuse the write (EIO) and need isolcpus=managed_irq")
            .ev(format!("/proc/irq/{n}/smp_affinity_list: {}", Display(&aff)));
        if let Some(e) = &eff {
            f = f.ev(format!("/proc/irq/{n}/effective_affinity_list: {}", Display(e)));
        }
        if let Some(l) = line {
            for &c in &hit {
                f = f.ev(format!("/proc/interrupts: {} on CPU{c}", l.counts.get(c).copied().unwrap_or(0)));
            }
        }
        if let Some(on) = &fires_here {
            let count = line.map_or(0, |l| on.iter().map(|&c| l.counts.get(c).copied().unwrap_or(0)).sum());
            f = f.fact(super::Fact::IrqDelivered { irq: n, count });
        }
        if managed == Some(true) {
            f = f.ev("kernel-managed (AFFINITY_MANAGED in /sys/kernel/debug/irq/irqs)");
            f = f.fix(format!("kernel-managed, writes fail: boot with isolcpus=managed_irq,domain,{w}"));
        } else if status == Status::Warn {
            f = f.fix_opt(hk.as_ref().map(|hk| format!("echo {hk} > /proc/irq/{n}/smp_affinity_list")));
        }
        cx.push(f);
    }
    if !clean.is_empty() {
        let f = finding(CHECK, "irq:others", Status::Ok, format!("{} other IRQs kept off {}", clean.len(), Ctx::cpu_word(&cx.cpus)))
            .ev(format!("IRQs {}", bounded(&clean, 20)));
        cx.push(f);
    }
    vectors(cx, &ints);
    default_affinity(cx);
    irqbalance(cx);
}

fn vectors(cx: &mut Ctx, ints: &BTreeMap<String, IrqLine>) {
    let mut ev = Vec::new();
    for &c in &cx.cpus {
        for (label, l) in ints.iter().filter(|(k, _)| !k.bytes().all(|b| b.is_ascii_digit())) {
            let n = l.counts.get(c).copied().unwrap_or(0);
            if n > 0 {
                ev.push(format!("CPU{c} {label} {n} ({})", visible(&l.name)));
            }
        }
    }
    if ev.is_empty() {
        return;
    }
    let mut f = finding(CHECK, "irq:vectors", Status::Info, format!("per-CPU interrupt counts on {} since boot", Ctx::cpu_word(&cx.cpus)))
        .why("LOC is the tick (nohz_full), RES/CAL/TLB are IPIs sent by other CPUs (wake-ups, cross-calls, TLB shootdowns of shared mappings); run jitterwatch to see which ones hit your workload");
    f.evidence = ev;
    cx.push(f);
}

fn default_affinity(cx: &mut Ctx) {
    let Some(s) = cx.read("proc/irq/default_smp_affinity") else { return };
    let Some(set) = parse_mask(&s) else { return };
    let hit = cx.overlap(&set);
    let f = if hit.is_empty() {
        finding(CHECK, "irq:default", Status::Ok, "default IRQ affinity excludes the watched CPUs")
    } else {
        finding(CHECK, "irq:default", Status::Warn, format!("new IRQs may land on {} (default_smp_affinity)", Ctx::cpu_word(&hit)))
            .fix_opt(cx.hk_mask().map(|m| format!("echo {m} > /proc/irq/default_smp_affinity")))
    };
    cx.push(
        f.why("IRQs set up from now on (hot-plugged devices, new queues) start with this affinity")
            .ev(format!("/proc/irq/default_smp_affinity: {}", visible(s.trim()))),
    );
}

fn irqbalance(cx: &mut Ctx) {
    let pids: Vec<String> = cx
        .list_dir("proc")
        .into_iter()
        .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        .filter(|p| cx.read_quiet(&format!("proc/{p}/comm")).is_some_and(|c| c.trim_end_matches('\n') == "irqbalance"))
        .collect();
    let Some(pid) = pids.first() else {
        cx.push(finding(CHECK, "irqbalance", Status::Ok, "irqbalance not running").why("nothing moves IRQ affinity behind your back"));
        return;
    };
    // irqbalance bans isolated and nohz_full CPUs itself, plus the banned lists.
    let mut banned: Vec<usize> = Vec::new();
    let mut ev = vec![format!("irqbalance running (pid {pid})")];
    for rel in ["sys/devices/system/cpu/isolated", "sys/devices/system/cpu/nohz_full"] {
        banned.extend(cx.read_quiet(rel).and_then(|s| parse_list_file(&s)).unwrap_or_default());
    }
    let env = cx.read_quiet(&format!("proc/{pid}/environ")).unwrap_or_default().replace('\0', "\n");
    for (src, text) in [
        ("/etc/default/irqbalance", cx.read_quiet("etc/default/irqbalance").unwrap_or_default()),
        ("/etc/sysconfig/irqbalance", cx.read_quiet("etc/sysconfig/irqbalance").unwrap_or_default()),
        ("environment", env),
    ] {
        for l in text.lines() {
            let l = l.trim();
            let val = |k: &str| l.strip_prefix(k).map(|v| v.trim_matches(|c| c == '"' || c == '\'').to_string());
            if let Some(v) = val("IRQBALANCE_BANNED_CPULIST=") {
                banned.extend(cpulist::parse(&v).unwrap_or_default());
                ev.push(format!("{src}: IRQBALANCE_BANNED_CPULIST={}", visible(&v)));
            } else if let Some(v) = val("IRQBALANCE_BANNED_CPUS=") {
                banned.extend(parse_mask(&v).unwrap_or_default());
                ev.push(format!("{src}: IRQBALANCE_BANNED_CPUS={}", visible(&v)));
            }
        }
    }
    let open: Vec<usize> = cx.cpus.iter().copied().filter(|c| !banned.contains(c)).collect();
    let w = cx.watched();
    let mut f = if open.is_empty() {
        finding(CHECK, "irqbalance", Status::Ok, format!("irqbalance running but keeps off {}", Ctx::cpu_word(&cx.cpus)))
    } else {
        finding(CHECK, "irqbalance", Status::Warn, format!("irqbalance may move IRQs onto {}", Ctx::cpu_word(&open)))
            .fix(format!("add IRQBALANCE_BANNED_CPULIST={w} to /etc/default/irqbalance (or /etc/sysconfig/irqbalance) and systemctl restart irqbalance; or systemctl disable --now irqbalance"))
    };
    f = f.why("irqbalance rewrites IRQ affinities every few seconds; it avoids isolated and nohz_full CPUs and its banned list only");
    f.evidence = ev;
    cx.push(f);
}

#[cfg(test)]
mod tests {
    use super::super::{audit, fixture::Fx, test_hints as hints, Status};
    use super::parse_interrupts;

    #[test]
    fn interrupts_parse() {
        let s = "           CPU0       CPU1       \n 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n 36:          0      40610 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n 11:  5  6  GICv3  27 Level     arch_timer\n LOC:      20097      23005   Local timer interrupts\nERR:          0\n";
        let m = parse_interrupts(s);
        assert_eq!(m["24"].name, "ACPI:Ged");
        assert_eq!(m["36"].counts, [0, 40610]);
        assert_eq!(m["36"].name, "virtio1-req.0");
        assert_eq!(m["11"].name, "arch_timer");
        assert_eq!(m["LOC"].name, "Local timer interrupts");
        assert_eq!(m["ERR"].counts, [0]);
    }

    #[test]
    fn irqs_ok_when_kept_off() {
        let fx = Fx::tuned();
        let r = audit(fx.path(), &[3]);
        assert!(r.findings.iter().all(|f| !f.key.starts_with("irq:") || f.status != Status::Warn), "{:#?}", r.findings);
        assert_eq!(r.find("irq:others").unwrap().status, Status::Ok);
        assert_eq!(r.find("irq:default").unwrap().status, Status::Ok);
        assert_eq!(r.find("irqbalance").unwrap().status, Status::Ok);
    }

    #[test]
    fn irqs_warn_with_fix_and_hint() {
        let fx = Fx::untuned();
        let r = audit(fx.path(), &[1]);
        let f = r.find("irq:36").unwrap();
        assert_eq!(f.status, Status::Warn);
        assert!(f.title.contains("virtio1-req.0") && f.title.contains("delivered to CPU 1"), "{}", f.title);
        assert_eq!(f.fix.as_deref(), Some("echo 0 > /proc/irq/36/smp_affinity_list"));
        assert!(f.evidence.iter().any(|e| e.contains("40610 on CPU1")));
        let f24 = r.find("irq:24").unwrap();
        assert_eq!(f24.status, Status::Warn);
        assert!(f24.title.contains("in its affinity"));
        let d = r.find("irq:default").unwrap();
        assert_eq!((d.status, d.fix.as_deref()), (Status::Warn, Some("echo 1 > /proc/irq/default_smp_affinity")));
        let b = r.find("irqbalance").unwrap();
        assert_eq!(b.status, Status::Warn);
        assert!(b.fix.as_deref().unwrap().contains("IRQBALANCE_BANNED_CPULIST=1"));
        let h = hints(&r, "irq", "36:virtio1-req.0");
        assert!(h.iter().any(|l| l == "irq 36 has CPU 1 in its affinity: echo 0 > /proc/irq/36/smp_affinity_list"), "{h:?}");
        assert!(h.iter().any(|l| l.contains("irqbalance")), "{h:?}");
        let h = hints(&r, "softirq", "NET_RX");
        assert!(h.iter().any(|l| l.contains("/proc/irq/36/")), "{h:?}");
        assert!(!h.iter().any(|l| l.contains("/proc/irq/24/")), "{h:?}");
        assert!(hints(&r, "task", "kworker/u8:0[77]").iter().all(|l| !l.contains("taskset")));
        assert!(r.find("irq:vectors").unwrap().evidence.iter().any(|e| e.starts_with("CPU1 LOC 23005")));
    }

    #[test]
    fn managed_irq_and_banned_irqbalance() {
        let fx = Fx::untuned();
        fx.write("sys/kernel/debug/irq/irqs/36", "handler: handle_edge_irq\ndstate: 0x3600\n  IRQD_AFFINITY_MANAGED\n");
        fx.write("etc/default/irqbalance", "#IRQBALANCE_ONESHOT=\nIRQBALANCE_BANNED_CPULIST=\"1\"\n");
        let r = audit(fx.path(), &[1]);
        assert!(r.find("irq:36").unwrap().fix.as_deref().unwrap().contains("managed_irq"));
        assert_eq!(r.find("irqbalance").unwrap().status, Status::Ok);
    }
}
