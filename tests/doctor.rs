//! `jitterwatch doctor` on this machine's real /proc and /sys: what the
//! audit must report is computed here from the same files, independently.

use std::fs;
use std::process::Command;

use jitterwatch::cpulist;

fn read(path: &str) -> String {
    fs::read_to_string(path).unwrap_or_default()
}

fn last_online_cpu() -> usize {
    let online = read("/sys/devices/system/cpu/online");
    *cpulist::parse(online.trim()).expect("online CPUs").last().unwrap()
}

/// CPUs of a sysfs hex mask (`3`, `ff,ffffffff`).
fn mask_cpus(s: &str) -> Vec<usize> {
    let mut cpus = Vec::new();
    for (i, group) in s.trim().rsplit(',').enumerate() {
        let w = u32::from_str_radix(group.trim(), 16).expect("hex mask");
        cpus.extend((0..32).filter(|b| w & (1 << b) != 0).map(|b| i * 32 + b));
    }
    cpus
}

fn list_file(path: &str) -> Vec<usize> {
    let s = read(path);
    let s = s.trim();
    if s.is_empty() || s == "(null)" {
        Vec::new()
    } else {
        cpulist::parse(s).unwrap_or_default()
    }
}

/// IRQ numbers whose smp_affinity_list includes `cpu`.
fn irqs_covering(cpu: usize) -> Vec<u32> {
    let mut v: Vec<u32> = fs::read_dir("/proc/irq")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|n| list_file(&format!("/proc/irq/{n}/smp_affinity_list")).contains(&cpu))
        .collect();
    v.sort_unstable();
    v
}

/// True when /proc/interrupts lists the IRQ (it has a handler).
fn has_handler(n: u32) -> bool {
    read("/proc/interrupts").lines().any(|l| l.split(':').next().map(str::trim) == Some(n.to_string().as_str()))
}

fn boot_isolated(cpu: usize) -> bool {
    let cmdline = read("/proc/cmdline");
    let kernel_part = cmdline.split(" -- ").next().unwrap_or("");
    let has_isolcpus = kernel_part.split_whitespace().any(|w| w.starts_with("isolcpus="));
    has_isolcpus
        || list_file("/sys/devices/system/cpu/isolated").contains(&cpu)
        || list_file("/sys/fs/cgroup/cpuset.cpus.isolated").contains(&cpu)
}

fn rt_throttled() -> bool {
    read("/proc/sys/kernel/sched_rt_runtime_us").trim() != "-1"
}

fn doctor(cpu: usize, json: bool) -> (Option<i32>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_jitterwatch"));
    cmd.args(["doctor", "--cpus", &cpu.to_string()]);
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().expect("run jitterwatch doctor");
    let stdout = String::from_utf8(out.stdout).expect("utf-8 output");
    assert!(!stdout.contains('\x1b'), "raw escape in output");
    (out.status.code(), stdout)
}

fn warn_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.trim_start().starts_with("[WARN]")).collect()
}

#[test]
fn doctor_text_names_what_this_machine_lacks() {
    let cpu = last_online_cpu();
    let (code, out) = doctor(cpu, false);
    let warns = warn_lines(&out);
    assert!(out.starts_with("jitterwatch doctor:"), "{out}");
    assert!(out.contains(&format!("CPU {cpu}")), "{out}");
    assert!(out.lines().last().unwrap_or("").contains("WARN"), "no summary line:\n{out}");

    let mut expect_warn = false;
    if !boot_isolated(cpu) {
        expect_warn = true;
        assert!(warns.iter().any(|l| l.contains("isolcpus")), "no WARN naming isolcpus:\n{out}");
        assert!(out.contains(&format!("isolcpus=domain,managed_irq,{cpu}")), "no isolcpus fix:\n{out}");
    }
    let irqs = irqs_covering(cpu);
    for n in &irqs {
        assert!(out.contains(&format!("IRQ {n} (")), "IRQ {n} covers CPU {cpu} but is not named:\n{out}");
    }
    if irqs.iter().any(|n| has_handler(*n)) {
        expect_warn = true;
    }
    if mask_cpus(&read("/sys/devices/virtual/workqueue/cpumask")).contains(&cpu) {
        expect_warn = true;
        assert!(warns.iter().any(|l| l.contains("workqueue cpumask")), "no WARN for the workqueue cpumask:\n{out}");
        assert!(out.contains("> /sys/devices/virtual/workqueue/cpumask"), "no workqueue cpumask fix:\n{out}");
    }
    if rt_throttled() {
        expect_warn = true;
        assert!(warns.iter().any(|l| l.contains("sched_rt_runtime_us")), "no WARN for RT throttling:\n{out}");
        assert!(out.contains("sysctl -w kernel.sched_rt_runtime_us=-1"), "no RT throttling fix:\n{out}");
    }
    if expect_warn {
        assert_eq!(code, Some(1), "exit code with WARN findings:\n{out}");
    } else {
        assert!(matches!(code, Some(0 | 1)), "{code:?}");
    }
}

#[test]
fn doctor_json_parses_and_has_findings() {
    let cpu = last_online_cpu();
    let (code, out) = doctor(cpu, true);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("bad JSON ({e}):\n{out}"));
    assert_eq!(v["cpus"], serde_json::json!([cpu]));
    assert!(v["unreadable"].is_array());
    let findings = v["findings"].as_array().expect("findings array");
    assert!(!findings.is_empty());
    for f in findings {
        for field in ["check", "status", "title", "why", "evidence", "fix", "key"] {
            assert!(f.get(field).is_some(), "finding without {field}: {f}");
        }
    }
    let status = |key: &str| findings.iter().find(|f| f["key"] == key).map(|f| f["status"].as_str().unwrap_or("").to_string());
    let mut expect_warn = false;
    if !boot_isolated(cpu) {
        expect_warn = true;
        assert_eq!(status("isolcpus").as_deref(), Some("Warn"));
    }
    if rt_throttled() {
        expect_warn = true;
        assert_eq!(status("rt_throttling").as_deref(), Some("Warn"));
    }
    for n in irqs_covering(cpu) {
        expect_warn |= has_handler(n);
        assert!(status(&format!("irq:{n}")).is_some(), "no irq:{n} finding");
    }
    if expect_warn {
        assert_eq!(code, Some(1));
    }
}
