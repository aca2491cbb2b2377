//! The harness of the context-switch hook's cost to the CPUs it does not
//! watch (C source, compiled by assets::compile).

/// What a context-switch hook on the watched CPU costs the other CPUs, by
/// paired batches (see its comment). jitterwatch opens the per-CPU software
/// event (`perf`); the BPF program on it never runs on other CPUs. The
/// other modes measure the alternatives: a sched_switch program on every
/// CPU (`tp`), a per-CPU sched_switch tracepoint event writing samples to a
/// ring (`tpevent`), the same with a BPF program on it (`tpevent-bpf`),
/// a per-CPU dummy event asking for switch records (`switchrec`), and
/// jitterwatch's own event with a program that returns at once on it
/// (`perf-bpf`: the hook's cost without our program's work, for the CPU it
/// is opened on).
pub const HOOKCOST: &str = r#"
/*
 * What a context-switch hook on CPU W costs the other CPUs: a pipe
 * ping-pong between two processes on this CPU, in batches, with the hook
 * set up on W for every other batch. Each "on" batch is compared with the
 * mean of its two "off" neighbours, so slow drifts of the host cancel.
 * Usage: hookcost W BATCHES ROUND_TRIPS_PER_BATCH [MODE]; W = -1 sets up
 * nothing (the null control: what the pairing alone reads). The hook of
 * the "on" batches, by MODE:
 *   perf (the default): a software context-switch event opened on W,
 *     sample period 1 (jitterwatch's);
 *   tp: a raw tracepoint program on sched_switch, which returns at once
 *     unless it runs on W: what the fallback tp_btf program (filtered by
 *     CPU first) costs every other CPU;
 *   tpevent: a sched_switch tracepoint perf event opened on W, sample
 *     period 1, raw record and CLOCK_MONOTONIC time, into a read-only
 *     (overwritten) ring of RING_PAGES pages, its wake-up watermark the
 *     whole ring: W writes every sample and raises at most a wake-up per
 *     lap. Its perf probe runs on every CPU, but returns before building
 *     the record where the CPU's list of events is empty;
 *   tpevent-bpf: the same event with a BPF tracepoint program that
 *     returns 0 on it: the tracepoint's programs are the event's, not the
 *     CPU's, so every CPU builds the record and runs the program;
 *   switchrec: a dummy software event opened on W asking for switch
 *     records (context_switch) into the same ring: it turns on the
 *     scheduler's perf hooks on every CPU, and each looks for its own;
 *   perf-bpf: the perf mode's event with a perf_event BPF program that
 *     returns 0 on it (jitterwatch's hook, its program doing nothing):
 *     with the ping-pong on W itself, what reaching a program through
 *     the event costs the CPU it watches, beside the tp mode there.
 */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <linux/bpf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RING_PAGES 8
#define SWITCH_ID "/sys/kernel/tracing/events/sched/sched_switch/id"

enum mode { PERF, TP, TPEVENT, TPEVENT_BPF, SWITCHREC, PERF_BPF };

static uint64_t now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int load(enum bpf_prog_type type, struct bpf_insn *insns, int n)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.prog_type = type;
	a.insns = (uint64_t)(unsigned long)insns;
	a.insn_cnt = n;
	a.license = (uint64_t)(unsigned long)"GPL";
	return syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof(a));
}

/* A raw tracepoint program on sched_switch that returns at once unless it
 * runs on CPU w: what a tp_btf program filtered by CPU costs elsewhere. */
static int load_filter(int w)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_get_smp_processor_id },
		{ .code = BPF_JMP | BPF_JNE | BPF_K, .dst_reg = BPF_REG_0, .off = 1, .imm = w },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 1 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	return load(BPF_PROG_TYPE_RAW_TRACEPOINT, insns, sizeof(insns) / sizeof(insns[0]));
}

/* The least program of a type: returns 0 (no sample for perf). A
 * tracepoint one for tpevent-bpf, a perf_event one (the type jitterwatch's
 * hangs on its software event) for perf-bpf. */
static int load_nothing(enum bpf_prog_type type)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	return load(type, insns, 2);
}

static int attach_filter(int prog)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.raw_tracepoint.name = (uint64_t)(unsigned long)"sched_switch";
	a.raw_tracepoint.prog_fd = prog;
	return syscall(SYS_bpf, BPF_RAW_TRACEPOINT_OPEN, &a, sizeof(a));
}

/* sched_switch's tracepoint id, tracefs mounted first if it is not. */
static long switch_id(void)
{
	long id = -1;
	FILE *f = fopen(SWITCH_ID, "r");
	if (!f && !mount("nodev", "/sys/kernel/tracing", "tracefs", 0, 0))
		f = fopen(SWITCH_ID, "r");
	if (f && fscanf(f, "%ld", &id) != 1)
		id = -1;
	if (f)
		fclose(f);
	return id;
}

/* The hook of an "on" batch on CPU cpu; its fd (-1: failed) and its ring
 * in *ring (unmapped by the caller). */
static int open_hook(enum mode m, int cpu, long id, int prog, void **ring)
{
	long page = sysconf(_SC_PAGESIZE);
	struct perf_event_attr at;
	int fd;

	*ring = MAP_FAILED;
	if (m == TP)
		return attach_filter(prog);
	memset(&at, 0, sizeof(at));
	at.size = sizeof(at);
	at.type = PERF_TYPE_SOFTWARE;
	at.config = PERF_COUNT_SW_CONTEXT_SWITCHES;
	at.sample_period = 1;
	if (m == PERF)
		return syscall(SYS_perf_event_open, &at, -1, cpu, -1, 0);
	if (m == PERF_BPF) {
		fd = syscall(SYS_perf_event_open, &at, -1, cpu, -1, 0);
		if (fd >= 0 && ioctl(fd, PERF_EVENT_IOC_SET_BPF, prog)) {
			close(fd);
			return -1;
		}
		return fd;
	}
	if (m == SWITCHREC) {
		at.config = PERF_COUNT_SW_DUMMY;
		at.context_switch = 1;
		at.sample_id_all = 1;
		at.sample_type = PERF_SAMPLE_TIME;
	} else {
		at.type = PERF_TYPE_TRACEPOINT;
		at.config = id;
		at.sample_type = PERF_SAMPLE_RAW | PERF_SAMPLE_TIME;
	}
	at.use_clockid = 1;
	at.clockid = CLOCK_MONOTONIC;
	at.watermark = 1;
	at.wakeup_watermark = RING_PAGES * page;
	fd = syscall(SYS_perf_event_open, &at, -1, cpu, -1, 0);
	if (fd < 0)
		return -1;
	*ring = mmap(0, (1 + RING_PAGES) * page, PROT_READ, MAP_SHARED, fd, 0);
	if (*ring == MAP_FAILED || (m == TPEVENT_BPF && ioctl(fd, PERF_EVENT_IOC_SET_BPF, prog))) {
		close(fd);
		return -1;
	}
	return fd;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	static const char *names[] = { "perf", "tp", "tpevent", "tpevent-bpf", "switchrec", "perf-bpf" };
	int cpu = argc > 1 ? atoi(argv[1]) : 1;
	int batches = argc > 2 ? atoi(argv[2]) : 601;
	int per = argc > 3 ? atoi(argv[3]) : 2000;
	enum mode m = PERF;
	long id = -1;
	int prog = -1;

	if (argc > 4) {
		for (m = 0; m <= PERF_BPF && strcmp(argv[4], names[m]); m++)
			;
		if (m > PERF_BPF) {
			fprintf(stderr, "unknown mode %s\n", argv[4]);
			return 2;
		}
	}
	if (m == TP)
		prog = load_filter(cpu);
	else if (m == TPEVENT_BPF)
		prog = load_nothing(BPF_PROG_TYPE_TRACEPOINT);
	else if (m == PERF_BPF)
		prog = load_nothing(BPF_PROG_TYPE_PERF_EVENT);
	if ((m == TP || m == TPEVENT_BPF || m == PERF_BPF) && prog < 0) {
		perror("bpf prog load");
		return 1;
	}
	if ((m == TPEVENT || m == TPEVENT_BPF) && (id = switch_id()) < 0) {
		fprintf(stderr, "no %s\n", SWITCH_ID);
		return 1;
	}
	int a[2], b[2];
	char c = 0;

	if (batches < 3 || batches > 100001 || per < 1 || pipe(a) || pipe(b))
		return 2;
	pid_t kid = fork();
	if (kid == 0) {
		close(a[1]);
		while (read(a[0], &c, 1) == 1)
			if (write(b[1], &c, 1) != 1)
				break;
		_exit(0);
	}
	double *ns = malloc(sizeof(double) * batches);
	double *ratio = malloc(sizeof(double) * batches);
	long ring_len = (1 + RING_PAGES) * sysconf(_SC_PAGESIZE);
	for (int i = 0; i < batches; i++) {
		int fd = -1;
		void *ring = MAP_FAILED;
		if ((i & 1) && cpu >= 0 && (fd = open_hook(m, cpu, id, prog, &ring)) < 0) {
			perror(names[m]);
			return 1;
		}
		uint64_t t0 = now();
		for (int j = 0; j < per; j++)
			if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1)
				return 1;
		ns[i] = (double)(now() - t0) / per;
		if (ring != MAP_FAILED)
			munmap(ring, ring_len);
		if (fd >= 0)
			close(fd);
	}
	close(a[1]);
	waitpid(kid, 0, 0);
	int n = 0;
	for (int i = 1; i + 1 < batches; i += 2)
		ratio[n++] = ns[i] / ((ns[i - 1] + ns[i + 1]) / 2);
	qsort(ratio, n, sizeof(double), cmp);
	double off = 0;
	for (int i = 0; i < batches; i += 2)
		off += ns[i];
	off /= (batches + 1) / 2;
	printf("pairs=%d ratio_median=%.5f ratio_p25=%.5f ratio_p75=%.5f off_ns_per_op=%.1f\n", n, ratio[n / 2],
	       ratio[n / 4], ratio[3 * n / 4], off);
	return 0;
}
"#;
