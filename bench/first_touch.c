/* bench/first_touch.c - how fast this machine backs fresh shared memory, beside memset of
 * memory already touched. Explains the KV pool's put figures on fresh pools (bench/RESULTS.md).
 *   cc -O2 -o /tmp/first_touch bench/first_touch.c -lrt && /tmp/first_touch [MiB] */
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
	return 0;
}
