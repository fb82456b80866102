/* cmd/openlake/cp_cmd.c - `openlake cp`: files between this host and any S3 endpoint over
 * libopenlake's S3 client (parallel parts and ranges, CRC32C, retries, resumable uploads). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/config.h" /* ol_parse_size */
#include "cmds.h"
#include "openlake/openlake_s3.h"

static const char cp_usage[] =
    "Usage: openlake cp SRC DST [options]\n"
    "\n"
    "Copy a file to or from S3 (as `aws s3 cp`). SRC and DST: a local path, or\n"
    "s3://BUCKET/KEY. A KEY that is empty or ends in '/' names a folder: the file's name is\n"
    "appended. Large files move as parallel parts (upload) or parallel ranges (download).\n"
    "\n"
    "Options:\n"
    "  -r, --recursive        copy every file under a local directory, or every key under\n"
    "                         an S3 prefix\n"
    "  --endpoint-url URL     S3 endpoint, http[s]://HOST[:PORT] (else AWS_ENDPOINT_URL,\n"
    "                         or endpoint_url of the profile)\n"
    "  --profile NAME         profile of ~/.aws/credentials and ~/.aws/config (else\n"
    "                         AWS_PROFILE, else default); keys also from AWS_ACCESS_KEY_ID\n"
    "                         and AWS_SECRET_ACCESS_KEY\n"
    "  --region NAME          signing region (else AWS_REGION, the profile, us-east-1)\n"
    "  --ca-bundle FILE       PEM CA bundle that signs an https endpoint's certificate\n"
    "                         (else AWS_CA_BUNDLE, the profile's ca_bundle, the system's)\n"
    "  --jobs N               parallel connections per file (default 8)\n"
    "  --part-size SIZE       multipart part size, e.g. 16MiB (default: from the file size,\n"
    "                         at least 8MiB, at most 10000 parts)\n"
    "  --resume               continue an upload that was interrupted: parts already\n"
    "                         uploaded (same size and MD5) are kept, the rest is sent\n"
    "  --max-bandwidth RATE   upload limit in bytes per second, e.g. 50MiB\n"
    "  --retries N            attempts per request (default 5)\n"
    "  -q, --quiet            no progress output\n"
    "\n"
    "Examples:\n"
    "  openlake cp model.safetensors s3://models/llama/ --endpoint-url http://127.0.0.1:9000\n"
    "  openlake cp -r s3://ckpt/run1/step-100/ ./step-100/\n"
    "  openlake cp --resume big.bin s3://data/big.bin\n";

struct cp {
	struct ol_s3_opts o;
	struct ol_s3 *s;
	int recursive, resume, quiet, tty;
	unsigned failed, copied;
	const char *label; /* progress line */
	char err[512];	   /* a local failure of this file ("" = look at the S3 client's) */
	double t0, last_draw;
};

static double
now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
is_s3(const char *p)
{
	return strncmp(p, "s3://", 5) == 0;
}

/* "s3://b/k" -> bucket, key ("" when none) */
static int
split_s3(const char *uri, char *bucket, size_t bcap, char *key, size_t kcap)
{
	const char *b = uri + 5, *sl = strchr(b, '/');
	size_t bl = sl ? (size_t)(sl - b) : strlen(b);
	if (bl == 0 || bl >= bcap || strlen(sl ? sl + 1 : "") >= kcap) {
		fprintf(stderr, "openlake cp: '%s' is not s3://BUCKET/KEY\n", uri);
		return -EINVAL;
	}
	memcpy(bucket, b, bl);
	bucket[bl] = 0;
	snprintf(key, kcap, "%s", sl ? sl + 1 : "");
	return 0;
}

static int
progress(uint64_t done, uint64_t total, void *arg)
{
	struct cp *c = arg;
	double t = now_s();
	if (c->quiet || !c->tty || (t - c->last_draw < 0.1 && done < total))
		return 0;
	c->last_draw = t;
	int w = 30, fill = total ? (int)((double)done / (double)total * w) : w;
	double rate = (double)done / (t - c->t0 > 1e-6 ? t - c->t0 : 1e-6) / 1048576.0;
	fprintf(stderr, "\r%-40.40s [%.*s%*s] %3d%% %8.1f MiB/s", c->label, fill,
		"##############################", w - fill, "",
		total ? (int)(done * 100 / total) : 100, rate);
	return 0;
}

static void
report(struct cp *c, const char *verb, const char *from, const char *to, uint64_t bytes, int rc,
       unsigned resumed)
{
	double dt = now_s() - c->t0;
	if (c->tty && !c->quiet)
		fprintf(stderr, "\r%*s\r", 80, "");
	if (rc) {
		c->failed++;
		fprintf(stderr, "openlake cp: %s failed: %s -> %s: %s\n", verb, from, to,
			c->err[0]		? c->err
			: ol_s3_last_error()[0] ? ol_s3_last_error()
						: ol_s3_strerror(rc));
		return;
	}
	c->copied++;
	if (c->quiet)
		return;
	if (resumed)
		printf("resumed: %u part(s) were already uploaded\n", resumed);
	printf("%s: %s to %s (%llu bytes, %.1f MiB/s)\n", verb, from, to, (unsigned long long)bytes,
	       (double)bytes / 1048576.0 / (dt > 1e-6 ? dt : 1e-6));
	fflush(stdout);
}

static int
upload(struct cp *c, const char *path, const char *bucket, const char *key)
{
	struct stat st = {0};
	void *map = NULL;
	unsigned resumed = 0;
	char uri[2300];
	int rc = 0, fd = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(uri, sizeof(uri), "s3://%s/%s", bucket, key);
	c->label = path;
	c->t0 = now_s();
	c->err[0] = 0;
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		rc = fd < 0 ? -errno : -EISDIR;
		snprintf(c->err, sizeof(c->err), "cannot read %s: %s%s", path, strerror(-rc),
			 rc == -EISDIR ? " (copy a directory with --recursive)" : "");
		report(c, "upload", path, uri, 0, rc, 0);
		goto out;
	}
	if (st.st_size > 0) {
		map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED) {
			map = NULL;
			rc = -errno;
			snprintf(c->err, sizeof(c->err), "cannot map %s: %s", path, strerror(-rc));
			report(c, "upload", path, uri, 0, rc, 0);
			goto out;
		}
		madvise(map, (size_t)st.st_size, MADV_SEQUENTIAL);
	}
	struct ol_iov iov = {map, (size_t)st.st_size};
	rc = ol_s3_put(c->s, bucket, key, &iov, 1,
		       c->resume ? OL_S3_PUT_RESUME | OL_S3_PUT_KEEP_FAILED : 0, progress, c, NULL,
		       0, &resumed);
	report(c, "upload", path, uri, (uint64_t)st.st_size, rc, resumed);
	if (rc && !c->resume && (uint64_t)st.st_size > ol_s3_part_size(c->s, (uint64_t)st.st_size))
		fprintf(stderr,
			"  (the multipart upload was aborted; with --resume a failed upload "
			"is kept and the next --resume run continues it)\n");
out:
	if (map)
		munmap(map, (size_t)st.st_size);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* the parent directories of path */
static int
mkdirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		int rc = mkdir(path, 0777) == 0 || errno == EEXIST ? 0 : -errno;
		*p = '/';
		if (rc)
			return rc;
	}
	return 0;
}

/* Into a temporary file beside path (mapped: ranges land in the page cache directly), made
 * durable, then renamed: an interrupted download never leaves a partial file under path. */
static int
download(struct cp *c, const char *bucket, const char *key, const char *path)
{
	char tmp[4200], uri[2300];
	uint64_t size = 0;
	void *map = NULL;
	int fd = -1, rc;
	snprintf(uri, sizeof(uri), "s3://%s/%s", bucket, key);
	snprintf(tmp, sizeof(tmp), "%s.openlake-tmp", path);
	c->label = uri;
	c->t0 = now_s();
	c->err[0] = 0;
	rc = ol_s3_head(c->s, bucket, key, &size, NULL, 0);
	if (!rc && (rc = mkdirs(tmp)) != 0)
		snprintf(c->err, sizeof(c->err), "cannot create the folders of %s: %s", path,
			 strerror(-rc));
	if (!rc) {
		fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		rc = fd < 0 || ftruncate(fd, (off_t)size) != 0 ? -errno : 0;
		if (rc)
			snprintf(c->err, sizeof(c->err), "cannot write %s: %s", tmp, strerror(-rc));
	}
	if (!rc && size) {
		map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		rc = map == MAP_FAILED ? -errno : 0;
		if (rc) {
			map = NULL;
			snprintf(c->err, sizeof(c->err), "cannot map %s: %s", tmp, strerror(-rc));
		}
	}
	if (!rc) {
		struct ol_iov iov = {map, size};
		rc = ol_s3_get(c->s, bucket, key, 0, &iov, 1, size ? OL_S3_GET_WHOLE : 0, progress,
			       c);
	}
	if (!rc &&
	    ((map && msync(map, size, MS_SYNC) != 0) || fsync(fd) != 0 || rename(tmp, path) != 0)) {
		rc = -errno;
		snprintf(c->err, sizeof(c->err), "cannot write %s: %s", path, strerror(-rc));
	}
	if (map)
		munmap(map, size);
	if (fd >= 0)
		close(fd);
	if (rc && fd >= 0)
		unlink(tmp);
	report(c, "download", uri, path, size, rc, 0);
	return rc;
}

/* ---- recursive ---- */

static struct cp *walk_cp; /* nftw has no argument */
static const char *walk_root, *walk_bucket, *walk_prefix;

static int
walk_file(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	char key[2100];
	const char *rel = path + strlen(walk_root);
	(void)st;
	(void)ftw;
	if (type != FTW_F)
		return 0;
	while (*rel == '/')
		rel++;
	if (snprintf(key, sizeof(key), "%s%s", walk_prefix, rel) >= (int)sizeof(key)) {
		fprintf(stderr, "openlake cp: %s: key too long, skipped\n", path);
		walk_cp->failed++;
		return 0;
	}
	(void)upload(walk_cp, path, walk_bucket, key);
	return 0;
}

struct dl_list {
	char **keys;
	size_t n, cap;
};

static int
collect(const char *key, uint64_t size, void *arg)
{
	struct dl_list *l = arg;
	(void)size;
	if (l->n == l->cap) {
		size_t nc = l->cap ? 2 * l->cap : 256;
		char **k = realloc(l->keys, nc * sizeof(*k));
		if (!k)
			return -ENOMEM;
		l->keys = k;
		l->cap = nc;
	}
	l->keys[l->n] = strdup(key);
	return l->keys[l->n++] ? 0 : -ENOMEM;
}

/* a key's path below the destination must stay below it */
static int
safe_rel(const char *rel)
{
	if (!*rel || rel[strlen(rel) - 1] == '/')
		return 0; /* a "folder" marker object */
	for (const char *p = rel; p; p = strchr(p, '/') ? strchr(p, '/') + 1 : NULL)
		if (!strncmp(p, "../", 3) || !strcmp(p, "..") || !strncmp(p, "./", 2) || *p == '/')
			return 0;
	return 1;
}

static int
download_tree(struct cp *c, const char *bucket, const char *prefix, const char *dir)
{
	struct dl_list l = {0};
	char path[4100];
	int rc = ol_s3_list(c->s, bucket, prefix, collect, &l);
	if (rc)
		fprintf(stderr, "openlake cp: cannot list s3://%s/%s: %s\n", bucket, prefix,
			ol_s3_last_error());
	for (size_t i = 0; !rc && i < l.n; i++) {
		const char *rel = l.keys[i] + strlen(prefix);
		while (*rel == '/')
			rel++;
		if (!safe_rel(rel)) {
			fprintf(stderr,
				"openlake cp: key '%s' does not map to a file below %s, "
				"skipped\n",
				l.keys[i], dir);
			continue;
		}
		size_t dl = strlen(dir); /* DST/ as the README writes it: no "//" in the names */
		snprintf(path, sizeof(path), "%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/",
			 rel);
		(void)download(c, bucket, l.keys[i], path);
	}
	for (size_t i = 0; i < l.n; i++)
		free(l.keys[i]);
	free(l.keys);
	return rc;
}

/* ---- arguments ---- */

static int
parse_args(struct cp *c, int argc, char **argv, const char **src, const char **dst)
{
	*src = *dst = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t n;
		int val = !strcmp(a, "--endpoint-url") || !strcmp(a, "--profile") ||
			  !strcmp(a, "--region") || !strcmp(a, "--jobs") ||
			  !strcmp(a, "--ca-bundle") || !strcmp(a, "--part-size") ||
			  !strcmp(a, "--max-bandwidth") || !strcmp(a, "--retries");
		if (val && !v) {
			fprintf(stderr, "openlake cp: %s needs a value (see openlake cp --help)\n",
				a);
			return 2;
		}
		if (!strcmp(a, "-r") || !strcmp(a, "--recursive"))
			c->recursive = 1;
		else if (!strcmp(a, "--resume"))
			c->resume = 1;
		else if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
			c->quiet = 1;
		else if (!strcmp(a, "--endpoint-url"))
			c->o.endpoint = v;
		else if (!strcmp(a, "--profile"))
			c->o.profile = v;
		else if (!strcmp(a, "--region"))
			c->o.region = v;
		else if (!strcmp(a, "--ca-bundle"))
			c->o.ca_file = v;
		else if (val) {
			if (ol_parse_size(v, &n) != 0 || n == 0 ||
			    (strcmp(a, "--part-size") && strcmp(a, "--max-bandwidth") && n > 256)) {
				fprintf(stderr, "openlake cp: %s '%s' is not a valid %s\n", a, v,
					strcmp(a, "--part-size") && strcmp(a, "--max-bandwidth")
					    ? "count (1..256)"
					    : "size (e.g. 16MiB)");
				return 2;
			}
			if (!strcmp(a, "--part-size") && n < (5u << 20)) {
				fprintf(stderr,
					"openlake cp: --part-size %s is below S3's 5MiB "
					"minimum part\n",
					v);
				return 2;
			}
			if (!strcmp(a, "--jobs"))
				c->o.conns = (unsigned)n;
			else if (!strcmp(a, "--retries"))
				c->o.retries = (unsigned)n;
			else if (!strcmp(a, "--part-size"))
				c->o.part_size = n;
			else
				c->o.max_bytes_per_sec = n;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr,
				"openlake cp: unknown option '%s' (see openlake cp --help)\n", a);
			return 2;
		} else if (!*src) {
			*src = a;
		} else if (!*dst) {
			*dst = a;
		} else {
			fprintf(stderr, "openlake cp: one SRC and one DST (got '%s' too)\n", a);
			return 2;
		}
		i += val;
	}
	if (!*dst) {
		fprintf(stderr, "openlake cp: give SRC and DST (see openlake cp --help)\n");
		return 2;
	}
	if (is_s3(*src) == is_s3(*dst)) {
		fprintf(stderr, "openlake cp: %s\n",
			is_s3(*src)
			    ? "copying between two S3 locations is not supported: download, "
			      "then upload"
			    : "one of SRC and DST must be s3://BUCKET/KEY (for local copies "
			      "use cp)");
		return 2;
	}
	return 0;
}

static const char *
base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static int
run_upload(struct cp *c, const char *src, const char *bucket, const char *key)
{
	struct stat st;
	char k[2100];
	if (stat(src, &st) != 0) {
		fprintf(stderr, "openlake cp: %s: %s\n", src, strerror(errno));
		return 1;
	}
	if (S_ISDIR(st.st_mode)) {
		if (!c->recursive) {
			fprintf(stderr, "openlake cp: %s is a directory: add --recursive\n", src);
			return 2;
		}
		size_t kl = strlen(key);
		snprintf(k, sizeof(k), "%s%s", key, kl && key[kl - 1] != '/' ? "/" : "");
		walk_cp = c;
		walk_root = src;
		walk_bucket = bucket;
		walk_prefix = k;
		if (nftw(src, walk_file, 32, FTW_PHYS) != 0) {
			fprintf(stderr, "openlake cp: cannot walk %s: %s\n", src, strerror(errno));
			return 1;
		}
		return c->failed ? 1 : 0;
	}
	if (!*key || key[strlen(key) - 1] == '/')
		snprintf(k, sizeof(k), "%s%s", key, base_name(src));
	else
		snprintf(k, sizeof(k), "%s", key);
	return upload(c, src, bucket, k) ? 1 : 0;
}

static int
run_download(struct cp *c, const char *bucket, const char *key, const char *dst)
{
	struct stat st;
	char path[4200];
	int isdir = stat(dst, &st) == 0 && S_ISDIR(st.st_mode);
	if (c->recursive) {
		snprintf(path, sizeof(path), "%s/", dst);
		int rc = isdir ? 0 : mkdirs(path);
		if (rc) {
			fprintf(stderr, "openlake cp: cannot create %s: %s\n", dst, strerror(-rc));
			return 1;
		}
		return download_tree(c, bucket, key, dst) || c->failed ? 1 : 0;
	}
	if (!*key || key[strlen(key) - 1] == '/') {
		fprintf(stderr,
			"openlake cp: s3://%s/%s is a prefix: name an object, or add "
			"--recursive\n",
			bucket, key);
		return 2;
	}
	if (isdir || dst[strlen(dst) - 1] == '/')
		snprintf(path, sizeof(path), "%s%s%s", dst, dst[strlen(dst) - 1] == '/' ? "" : "/",
			 base_name(key));
	else
		snprintf(path, sizeof(path), "%s", dst);
	return download(c, bucket, key, path) ? 1 : 0;
}

int
ol_cmd_cp(int argc, char **argv)
{
	struct cp c = {.o = {.size = sizeof(struct ol_s3_opts)}};
	const char *src, *dst;
	char bucket[256], key[2048];
	int rc;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(cp_usage, stdout);
			return 0;
		}
	}
	rc = parse_args(&c, argc, argv, &src, &dst);
	if (rc)
		return rc;
	if (split_s3(is_s3(src) ? src : dst, bucket, sizeof(bucket), key, sizeof(key)))
		return 2;
	c.tty = isatty(2);
	rc = ol_s3_new(&c.o, &c.s);
	if (rc) {
		fprintf(stderr, "openlake cp: %s\n", ol_s3_last_error());
		return 2;
	}
	rc = is_s3(dst) ? run_upload(&c, src, bucket, key) : run_download(&c, bucket, key, dst);
	if (c.recursive && !c.quiet)
		printf("%u file(s) copied, %u failed\n", c.copied, c.failed);
	ol_s3_free(c.s);
	return rc;
}
