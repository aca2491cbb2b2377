//! `--stacks-above`: a stall over the threshold gets the stack of its
//! largest cause when that is a task whose stack was taken inside it.

use super::*;

/// Our program's frames first (the JIT-ed program, unnamed; the hook's
/// dispatch and the tracepoint's iterator), then the task's.
const STACK: [u64; 6] =
    [0xffff_ffff_c002_67cc, 0xffff_ffff_8100_3010, 0xffff_ffff_8100_0840, 0xffff_ffff_8100_2010, 0xffff_ffff_8100_1000, 0xdead];

/// A hog (pid 50) that runs from 1,000 to 3,000 ns and leaves with stack 7.
fn hog_leaves() -> Vec<Event> {
    let hog = task(50, "hog");
    vec![switch(1_000, probe(), hog), switch_ran(3_000, hog, probe(), 2_000), ev(3_000, Payload::Stack { pid: 50, id: 7 })]
}

/// `events` fed to `e`, then the probe's gap from 900 to 3,100 ns, explained.
fn explained(mut e: Engine, events: &[Event]) -> Hiccup {
    for x in events {
        e.on_event(x);
    }
    e.on_interval(gap(900, 3_100));
    let mut got = Vec::new();
    e.attribute_ready(10_000, |h| got.push(h.clone()));
    got.remove(0)
}

/// An engine with stacks from `above_ns`; stack 7 is STACK, any other one
/// frame; the ids it read go to `read`.
fn with_stacks(above_ns: u64, read: &std::sync::Arc<std::sync::Mutex<Vec<u32>>>) -> Engine {
    let mut e = engine();
    let seen = read.clone();
    e.set_stacks(Stacks::new(
        above_ns,
        Box::new(move |id| {
            seen.lock().unwrap().push(id);
            Some(if id == 7 { STACK.to_vec() } else { vec![1] })
        }),
    ));
    e
}

#[test]
fn a_long_stall_has_its_largest_task_s_stack() {
    let read = Default::default();
    let mut events = vec![ev(500, Payload::Stack { pid: 51, id: 8 })];
    events.extend(hog_leaves());
    let h = explained(with_stacks(2_000, &read), &events);
    assert_eq!(*read.lock().unwrap(), [8, 7], "every stack read as it comes (which frees it)");
    let st = h.stack.as_ref().expect("a stack");
    assert_eq!(st.cause.label(), "task:hog[50]");
    let frames: Vec<&str> = st.frames.iter().map(|f| &**f).collect();
    assert_eq!(frames, ["tick_nohz_handler+0x10", "vmstat_update", "0xdead"], "ours left out, the task's kept");
}

/// kptr_restrict=2: /proc/kallsyms reads as zeros, nothing resolves, and
/// every frame is kept as its address (82 rows had an empty stack when
/// the unresolved frames were all taken for ours).
#[test]
fn with_addresses_hidden_every_frame_is_kept_as_an_address() {
    let mut e = Engine::new(&[CPU as usize], 0, 1024, Namer::new(Kallsyms::empty(), IdleStates::default()));
    e.set_probe_tids(CPU, &[PROBE]);
    e.set_stacks(Stacks::new(2_000, Box::new(|_| Some(STACK.to_vec()))));
    let h = explained(e, &hog_leaves());
    let frames: Vec<String> = h.stack.as_ref().expect("a stack").frames.iter().map(|f| f.to_string()).collect();
    let want: Vec<String> = STACK.iter().map(|a| format!("{a:#x}")).collect();
    assert_eq!(frames, want);
}

#[test]
fn a_stall_under_the_threshold_has_none() {
    let h = explained(with_stacks(2_201, &Default::default()), &hog_leaves());
    assert_eq!((h.gap, h.stack), (2_200, None));
}

#[test]
fn no_stack_when_the_largest_cause_is_not_a_task_with_one() {
    // The work item is the largest cause; the stack is another pid's.
    let events = [
        ev(1_000, Payload::WorkStart { func: WORK_FN, work: 1 }),
        ev(3_000, Payload::WorkEnd { func: WORK_FN, work: 1 }),
        ev(3_000, Payload::Stack { pid: 50, id: 7 }),
    ];
    let h = explained(with_stacks(1, &Default::default()), &events);
    assert_eq!(h.causes[0].0.label(), "work:vmstat_update");
    assert_eq!(h.stack, None);
}

#[test]
fn without_stacks_a_stack_event_is_ignored() {
    let h = explained(engine(), &hog_leaves());
    assert_eq!(h.causes[0].0.label(), "task:hog[50]");
    assert_eq!(h.stack, None);
}

/// An IRQ that tops a long stall: its handler and threaded handler, as
/// its action said them.
#[test]
fn an_irq_s_stall_shows_its_functions() {
    let events = [
        ev(500, Payload::IrqAction { irq: 24, handler: 0xffff_ffff_8100_1000, thread_fn: 0xffff_ffff_8100_2004 }),
        ev(1_000, Payload::IrqEntry { irq: 24, name: *b"virtio0-input.0\0\0\0\0\0\0\0\0\0" }),
        ev(3_000, Payload::IrqExit { irq: 24, ret: 1 }),
    ];
    let h = explained(with_stacks(2_000, &Default::default()), &events);
    let st = h.stack.as_ref().expect("its functions");
    assert_eq!(st.cause.label(), "irq:24:virtio0-input.0");
    let frames: Vec<&str> = st.frames.iter().map(|f| &**f).collect();
    assert_eq!(frames, ["vmstat_update", "tick_nohz_handler+0x4"]);
    // Without stacks asked for, none.
    assert_eq!(explained(engine(), &events).stack, None);
}
