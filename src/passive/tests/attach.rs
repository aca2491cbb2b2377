//! Passive mode against a fixture /proc: the threads a command line names,
//! and the ones already running when tracing begins.

use std::fs;

use super::*;

/// A fixture /proc: (pid, tid, comm, flags, affinity).
fn proc_root(tasks: &[(u32, u32, &[u8], u64, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for &(pid, tid, comm, flags, cpus) in tasks {
        let mut stat = format!("{tid} (").into_bytes();
        stat.extend_from_slice(comm);
        stat.extend_from_slice(format!(") S 1 1 1 0 -1 {flags} 0 0").as_bytes());
        for dir in [format!("proc/{pid}/task/{tid}"), format!("proc/{tid}")] {
            let p = d.path().join(&dir);
            fs::create_dir_all(&p).unwrap();
            fs::write(p.join("stat"), &stat).unwrap();
            fs::write(p.join("status"), format!("Name:\tx\nTgid:\t{pid}\nCpus_allowed_list:\t{cpus}\n")).unwrap();
        }
        if pid == tid {
            fs::create_dir_all(d.path().join(format!("proc/{pid}/task"))).unwrap();
        }
    }
    d
}

#[test]
fn resolve_finds_threads_their_cpus_and_refuses_what_it_cannot_watch() {
    let r = proc_root(&[(100, 100, b"app", 0x400000, "2-3"), (100, 101, b"a) b\xff", 0x400040, "3"), (2, 2, b"kthreadd", 0x208040, "0-3")]);
    let f = |tgids: Vec<u32>, tids: Vec<u32>, comm: Option<&[u8]>| Filter { tgids, tids, comm: comm.map(<[u8]>::to_vec) };
    let t = resolve(r.path(), f(vec![100], vec![], None), None, &[0, 1, 2, 3]).unwrap();
    assert_eq!(t.cpus, vec![2, 3]);
    assert_eq!(t.threads, vec![(100, "app".to_string()), (101, "a) b\\xff".to_string())]);
    let t = resolve(r.path(), f(vec![], vec![], Some(b"a) b\xff")), None, &[0, 1, 2, 3]).unwrap();
    assert_eq!((t.cpus.clone(), t.threads.len()), (vec![3], 1));
    // With --cpus, a thread that may run elsewhere is said once.
    let t = resolve(r.path(), f(vec![100], vec![], None), Some(&[3]), &[0, 1, 2, 3]).unwrap();
    assert_eq!(t.cpus, vec![3]);
    assert!(t.notes.len() == 1 && t.notes[0].contains("app[100] may also run on CPUs 2"), "{:?}", t.notes);
    let e = |f: Filter| resolve(r.path(), f, None, &[0, 1, 2, 3]).unwrap_err().to_string();
    assert!(e(f(vec![999], vec![], None)).contains("--pid 999: no such process"));
    // Kernel threads are watched like others, by --tid, --pid or --comm alike.
    let k = proc_root(&[(40, 40, b"ksoftirqd/3", 0x208040, "3")]);
    for filter in [f(vec![], vec![40], None), f(vec![40], vec![], None), f(vec![], vec![], Some(b"ksoftirqd/3"))] {
        let t = resolve(k.path(), filter, None, &[0, 1, 2, 3]).unwrap();
        assert_eq!((t.cpus.clone(), t.threads.clone(), t.found.clone()), (vec![3], vec![(40, "ksoftirqd/3".to_string())], vec![(40, 40)]));
    }
    assert!(e(f(vec![], vec![], Some(b"nope"))).contains("no thread has that name"));
    // Unpinned threads (or both ends of a load, pinned apart) take every
    // CPU: watched, and said, since jitterwatch then shares them.
    let r = proc_root(&[(300, 300, b"free", 0, "0-3")]);
    let t = resolve(r.path(), f(vec![300], vec![], None), None, &[0, 1, 2, 3]).unwrap();
    assert_eq!(t.cpus, vec![0, 1, 2, 3]);
    assert!(t.notes.iter().any(|n| n.contains("watching every online CPU (0-3)")), "{:?}", t.notes);
}

/// A thread busy on an isolated CPU before tracing began never switches:
/// seeded from /proc, its interruptions are seen from the first one.
#[test]
fn a_thread_already_running_is_watched_from_the_seed() {
    let seed = Seed { tid: APP, tgid: APP, comm: crate::cause::comm(b"app"), cpu: CPU };
    let evs = [irq(1_000 * US, true), irq(1_020 * US, false), irq(5_000 * US, true), irq(5_030 * US, false)];
    // Without the seed nothing is known to run there: blind.
    let (blind, t) = run(&evs, US);
    assert!(blind.is_empty() && t.threads().count() == 0, "{blind:?}");
    let mut tracker = Tracker::new(Filter { tgids: vec![APP], ..Filter::default() }, &[2, 3], US);
    tracker.seed(std::slice::from_ref(&seed), 500 * US);
    let mut out = Vec::new();
    for e in &evs {
        tracker.on_event(e, &mut |iv| out.push(iv));
    }
    tracker.flush(10_000 * US, &mut |iv| out.push(iv));
    let got: Vec<(u64, u64, Source)> = out.iter().map(|i| (i.t0, i.t1, i.source)).collect();
    assert_eq!(got, [(1_000 * US, 1_020 * US, Source::Interrupted), (5_000 * US, 5_030 * US, Source::Interrupted)]);
    let info = tracker.threads().next().expect("the seeded thread");
    assert_eq!((info.found, info.last_cpu), (Found::RunningAtAttach, Some(CPU)));
    assert_eq!(tracker.books_until(APP, 6_000 * US).runnable_ns(), 5_500 * US);
    // A switch already seen on that CPU says what runs there: the seed
    // (read later, from /proc) does not override it.
    let mut tracker = Tracker::new(Filter { tgids: vec![APP], ..Filter::default() }, &[2, 3], US);
    tracker.on_event(&switch(100 * US, app(), task(77, 77, "other"), 1), &mut |_| {});
    tracker.seed(std::slice::from_ref(&seed), 500 * US);
    assert_eq!(tracker.threads().next().map(|i| i.found), Some(Found::Switch));
    // A seed on a CPU not watched is ignored.
    let mut tracker = Tracker::new(Filter { tgids: vec![APP], ..Filter::default() }, &[2], US);
    tracker.seed(&[seed], 500 * US);
    assert_eq!(tracker.threads().count(), 0);
}

/// /proc is read after tracing began, while the events before the read are
/// still in the ring: a sleeping thread caught running by the read is not
/// taken to have run from then when the events say it slept and woke, and
/// its books begin where the events do. A seed on a CPU with no event
/// after the read still takes once the stream has passed it.
#[test]
fn a_seed_waits_for_the_events_before_it() {
    let seed = Seed { tid: APP, tgid: APP, comm: crate::cause::comm(b"app"), cpu: CPU };
    let idle = task(0, 0, "swapper/3");
    let mut tracker = Tracker::new(Filter { tgids: vec![APP], ..Filter::default() }, &[2, 3], US);
    tracker.seed(std::slice::from_ref(&seed), 500 * US);
    for e in [
        switch(300 * US, app(), idle, 1),
        ev(350 * US, Payload::Wakeup { task: app(), target_cpu: CPU, waker_cpu: 2 }),
        switch(400 * US, idle, app(), 1),
        switch(700 * US, app(), idle, 1),
    ] {
        tracker.on_event(&e, &mut |_| {});
    }
    let info = tracker.threads().next().expect("the thread, from its events");
    assert_eq!(info.found, Found::Switch);
    let b = tracker.books_until(APP, 800 * US);
    assert_eq!(
        (b.from_ns, b.ran_ns, b.booked.queued_ns),
        (Some(300 * US), 300 * US, 50 * US),
        "its books from the events, not from the read"
    );
    // Nothing after the read on its CPU: the flush that passes it seeds it.
    let mut tracker = Tracker::new(Filter { tgids: vec![APP], ..Filter::default() }, &[2, 3], US);
    tracker.seed(std::slice::from_ref(&seed), 500 * US);
    tracker.flush(400 * US, &mut |_| {});
    assert_eq!(tracker.threads().count(), 0, "not before the stream reaches the read");
    tracker.flush(600 * US, &mut |_| {});
    assert_eq!(tracker.threads().next().map(|i| i.found), Some(Found::RunningAtAttach));
    assert_eq!(tracker.books_until(APP, 900 * US).ran_ns, 400 * US);
}

/// A fixture stat line with a state and the CPU it last ran on.
fn stat_line(tid: u32, comm: &str, state: char, cpu: u32) -> String {
    let mut f = vec![format!("{tid}"), format!("({comm})"), state.to_string()];
    f.extend((4..=38).map(|i| if i == 9 { "4194560".to_string() } else { "0".to_string() }));
    f.push(cpu.to_string());
    f.extend(["0"; 13].iter().map(|s| s.to_string()));
    f.join(" ")
}

#[test]
fn at_attach_finds_the_running_and_the_gone() {
    let d = tempfile::tempdir().unwrap();
    for (tid, comm, state, cpu) in [(501, "busy", 'R', 3), (502, "sleeper", 'S', 3), (503, "elsewhere", 'R', 1)] {
        let p = d.path().join(format!("proc/500/task/{tid}"));
        fs::create_dir_all(&p).unwrap();
        fs::write(p.join("stat"), stat_line(tid, comm, state, cpu)).unwrap();
    }
    let names = |v: &[(u32, &str)]| v.iter().map(|&(t, n)| (t, n.to_string())).collect::<Vec<_>>();
    let t = Target {
        filter: Filter { tgids: vec![500], ..Filter::default() },
        cpus: vec![3],
        threads: names(&[(501, "busy"), (502, "sleeper"), (503, "elsewhere"), (504, "gone")]),
        found: vec![(500, 501), (500, 502), (500, 503), (500, 504)],
        notes: vec![],
    };
    let a = at_attach(d.path(), &t);
    assert_eq!(a.running, [Seed { tid: 501, tgid: 500, comm: crate::cause::comm(b"busy"), cpu: 3 }]);
    assert_eq!(a.gone, [(504, "gone".to_string())]);
    let lines = start_lines(&t, &a, 1_000);
    assert!(lines[0].starts_with("passive: watching 3 threads (busy, sleeper, elsewhere) on CPU 3"), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("busy[501] is running on CPU 3 (read from /proc at attach)")), "{lines:?}");
    assert!(lines.iter().any(|l| l == "passive: gone[504] ended before tracing began: it is not watched"), "{lines:?}");
    // Nothing matches yet: said, with what it waits for.
    let none =
        Target { filter: Filter { comm: Some(b"osnoise/3\x1b".to_vec()), ..Filter::default() }, threads: vec![], found: vec![], ..t };
    let lines = start_lines(&none, &AtAttach::default(), 1_000);
    assert_eq!(
        lines[0],
        "passive: no thread matches yet: waiting for a thread named osnoise/3\\x1b to run on CPU 3 (no probe; threshold 1000 ns)"
    );
}

/// The threads the screen counts: those found at start, less those gone
/// before tracing began, named `comm[tid]`.
#[test]
fn found_threads_are_those_still_there_at_attach() {
    let t = Target {
        filter: Filter { tgids: vec![23769], ..Filter::default() },
        cpus: vec![1],
        threads: vec![(23769, "redis-server".into()), (23770, "bio_close_file".into()), (23771, "bio_aof".into())],
        found: vec![(23769, 23769), (23769, 23770), (23769, 23771)],
        notes: vec![],
    };
    let at = AtAttach { running: vec![], gone: vec![(23770, "bio_close_file".into())] };
    assert_eq!(at.found(&t), [(23769, "redis-server[23769]".to_string()), (23771, "bio_aof[23771]".to_string())]);
}

/// Nothing before tracing was on is reported: the programs attach one by
/// one while the kernel patches itself (IPIs to every CPU), and a thread
/// running at attach must not show that start as its first stall.
#[test]
fn nothing_before_tracing_was_on_is_a_stall() {
    let seed = Seed { tid: APP, tgid: APP, comm: crate::cause::comm(b"app"), cpu: CPU };
    let mut tracker = Tracker::new(Filter { tgids: vec![APP], ..Filter::default() }, &[2, 3], US);
    tracker.seed(std::slice::from_ref(&seed), 100 * US);
    tracker.started_at(2_000 * US);
    let evs = [
        // The attach's IPIs: entirely before the start, then across it.
        ev(150 * US, Payload::VectorEntry(Vector::CallFunctionSingle)),
        ev(900 * US, Payload::VectorExit(Vector::CallFunctionSingle)),
        ev(1_800 * US, Payload::VectorEntry(Vector::CallFunctionSingle)),
        ev(2_300 * US, Payload::VectorExit(Vector::CallFunctionSingle)),
        irq(5_000 * US, true),
        irq(5_030 * US, false),
    ];
    let mut out = Vec::new();
    for e in &evs {
        tracker.on_event(e, &mut |iv| out.push(iv));
    }
    tracker.flush(10_000 * US, &mut |iv| out.push(iv));
    let got: Vec<(u64, u64)> = out.iter().map(|i| (i.t0, i.t1)).collect();
    assert_eq!(got, [(2_000 * US, 2_300 * US), (5_000 * US, 5_030 * US)]);
}

/// Wake-ups before tracing was on are not the thread's: the switches
/// around them were not seen (the switch hook attaches last). Seen, the
/// thread was booked as waiting from the first of them, across its runs
/// and sleeps, and its window began before the kernel's count did.
#[test]
fn wakeups_before_tracing_was_on_open_no_wait() {
    let mut tracker = Tracker::new(Filter { tgids: vec![APP], ..Filter::default() }, &[2, 3], US);
    tracker.started_at(1_000 * US);
    let idle = || task(0, 0, "swapper/2");
    let hog = task(77, 77, "hog");
    let sw = |ts: u64, prev: Task, next: Task, state: u32, delays| {
        ev(ts, Payload::Switch { prev, next, prev_state: state, prev_ran_ns: 0, delays, runtimes: (0, 0), preempt: state == 0 })
    };
    let wake = |ts: u64| ev(ts, Payload::Wakeup { task: app(), target_cpu: CPU, waker_cpu: CPU });
    let evs = [
        wake(100 * US),
        wake(400 * US),
        wake(700 * US),
        // The hook is on: app comes in, runs, sleeps, is woken and waits
        // 100 µs, which the kernel books as it comes in.
        sw(1_010 * US, hog, app(), 0, (None, Some(5_000_000))),
        sw(1_200 * US, app(), idle(), 1, (Some(5_000_000), None)),
        wake(1_500 * US),
        sw(1_600 * US, hog, app(), 0, (None, Some(5_000_000))),
        sw(1_800 * US, app(), idle(), 1, (Some(5_100_000), None)),
    ];
    for e in &evs {
        tracker.on_event(e, &mut |_| {});
    }
    let b = tracker.books_until(APP, 2_000 * US);
    assert_eq!(b.from_ns, Some(1_010 * US), "{b:?}");
    assert_eq!((b.booked.queued_ns, b.booked.kernel_queued_ns), (100 * US, 100 * US), "{b:?}");
}

/// Once its CPU shows a switch, the hook is on: a wake-up there before the
/// start is the thread's, and its wait is timed by the clock, not taken
/// from the kernel's count alone.
#[test]
fn wakeups_before_the_start_count_once_the_cpu_shows_a_switch() {
    let mut tracker = Tracker::new(Filter { tgids: vec![APP], ..Filter::default() }, &[2, 3], US);
    tracker.started_at(1_000 * US);
    let sw = |ts: u64, prev: Task, next: Task, state: u32, delays| {
        ev(ts, Payload::Switch { prev, next, prev_state: state, prev_ran_ns: 0, delays, runtimes: (0, 0), preempt: state == 0 })
    };
    let evs = [
        sw(100 * US, task(77, 77, "hog"), app(), 0, (None, Some(5_000_000))),
        sw(200 * US, app(), task(0, 0, "swapper/2"), 1, (Some(5_000_000), None)),
        ev(500 * US, Payload::Wakeup { task: app(), target_cpu: CPU, waker_cpu: CPU }),
        sw(600 * US, task(77, 77, "hog"), app(), 0, (None, Some(5_000_000))),
        sw(800 * US, app(), task(0, 0, "swapper/2"), 1, (Some(5_100_000), None)),
    ];
    for e in &evs {
        tracker.on_event(e, &mut |_| {});
    }
    let b = tracker.books_until(APP, 1_000 * US);
    assert_eq!(
        (b.booked.queued_ns, b.booked.woken_queued_ns, b.booked.kernel_queued_ns, b.from_kernel),
        (100 * US, 100 * US, 100 * US, 0),
        "{b:?}"
    );
}
