//! Decoding ring-buffer records into a plain, copyable `Event`. The layout
//! and the limits come from the C header through libbpf-cargo's generated
//! types; nothing here allocates. A batch (one interruption's events in one
//! record) is decoded by [`Decoder`], into the same events.

mod batch;
mod order;
pub use batch::Decoder;
pub use order::in_time_order;

use crate::bpf::types::{jw_event, jw_kind, jw_limits, jw_origin_kind, jw_sentinel, jw_vector};

/// The most CPUs the BPF side can watch.
pub const MAX_CPUS: usize = jw_limits::JW_MAX_CPUS.0 as usize;
/// A task's comm as the kernel keeps it (TASK_COMM_LEN).
pub const COMM_LEN: usize = jw_limits::JW_COMM_LEN.0 as usize;
pub const IRQ_NAME_LEN: usize = jw_limits::JW_IRQ_NAME_LEN.0 as usize;
/// A duration the BPF side could not read.
const UNKNOWN: u32 = jw_sentinel::JW_UNKNOWN.0;

/// x86 system vectors the kernel traces with entry/exit pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Vector {
    LocalTimer,
    Reschedule,
    CallFunction,
    CallFunctionSingle,
    IrqWork,
}

impl Vector {
    fn from_raw(v: u8) -> Option<Self> {
        Some(match jw_vector(v.into()) {
            jw_vector::JW_VEC_LOCAL_TIMER => Self::LocalTimer,
            jw_vector::JW_VEC_RESCHEDULE => Self::Reschedule,
            jw_vector::JW_VEC_CALL_FUNCTION => Self::CallFunction,
            jw_vector::JW_VEC_CALL_FUNCTION_SINGLE => Self::CallFunctionSingle,
            jw_vector::JW_VEC_IRQ_WORK => Self::IrqWork,
            _ => return None,
        })
    }

    /// The vector's name, as its tracepoints are named (`local_timer` for
    /// local_timer_entry/exit).
    pub fn name(self) -> &'static str {
        match self {
            Self::LocalTimer => "local_timer",
            Self::Reschedule => "reschedule",
            Self::CallFunction => "call_function",
            Self::CallFunctionSingle => "call_function_single",
            Self::IrqWork => "irq_work",
        }
    }
}

pub type Comm = [u8; COMM_LEN];

/// A name as the BPF side writes it into a record (`char[COMM_LEN]`),
/// for records made in userspace (the replay, tests).
pub fn c_comm(s: &str) -> [i8; COMM_LEN] {
    let mut c = [0i8; COMM_LEN];
    c.iter_mut().zip(s.bytes()).for_each(|(d, b)| *d = b as i8);
    c
}

/// The state cpu_idle reports when the CPU leaves idle (PWR_EVENT_EXIT).
pub const IDLE_EXIT: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    pub pid: u32,
    pub tgid: u32,
    pub prio: i32,
    pub comm: Comm,
}

/// What an origin record says was done to a watched CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OriginKind {
    /// An IPI sent to it (ipi_send_cpu, ipi_send_cpumask).
    Ipi,
    /// Work queued on its per-CPU pool (workqueue_queue_work).
    Work,
    /// A task on it woken (sched_waking).
    Wake,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// `prev_ran_ns`: how long prev had run (0: unknown), which places a
    /// switch into prev that was not seen (see bpf/jitterwatch.h).
    Switch {
        prev: Task,
        next: Task,
        prev_state: u32,
        prev_ran_ns: u32,
        /// The kernel's run_delay (time waiting on a runqueue), low 32
        /// bits: prev's as it leaves, next's before this switch adds its
        /// wait (None: not read; see bpf/jitterwatch.h).
        delays: (Option<u32>, Option<u32>),
        /// The kernel's time on a CPU (schedstat's first field), low 32
        /// bits: prev's as it leaves, next's as it comes in.
        runtimes: (u32, u32),
        preempt: bool,
    },
    IrqEntry {
        irq: i32,
        name: [u8; IRQ_NAME_LEN],
    },
    IrqExit {
        irq: i32,
        ret: i32,
    },
    SoftirqEntry {
        vec: u16,
        /// The system call the task it ran on was in (None: user space, or
        /// a kernel thread).
        syscall: Option<u32>,
    },
    SoftirqExit {
        vec: u16,
    },
    WorkStart {
        func: u64,
        work: u64,
    },
    WorkEnd {
        func: u64,
        work: u64,
    },
    HrtimerEntry {
        func: u64,
        timer: u64,
    },
    HrtimerExit {
        timer: u64,
    },
    VectorEntry(Vector),
    VectorExit(Vector),
    /// The task running on the CPU renamed itself (exec, prctl), to this.
    Rename(Task),
    CsdEntry {
        func: u64,
        csd: u64,
    },
    CsdExit {
        func: u64,
        csd: u64,
    },
    /// Reported after the handler ran, with its duration.
    Nmi {
        handler: u64,
        delta_ns: u64,
        handled: bool,
    },
    /// The CPU entered idle state `state`, or left it (`IDLE_EXIT`).
    Idle {
        state: u32,
    },
    /// The CPU's frequency became `khz` (written by the CPU that changed
    /// it: not in this CPU's order).
    Freq {
        khz: u32,
    },
    /// The CPU's steal clock (ns the hypervisor ran something else while
    /// this vCPU was runnable, since boot) moved to `ns`, as the kernel read
    /// it at its last rq clock update; stamped with the record before it.
    Steal {
        ns: u64,
    },
    /// `sender`, on `from_cpu`, sent an IPI to this event's CPU (`func`
    /// its callback, 0 for none; `callsite` where), queued work on it
    /// (`func` the work function, `callsite` the work_struct), or woke
    /// `woken` there. Written on the sender's CPU: not in this CPU's order
    /// unless it is the same CPU.
    Origin {
        kind: OriginKind,
        sender: Task,
        from_cpu: u32,
        callsite: u64,
        func: u64,
        woken: u32,
    },
    /// IRQ `irq`'s action: its handler and threaded handler (0: none),
    /// sent with its name when the action changes.
    IrqAction {
        irq: i32,
        handler: u64,
        thread_fn: u64,
    },
    /// `--stacks-above`: task `pid` just left this CPU after a long run;
    /// its kernel stack there is `id` in the BPF stacks map (read once).
    Stack {
        pid: u32,
        id: u32,
    },
    /// Passive mode: `task` was woken onto this event's CPU (`target_cpu`,
    /// the same), from `waker_cpu`. Not in its CPU's order: written there.
    Wakeup {
        task: Task,
        target_cpu: u32,
        waker_cpu: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub ts: u64,
    pub cpu: u32,
    /// The CPU's failed reservations so far (wrapping): a step from its
    /// previous record means events were lost in between.
    pub dropped: u32,
    /// How long our own program ran from `ts` on, by its clock (0: not
    /// measured): jitterwatch's time, not the kernel's.
    pub own_ns: u32,
    pub payload: Payload,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("short record: {0} bytes")]
    Short(usize),
    #[error("unknown record kind {0}")]
    Kind(u8),
    #[error("unknown vector {0}")]
    Vector(u8),
    #[error("unknown origin kind {0}")]
    Origin(u8),
}

pub(crate) fn bytes<const N: usize>(raw: &[i8; N]) -> [u8; N] {
    raw.map(|c| c as u8)
}

impl Event {
    pub fn decode(data: &[u8]) -> Result<Self, DecodeError> {
        if data.len() < std::mem::size_of::<jw_event>() {
            return Err(DecodeError::Short(data.len()));
        }
        // SAFETY: the length is checked and jw_event is plain old data.
        let e: jw_event = unsafe { std::ptr::read_unaligned(data.as_ptr().cast()) };
        // SAFETY: every union read below reads the member that `kind` says
        // the BPF program wrote, and every member is plain old data.
        let payload = unsafe {
            match jw_kind(e.kind.into()) {
                jw_kind::JW_SWITCH => {
                    let s = e.u.sw;
                    Payload::Switch {
                        prev: Task { pid: s.prev_pid, tgid: s.prev_tgid, prio: s.prev_prio.into(), comm: bytes(&s.prev_comm) },
                        next: Task { pid: s.next_pid, tgid: s.next_tgid, prio: s.next_prio.into(), comm: bytes(&s.next_comm) },
                        prev_state: s.prev_state,
                        prev_ran_ns: s.prev_ran_ns,
                        delays: ((s.prev_delay != UNKNOWN).then_some(s.prev_delay), (s.next_delay != UNKNOWN).then_some(s.next_delay)),
                        runtimes: (s.prev_runtime, s.next_runtime),
                        preempt: e.sub != 0,
                    }
                }
                jw_kind::JW_IRQ_ENTRY => Payload::IrqEntry { irq: e.u.irq.irq, name: bytes(&e.u.irq.name) },
                jw_kind::JW_IRQ_EXIT => Payload::IrqExit { irq: e.u.irq.irq, ret: e.u.irq.ret },
                jw_kind::JW_SOFTIRQ_ENTRY => Payload::SoftirqEntry { vec: e.sub.into(), syscall: u32::try_from(e.u.sirq.syscall).ok() },
                jw_kind::JW_SOFTIRQ_EXIT => Payload::SoftirqExit { vec: e.sub.into() },
                jw_kind::JW_WORK_START => Payload::WorkStart { func: e.u.r#fn.func, work: e.u.r#fn.obj },
                jw_kind::JW_WORK_END => Payload::WorkEnd { func: e.u.r#fn.func, work: e.u.r#fn.obj },
                jw_kind::JW_HRTIMER_ENTRY => Payload::HrtimerEntry { func: e.u.r#fn.func, timer: e.u.r#fn.obj },
                jw_kind::JW_HRTIMER_EXIT => Payload::HrtimerExit { timer: e.u.r#fn.obj },
                jw_kind::JW_VECTOR_ENTRY => Payload::VectorEntry(Vector::from_raw(e.sub).ok_or(DecodeError::Vector(e.sub))?),
                jw_kind::JW_VECTOR_EXIT => Payload::VectorExit(Vector::from_raw(e.sub).ok_or(DecodeError::Vector(e.sub))?),
                jw_kind::JW_CSD_ENTRY => Payload::CsdEntry { func: e.u.r#fn.func, csd: e.u.r#fn.obj },
                jw_kind::JW_CSD_EXIT => Payload::CsdExit { func: e.u.r#fn.func, csd: e.u.r#fn.obj },
                jw_kind::JW_NMI => Payload::Nmi { handler: e.u.nmi.handler, delta_ns: e.u.nmi.delta_ns, handled: e.sub != 0 },
                jw_kind::JW_IDLE => Payload::Idle { state: e.u.r#fn.obj as u32 },
                jw_kind::JW_FREQ => Payload::Freq { khz: e.u.r#fn.obj as u32 },
                jw_kind::JW_STEAL => Payload::Steal { ns: e.u.r#fn.obj },
                jw_kind::JW_STACK => Payload::Stack { pid: e.u.r#fn.func as u32, id: e.u.r#fn.obj as u32 },
                jw_kind::JW_ORIGIN => {
                    let o = e.u.org;
                    let kind = match jw_origin_kind(e.sub.into()) {
                        jw_origin_kind::JW_ORIGIN_IPI => OriginKind::Ipi,
                        jw_origin_kind::JW_ORIGIN_WORK => OriginKind::Work,
                        jw_origin_kind::JW_ORIGIN_WAKE => OriginKind::Wake,
                        _ => return Err(DecodeError::Origin(e.sub)),
                    };
                    Payload::Origin {
                        kind,
                        sender: Task { pid: o.pid, tgid: o.tgid, prio: 0, comm: bytes(&o.comm) },
                        from_cpu: o.from_cpu,
                        callsite: o.callsite,
                        func: o.func,
                        woken: o.woken,
                    }
                }
                jw_kind::JW_RENAME => {
                    let w = e.u.wk;
                    Payload::Rename(Task { pid: w.pid, tgid: w.tgid, prio: w.prio, comm: bytes(&w.comm) })
                }
                jw_kind::JW_WAKEUP => {
                    let w = e.u.wk;
                    Payload::Wakeup {
                        task: Task { pid: w.pid, tgid: w.tgid, prio: w.prio, comm: bytes(&w.comm) },
                        target_cpu: e.cpu.into(),
                        waker_cpu: w.waker_cpu,
                    }
                }
                _ => return Err(DecodeError::Kind(e.kind)),
            }
        };
        // SAFETY: as above: the switch member, when the kind says so.
        let own_ns = if e.kind == jw_kind::JW_SWITCH.0 as u8 { u32::from(unsafe { e.u.sw.own_ns }) } else { 0 };
        Ok(Event { ts: e.ts, cpu: e.cpu.into(), dropped: e.dropped, own_ns, payload })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::bpf::types::{jw_func, jw_payload, jw_switch};

    fn raw(e: &jw_event) -> Vec<u8> {
        // SAFETY: reading the bytes of a plain-old-data struct.
        unsafe { std::slice::from_raw_parts((e as *const jw_event).cast::<u8>(), std::mem::size_of::<jw_event>()) }.to_vec()
    }

    use super::c_comm as comm;

    #[test]
    fn decodes_a_switch() {
        let e = jw_event {
            ts: 42,
            cpu: 3,
            kind: jw_kind::JW_SWITCH.0 as u8,
            sub: 1,
            dropped: 5,
            u: jw_payload {
                sw: jw_switch {
                    prev_pid: 10,
                    prev_tgid: 9,
                    next_pid: 0,
                    next_tgid: 0,
                    prev_prio: 120,
                    next_prio: 120,
                    prev_state: 1,
                    prev_ran_ns: 7,
                    prev_delay: 11,
                    next_delay: u32::MAX,
                    prev_runtime: 13,
                    next_runtime: 17,
                    own_ns: 310,
                    pad: 0,
                    prev_comm: comm("bash"),
                    next_comm: comm("swapper/3"),
                },
            },
        };
        let ev = Event::decode(&raw(&e)).unwrap();
        assert_eq!((ev.ts, ev.cpu, ev.dropped, ev.own_ns), (42, 3, 5, 310));
        match ev.payload {
            Payload::Switch { prev, next, prev_state, prev_ran_ns, delays, runtimes, preempt } => {
                assert_eq!((prev.pid, prev.tgid, next.pid, prev_state, prev_ran_ns, preempt), (10, 9, 0, 1, 7, true));
                assert_eq!(runtimes, (13, 17));
                // An unread delay (JW_UNKNOWN) is None, not a reading.
                assert_eq!(delays, (Some(11), None));
                assert_eq!(&prev.comm[..5], b"bash\0");
                assert_eq!(&next.comm[..9], b"swapper/3");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn decodes_functions_vectors_and_rejects_garbage() {
        let mut e = jw_event {
            ts: 7,
            cpu: 1,
            kind: jw_kind::JW_WORK_START.0 as u8,
            sub: 0,
            dropped: 0,
            u: jw_payload { r#fn: jw_func { func: 0xffff_ffff_8100_0000, obj: 0x1234 } },
        };
        assert_eq!(Event::decode(&raw(&e)).unwrap().payload, Payload::WorkStart { func: 0xffff_ffff_8100_0000, work: 0x1234 });
        e.kind = jw_kind::JW_STACK.0 as u8;
        e.u.r#fn = jw_func { func: 4242, obj: 17 };
        assert_eq!(Event::decode(&raw(&e)).unwrap().payload, Payload::Stack { pid: 4242, id: 17 });
        e.kind = jw_kind::JW_VECTOR_EXIT.0 as u8;
        e.sub = jw_vector::JW_VEC_IRQ_WORK.0 as u8;
        assert_eq!(Event::decode(&raw(&e)).unwrap().payload, Payload::VectorExit(Vector::IrqWork));
        e.sub = 99;
        assert_eq!(Event::decode(&raw(&e)), Err(DecodeError::Vector(99)));
        e.kind = 200;
        assert_eq!(Event::decode(&raw(&e)), Err(DecodeError::Kind(200)));
        assert_eq!(Event::decode(&raw(&e)[..10]), Err(DecodeError::Short(10)));
    }
}
