//! The harness of the context-switch hook's cost to the CPUs it does not
//! watch (C source, compiled by assets::compile).

/// What the per-CPU context-switch perf event on the watched CPU costs the
/// other CPUs, by paired batches (see its comment). jitterwatch opens the
/// same event; the BPF program on it never runs on other CPUs. The `tp`
/// mode measures the alternative, a sched_switch program on every CPU.
pub const HOOKCOST: &str = r#"
/*
 * What a per-CPU context-switch perf event on CPU W costs the other CPUs:
 * a pipe ping-pong between two processes on this CPU, in batches, with the
 * event opened on W for every other batch. Each "on" batch is compared with
 * the mean of its two "off" neighbours, so slow drifts of the host cancel.
 * Usage: hookcost W BATCHES ROUND_TRIPS_PER_BATCH [tp]; W = -1 opens
 * nothing (the null control: what the pairing alone reads). With `tp`, the
 * "on" batches attach a raw tracepoint program on sched_switch instead,
 * which returns at once unless it runs on W: what the fallback tp_btf
 * program (filtered by CPU first) costs every other CPU.
 */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <linux/bpf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
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
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_RAW_TRACEPOINT;
	a.insns = (uint64_t)(unsigned long)insns;
	a.insn_cnt = sizeof(insns) / sizeof(insns[0]);
	a.license = (uint64_t)(unsigned long)"GPL";
	return syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof(a));
}

static int attach_filter(int prog)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.raw_tracepoint.name = (uint64_t)(unsigned long)"sched_switch";
	a.raw_tracepoint.prog_fd = prog;
	return syscall(SYS_bpf, BPF_RAW_TRACEPOINT_OPEN, &a, sizeof(a));
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int cpu = argc > 1 ? atoi(argv[1]) : 1;
	int batches = argc > 2 ? atoi(argv[2]) : 601;
	int per = argc > 3 ? atoi(argv[3]) : 2000;
	int tp = argc > 4 && !strcmp(argv[4], "tp");
	int prog = tp ? load_filter(cpu) : -1;
	if (tp && prog < 0) {
		perror("bpf prog load");
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
	for (int i = 0; i < batches; i++) {
		int fd = -1;
		if ((i & 1) && cpu >= 0 && tp) {
			fd = attach_filter(prog);
			if (fd < 0) {
				perror("raw tracepoint open");
				return 1;
			}
		} else if ((i & 1) && cpu >= 0) {
			struct perf_event_attr at;
			memset(&at, 0, sizeof(at));
			at.type = PERF_TYPE_SOFTWARE;
			at.size = sizeof(at);
			at.config = PERF_COUNT_SW_CONTEXT_SWITCHES;
			at.sample_period = 1;
			fd = syscall(SYS_perf_event_open, &at, -1, cpu, -1, 0);
			if (fd < 0) {
				perror("perf_event_open");
				return 1;
			}
		}
		uint64_t t0 = now();
		for (int j = 0; j < per; j++)
			if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1)
				return 1;
		ns[i] = (double)(now() - t0) / per;
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
