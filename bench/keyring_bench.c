/* bench/keyring_bench.c - what finding an S3 key costs the SigV4 verifier (base/keyring):
 * ns per ol_keyring_secret_for() for a config key (the reference, measured in the same run)
 * and for a run-time key among 1000, with 1 and 2 threads reading at once while nothing and
 * while a writer adds and removes a key. One line per figure; not a pass/fail test.
 *   ninja -C build src/base/keyring_bench && build/src/base/keyring_bench [iterations] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/keyring.h"

static struct ol_config cfg;
static long iters = 2000000;
static _Atomic int stop;

struct job {
	const char *ak;
	double ns;
};

static void *
reader(void *arg)
{
	struct job *j = arg;
	uint64_t t0 = ol_clock_us();
	size_t sink = 0;
	for (long i = 0; i < iters; i++)
		sink += strlen(ol_keyring_secret_for(j->ak, &cfg));
	j->ns = (double)(ol_clock_us() - t0) * 1000.0 / (double)iters;
	if (sink == 1)
		puts("");
	return NULL;
}

static void *
writer(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		ol_keyring_add("CHURNKEY", "churn-secret-1", "churn", 0);
		ol_keyring_remove("CHURNKEY");
	}
	return NULL;
}

static double
run(const char *ak, int threads, bool churn)
{
	pthread_t t[2], w;
	struct job j[2] = {{ak, 0}, {ak, 0}};
	atomic_store(&stop, 0);
	if (churn)
		pthread_create(&w, NULL, writer, NULL);
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, reader, &j[i]);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	atomic_store(&stop, 1);
	if (churn)
		pthread_join(w, NULL);
	return threads == 1 ? j[0].ns : (j[0].ns + j[1].ns) / 2;
}

int
main(int argc, char **argv)
{
	char ak[32];
	if (argc > 1)
		iters = strtol(argv[1], NULL, 10);
	ol_config_default(&cfg);
	snprintf(cfg.creds[1].access_key, sizeof(cfg.creds[1].access_key), "alicekey");
	snprintf(cfg.creds[1].secret_key, sizeof(cfg.creds[1].secret_key), "alicesecret");
	snprintf(cfg.creds[1].user, sizeof(cfg.creds[1].user), "alice");
	cfg.n_creds = 2;
	printf("config key, no run-time keys:      %6.1f ns/lookup (1 thread)\n",
	       run("alicekey", 1, false));
	for (int i = 0; i < 1000; i++) {
		snprintf(ak, sizeof(ak), "FILLER%d", i);
		ol_keyring_add(ak, "filler-secret", "filler", 0);
	}
	ol_keyring_add("BOBRUNTIME", "bob-runtime-secret", "bob", 0);
	for (int th = 1; th <= 2; th++) {
		printf("config key (reference):            %6.1f ns/lookup (%d thread%s)\n",
		       run("alicekey", th, false), th, th > 1 ? "s" : "");
		printf("run-time key among 1001:           %6.1f ns/lookup (%d thread%s)\n",
		       run("BOBRUNTIME", th, false), th, th > 1 ? "s" : "");
		printf("run-time key, a writer churning:   %6.1f ns/lookup (%d thread%s)\n",
		       run("BOBRUNTIME", th, true), th, th > 1 ? "s" : "");
	}
	return 0;
}
