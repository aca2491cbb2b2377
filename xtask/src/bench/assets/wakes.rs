//! Figure 8b's paired loop: cyclictest's measurement (a SCHED_FIFO thread
//! that sleeps to an absolute deadline and reads how late it woke), which
//! turns jitterwatch's watching of its CPU off and on between wake-ups, so
//! what watching adds to a wake-up is read within one run.

/// `wakes W SECS INTERVAL_US PRIO [MAP_ID OFFSET TOGGLE_MS]`.
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
 * and each wake-up is watched whole or not at all. Prints "L late on" per
 * wake-up (on: 1 watched, 0 not; 2 without a toggle).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <time.h>

#include "map_byte.h"

#define CAP (1 << 22)
static uint64_t late[CAP];
static uint8_t was_on[CAP];

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
		late[i] = was_on[i] = 0;
	uint64_t n = (uint64_t)(secs * 1e9) / interval;
	if (n > CAP)
		n = CAP;
	uint8_t on = 1;
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
		if (flag && (i + 1) % toggle_every == 0) {
			on ^= 1;
			*flag = on;
		}
	}
	if (flag)
		*flag = 1;
	for (uint64_t i = 0; i < n; i++)
		printf("L %llu %u\n", (unsigned long long)late[i], (unsigned)was_on[i]);
	if (dma >= 0)
		close(dma);
	return 0;
}
"#;
