//! Figure 8b's paired loop: cyclictest's measurement (a SCHED_FIFO thread
//! that sleeps to an absolute deadline and reads how late it woke), which
//! turns jitterwatch's watching of its CPU off and on between wake-ups, so
//! what watching adds to a wake-up is read within one run; and, given
//! jitterwatch's programs (it attached none), holds their only links and
//! closes them for a third window, so what the hooks alone add, against no
//! hook at all, is read within the run too.

/// `wakes W SECS INTERVAL_US PRIO [MAP_ID OFFSET TOGGLE_MS [PROG...]]`, each
/// PROG `ID` (a tp_btf program) or `ID:TRACEPOINT` (a raw_tp one).
pub const WAKES: &str = r#"
/*
 * Like `cyclictest -t1 -a W -i INTERVAL_US -p PRIO -m` with
 * /dev/cpu_dma_latency held at 0: one thread on CPU W, SCHED_FIFO PRIO,
 * memory locked, sleeps with clock_nanosleep(CLOCK_MONOTONIC,
 * TIMER_ABSTIME) to each deadline, INTERVAL_US apart, and keeps how late it
 * woke (ns). The thread is named jwwakes.
 *
 * With MAP_ID, OFFSET and TOGGLE_MS it turns jitterwatch's watched[W] off
 * and on every TOGGLE_MS, right after a wake-up was read and before the
 * next sleep: from user space on W, so no interruption of W is open then
 * and each wake-up is watched whole or not at all.
 *
 * With PROGs (jitterwatch's programs, by id; jitterwatch attached none:
 * JITTERWATCH_BPF_UNATTACHED) the loop opens each program's one link
 * (BPF_RAW_TRACEPOINT_OPEN, links.h) before its first sleep, and a third
 * window follows each not-watched one: the links closed (from user space
 * on W again), no hook at all, opened again as it ends. The not-watched
 * window less that one is what the hooks add, returning at once.
 *
 * Prints "L late class pos" per wake-up (class: 1 watched, 0 not, 4 no
 * hook, 2 without a toggle; pos: its place in its window, from 0).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <time.h>

#include "links.h"
#include "map_byte.h"

#define CAP (1 << 22)
static uint64_t late[CAP];
static uint8_t was_on[CAP];
static uint16_t place[CAP];

static uint64_t ns(const struct timespec *t)
{
	return (uint64_t)t->tv_sec * 1000000000u + (uint64_t)t->tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc < 5)
		return 2;
	int w = atoi(argv[1]), prio = atoi(argv[4]);
	double secs = atof(argv[2]);
	uint64_t interval = strtoull(argv[3], 0, 10) * 1000u;
	volatile uint8_t *flag = 0;
	uint64_t toggle_every = 0;
	if (argc >= 8) {
		flag = map_byte(atoi(argv[5]), strtoull(argv[6], 0, 10));
		toggle_every = strtoull(argv[7], 0, 10) * 1000000u / interval;
		if (toggle_every == 0)
			toggle_every = 1;
		for (int i = 8; i < argc; i++)
			if (open_prog(argv[i]))
				return 1;
	}
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(w, &s);
	if (sched_setaffinity(0, sizeof(s), &s)) {
		perror("sched_setaffinity");
		return 1;
	}
	struct sched_param p = { .sched_priority = prio };
	if (sched_setscheduler(0, SCHED_FIFO, &p)) {
		perror("sched_setscheduler");
		return 1;
	}
	if (mlockall(MCL_CURRENT | MCL_FUTURE)) {
		perror("mlockall");
		return 1;
	}
	int dma = open("/dev/cpu_dma_latency", O_WRONLY);
	int32_t zero = 0;
	if (dma >= 0 && write(dma, &zero, sizeof(zero)) != sizeof(zero)) {
		close(dma);
		dma = -1;
	}
	prctl(PR_SET_NAME, "jwwakes", 0, 0, 0);
	for (size_t i = 0; i < CAP; i += 512)
		late[i] = was_on[i] = place[i] = 0;
	uint64_t n = (uint64_t)(secs * 1e9) / interval;
	if (n > CAP)
		n = CAP;
	/* The only links: without them nothing is watched at all. */
	if (progs && attach_all())
		return 1;
	/* The window: 1 watched, then 0 not, then 4 no hook. */
	uint8_t on = 1;
	uint64_t pos = 0;
	struct timespec next, t;
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t d = ns(&next) + interval;
		next.tv_sec = d / 1000000000u;
		next.tv_nsec = d % 1000000000u;
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, 0);
		clock_gettime(CLOCK_MONOTONIC, &t);
		late[i] = ns(&t) > d ? ns(&t) - d : 0;
		was_on[i] = flag ? on : 2;
		place[i] = pos < 65535 ? pos : 65535;
		pos++;
		if (flag && (i + 1) % toggle_every == 0) {
			pos = 0;
			if (on == 4 && attach_all())
				return 1;
			if (on == 0 && progs)
				detach_all();
			on = on == 1 ? 0 : on == 0 && progs ? 4 : 1;
			*flag = on == 1;
		}
	}
	if (progs && on != 4)
		detach_all();
	if (flag)
		*flag = 1;
	for (uint64_t i = 0; i < n; i++)
		printf("L %llu %u %u\n", (unsigned long long)late[i], (unsigned)was_on[i], (unsigned)place[i]);
	if (dma >= 0)
		close(dma);
	return 0;
}
"#;
