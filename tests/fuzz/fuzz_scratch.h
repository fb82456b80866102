/* tests/fuzz/fuzz_scratch.h - keep libFuzzer runs out of the checked-in corpus.
 *
 * libFuzzer writes every new input into the FIRST corpus directory on its command line, so the
 * natural `fuzz_http tests/fuzz/corpus/http` would add files to the repository. Each target
 * includes this header once: its LLVMFuzzerInitialize (called by libFuzzer before it reads its
 * flags; the corpus-replay runner fuzz_main.c never calls it) sees a first corpus directory
 * inside a tests/fuzz/corpus/ tree and puts a scratch directory before it, which libFuzzer then
 * writes to while the checked-in one is only read: $OPENLAKE_FUZZ_SCRATCH/NAME, default
 * /tmp/openlake-fuzz-scratch/NAME (created). A first directory elsewhere is left as given, and
 * OPENLAKE_FUZZ_SCRATCH=off leaves the command line alone (to -merge=1 new seeds into the
 * checked-in corpus on purpose). */
#ifndef OL_TESTS_FUZZ_SCRATCH_H
#define OL_TESTS_FUZZ_SCRATCH_H

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);

static int
fuzz_scratch_mkdirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		int rc = mkdir(path, 0755) && errno != EEXIST ? -errno : 0;
		*p = '/';
		if (rc)
			return rc;
	}
	return mkdir(path, 0755) && errno != EEXIST ? -errno : 0;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char real[PATH_MAX], scratch[PATH_MAX];
	struct stat st;
	int i = 1;
	while (i < *argc && (*argv)[i][0] == '-')
		i++;
	if (i >= *argc || stat((*argv)[i], &st) || !S_ISDIR(st.st_mode) ||
	    !realpath((*argv)[i], real) || !strstr(real, "/tests/fuzz/corpus/"))
		return 0;
	const char *base = strrchr(real, '/') + 1, *root = getenv("OPENLAKE_FUZZ_SCRATCH");
	if (root && strcmp(root, "off") == 0)
		return 0;
	int n = snprintf(scratch, sizeof(scratch), "%s/%s",
			 root && *root ? root : "/tmp/openlake-fuzz-scratch", base);
	char **nv = malloc(sizeof(char *) * (size_t)(*argc + 2));
	if (n <= 0 || (size_t)n >= sizeof(scratch) || !nv || fuzz_scratch_mkdirs(scratch)) {
		fprintf(stderr,
			"fuzz: cannot make the scratch corpus %s; give a scratch directory "
			"before %s\n",
			scratch, (*argv)[i]);
		exit(2);
	}
	memcpy(nv, *argv, sizeof(char *) * (size_t)i);
	nv[i] = strdup(scratch);
	memcpy(nv + i + 1, *argv + i, sizeof(char *) * (size_t)(*argc - i + 1));
	fprintf(stderr, "fuzz: new inputs go to %s; the checked-in corpus %s is only read\n",
		scratch, (*argv)[i]);
	*argv = nv;
	(*argc)++;
	return 0;
}

#endif
