/* bench/first_touch.c - how fast this machine backs fresh shared memory, beside memset of
 * memory already touched. Explains the KV pool's put figures on fresh pools (bench/RESULTS.md).
 *   cc -O2 -o /tmp/first_touch bench/first_touch.c -lrt && /tmp/first_touch [MiB] */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double
now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Kernel-mode copies into pages touched from user mode only (a TCP recv into a KV slot is one),
 * before and after one kernel-mode read of them (the KV prefault's write(2) into a memfd): on
 * a guest whose host shadows page tables (PVM) the two modes fault separately. A second
 * mapping of the object, populated, so no page fault of the guest is left in either pass. */
static int
mode_split(int fd, size_t n)
{
	size_t blk = 2u << 20, half = n / 2 / blk * blk;
	char *q = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	char *src = malloc(blk);
	int scratch = memfd_create("first-touch", 0);
	if (q == MAP_FAILED || !src || scratch < 0 || madvise(q, n, MADV_POPULATE_WRITE) != 0) {
		perror("second mapping");
		return 1;
	}
	memset(src, 3, blk);
	if (pwrite(scratch, src, blk, 0) != (ssize_t)blk)
		return 1;
	for (size_t i = 0; i < 2 * half; i += 4096) /* user-mode touch of all of it */
		__atomic_fetch_add((long *)(q + i), 0, __ATOMIC_RELAXED);
	for (size_t o = half; o < 2 * half; o += blk) /* kernel-mode touch of the second half */
		if (pwrite(scratch, q + o, blk, 0) != (ssize_t)blk)
			return 1;
	for (int h = 0; h < 2; h++) {
		double t = now();
		for (size_t o = 0; o < half; o += blk)
			if (pread(scratch, q + h * half + o, blk, 0) != (ssize_t)blk)
				return 1;
		printf("kernel copy into pages touched %s %6.2f GB/s\n",
		       h ? "in both modes    " : "in user mode only",
		       (double)half / (now() - t) / 1e9);
	}
	return 0;
}

int
main(int argc, char **argv)
{
	size_t n = (size_t)(argc > 1 ? strtoul(argv[1], NULL, 10) : 1024) << 20;
	char name[64];
	snprintf(name, sizeof(name), "/openlake-first-touch-%d", (int)getpid());
	int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)n) != 0) {
		perror("shm");
		return 1;
	}
	char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	shm_unlink(name);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	double t = now();
	memset(p, 1, n / 2);
	printf("memset, first touch      %6.2f GB/s\n", (double)n / 2 / (now() - t) / 1e9);
	t = now();
	for (size_t i = n / 2; i < n; i += 4096) /* what a background prefault would do */
		__atomic_fetch_add((long *)(p + i), 0, __ATOMIC_RELAXED);
	printf("touch pass, 1 op/page    %6.2f GB/s\n", (double)n / 2 / (now() - t) / 1e9);
	t = now();
	memset(p, 2, n);
	printf("memset, touched memory   %6.2f GB/s\n", (double)n / (now() - t) / 1e9);
	return mode_split(fd, n);
}
