/* Runs a libFuzzer target over corpus files as a plain test (no clang needed).
 * Usage: fuzz_<name> DIR_OR_FILE...   Prints TAP: one line per file. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int n_run;

static int
run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		printf("not ok %d - cannot open %s\n", ++n_run, path);
		return -1;
	}
	size_t cap = 1 << 16, len = 0;
	uint8_t *buf = malloc(cap);
	size_t r;
	while (buf && (r = fread(buf + len, 1, cap - len, f)) > 0) {
		len += r;
		if (len == cap) {
			cap *= 2;
			buf = realloc(buf, cap);
		}
	}
	fclose(f);
	if (!buf) {
		printf("not ok %d - out of memory on %s\n", ++n_run, path);
		return -1;
	}
	/* copy into an exact-size allocation so ASan catches reads past the end */
	uint8_t *exact = malloc(len ? len : 1);
	memcpy(exact, buf, len);
	free(buf);
	LLVMFuzzerTestOneInput(exact, len);
	free(exact);
	printf("ok %d - %s\n", ++n_run, path);
	return 0;
}

int
main(int argc, char **argv)
{
	int bad = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0) {
			printf("not ok %d - missing %s\n", ++n_run, argv[i]);
			bad = 1;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			bad |= run_file(argv[i]) != 0;
			continue;
		}
		struct dirent **ents;
		int n = scandir(argv[i], &ents, NULL, alphasort);
		for (int j = 0; j < n; j++) {
			if (ents[j]->d_name[0] != '.') {
				char p[4096];
				snprintf(p, sizeof(p), "%s/%s", argv[i], ents[j]->d_name);
				bad |= run_file(p) != 0;
			}
			free(ents[j]);
		}
		if (n >= 0)
			free(ents);
	}
	printf("1..%d\n", n_run);
	return bad;
}
