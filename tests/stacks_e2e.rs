//! Root, end to end: `--stacks-above 1ms` during a SCHED_FIFO hog's 2 ms
//! bursts on the last CPU. The rows the hog tops carry its kernel stack as
//! it left the CPU (it goes to sleep: the scheduler, inside nanosleep), in
//! the CSV, the summary's top causes and the stall's trace.

mod common;
use common::*;
use std::time::Duration;

#[test]
fn a_fifo_hog_s_stalls_show_its_kernel_stack() {
    if require_root_btf("a_fifo_hog_s_stalls_show_its_kernel_stack") {
        hog_with_stacks(&[]);
    }
}

/// The same through the per-CPU software switch event (--switch-hook
/// perf-event): its own frames are left out too.
#[test]
fn the_perf_event_hook_takes_the_same_stacks() {
    if require_root_btf("the_perf_event_hook_takes_the_same_stacks") {
        hog_with_stacks(&["--switch-hook", "perf-event"]);
    }
}

fn hog_with_stacks(extra: &[&str]) {
    let _g = lock();
    let cpu = last_cpu();
    let traces = tempfile::tempdir().unwrap();
    let name = random_name("jwstk");
    let c = cpu.to_string();
    let mut args = vec![
        "--cpus",
        c.as_str(),
        "--no-tui",
        "--json",
        "--duration",
        "3s",
        "--stacks-above",
        "1ms",
        "--trace-dir",
        traces.path().to_str().unwrap(),
        "--trace-above",
        "1ms",
    ];
    args.extend_from_slice(extra);
    let (child, _dir, csv) = watch_csv(&args, &[]);
    let (tid, bursts) = fifo_bursts(cpu, name.clone(), Duration::from_millis(100), 5, 2_000_000).join().unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let me = format!("{name}[{tid}]");
    // The scheduler's entry, inside the sleep the hog goes to.
    let where_it_sleeps = |frames: &[String]| {
        frames.iter().any(|f| f.starts_with("__schedule") || f.starts_with("schedule")) && frames.iter().any(|f| f.contains("nanosleep"))
    };

    let rows = read_csv(&csv);
    // By its tid: the first burst may run under the thread's old name.
    let its = format!("[{tid}]");
    let hog_rows: Vec<&Row> = rows.iter().filter(|r| r.causes.first().is_some_and(|c| c.0 == "task" && c.1.ends_with(&its))).collect();
    let with_stack: Vec<&&Row> = hog_rows.iter().filter(|r| !r.stack.is_empty()).collect();
    eprintln!(
        "{} rows topped by {me} ({} bursts), {} with a stack; one: {:?}",
        hog_rows.len(),
        bursts.len(),
        with_stack.len(),
        with_stack.first().map(|r| &r.stack)
    );
    assert!(with_stack.len() * 10 >= bursts.len() * 8, "{} of {} bursts have a stack", with_stack.len(), bursts.len());
    for r in &with_stack {
        assert!(r.gap_ns >= 1_000_000, "a stack on a stall under --stacks-above: {:?}", r.stack);
        assert!(where_it_sleeps(&r.stack), "not where the hog sleeps: {:?}", r.stack);
    }
    // The walk (1.8 µs in BENCHMARKS figure 3) is our time, in the switch
    // record's own: charged to self, never to the kernel or the hog.
    let own: Vec<u64> = with_stack.iter().map(|r| r.causes.iter().filter(|c| c.0 == "self").map(|c| c.2).sum()).collect();
    eprintln!("self in the rows with a stack: {own:?} ns");
    assert!(own.iter().filter(|&&ns| ns >= 1_000).count() * 2 >= own.len(), "the stack walk is not in self: {own:?}");
    // Other rows' stacks are other long-running tasks' (the kernel's own
    // threads), never on a row under the threshold.
    for r in rows.iter().filter(|r| !r.stack.is_empty()) {
        eprintln!("{} ns, {:?}: {:?}", r.gap_ns, r.causes.first(), r.stack);
        assert!(r.gap_ns >= 1_000_000, "a stack on a stall under --stacks-above");
    }

    // The summary: the hog's top-cause row with its stack.
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    let hook = if extra.contains(&"perf-event") { "per-CPU perf event" } else { "tp_btf/sched_switch" };
    assert_eq!(v["switch_hook"].as_str().map(|h| h.starts_with(hook)), Some(true), "{}", v["switch_hook"]);
    let top = v["cpus"][0]["top_causes"].as_array().unwrap().iter().find(|c| c["kind"] == "task" && c["name"] == me.as_str()).cloned();
    let top = top.unwrap_or_else(|| panic!("{me} not among the top causes: {}", v["cpus"][0]["top_causes"]));
    let frames: Vec<String> =
        top["stack"].as_array().expect("a stack in the summary").iter().map(|f| f.as_str().unwrap().to_string()).collect();
    assert!(where_it_sleeps(&frames), "{frames:?}");

    // A stall's trace: the stack, whose it is, innermost first.
    let mut traced = 0;
    for e in std::fs::read_dir(traces.path()).unwrap() {
        let slices = read_trace(&e.unwrap().path());
        for s in slices.iter().filter(|s| s.track == format!("cpu {cpu} probe")) {
            let (of, frames) = stall_stack(s);
            if of == format!("task:{me}") {
                assert!(where_it_sleeps(&frames), "{frames:?}");
                traced += 1;
            }
        }
    }
    assert!(traced >= 1, "no trace has {me}'s stack");
}

/// kptr_restrict=2 (root reads /proc/kallsyms as zeros): the stacks are
/// kept, every frame an address, as the docs promise; before, all 82 rows
/// the hog topped had an empty stack. The setting is restored however the
/// test ends.
#[test]
fn with_kernel_addresses_hidden_the_stacks_are_addresses() {
    if !require_root_btf("with_kernel_addresses_hidden_the_stacks_are_addresses") {
        return;
    }
    struct Restore(String);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = std::fs::write("/proc/sys/kernel/kptr_restrict", &self.0);
        }
    }
    let _g = lock();
    let cpu = last_cpu();
    let was = std::fs::read_to_string("/proc/sys/kernel/kptr_restrict").unwrap();
    let _restore = Restore(was);
    std::fs::write("/proc/sys/kernel/kptr_restrict", "2\n").unwrap();
    let name = random_name("jwkpt");
    let c = cpu.to_string();
    let (child, _dir, csv) = watch_csv(&["--cpus", &c, "--no-tui", "--json", "--duration", "2s", "--stacks-above", "1ms"], &[]);
    let (tid, bursts) = fifo_bursts(cpu, name, Duration::from_millis(100), 5, 2_000_000).join().unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("kernel functions show as addresses"), "{err}");
    let its = format!("[{tid}]");
    let rows = read_csv(&csv);
    let hog_rows: Vec<&Row> = rows.iter().filter(|r| r.causes.first().is_some_and(|c| c.0 == "task" && c.1.ends_with(&its))).collect();
    let with_stack = hog_rows.iter().filter(|r| !r.stack.is_empty()).count();
    eprintln!(
        "{} rows topped by the hog ({} bursts), {with_stack} with a stack; one: {:?}",
        hog_rows.len(),
        bursts.len(),
        hog_rows.first().map(|r| &r.stack)
    );
    assert!(with_stack * 10 >= bursts.len() * 8, "{with_stack} of {} bursts have a stack", bursts.len());
    for r in hog_rows.iter().filter(|r| !r.stack.is_empty()) {
        assert!(r.stack.iter().all(|f| f.starts_with("0x")), "a name where none resolves: {:?}", r.stack);
        assert!(r.stack.len() >= 3, "the walk cut short: {:?}", r.stack);
    }
}
