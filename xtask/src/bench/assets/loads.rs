//! The loads the bench drives (C sources, compiled by assets::compile):
//! context switches, IPIs from another CPU, a real app's passive-mode mix,
//! and a hog that starves the consumer.

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
