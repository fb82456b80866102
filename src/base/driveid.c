/* base/driveid.c - a drive's identity record: codec and atomic file I/O (see driveid.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/driveid.h"
#include "base/hex.h"

#define MAGIC "openlake-format "

enum { F_STORE, F_DRIVE, F_POOL, F_SETS, F_SET, F_INDEX, F_DRIVES, F_PARITY, F_N };

static const char *const names[F_N] = {"store", "drive", "pool",   "sets",
				       "set",	"index", "drives", "parity"};

static bool
token_ok(const char *s, size_t n, size_t cap, bool hex)
{
	if (!n || n >= cap)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (hex ? ol_hex_val(c) < 0 || (c >= 'A' && c <= 'F')
			: !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			    (c >= '0' && c <= '9') || c == '-'))
			return false;
	}
	return !hex || n == OL_DRIVEID_UUID - 1;
}

static int
number(const char *s, size_t n, unsigned *out)
{
	char buf[16], *end;
	unsigned long long v;

	if (!n || n >= sizeof(buf) || s[0] < '0' || s[0] > '9')
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = 0;
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (errno || *end || v > 0xffff)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

/* One "key value" line into id; *seen gets the field's bit. */
static int
field(const char *s, size_t n, struct ol_driveid *id, unsigned *seen)
{
	unsigned *num[F_N] = {NULL,	NULL,	    &id->pool,	 &id->sets,
			      &id->set, &id->index, &id->drives, &id->parity};
	const char *sp = memchr(s, ' ', n);
	size_t kl, vl;

	if (!sp)
		return -EINVAL;
	kl = (size_t)(sp - s);
	vl = n - kl - 1;
	for (int f = 0; f < F_N; f++) {
		if (strlen(names[f]) != kl || memcmp(s, names[f], kl))
			continue;
		if (*seen & (1u << f))
			return -EINVAL;
		*seen |= 1u << f;
		if (f == F_STORE || f == F_DRIVE) {
			char *dst = f == F_STORE ? id->store : id->drive;
			size_t cap = f == F_STORE ? OL_DRIVEID_STORE : OL_DRIVEID_UUID;

			if (!token_ok(sp + 1, vl, cap, f == F_DRIVE))
				return -EINVAL;
			memcpy(dst, sp + 1, vl);
			dst[vl] = 0;
			return 0;
		}
		return number(sp + 1, vl, num[f]);
	}
	return -EINVAL;
}

int
ol_driveid_parse(const char *buf, size_t len, struct ol_driveid *out)
{
	const unsigned v1 = 1u << F_STORE | 1u << F_SETS | 1u << F_SET | 1u << F_DRIVES;
	const unsigned v2 = (1u << F_N) - 1;
	struct ol_driveid id = {
	    .pool = OL_DRIVEID_NONE, .index = OL_DRIVEID_NONE, .parity = OL_DRIVEID_NONE};
	const char *p = buf, *end = buf + len, *nl;
	unsigned seen = 0;

	if (len < sizeof(MAGIC) || memcmp(buf, MAGIC, sizeof(MAGIC) - 1))
		return -EINVAL;
	p += sizeof(MAGIC) - 1;
	if (p + 2 > end || p[1] != '\n' || (p[0] != '1' && p[0] != '2'))
		return -EINVAL;
	id.version = (unsigned)(p[0] - '0');
	for (p += 2; p < end; p = nl + 1) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			nl = end; /* a last line without its newline */
		if (field(p, (size_t)(nl - p), &id, &seen))
			return -EINVAL;
	}
	if (seen != (id.version == 1 ? v1 : v2) || !id.sets || id.set >= id.sets || !id.drives ||
	    (id.version == 2 && (id.index >= id.drives || id.parity >= id.drives)))
		return -EINVAL;
	*out = id;
	return 0;
}

int
ol_driveid_format(const struct ol_driveid *id, char *buf, size_t cap)
{
	int n;

	if (!token_ok(id->store, strlen(id->store), OL_DRIVEID_STORE, false) ||
	    !token_ok(id->drive, strlen(id->drive), OL_DRIVEID_UUID, true) || !id->sets ||
	    id->set >= id->sets || !id->drives || id->index >= id->drives ||
	    id->parity >= id->drives || id->pool > 0xffff || id->sets > 0xffff ||
	    id->drives > 0xffff)
		return -EINVAL;
	n = snprintf(buf, cap,
		     MAGIC "2\nstore %s\ndrive %s\npool %u\nsets %u\nset %u\nindex %u\ndrives "
			   "%u\nparity %u\n",
		     id->store, id->drive, id->pool, id->sets, id->set, id->index, id->drives,
		     id->parity);
	return n < 0 || (size_t)n >= cap ? -EINVAL : n;
}

int
ol_driveid_uuid(char out[OL_DRIVEID_UUID])
{
	unsigned char u[16];

	if (getrandom(u, sizeof(u), 0) != (ssize_t)sizeof(u))
		return errno ? -errno : -EIO;
	ol_hex_encode(u, sizeof(u), out);
	return 0;
}

int
ol_driveid_read(const char *root, struct ol_driveid *out)
{
	char p[4096], buf[OL_DRIVEID_TEXT];
	ssize_t n;
	int fd;

	if ((size_t)snprintf(p, sizeof(p), "%s/%s", root, OL_DRIVEID_NAME) >= sizeof(p))
		return -ENAMETOOLONG;
	fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf));
	if (n < 0)
		n = -errno;
	close(fd);
	if (n < 0)
		return (int)n;
	if ((size_t)n == sizeof(buf))
		return -EINVAL; /* longer than any record */
	return ol_driveid_parse(buf, (size_t)n, out);
}

static void
sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

int
ol_driveid_write(const char *root, const struct ol_driveid *id)
{
	char dir[4096], p[4096 + 32], tmp[4096 + 48], body[OL_DRIVEID_TEXT];
	int fd, rc = 0, n = ol_driveid_format(id, body, sizeof(body));

	if (n < 0)
		return n;
	if ((size_t)snprintf(dir, sizeof(dir), "%s/.openlake", root) >= sizeof(dir))
		return -ENAMETOOLONG;
	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	snprintf(p, sizeof(p), "%s/%s", root, OL_DRIVEID_NAME);
	snprintf(tmp, sizeof(tmp), "%s.tmp", p);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	errno = 0;
	if (write(fd, body, (size_t)n) != n || fsync(fd))
		rc = errno ? -errno : -EIO;
	close(fd);
	if (!rc && rename(tmp, p))
		rc = -errno;
	if (rc)
		unlink(tmp);
	else
		sync_dir(dir);
	return rc;
}

bool
ol_driveid_used(const char *root)
{
	char p[4096];
	struct stat sb;

	snprintf(p, sizeof(p), "%s/.openlake/meta.mdb", root);
	return stat(p, &sb) == 0;
}
