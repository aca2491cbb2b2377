//! Hints for what ran as a thread on the CPU: a task, or a work item a
//! kworker ran. A thread's fix is its affinity (taskset, cpusets) unless it
//! is one of the kernel's per-CPU threads, which must stay; per-CPU work
//! goes where its caller queues it, so the hint names the caller's knob
//! (vmstat's interval, THP, NUMA balancing) or the workqueue cpumask.

use super::Hints;
use crate::sanitize::visible;

pub(super) fn work(h: &mut Hints, name: &str) {
    match name {
        "vmstat_update" | "refresh_vm_stats" | "vmstat_shepherd" => {
            // Per-CPU work on mm_percpu_wq: workqueue cpumasks do not apply.
            h.add("stat_interval");
            h.add("nohz_full");
            return;
        }
        "wb_workfn" => {
            h.add("workqueue:writeback");
        }
        "lru_add_drain_per_cpu" | "drain_local_pages_wq" => {
            h.push(format!(
                "{name}: another CPU drains per-CPU page lists on every CPU (mlock, page migration, compaction, memory pressure)"
            ));
            h.add("thp");
            h.add("numa_balancing");
        }
        "psi_avgs_work" => h.push("psi_avgs_work: pressure-stall averaging every 2 s; boot with psi=0 if /proc/pressure is unused"),
        n if n.contains("rcu") => {
            h.add("rcu_nocbs");
        }
        n => {
            if n.starts_with("blk_") {
                h.add_delivered_irqs();
            }
            h.push(format!(
                "{}: unbound work follows the workqueue cpumasks; per-CPU work is queued by code running on, or targeting, that CPU",
                visible(n)
            ));
        }
    }
    h.add("workqueue:cpumask");
    h.add_prefix("workqueue:");
}

/// `comm` as shown (escaped); `pid` None for a program's folded tasks.
pub(super) fn task(h: &mut Hints, comm: &str, pid: Option<u32>) {
    let base = comm.split('/').next().unwrap_or(comm);
    match base {
        "swapper" => {
            if h.probe {
                h.push(format!("{comm} went idle: the workload blocked, or was parked by RT throttling or the fair server"));
                h.add("rt_throttling");
                h.add("fair_server");
            } else {
                h.push(format!("{comm} went idle: the watched thread slept"));
            }
        }
        "kworker" => {
            let unbound = comm.starts_with("kworker/u") || comm.starts_with("kworker/R-");
            if unbound {
                h.add("workqueue:cpumask");
                h.add_prefix("workqueue:");
            } else {
                h.push("per-CPU kworker: the work function names the cause (the work view of jitterwatch)");
                h.add("stat_interval");
                h.add("workqueue:cpumask");
            }
        }
        "ksoftirqd" => {
            h.push("softirqs overflowed to ksoftirqd: usually network or block IRQs delivered to that CPU");
            h.add_delivered_irqs();
        }
        "migration" => {
            h.push("the stopper thread: softlockup watchdog checks, task migration (load balancing), stop_machine");
            h.add("watchdog");
            h.add("isolcpus");
        }
        "rcuc" | "rcu_preempt" | "rcu_sched" | "rcuop" | "rcuog" | "rcuos" => {
            h.add("rcu_nocbs");
            h.add("tasks:kthreads");
        }
        "cpuhp" => h.push("CPU hotplug thread: a CPU went on- or offline"),
        "khugepaged" => {
            h.add("thp");
        }
        "ksmd" => {
            h.add("ksm");
        }
        "irqbalance" => {
            h.add("irqbalance");
        }
        _ => {}
    }
    // kworkers cannot be re-pinned (PF_NO_SETAFFINITY); per-CPU threads must stay.
    let percpu = ["kworker", "ksoftirqd", "migration", "cpuhp", "rcuc", "swapper", "idle_inject"].contains(&base);
    if let (Some(pid), false) = (pid, percpu) {
        let label = format!("{comm}[{pid}]");
        if h.pinned(pid) {
            h.push(format!("{label} is pinned to the watched CPUs: part of your workload, or pin it elsewhere"));
        } else if pid != 0 {
            if let Some(hk) = h.hk() {
                h.push(format!("{label} may run on {}: taskset -pc {hk} {pid}", h.cpus()));
            }
            h.add("isolcpus");
        }
    }
}
