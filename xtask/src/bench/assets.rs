//! What the bench compiles and runs besides jitterwatch: three small C
//! programs (written to a temp dir, built with gcc -O2) and the bpftrace
//! script it compares against.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use crate::proc;

/// The limit for the probe: a bare clock_gettime loop. Its floor is found
/// as jitterwatch's probe finds its own (docs/threshold.md): over its first
/// 20 ms and at least 1,048,576 turns (at most 1 s), turns timed in blocks
/// of 64, the floor the 5th percentile of the blocks' mean turn; then 8 ×
/// the floor is its threshold (`--threshold auto`'s rule). Prints the
/// floor, its smallest delta, its mean period over `secs`, and its mean
/// period between hiccups.
pub const CLOOP: &str = r#"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BLOCK 64
#define MIN_TURNS 1048576u
#define MAX_BLOCKS (1u << 20)

static inline uint64_t now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	uint64_t span = (uint64_t)(atof(argc > 1 ? argv[1] : "1") * 1e9);
	uint64_t start = now(), prev = start, end = start + span;
	uint64_t calibrated = start + 20000000, give_up = start + 1000000000;
	uint64_t min = UINT64_MAX, n = 0;
	uint64_t hot_start = 0, hot_n = 0, thr = UINT64_MAX, gap_ns = 0, gaps = 0;
	double *blocks = malloc(MAX_BLOCKS * sizeof(double)), floor_ns = 0;
	uint64_t nb = 0, block_t0 = start;

	if (!blocks)
		return 1;
	while (prev < end) {
		uint64_t t = now(), d = t - prev;
		if (d < min)
			min = d;
		if (d >= thr) {
			gap_ns += d;
			gaps++;
		}
		n++;
		prev = t;
		if (!hot_start) {
			if (n % BLOCK == 0 && nb < MAX_BLOCKS) {
				blocks[nb++] = (double)(t - block_t0) / BLOCK;
				block_t0 = t;
			}
			if ((t >= calibrated && n >= MIN_TURNS) || t >= give_up) {
				hot_start = t;
				hot_n = n;
				qsort(blocks, nb, sizeof(double), cmp);
				floor_ns = nb ? blocks[nb * 5 / 100] : (double)min;
				thr = (uint64_t)(8 * (floor_ns > 1 ? floor_ns : 1));
			}
		}
	}
	printf("floor_ns=%.3f min_ns=%llu mean_ns=%.3f loops=%llu quiet_mean_ns=%.3f\n", floor_ns, (unsigned long long)min,
	       (double)(prev - start) / (double)n, (unsigned long long)n,
	       hot_start ? (double)(prev - hot_start - gap_ns) / (double)(n - hot_n - gaps) : 0.0);
	return 0;
}
"#;

/// An IPI storm from another CPU: enabling and disabling a per-CPU perf
/// event of the target CPU is a synchronous cross-CPU call, one IPI (and a
/// csd) on the target each time it is busy, as it is under the probe.
/// Usage: ipistorm CPU MAX_SECS; prints the calls it made.
pub const IPISTORM: &str = r#"
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int cpu = atoi(argc > 1 ? argv[1] : "1");
	double secs = atof(argc > 2 ? argv[2] : "1");
	struct perf_event_attr a;
	struct timespec t0, t;
	unsigned long n = 0;
	int fd;

	memset(&a, 0, sizeof a);
	a.size = sizeof a;
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_DUMMY;
	a.disabled = 1;
	fd = syscall(SYS_perf_event_open, &a, -1, cpu, -1, 0);
	if (fd < 0) {
		perror("ipistorm: perf_event_open");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
		ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
		n += 2;
		if ((n & 1023) == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 >= secs)
				break;
		}
	}
	printf("calls=%lu\n", n);
	return 0;
}
"#;

/// A context-switch storm: PAIRS pairs of threads hand a token back and
/// forth through a futex; on one CPU every hand-off is a sched_switch.
/// Usage: pingpong PAIRS MAX_SECS [PRIO]; runs until killed, or MAX_SECS as
/// a safety net; PRIO > 0: SCHED_FIFO at PRIO, PRIO < 0: nice PRIO.
pub const PINGPONG: &str = r#"
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct pair { _Atomic int turn; } __attribute__((aligned(64)));
static struct pair pairs[64];
static _Atomic int stop;

static void *side(void *arg)
{
	long k = (long)arg;
	struct pair *p = &pairs[k >> 1];
	int me = k & 1;
	struct timespec tmo = { 0, 10000000 };

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		if (atomic_load(&p->turn) != me) {
			syscall(SYS_futex, &p->turn, FUTEX_WAIT_PRIVATE, !me, &tmo, 0, 0);
			continue;
		}
		atomic_store(&p->turn, !me);
		syscall(SYS_futex, &p->turn, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
	}
	return 0;
}

int main(int argc, char **argv)
{
	int np = argc > 1 ? atoi(argv[1]) : 1;
	int secs = argc > 2 ? atoi(argv[2]) : 60;
	int prio = argc > 3 ? atoi(argv[3]) : 0;
	pthread_t t[128];

	if (np < 1 || np > 64)
		return 2;
	/* The threads inherit either: SCHED_FIFO takes the CPU from the
	 * (SCHED_OTHER) probe but for RT throttling's share; nice -20 leaves
	 * it ~1%. */
	if (prio > 0) {
		struct sched_param sp = { .sched_priority = prio };

		if (sched_setscheduler(0, SCHED_FIFO, &sp)) {
			perror("pingpong: SCHED_FIFO");
			return 3;
		}
	} else if (prio < 0 && setpriority(PRIO_PROCESS, 0, prio)) {
		perror("pingpong: nice");
		return 3;
	}
	for (long i = 0; i < 2 * np; i++)
		pthread_create(&t[i], 0, side, (void *)i);
	sleep(secs);
	atomic_store(&stop, 1);
	for (int i = 0; i < 2 * np; i++)
		pthread_join(t[i], 0);
	return 0;
}
"#;

/// What the per-CPU context-switch perf event on the watched CPU costs the
/// other CPUs, by paired batches (see its comment). jitterwatch opens the
/// same event; the BPF program on it never runs on other CPUs.
pub const HOOKCOST: &str = r#"
/*
 * What a per-CPU context-switch perf event on CPU W costs the other CPUs:
 * a pipe ping-pong between two processes on this CPU, in batches, with the
 * event opened on W for every other batch. Each "on" batch is compared with
 * the mean of its two "off" neighbours, so slow drifts of the host cancel.
 * Usage: hookcost W BATCHES ROUND_TRIPS_PER_BATCH; W = -1 opens nothing
 * (the null control: what the pairing alone reads).
 */
#define _GNU_SOURCE
#include <linux/perf_event.h>
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
		if ((i & 1) && cpu >= 0) {
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

/// A real app's mix for passive mode (redis under redis-benchmark, in
/// miniature): two threads of one process ping-pong 64-byte messages over
/// loopback TCP, pinned to one CPU by the caller. Every write() runs the
/// peer's NET_RX softirq inside the system call, wakes the peer and is
/// preempted by it. Usage: tcppp SECS.
pub const TCPPP: &str = r#"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MSG 64

static double secs;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void pingpong(int fd, int first)
{
	char buf[MSG] = {0};
	double end = now() + secs;
	unsigned long n = 0;
	if (first && write(fd, buf, MSG) != MSG)
		return;
	for (;;) {
		ssize_t got = 0;
		while (got < MSG) {
			ssize_t r = read(fd, buf + got, MSG - got);
			if (r <= 0)
				return;
			got += r;
		}
		if (write(fd, buf, MSG) != MSG)
			return;
		if ((++n & 255) == 0 && now() >= end)
			return;
	}
}

static void *server(void *arg)
{
	int l = *(int *)arg, fd = accept(l, NULL, NULL), one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	pingpong(fd, 0);
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof a;
	int l = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	pthread_t t;

	secs = atof(argc > 1 ? argv[1] : "1");
	if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1) || getsockname(l, (struct sockaddr *)&a, &len)) {
		perror("tcppp: listen");
		return 1;
	}
	pthread_create(&t, NULL, server, &l);
	if (connect(c, (struct sockaddr *)&a, sizeof a)) {
		perror("tcppp: connect");
		return 1;
	}
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	pingpong(c, 1);
	shutdown(c, SHUT_RDWR);
	pthread_join(t, NULL);
	return 0;
}
"#;

/// Starves the consumer: SCHED_FIFO busy loop for MS milliseconds (run
/// pinned to the housekeeping CPU), to show what happens past the buffer.
pub const HOG: &str = r#"
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	struct sched_param sp = { .sched_priority = 10 };
	struct timespec a, b;
	long ms = argc > 1 ? atol(argv[1]) : 200;

	if (sched_setscheduler(0, SCHED_FIFO, &sp)) {
		perror("sched_setscheduler");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < ms);
	return 0;
}
"#;

/// The tracepoints jitterwatch attaches, as bpftrace names them.
/// irq_work_exit is left out: the kernel refuses perf_event_open on it
/// (EPERM), and bpftrace's `tracepoint:` goes through perf.
const TRACEPOINTS: &[&str] = &[
    "sched:sched_switch",
    "irq:irq_handler_entry",
    "irq:irq_handler_exit",
    "irq:softirq_entry",
    "irq:softirq_exit",
    "workqueue:workqueue_execute_start",
    "workqueue:workqueue_execute_end",
    "timer:hrtimer_expire_entry",
    "timer:hrtimer_expire_exit",
    "irq_vectors:local_timer_entry",
    "irq_vectors:local_timer_exit",
    "irq_vectors:reschedule_entry",
    "irq_vectors:reschedule_exit",
    "irq_vectors:call_function_entry",
    "irq_vectors:call_function_exit",
    "irq_vectors:call_function_single_entry",
    "irq_vectors:call_function_single_exit",
    "irq_vectors:irq_work_entry",
    "csd:csd_function_entry",
    "csd:csd_function_exit",
    "nmi:nmi_handler",
];

pub const TRACEFS: &str = "/sys/kernel/tracing";

/// The bpftrace script: every tracepoint of [`TRACEPOINTS`] this kernel
/// has, filtered to `cpu`, counting per probe. Also returns how many.
pub fn bpftrace_script(cpu: usize) -> (String, usize) {
    let probes: Vec<String> = TRACEPOINTS
        .iter()
        .filter(|tp| {
            let (cat, name) = tp.split_once(':').expect("cat:name");
            Path::new(TRACEFS).join("events").join(cat).join(name).exists()
        })
        .map(|tp| format!("tracepoint:{tp}"))
        .collect();
    let n = probes.len();
    let script = format!("{}\n/cpu == {cpu}/\n{{\n\t@[probe] = count();\n}}\n", probes.join(",\n"));
    (script, n)
}

/// Writes `src` as NAME.c in `dir` and builds it with gcc -O2.
pub fn compile(dir: &Path, name: &str, src: &str) -> Result<PathBuf> {
    let c = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    std::fs::write(&c, src).with_context(|| format!("writing {}", c.display()))?;
    proc::check(Command::new("gcc").args(["-O2", "-pthread", "-o"]).arg(&exe).arg(&c))?;
    Ok(exe)
}
