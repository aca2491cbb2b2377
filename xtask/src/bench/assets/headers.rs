//! C shared by the bench's programs, written beside them as headers.

/// `map_byte.h`: the byte at an offset of a BPF array map's first value
/// (jitterwatch's .bss, found by map id), mapped writable: how a loop on
/// the watched CPU turns jitterwatch's watching of it off and on from user
/// space, where no interruption of that CPU is open.
pub const MAP_BYTE: &str = r#"
#include <linux/bpf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The byte at `offset` of BPF array map `id`'s first value, mapped writable. */
static volatile uint8_t *map_byte(unsigned id, size_t offset)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.map_id = id;
	int fd = syscall(SYS_bpf, BPF_MAP_GET_FD_BY_ID, &a, sizeof(a));
	if (fd < 0) {
		perror("BPF_MAP_GET_FD_BY_ID");
		exit(1);
	}
	size_t len = (offset / 4096 + 1) * 4096;
	void *m = mmap(0, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		perror("mmap of the map");
		exit(1);
	}
	return (volatile uint8_t *)m + offset;
}
"#;

/// `links.h`: the only link to each of jitterwatch's programs (it attached
/// none: JITTERWATCH_BPF_UNATTACHED), opened and closed by a loop on the
/// watched CPU, so what its hooks alone add against no hook at all is read
/// within one run (figures 3b and 8b).
pub const LINKS: &str = r#"
#include <linux/bpf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_PROGS 64
static int prog_fd[MAX_PROGS], link_fd[MAX_PROGS];
static const char *tp_name[MAX_PROGS];
/* Programs given; 0 once a link was refused (the loop then stops). */
static int progs;

static int bpf_cmd(int cmd, union bpf_attr *a)
{
	return syscall(SYS_bpf, cmd, a, sizeof(*a));
}

/* "ID" (a tp_btf program: it names its own tracepoint) or "ID:TRACEPOINT"
 * (a raw_tp one): its fd, kept. */
static int open_prog(char *arg)
{
	char *colon = strchr(arg, ':');
	union bpf_attr a;

	if (progs == MAX_PROGS) {
		fprintf(stderr, "more than %d programs\n", MAX_PROGS);
		return -1;
	}
	memset(&a, 0, sizeof(a));
	if (colon)
		*colon = 0;
	tp_name[progs] = colon ? colon + 1 : 0;
	a.prog_id = atoi(arg);
	prog_fd[progs] = bpf_cmd(BPF_PROG_GET_FD_BY_ID, &a);
	if (prog_fd[progs] < 0) {
		perror("BPF_PROG_GET_FD_BY_ID");
		return -1;
	}
	progs++;
	return 0;
}

/* Opens the link of every program; on a refusal closes those opened,
 * says so and returns -1: the loop stops (nothing would be watched). */
static int attach_all(void)
{
	for (int i = 0; i < progs; i++) {
		union bpf_attr a;

		memset(&a, 0, sizeof(a));
		a.raw_tracepoint.name = (uint64_t)(uintptr_t)tp_name[i];
		a.raw_tracepoint.prog_fd = prog_fd[i];
		link_fd[i] = bpf_cmd(BPF_RAW_TRACEPOINT_OPEN, &a);
		if (link_fd[i] < 0) {
			perror("linking one of jitterwatch's programs (BPF_RAW_TRACEPOINT_OPEN)");
			while (i-- > 0)
				close(link_fd[i]);
			progs = 0;
			return -1;
		}
	}
	return 0;
}

static void detach_all(void)
{
	for (int i = 0; i < progs; i++)
		close(link_fd[i]);
}
"#;

/// Every header, by its file name.
pub const HEADERS: [(&str, &str); 2] = [("map_byte.h", MAP_BYTE), ("links.h", LINKS)];
