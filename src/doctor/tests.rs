use super::*;

#[test]
fn masks_parse() {
    assert_eq!(parse_mask("3"), Some(vec![0, 1]));
    assert_eq!(parse_mask("00000000,00000002"), Some(vec![1]));
    assert_eq!(parse_mask("2,00000000"), Some(vec![33]));
    assert_eq!(parse_mask("zz"), None);
    for cpus in [vec![0usize], vec![1, 5, 40], vec![63]] {
        assert_eq!(parse_mask(&cpulist::to_mask(&cpus, 64)), Some(cpus));
    }
}

#[test]
fn text_and_json_output() {
    let fx = fixture::Fx::untuned();
    let mut out = Vec::new();
    assert_eq!(run(fx.path(), &[1], false, &mut out).unwrap(), 1);
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("jitterwatch doctor: isolation audit of CPU 1\n"), "{text}");
    assert!(text.contains("\nboot\n  [WARN] CPU 1 not isolated"), "{text}");
    assert!(text.contains("\n         why: ") && text.contains("\n         evidence: ") && text.contains("\n         fix: "));
    assert!(text.contains("  [ OK ] ") && text.contains("  [INFO] "));
    let r = audit(fx.path(), &[1]);
    let last = text.lines().last().unwrap();
    assert_eq!(last, format!("{} WARN, {} INFO, {} OK", r.count(Status::Warn), r.count(Status::Info), r.count(Status::Ok)));

    let mut out = Vec::new();
    assert_eq!(run(fx.path(), &[1], true, &mut out).unwrap(), 1);
    let back: Report = serde_json::from_slice(&out).unwrap();
    assert_eq!(back, r);
    assert!(String::from_utf8(out).unwrap().contains("\"status\": \"Warn\""));

    // A clean machine exits 0.
    let fx = fixture::Fx::tuned();
    assert_eq!(
        run(fx.path(), &[3], false, &mut Vec::new()).unwrap(),
        0,
        "{:#?}",
        audit(fx.path(), &[3]).findings.iter().filter(|f| f.status == Status::Warn).collect::<Vec<_>>()
    );
}

#[test]
fn run_on_empty_root_does_not_panic() {
    let d = tempfile::tempdir().unwrap();
    let mut out = Vec::new();
    let code = run(d.path(), &[1], false, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("could not read"), "{text}");
    // With no command line the boot checks see no isolation: WARN, so 1;
    // the housekeeping check, with no CPU list, says it is unknown.
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("[INFO] online CPUs unknown"), "{text}");
    let r = audit(d.path(), &[1]);
    assert!(r.unreadable.iter().any(|u| u.starts_with("/proc/cmdline")));
}

#[test]
fn offline_cpu_is_flagged() {
    let fx = fixture::Fx::untuned();
    let r = audit(fx.path(), &[5]);
    assert_eq!(r.find("cpus").unwrap().status, Status::Warn);
}

/// Passive mode has no probe: no hint about RT throttling or the fair
/// server parking one (they came with every idle cause of a passive run).
#[test]
fn no_probe_only_hint_in_passive_mode() {
    let fx = fixture::Fx::untuned();
    fx.write("proc/sys/kernel/sched_rt_runtime_us", "950000\n").write("proc/sys/kernel/sched_rt_period_us", "1000000\n");
    let r = audit(fx.path(), &[1]);
    assert_eq!(r.find("rt_throttling").unwrap().status, Status::Warn);
    let idle = crate::cause::Cause::Idle(crate::cause::Symbol::from("haltpoll"));
    let probe = hints_for(&r, &idle, true);
    assert!(probe.iter().any(|h| h.contains("RT throttling")), "{probe:?}");
    let passive = hints_for(&r, &idle, false);
    assert!(!passive.iter().any(|h| h.contains("RT throttling") || h.contains("fair server")), "{passive:?}");
}

/// A task on a watched nohz_full CPU with a timer on a CPU clock keeps
/// the tick (POSIX_TIMER): WARN with the fix; none is OK; a CPU that is
/// not nohz_full is not checked.
#[test]
fn posix_cpu_timers_on_a_nohz_full_cpu_are_found() {
    let fx = fixture::Fx::tuned();
    fx.write("proc/500/timers", "ID: 0\nsignal: 14/0000000000000000\nnotify: signal/pid.500\nClockID: 1\n");
    let r = audit(fx.path(), &[3]);
    let f = r.find("posix_cpu_timers").expect("checked");
    assert_eq!(f.status, Status::Ok, "{f:?}");
    let fx = fixture::Fx::tuned_with_cpu_timer();
    let r = audit(fx.path(), &[3]);
    let f = r.find("posix_cpu_timers").unwrap();
    assert_eq!(f.status, Status::Warn, "{f:?}");
    assert_eq!(f.evidence, ["spinner[500]: 1 CPU-clock timer(s) in /proc/500/timers"]);
    assert!(f.fix.as_deref().unwrap().contains("CLOCK_MONOTONIC"), "{f:?}");
    // Not nohz_full: its tick runs anyway, nothing to say.
    assert!(audit(fixture::Fx::untuned().path(), &[1]).find("posix_cpu_timers").is_none());
}

/// Processes holding perf events are named (INFO: the kernel does not say
/// which CPUs an event samples), only where a watched CPU is nohz_full.
#[test]
fn perf_event_holders_are_named() {
    let fx = fixture::Fx::tuned();
    assert!(audit(fx.path(), &[3]).find("perf_events").is_none(), "none open");
    std::fs::create_dir_all(fx.path().join("proc/500/fd")).unwrap();
    std::os::unix::fs::symlink("anon_inode:[perf_event]", fx.path().join("proc/500/fd/3")).unwrap();
    std::os::unix::fs::symlink("anon_inode:[perf_event]", fx.path().join("proc/500/fd/4")).unwrap();
    std::os::unix::fs::symlink("/dev/null", fx.path().join("proc/500/fd/5")).unwrap();
    let r = audit(fx.path(), &[3]);
    let f = r.find("perf_events").expect("named");
    assert_eq!((f.status, f.evidence.clone()), (Status::Info, vec!["spinner[500]: 2 perf event(s)".to_string()]));
    assert!(f.fix.as_deref().unwrap().contains("perf record -c"), "{f:?}");
}
