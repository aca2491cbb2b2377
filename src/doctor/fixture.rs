//! Fake /proc and /sys trees for the unit tests.

use std::path::Path;

use tempfile::TempDir;

pub struct Fx {
    dir: TempDir,
}

const KTHREAD: u64 = 0x0020_0000;
const NOSET: u64 = 0x0400_0000;

impl Fx {
    pub fn empty() -> Self {
        Fx { dir: tempfile::tempdir().unwrap() }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, rel: &str, content: &str) -> &Self {
        let p = self.dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
        self
    }

    /// One single-threaded task with a stat and status as the kernel writes them.
    pub fn task(&self, pid: u32, comm: &str, flags: u64, allowed: &str, cpu: usize) -> &Self {
        let mut f = vec!["0".to_string(); 50];
        f[0] = "S".into();
        f[1] = "1".into();
        f[6] = flags.to_string();
        f[36] = cpu.to_string();
        let stat = format!("{pid} ({comm}) {}\n", f.join(" "));
        let status = format!("Name:\t{comm}\nTgid:\t{pid}\nPid:\t{pid}\nCpus_allowed_list:\t{allowed}\n");
        for base in [format!("proc/{pid}"), format!("proc/{pid}/task/{pid}")] {
            self.write(&format!("{base}/stat"), &stat);
            self.write(&format!("{base}/status"), &status);
            self.write(&format!("{base}/comm"), &format!("{comm}\n"));
        }
        self
    }

    /// A 4-CPU machine tuned for watching CPU 3: every check OK.
    pub fn tuned() -> Self {
        let fx = Fx::empty();
        fx.write("proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1 isolcpus=domain,managed_irq,3 nohz_full=3 rcu_nocbs=3 rcu_nocb_poll irqaffinity=0-2 tsc=reliable intel_idle.max_cstate=1\n")
            .write("sys/devices/system/cpu/online", "0-3\n")
            .write("sys/devices/system/cpu/isolated", "3\n")
            .write("sys/devices/system/cpu/nohz_full", "3\n")
            .write("proc/sys/kernel/watchdog", "1\n")
            .write("proc/sys/kernel/nmi_watchdog", "0\n")
            .write("proc/sys/kernel/watchdog_cpumask", "0-2\n")
            .write("sys/devices/system/clocksource/clocksource0/current_clocksource", "tsc\n")
            .write("sys/devices/system/clocksource/clocksource0/available_clocksource", "tsc hpet acpi_pm \n")
            .write("proc/irq/default_smp_affinity", "7\n")
            .write("proc/irq/24/smp_affinity_list", "0-2\n")
            .write("proc/irq/24/effective_affinity_list", "0\n")
            .write("proc/irq/36/smp_affinity_list", "1\n")
            .write("proc/irq/36/effective_affinity_list", "1\n")
            .write(
                "proc/interrupts",
                "           CPU0       CPU1       CPU2       CPU3       \n 24:          1          0          0          0  IO-APIC   5-edge      ACPI:Ged\n 36:          0      40610          0          0  PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\nLOC:      20097      23005        100         12   Local timer interrupts\nRES:          1          2          3          0   Rescheduling interrupts\nERR:          0\n",
            )
            .write("sys/devices/virtual/workqueue/cpumask", "7\n")
            .write("sys/devices/virtual/workqueue/cpumask_requested", "f\n")
            .write("sys/devices/virtual/workqueue/writeback/cpumask", "7\n")
            .write("sys/devices/virtual/workqueue/writeback/per_cpu", "0\n")
            .write("sys/devices/virtual/workqueue/power/control", "auto\n")
            .write("proc/sys/kernel/timer_migration", "1\n")
            .write("proc/sys/vm/stat_interval", "10\n")
            .write("proc/sys/kernel/sched_rt_runtime_us", "-1\n")
            .write("proc/sys/kernel/sched_rt_period_us", "1000000\n")
            .write("sys/kernel/debug/sched/fair_server/cpu3/runtime", "0\n")
            .write("sys/devices/system/cpu/cpu3/cpufreq/scaling_governor", "performance\n")
            .write("sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n")
            .write("sys/kernel/mm/ksm/run", "0\n")
            .write("proc/sys/kernel/numa_balancing", "0\n")
            .write("proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu vme tsc constant_tsc nonstop_tsc\n\nprocessor\t: 1\nflags\t\t: fpu vme tsc\n")
            .write("proc/stat", "cpu  10 0 10 100 0 0 0 0 0 0\ncpu0 5 0 5 50 0 0 0 0 0 0\ncpu3 5 0 5 50 0 0 0 0 0 0\nintr 0\n");
        for (i, (name, lat, dis)) in [("POLL", 0, 0), ("C1", 2, 0), ("C6", 133, 1)].iter().enumerate() {
            let b = format!("sys/devices/system/cpu/cpu3/cpuidle/state{i}");
            fx.write(&format!("{b}/name"), &format!("{name}\n"))
                .write(&format!("{b}/latency"), &format!("{lat}\n"))
                .write(&format!("{b}/disable"), &format!("{dis}\n"));
        }
        fx.task(1, "init", 0, "0-2", 0)
            .task(2, "kthreadd", KTHREAD, "0-2", 1)
            .task(30, "ksoftirqd/3", KTHREAD, "3", 3)
            .task(32, "rcuop/3", KTHREAD, "0-2", 0)
            .task(31, "kworker/3:0-mm_percpu_wq", KTHREAD | NOSET, "3", 3)
            .task(500, "spinner", 0, "3", 3);
        fx
    }

    /// The tuned machine whose task on CPU 3 has a timer on a CPU clock
    /// (POSIX_TIMER keeps the tick).
    pub fn tuned_with_cpu_timer() -> Self {
        let fx = Self::tuned();
        fx.write("proc/500/timers", "ID: 0\nsignal: 27/0000000000000000\nnotify: signal/pid.500\nClockID: 2\n");
        fx
    }

    /// A 2-CPU VM like the development machine, watching CPU 1: mostly WARN.
    pub fn untuned() -> Self {
        let fx = Fx::empty();
        fx.write("proc/cmdline", "console=ttyS0 quiet reboot=k panic=1 psi=1 rdinit=/process_api -- --firecracker-init\n")
            .write("sys/devices/system/cpu/online", "0-1\n")
            .write("sys/devices/system/cpu/isolated", "\n")
            .write("proc/sys/kernel/watchdog", "1\n")
            .write("proc/sys/kernel/nmi_watchdog", "0\n")
            .write("proc/sys/kernel/watchdog_cpumask", "0-1\n")
            .write("sys/devices/system/clocksource/clocksource0/current_clocksource", "tsc\n")
            .write("proc/irq/default_smp_affinity", "3\n")
            .write("proc/irq/24/smp_affinity_list", "0-1\n")
            .write("proc/irq/24/effective_affinity_list", "0\n")
            .write("proc/irq/36/smp_affinity_list", "0-1\n")
            .write("proc/irq/36/effective_affinity_list", "1\n")
            .write("sys/kernel/irq/36/actions", "virtio1-req.0\n")
            .write(
                "proc/interrupts",
                "           CPU0       CPU1       \n 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n 36:          0      40610 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\nNMI:          0          0   Non-maskable interrupts\nLOC:      20097      23005   Local timer interrupts\nERR:          0\n",
            )
            .write("sys/devices/virtual/workqueue/cpumask", "3\n")
            .write("sys/devices/virtual/workqueue/cpumask_isolated", "0\n")
            .write("sys/devices/virtual/workqueue/writeback/cpumask", "3\n")
            .write("sys/devices/virtual/workqueue/blkcg_punt_bio/cpumask", "3\n")
            .write("sys/devices/virtual/workqueue/power/control", "auto\n")
            .write("proc/sys/kernel/timer_migration", "1\n")
            .write("proc/sys/vm/stat_interval", "1\n")
            .write("proc/sys/kernel/sched_rt_runtime_us", "950000\n")
            .write("proc/sys/kernel/sched_rt_period_us", "1000000\n")
            .write("sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never\n")
            .write("sys/kernel/mm/ksm/run", "1\n")
            .write("proc/sys/kernel/numa_balancing", "1\n")
            .write("proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu vme tsc hypervisor avx2\n")
            .write("proc/stat", "cpu  8955 0 1798 38450 276 0 31 11 0 0\ncpu0 3823 0 746 20131 41 0 5 5 0 0\ncpu1 5131 0 1051 18319 234 0 25 60 0 0\n");
        fx.task(1, "process_api", 0, "0-1", 1)
            .task(2, "kthreadd", KTHREAD, "0-1", 0)
            .task(20, "ksoftirqd/1", KTHREAD, "1", 1)
            .task(41, "kworker/1:0", KTHREAD | NOSET, "1", 1)
            .task(77, "kworker/u8:0", KTHREAD | NOSET, "0-1", 1)
            .task(300, "irqbalance", 0, "0-1", 0)
            .task(666, "evil\x1b[2J\x07", 0, "0-1", 1);
        fx
    }
}

/// The hints for a cause written as the tests know it (`task`,
/// `kworker/1:0[41]`): a fixture helper, never used on real names.
pub(crate) fn test_hints(report: &super::Report, kind: &str, name: &str) -> Vec<String> {
    use crate::cause::{comm, Cause, Symbol};
    use crate::record::Vector;
    let cause = match kind {
        "task" => {
            let (c, pid) = name.strip_suffix(']').and_then(|n| n.rsplit_once('[')).expect("comm[pid]");
            Cause::Task { comm: comm(c.as_bytes()), pid: pid.parse().ok() }
        }
        "irq" => {
            let (n, action) = name.split_once(':').unwrap_or((name, ""));
            Cause::Irq { irq: n.parse().expect("irq number"), name: std::sync::Arc::from(action.as_bytes()) }
        }
        "softirq" => Cause::Softirq((0..10).find(|&v| crate::names::softirq(v) == name).expect("softirq name")),
        "work" => Cause::Work(Symbol::from(name)),
        "timer" => Cause::Timer(Symbol::from(name)),
        "ipi" if name == "reschedule" => Cause::Vector(Vector::Reschedule),
        "ipi" => Cause::Csd(Symbol::from(name)),
        "nmi" => Cause::Nmi(Symbol::from(name)),
        "idle" => Cause::Idle(Symbol::from(name)),
        _ => Cause::Unexplained,
    };
    super::hints_for(report, &cause, true)
}
