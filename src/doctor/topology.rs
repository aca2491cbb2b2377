//! Where each watched CPU sits: its SMT siblings, NUMA node and shared
//! caches (sysfs). A hyperthread sibling that runs work shares the core's
//! execution units and slows the watched CPU's loop without ever stopping
//! it, so no stall names it: the audit does, and says how to free it.

use super::tasks::Thread;
use super::{bounded, finding, Ctx, Status};
use crate::cpulist;

const CHECK: &str = "topology";

/// `CPU 3: node 0; L1d, L1i, L2 shared with 3,7; L3 shared with 0-7`.
fn placement(cx: &mut Ctx, c: usize) -> String {
    let base = format!("sys/devices/system/cpu/cpu{c}");
    let node = cx
        .list_dir(&base)
        .into_iter()
        .find(|n| n.strip_prefix("node").is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())));
    let mut shared: Vec<(String, String)> = Vec::new();
    let mut idx: Vec<String> = cx.list_dir(&format!("{base}/cache")).into_iter().filter(|i| i.starts_with("index")).collect();
    idx.sort();
    for i in idx {
        let dir = format!("{base}/cache/{i}");
        let level = cx.read_opt(&format!("{dir}/level")).map(|s| s.trim().to_string()).unwrap_or_default();
        let kind = match cx.read_opt(&format!("{dir}/type")).as_deref().map(str::trim) {
            Some("Data") => "d",
            Some("Instruction") => "i",
            _ => "",
        };
        let Some(with) = cx.read_opt(&format!("{dir}/shared_cpu_list")).and_then(|s| cpulist::parse(s.trim()).ok()) else { continue };
        let with = cpulist::Display(&with).to_string();
        let name = format!("L{level}{kind}");
        match shared.iter_mut().find(|(_, w)| *w == with) {
            Some((n, _)) => *n = format!("{n}, {name}"),
            None => shared.push((name, with)),
        }
    }
    let mut s = format!("CPU {c}: {}", node.map_or("node unknown".to_string(), |n| format!("node {}", &n[4..])));
    for (names, with) in shared {
        s += &format!("; {names} shared with {with}");
    }
    s
}

pub(crate) fn check(cx: &mut Ctx, threads: &[Thread]) {
    let isolated = cx.read_opt("sys/devices/system/cpu/isolated").and_then(|s| cpulist::parse(s.trim()).ok()).unwrap_or_default();
    for c in cx.cpus.clone() {
        let place = placement(cx, c);
        let rel = format!("sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list");
        let Some(siblings) = cx.read_opt(&rel).and_then(|s| cpulist::parse(s.trim()).ok()) else {
            cx.push(
                finding(CHECK, &format!("smt:{c}"), Status::Info, format!("CPU {c}: SMT siblings unknown"))
                    .ev(place)
                    .ev(format!("/{rel}: absent")),
            );
            continue;
        };
        let others: Vec<usize> = siblings.iter().copied().filter(|&s| s != c).collect();
        if others.is_empty() {
            cx.push(
                finding(CHECK, &format!("smt:{c}"), Status::Ok, format!("CPU {c} has no SMT sibling"))
                    .why("a core to itself: no hyperthread shares its execution units")
                    .ev(place),
            );
            continue;
        }
        // User threads and unpinned kernel threads that last ran on a
        // sibling: the per-CPU kernel threads every CPU has do not count.
        let busy: Vec<String> = threads
            .iter()
            .filter(|t| t.last_cpu.is_some_and(|l| others.contains(&l)) && !(t.kthread && t.allowed.len() == 1))
            .map(|t| t.label())
            .collect();
        let free = |s: &usize| cx.cpus.contains(s) || isolated.contains(s);
        let open: Vec<usize> = others.iter().copied().filter(|s| !free(s)).collect();
        let sib = cpulist::Display(&others).to_string();
        let f = if open.is_empty() && busy.is_empty() {
            finding(CHECK, &format!("smt:{c}"), Status::Ok, format!("CPU {c}'s SMT sibling CPU {sib} is isolated too and idle"))
        } else {
            let mut why = Vec::new();
            if !open.is_empty() {
                why.push(format!("CPU {} not isolated", cpulist::Display(&open)));
            }
            if !busy.is_empty() {
                why.push(format!("{} thread(s) last ran there: {}", busy.len(), bounded(&busy, 6)));
            }
            let with: Vec<usize> = cx.cpus.iter().chain(&others).copied().collect();
            let mut with = with;
            with.sort_unstable();
            with.dedup();
            let list = cpulist::Display(&with);
            finding(CHECK, &format!("smt:{c}"), Status::Warn, format!("CPU {c}'s SMT sibling CPU {sib}: {}", why.join("; "))).fix(format!(
                "isolate the sibling with it (isolcpus=domain,managed_irq,{list} nohz_full={list} rcu_nocbs={list}), or take it offline: {} (or boot with nosmt)",
                others.iter().map(|s| format!("echo 0 > /sys/devices/system/cpu/cpu{s}/online")).collect::<Vec<_>>().join("; ")
            ))
        };
        cx.push(
            f.why("a busy hyperthread sibling shares the core and slows the watched CPU's loop without stopping it: no stall names it")
                .ev(place),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::doctor::fixture::Fx;
    use crate::doctor::{audit, Status};

    fn topo(fx: &Fx, siblings: &str) {
        fx.write("sys/devices/system/cpu/cpu3/topology/thread_siblings_list", siblings)
            .write("sys/devices/system/cpu/cpu3/node0/cpulist", "0-3\n")
            .write("sys/devices/system/cpu/cpu3/cache/index0/level", "1\n")
            .write("sys/devices/system/cpu/cpu3/cache/index0/type", "Data\n")
            .write("sys/devices/system/cpu/cpu3/cache/index0/shared_cpu_list", siblings)
            .write("sys/devices/system/cpu/cpu3/cache/index3/level", "3\n")
            .write("sys/devices/system/cpu/cpu3/cache/index3/type", "Unified\n")
            .write("sys/devices/system/cpu/cpu3/cache/index3/shared_cpu_list", "0-3\n");
    }

    #[test]
    fn an_idle_isolated_sibling_and_no_sibling_are_fine() {
        let fx = Fx::tuned();
        topo(&fx, "3\n");
        let f = audit(fx.path(), &[3]).find("smt:3").cloned().unwrap();
        assert_eq!((f.status, f.title.as_str()), (Status::Ok, "CPU 3 has no SMT sibling"));
        assert_eq!(f.evidence, ["CPU 3: node 0; L1d shared with 3; L3 shared with 0-3"]);
        let fx = Fx::tuned();
        topo(&fx, "2-3\n");
        fx.write("sys/devices/system/cpu/isolated", "2-3\n");
        let f = audit(fx.path(), &[3]).find("smt:3").cloned().unwrap();
        assert_eq!(f.status, Status::Ok, "{f:?}");
        assert!(f.title.contains("sibling CPU 2 is isolated too"), "{f:?}");
    }

    #[test]
    fn a_busy_or_open_sibling_is_a_warning_with_its_fix() {
        let fx = Fx::tuned();
        topo(&fx, "2-3\n");
        fx.task(700, "make", 0, "0-2", 2).task(701, "ksoftirqd/2", 0x0020_0000, "2", 2);
        let f = audit(fx.path(), &[3]).find("smt:3").cloned().unwrap();
        assert_eq!(f.status, Status::Warn);
        assert!(f.title.contains("CPU 2 not isolated") && f.title.contains("1 thread(s) last ran there: make[700]"), "{f:?}");
        let fix = f.fix.unwrap();
        assert!(fix.contains("isolcpus=domain,managed_irq,2-3") && fix.contains("echo 0 > /sys/devices/system/cpu/cpu2/online"), "{fix}");
    }
}
