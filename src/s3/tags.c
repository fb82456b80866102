/* s3/tags.c - object and bucket tags: the x-amz-tagging header form (also how tags are kept:
 * a URL query string "k1=v1&k2=v2"), AWS's limits, and the Tagging XML answer. Pure: no
 * sockets, no store; the Tagging request body is parsed in xmlparse.c. */
#include "s3/s3util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

void
ol_s3_tags_free(struct ol_s3_tags *t)
{
	for (unsigned i = 0; i < t->n; i++) {
		free(t->key[i]);
		free(t->val[i]);
	}
	t->n = 0;
}

int
ol_s3_tags_add(struct ol_s3_tags *t, const char *k, size_t kl, const char *v, size_t vl)
{
	if (t->n >= OL_S3_MAX_TAGS + 1) /* one over the limit is kept: the check names it */
		return -E2BIG;
	t->key[t->n] = ol_xmalloc(kl + 1);
	memcpy(t->key[t->n], k, kl);
	t->key[t->n][kl] = '\0';
	t->val[t->n] = ol_xmalloc(vl + 1);
	memcpy(t->val[t->n], v, vl);
	t->val[t->n][vl] = '\0';
	t->n++;
	return 0;
}

int
ol_s3_tags_parse_query(const char *s, size_t n, struct ol_s3_tags *t)
{
	size_t i = 0;
	char *k = ol_xmalloc(OL_S3_TAG_BYTES + 1), *v = ol_xmalloc(OL_S3_TAG_BYTES + 1);
	int rc = 0;

	memset(t, 0, sizeof(*t));
	while (i < n && !rc) {
		const char *amp = memchr(s + i, '&', n - i);
		size_t end = amp ? (size_t)(amp - s) : n;
		const char *eq = memchr(s + i, '=', end - i);
		size_t ke = eq ? (size_t)(eq - s) : end;
		long kl = ol_s3_pct_decode(s + i, ke - i, k, OL_S3_TAG_BYTES + 1, true);
		long vl =
		    eq ? ol_s3_pct_decode(eq + 1, end - ke - 1, v, OL_S3_TAG_BYTES + 1, true) : 0;

		if (kl < 0 || vl < 0)
			rc = -EINVAL;
		else if (end > i) /* "a&&b": empty pairs are skipped */
			rc = ol_s3_tags_add(t, k, (size_t)kl, v, (size_t)vl);
		i = end + 1;
	}
	free(k);
	free(v);
	if (rc)
		ol_s3_tags_free(t);
	return rc;
}

/* Unicode characters in a valid UTF-8 string. */
static size_t
chars(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xC0) != 0x80;
	return n;
}

static bool
printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

int
ol_s3_tags_check(const struct ol_s3_tags *t, unsigned max, const char **why)
{
	if (t->n > max) {
		*why = max == OL_S3_MAX_OBJ_TAGS ? "Object tags cannot be greater than 10"
						 : "Bucket tag count cannot be greater than 50";
		return -EINVAL;
	}
	for (unsigned i = 0; i < t->n; i++) {
		size_t kl = strlen(t->key[i]), vl = strlen(t->val[i]);

		if (kl == 0 || chars(t->key[i]) > OL_S3_TAG_KEY_MAX ||
		    !ol_s3_utf8_valid(t->key[i], kl) || !printable(t->key[i])) {
			*why = "The TagKey you have provided is invalid";
			return -EINVAL;
		}
		if (chars(t->val[i]) > OL_S3_TAG_VALUE_MAX || !ol_s3_utf8_valid(t->val[i], vl) ||
		    !printable(t->val[i])) {
			*why = "The TagValue you have provided is invalid";
			return -EINVAL;
		}
		if (strncmp(t->key[i], "aws:", 4) == 0) {
			*why = "Your TagKey cannot be prefixed with aws:";
			return -EINVAL;
		}
		for (unsigned j = 0; j < i; j++)
			if (strcmp(t->key[i], t->key[j]) == 0) {
				*why = "Cannot provide multiple Tags with the same key";
				return -EINVAL;
			}
	}
	return 0;
}

void
ol_s3_tags_encode(const struct ol_s3_tags *t, struct ol_buf *out)
{
	for (unsigned i = 0; i < t->n; i++) {
		if (i)
			ol_buf_adds(out, "&");
		ol_s3_url_encode(out, t->key[i], strlen(t->key[i]));
		ol_buf_adds(out, "=");
		ol_s3_url_encode(out, t->val[i], strlen(t->val[i]));
	}
}

void
ol_s3_tags_xml(const struct ol_s3_tags *t, struct ol_buf *x)
{
	ol_s3_xml_open_root(x, "Tagging");
	ol_buf_adds(x, "<TagSet>");
	for (unsigned i = 0; i < t->n; i++) {
		ol_buf_adds(x, "<Tag>");
		ol_s3_xml_elem(x, "Key", t->key[i]);
		ol_s3_xml_elem(x, "Value", t->val[i]);
		ol_buf_adds(x, "</Tag>");
	}
	ol_buf_adds(x, "</TagSet></Tagging>");
}
