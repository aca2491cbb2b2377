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

/// Every header, by its file name.
pub const HEADERS: [(&str, &str); 1] = [("map_byte.h", MAP_BYTE)];
