/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The one definition of the record that crosses the ring buffer.
 * Rust reads it through the types libbpf-cargo generates from BTF, so this
 * file is the only place its layout is written down.
 */
#ifndef JITTERWATCH_H
#define JITTERWATCH_H

/*
 * Limits, as an enum rather than #defines so that they reach BTF and Rust
 * reads them from the generated types instead of repeating the numbers.
 */
enum jw_limits {
	JW_MAX_CPUS = 1024,
	JW_MAX_LISTED = 64, /* watched CPUs a mask-wide IPI send is checked against */
	JW_COMM_LEN = 16,
	JW_IRQ_NAME_LEN = 24,
	JW_BATCH_ITEMS = 16, /* a batch record's items at most */
	JW_MAX_IRQS = 4096, /* IRQ numbers whose name is sent once, not with each entry */
	JW_STACK_DEPTH = 32, /* frames of a kernel stack kept (--stacks-above) */
	JW_REGION_BYTES = 1 << 21, /* a watched CPU's region of its own records (a power of two) */
	JW_REGION_SLACK = 512, /* past its end: a record (with its header) never wraps */
};

/*
 * Where figure 3b's runs stop our programs, so that it can say where their
 * time goes, stage by stage (JITTERWATCH_BPF_FLOOR; a run never sets it
 * otherwise). JW_STOP_HOOK: every program returns right after its
 * watched-CPU test (what the kernel's hooks alone cost). JW_STOP_CLOCK and
 * JW_STOP_APPEND stop the per-interruption programs after their clock
 * read, and after their item joins the CPU's batch (which is then dropped,
 * never written); the other programs run whole.
 */
enum jw_stop {
	JW_STOP_NONE = 0,
	JW_STOP_HOOK = 1,
	JW_STOP_CLOCK = 2,
	JW_STOP_APPEND = 3,
};

/* A __u32 duration that could not be read (an enum: it reaches BTF too). */
enum jw_sentinel {
	JW_UNKNOWN = 0xffffffffu,
};

enum jw_kind {
	JW_SWITCH = 1,
	JW_IRQ_ENTRY,
	JW_IRQ_EXIT,
	JW_SOFTIRQ_ENTRY,
	JW_SOFTIRQ_EXIT,
	JW_WORK_START,
	JW_WORK_END,
	JW_HRTIMER_ENTRY,
	JW_HRTIMER_EXIT,
	JW_VECTOR_ENTRY, /* x86 system vectors: sub holds enum jw_vector */
	JW_VECTOR_EXIT,
	JW_CSD_ENTRY,
	JW_CSD_EXIT,
	JW_NMI, /* emitted once, after the handler, with its duration */
	JW_WAKEUP, /* passive mode: a task woken onto a watched CPU; cpu is that CPU */
	JW_IDLE, /* cpu_idle: fn.obj holds the idle state, (__u32)-1 when the CPU leaves it */
	JW_FREQ, /* cpu_frequency: fn.obj holds the new frequency (kHz); cpu is the CPU it is for */
	JW_STEAL, /* the CPU's steal clock changed: fn.obj holds its new value (ns), read with the record before it */
	JW_ORIGIN, /* current, on any CPU, sent an IPI to, queued work on, or woke a task on cpu: sub holds enum jw_origin_kind */
	JW_RENAME, /* passive mode: the running task renamed itself (exec, prctl): wk holds it with its new comm */
	JW_BATCH, /* struct jw_batch: a watched CPU's events of one interruption, in one record */
	JW_IRQ_NAME, /* an IRQ's action name, sent when it changes: irq.irq and irq.name */
	JW_STACK, /* --stacks-above: the kernel stack of a task leaving a watched CPU after a long run: fn.func its pid, fn.obj its id in the stacks map; right after its switch */
};

enum jw_origin_kind {
	JW_ORIGIN_IPI = 1,
	JW_ORIGIN_WORK,
	JW_ORIGIN_WAKE,
};

enum jw_vector {
	JW_VEC_LOCAL_TIMER = 1,
	JW_VEC_RESCHEDULE,
	JW_VEC_CALL_FUNCTION,
	JW_VEC_CALL_FUNCTION_SINGLE,
	JW_VEC_IRQ_WORK,
};

struct jw_switch {
	__u32 prev_pid;
	__u32 prev_tgid;
	__u32 next_pid;
	__u32 next_tgid;
	__s16 prev_prio; /* 0-139, -1 for deadline tasks */
	__s16 next_prio;
	__u16 own_ns; /* how long the switch program itself ran (see jw_item) */
	__u16 pad;
	__u32 prev_state;
	/*
	 * How long prev ran since it was switched in (rq clock; 0: unknown).
	 * It places a switch into prev that no program saw: the per-CPU perf
	 * event never sees the idle task switch out, and on our VMs no hook
	 * runs as the hypervisor agent's threads switch out.
	 */
	__u32 prev_ran_ns;
	/*
	 * The kernel's books (schedstat's run_delay: time waiting on a
	 * runqueue), low 32 bits, wrapping: prev's as it leaves, next's before
	 * this switch adds its wait. Two readings of one task differ by what
	 * the kernel booked in between, switches no hook saw included.
	 * JW_UNKNOWN in next_delay where it cannot be read (the perf event
	 * fires after the kernel booked the wait).
	 */
	__u32 prev_delay;
	__u32 next_delay;
	/*
	 * The kernel's time on a CPU (schedstat's first field,
	 * se.sum_exec_runtime), low 32 bits, wrapping: prev's as it leaves
	 * (its run just booked), next's as it comes in. Two readings of one
	 * task differ by what the kernel booked as its run in between.
	 */
	__u32 prev_runtime;
	__u32 next_runtime;
	char prev_comm[JW_COMM_LEN];
	char next_comm[JW_COMM_LEN];
};

struct jw_irq {
	__s32 irq;
	__s32 ret; /* irq_handler_exit's return value */
	char name[JW_IRQ_NAME_LEN];
	/* JW_IRQ_NAME: the action's handler and threaded handler (0: none) */
	__u64 handler;
	__u64 thread_fn;
};

/* work items, hrtimers and csd callbacks: a kernel function pointer */
struct jw_func {
	__u64 func;
	__u64 obj; /* the work_struct / hrtimer / csd, to pair entry and exit */
};

/* A softirq's entry: whether the task it runs on was in a system call. */
struct jw_softirq {
	/*
	 * The current task's system call number (x86's orig_ax in the pt_regs
	 * at the top of its kernel stack), or negative: it was in user space
	 * when interrupted, or it is a kernel thread. A softirq run inside the
	 * watched thread's own system call is its own work, not an interruption.
	 */
	__s64 syscall;
};

struct jw_nmi {
	__u64 handler;
	__u64 delta_ns;
};

/* Written on the waker's CPU; the record's cpu is the woken task's. */
struct jw_wakeup {
	__u32 pid;
	__u32 tgid;
	__s32 prio;
	__u32 waker_cpu;
	char comm[JW_COMM_LEN];
};
/* Written on the sender's CPU; the record's cpu is the target. */
struct jw_origin {
	__u32 pid;
	__u32 tgid;
	__u32 from_cpu;
	__u32 woken;    /* JW_ORIGIN_WAKE: the woken task's pid */
	__u64 callsite; /* IPI: where it was sent from; work: the work_struct */
	__u64 func;     /* IPI: its callback (0: none); work: the work function */
	char comm[JW_COMM_LEN];
};

union jw_payload {
	struct jw_switch sw;
	struct jw_wakeup wk;
	struct jw_irq irq;
	struct jw_func fn;
	struct jw_nmi nmi;
	struct jw_softirq sirq;
	struct jw_origin org;
};

/*
 * Why the tick runs (not a record: a per-CPU tally userspace reads from
 * .bss). The kernel's timer:tick_stop says, each time a nohz_full CPU
 * tries to stop its tick, whether it could, and if not the dependency
 * that kept it: one of TICK_DEP_MASK_* (POSIX_TIMER, PERF_EVENTS, SCHED,
 * CLOCK_UNSTABLE, RCU, RCU_EXP: bit i counted in deps[i]).
 */
enum {
	JW_TICK_DEPS = 8,
};

struct jw_tick {
	__u64 stops;    /* the tick stopped (success) */
	__u64 refusals; /* it could not stop */
	__u64 deps[JW_TICK_DEPS];
	__u32 last_success;
	__u32 last_dep;
};

struct jw_event {
	__u64 ts; /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u16 cpu;
	__u8 kind; /* enum jw_kind */
	__u8 sub;  /* softirq vector, or enum jw_vector */
	/*
	 * This CPU's failed reservations so far (wrapping). When it differs
	 * from the CPU's previous record, events were lost between the two:
	 * userspace marks that stretch instead of guessing what ran.
	 */
	__u32 dropped;
	union jw_payload u;
};

/*
 * One event of a batch: what a per-tracepoint record carried, in 24 bytes.
 * a and b by kind: IRQ entry irq; IRQ exit irq, ret; softirq entry (sub:
 * vector) the task's system call or -1; work, hrtimer and csd func, obj;
 * idle state in b.
 */
struct jw_item {
	__u32 dt; /* ns after the batch's ts */
	/*
	 * How long the program that wrote it ran from dt on, by its own clock
	 * reads (at its start, and before it returned or submitted): its own
	 * time, never the kernel's. Saturated at 65535.
	 */
	__u16 own_ns;
	__u8 kind; /* enum jw_kind, a per-tracepoint one */
	__u8 sub;
	__u64 a;
	__u64 b;
};

/*
 * A watched CPU's events from the first entry of an interruption to its
 * last exit (IRQ, its softirqs, the tick and its timers, an IPI and its
 * calls), kept per CPU as they happen and written as one record (kind
 * JW_BATCH, n items). Also flushed before any other record of that CPU
 * (a context switch), when full, and when one runs alone (a work item).
 * Its size is its n items' (the header and n * sizeof(struct jw_item)).
 */
struct jw_batch {
	__u64 ts; /* the first item's time (bpf_ktime_get_ns) */
	__u16 cpu;
	__u8 kind; /* JW_BATCH */
	__u8 n;
	__u32 dropped; /* as jw_event's */
	/*
	 * The runqueue's steal clock when the batch was written (0: none), read
	 * once per batch rather than with every record.
	 */
	__u64 steal;
	struct jw_item items[JW_BATCH_ITEMS];
};


/*
 * A watched CPU's own records (x86), written by that CPU alone and read by
 * the collector through an mmap of the `regions` map: a ring of its own,
 * with no lock and no line the other CPUs write but `tail` (which the
 * collector moves once per read). Each record is an 8-byte header (its
 * length in bytes, then 0) and the record, the two rounded up to 8 bytes.
 * A record starting near the end runs on into the slack rather than
 * wrapping, so every record is contiguous; the next starts at the next
 * position modulo JW_REGION_BYTES.
 */
struct jw_region {
	__u64 head; /* bytes written: moved by the CPU once a record is whole */
	__u64 pad0[7];
	__u64 tail; /* bytes read: moved by the collector */
	__u64 pad1[7];
	__u8 data[JW_REGION_BYTES + JW_REGION_SLACK];
};

#endif
