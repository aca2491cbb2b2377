//! `jitterwatch events`: one line per decoded event, like `perf script`,
//! with names resolved and the duration on exit events.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{self, Write};

use crate::engine::Namer;
use crate::names;
use crate::record::{Event, Payload};
use crate::sanitize::{visible, visible_bytes};

/// What an entry is remembered by until its exit: (cpu, tag, id).
type Key = (u32, u8, u64);

pub struct Printer {
    /// Symbols and IRQ names, as the engine resolves them.
    namer: Namer,
    /// Open entries: when they began, and the function for exits that lack it.
    open: HashMap<Key, (u64, u64)>,
}

fn state(s: u32) -> Cow<'static, str> {
    if s == 0 {
        return "R".into();
    }
    if s & 0x400 != 0 && s & 0x2 != 0 {
        return "I".into();
    }
    const LETTERS: [&str; 8] = ["S", "D", "T", "t", "X", "Z", "P", "x"];
    match LETTERS.get(s.trailing_zeros() as usize) {
        Some(l) => (*l).into(),
        None => format!("{s:#x}").into(),
    }
}

fn dur(ns: u64) -> String {
    crate::units::ns(ns)
}

impl Printer {
    /// Its namer, for a trace of the same events.
    pub fn into_namer(self) -> Namer {
        self.namer
    }

    pub fn new(namer: Namer) -> Self {
        Self { namer, open: HashMap::with_capacity(256) }
    }

    fn enter(&mut self, key: Key, ts: u64, func: u64) {
        if self.open.len() > 4096 {
            self.open.clear();
        }
        self.open.insert(key, (ts, func));
    }

    /// Duration since the matching entry, and its function.
    fn leave(&mut self, key: Key, ts: u64) -> (Option<u64>, u64) {
        match self.open.remove(&key) {
            Some((t, f)) => (Some(ts.saturating_sub(t)), f),
            None => (None, 0),
        }
    }

    fn sym(&self, addr: u64) -> String {
        visible(&self.namer.symbol(addr)).into_owned()
    }

    fn irq(&self, irq: i32) -> String {
        self.namer.irq(irq).name()
    }

    pub fn print(&mut self, ev: &Event, out: &mut impl Write) -> io::Result<()> {
        let vector_tp;
        let (kind, detail, took): (&str, String, Option<u64>) = match ev.payload {
            // The time shown is how long prev ran (known with the perf-event hook).
            Payload::Switch { prev, next, prev_state, prev_ran_ns, .. } => (
                "sched_switch",
                format!(
                    "{}[{}] prio={} state={} ==> {}[{}] prio={}",
                    visible_bytes(&prev.comm),
                    prev.pid,
                    prev.prio,
                    state(prev_state),
                    visible_bytes(&next.comm),
                    next.pid,
                    next.prio
                ),
                (prev_ran_ns > 0).then_some(u64::from(prev_ran_ns)),
            ),
            Payload::Wakeup { task, waker_cpu, .. } => {
                ("sched_wakeup", format!("{}[{}] prio={} from cpu {waker_cpu}", visible_bytes(&task.comm), task.pid, task.prio), None)
            }
            Payload::IrqEntry { irq, name } => {
                self.namer.note_irq(irq, &name);
                self.enter((ev.cpu, 1, irq as u64), ev.ts, 0);
                ("irq_handler_entry", self.irq(irq), None)
            }
            Payload::IrqExit { irq, ret } => {
                let (d, _) = self.leave((ev.cpu, 1, irq as u64), ev.ts);
                ("irq_handler_exit", format!("{} ret={}", self.irq(irq), if ret != 0 { "handled" } else { "unhandled" }), d)
            }
            Payload::SoftirqEntry { vec, syscall } => {
                self.enter((ev.cpu, 2, vec as u64), ev.ts, 0);
                let name = names::softirq(vec);
                let what = match syscall {
                    Some(nr) => format!("{name} in syscall {nr}"),
                    None => name.into_owned(),
                };
                ("softirq_entry", what, None)
            }
            Payload::SoftirqExit { vec } => {
                let (d, _) = self.leave((ev.cpu, 2, vec as u64), ev.ts);
                ("softirq_exit", names::softirq(vec).into_owned(), d)
            }
            Payload::WorkStart { func, work } => {
                self.enter((ev.cpu, 3, work), ev.ts, func);
                ("workqueue_execute_start", self.sym(func), None)
            }
            Payload::WorkEnd { func, work } => {
                let (d, f) = self.leave((ev.cpu, 3, work), ev.ts);
                let f = if func != 0 { func } else { f };
                ("workqueue_execute_end", if f != 0 { self.sym(f) } else { format!("work={work:#x}") }, d)
            }
            Payload::HrtimerEntry { func, timer } => {
                self.enter((ev.cpu, 4, timer), ev.ts, func);
                ("hrtimer_expire_entry", self.sym(func), None)
            }
            Payload::HrtimerExit { timer } => {
                let (d, func) = self.leave((ev.cpu, 4, timer), ev.ts);
                ("hrtimer_expire_exit", if func != 0 { self.sym(func) } else { format!("timer={timer:#x}") }, d)
            }
            Payload::VectorEntry(v) => {
                self.enter((ev.cpu, 5, v as u64), ev.ts, 0);
                {
                    vector_tp = format!("{}_entry", v.name());
                    (vector_tp.as_str(), String::new(), None)
                }
            }
            Payload::VectorExit(v) => {
                let (d, _) = self.leave((ev.cpu, 5, v as u64), ev.ts);
                {
                    vector_tp = format!("{}_exit", v.name());
                    (vector_tp.as_str(), String::new(), d)
                }
            }
            Payload::CsdEntry { func, csd } => {
                self.enter((ev.cpu, 6, csd), ev.ts, func);
                ("csd_function_entry", self.sym(func), None)
            }
            Payload::CsdExit { func, csd } => {
                let (d, f) = self.leave((ev.cpu, 6, csd), ev.ts);
                let f = if func != 0 { func } else { f };
                ("csd_function_exit", if f != 0 { self.sym(f) } else { format!("csd={csd:#x}") }, d)
            }
            Payload::Idle { state: crate::record::IDLE_EXIT } => ("cpu_idle", "exit".to_string(), None),
            Payload::Idle { state } => ("cpu_idle", format!("state={state}"), None),
            Payload::Freq { khz } => ("cpu_frequency", format!("{khz} kHz"), None),
            Payload::Rename(t) => ("task_rename", format!("{}[{}]", visible_bytes(&t.comm), t.pid), None),
            Payload::Steal { ns } => ("steal_clock", format!("{ns} ns"), None),
            Payload::Stack { pid, id } => ("stack", format!("pid {pid} left with stack {id}"), None),
            Payload::IrqAction { irq, handler, thread_fn } => {
                let f = if thread_fn == 0 { String::new() } else { format!(", thread {}", self.namer.symbol(thread_fn)) };
                ("irq_action", format!("{irq} handler {}{f}", self.namer.symbol(handler)), None)
            }
            Payload::Origin { kind, sender, from_cpu, callsite, func, woken } => {
                let who = format!("by {}[{}] on cpu {from_cpu}", visible_bytes(&sender.comm), sender.pid);
                match kind {
                    crate::record::OriginKind::Ipi => (
                        "ipi_send",
                        format!(
                            "{} {who} via {}",
                            if func == 0 { "(no callback)".to_string() } else { self.sym(func) },
                            self.sym(callsite)
                        ),
                        None,
                    ),
                    crate::record::OriginKind::Work => ("workqueue_queue_work", format!("{} {who}", self.sym(func)), None),
                    crate::record::OriginKind::Wake => ("sched_waking", format!("pid {woken} {who}"), None),
                }
            }
            Payload::Nmi { handler, delta_ns, handled } => {
                ("nmi_handler", format!("{}{}", self.sym(handler), if handled { "" } else { " unhandled" }), Some(delta_ns))
            }
        };
        write!(out, "{:>6}.{:09} cpu{:<3} ", ev.ts / 1_000_000_000, ev.ts % 1_000_000_000, ev.cpu)?;
        if detail.is_empty() {
            out.write_all(kind.as_bytes())?;
        } else {
            write!(out, "{kind:<26} {detail}")?;
        }
        if let Some(d) = took {
            write!(out, " dur={}", dur(d))?;
        }
        writeln!(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kallsyms::Kallsyms;
    use crate::record::{Task, Vector};

    fn line(p: &mut Printer, ts: u64, payload: Payload) -> String {
        let mut out = Vec::new();
        p.print(&Event { ts, cpu: 1, dropped: 0, own_ns: 0, payload }, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn lines_name_things_and_time_exits() {
        let mut p =
            Printer::new(Namer::new(Kallsyms::parse("ffffffff81001000 t refresh_vm_stats\n"), crate::engine::IdleStates::default()));
        let mut comm = [0u8; 16];
        comm[..8].copy_from_slice(b"bad\x1b[2Jx");
        let t = Task { pid: 7, tgid: 7, prio: 120, comm };
        let s = line(
            &mut p,
            1_500_000_000,
            Payload::Switch { prev: t, next: t, prev_state: 1, prev_ran_ns: 0, delays: (None, None), runtimes: (0, 0), preempt: false },
        );
        assert!(s.starts_with("     1.500000000 cpu1   sched_switch"), "{s}");
        assert!(s.contains("bad\\x1b[2Jx[7] prio=120 state=S"), "{s}");
        line(&mut p, 10, Payload::WorkStart { func: 0xffffffff81001000, work: 9 });
        let s = line(&mut p, 2010, Payload::WorkEnd { func: 0xffffffff81001000, work: 9 });
        assert!(s.contains("workqueue_execute_end") && s.contains("refresh_vm_stats dur=2.0µs"), "{s}");
        line(&mut p, 0, Payload::HrtimerEntry { func: 0x1234, timer: 5 });
        let s = line(&mut p, 500, Payload::HrtimerExit { timer: 5 });
        assert!(s.contains("0x1234 dur=500ns"), "{s}");
        let s = line(&mut p, 5, Payload::VectorExit(Vector::LocalTimer));
        assert!(s.trim_end().ends_with("local_timer_exit"), "{s}");
    }
}
