/* s3/listing.c - ListObjects V1 and V2 over the store's ordered iterator.
 *
 * Both versions share one scan: seek to max(prefix, after), walk keys in byte order, roll
 * keys holding the delimiter after the prefix into CommonPrefixes (then seek past the whole
 * prefix), and skip keys <= the cursor (marker, start-after or continuation token) and the
 * common prefix equal to it (a NextMarker / token that named a common prefix).
 * The continuation token is the hex of the last entry returned: opaque and XML-safe. */
#include "s3/s3int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

struct list_params {
	char prefix[OL_S3_MAX_KEY + 1], delim[64], after[OL_S3_MAX_KEY + 1];
	char marker_echo[OL_S3_MAX_KEY + 1], token[2 * OL_S3_MAX_KEY + 8];
	char start_after[OL_S3_MAX_KEY + 1];
	char vmarker[OL_S3_MAX_VID + 1]; /* ListObjectVersions: version-id-marker */
	size_t prefix_len, delim_len, after_len;
	unsigned max_keys;
	bool url, v2, versions, fetch_owner, has_token, has_marker, has_start_after;
	const char *bucket_owner; /* Owner of an entry whose blob names none */
};

struct list_out {
	struct ol_buf contents, prefixes;
	unsigned count;
	bool truncated;
	char last[OL_S3_MAX_KEY + 1];
	size_t last_len;
	char last_vid[OL_STORE_VID_MAX]; /* versions: "" after a common prefix */
};

static int
cmp_bytes(const char *a, size_t al, const char *b, size_t bl)
{
	size_t n = al < bl ? al : bl;
	int c = memcmp(a, b, n);
	return c ? c : (al < bl ? -1 : al > bl);
}

static void
elem_enc(struct ol_buf *x, const struct list_params *p, const char *name, const char *v, size_t n)
{
	ol_s3_xml_elem_url(x, p->url, name, v, n);
}

static int
hex_decode(const char *s, char *out, size_t cap, size_t *n)
{
	size_t l = strlen(s);
	if (l % 2 || l / 2 >= cap || l < 2 || s[0] != '1' || s[1] != '-')
		return -EINVAL;
	s += 2, l -= 2;
	for (size_t i = 0; i < l / 2; i++) {
		char b[3] = {s[2 * i], s[2 * i + 1], 0};
		char *end;
		unsigned long v = strtoul(b, &end, 16);
		if (*end || v == 0)
			return -EINVAL;
		out[i] = (char)v;
	}
	out[l / 2] = '\0';
	*n = l / 2;
	return 0;
}

int
s3_query_param(struct s3_req *r, const char *name, char *buf, size_t cap, size_t *len, bool *has)
{
	long n = ol_s3_query_get(r->query, name, buf, cap);
	if (n == -ENOENT) {
		buf[0] = '\0';
		if (len)
			*len = 0;
		return 0;
	}
	if (n < 0)
		return -1;
	if (len)
		*len = (size_t)n;
	if (has)
		*has = true;
	return 0;
}

static int
parse_params(struct s3_req *r, struct list_params *p, int kind)
{
	char mk[16], enc[16], fo[8];
	bool v2 = kind == 2;
	memset(p, 0, sizeof(*p));
	p->bucket_owner = s3_bucket_owner(r);
	p->v2 = v2;
	p->versions = kind == 3;
	p->max_keys = 1000;
	if (s3_query_param(r, "prefix", p->prefix, sizeof(p->prefix), &p->prefix_len, NULL) < 0 ||
	    s3_query_param(r, "delimiter", p->delim, sizeof(p->delim), &p->delim_len, NULL) < 0 ||
	    s3_query_param(r, "encoding-type", enc, sizeof(enc), NULL, NULL) < 0)
		return -1;
	if (enc[0] && strcmp(enc, "url") != 0)
		return -1;
	p->url = enc[0] != '\0';
	long mkl = ol_s3_query_get(r->query, "max-keys", mk, sizeof(mk));
	if (mkl != -ENOENT) {
		unsigned v;
		if (mkl < 0 || ol_s3_parse_count(mk, &v) < 0)
			return -3;
		p->max_keys = v > 1000 ? 1000 : v;
	}
	if (p->versions &&
	    s3_query_param(r, "version-id-marker", p->vmarker, sizeof(p->vmarker), NULL, NULL) < 0)
		return -4;
	if (p->versions && p->vmarker[0] && !ol_s3_query_has(r->query, "key-marker"))
		return -5;
	if (!v2)
		return s3_query_param(r, p->versions ? "key-marker" : "marker", p->after,
				      sizeof(p->after), &p->after_len, &p->has_marker);
	if (s3_query_param(r, "fetch-owner", fo, sizeof(fo), NULL, NULL) < 0 ||
	    s3_query_param(r, "start-after", p->start_after, sizeof(p->start_after), NULL,
			   &p->has_start_after) < 0 ||
	    s3_query_param(r, "continuation-token", p->token, sizeof(p->token), NULL,
			   &p->has_token) < 0)
		return -1;
	p->fetch_owner = strcmp(fo, "true") == 0;
	/* An empty token lists from the start (or from start-after); it is echoed as sent. */
	if (p->has_token && p->token[0])
		return hex_decode(p->token, p->after, sizeof(p->after), &p->after_len) < 0 ? -2 : 0;
	memcpy(p->after, p->start_after, strlen(p->start_after) + 1);
	p->after_len = strlen(p->after);
	return 0;
}

/* A common prefix entry (the walk then seeks past every key under it). */
static void
add_prefix(struct list_out *o, const struct list_params *p, const char *key, size_t el)
{
	ol_buf_adds(&o->prefixes, "<CommonPrefixes>");
	elem_enc(&o->prefixes, p, "Prefix", key, el);
	ol_buf_adds(&o->prefixes, "</CommonPrefixes>");
}

/* <Owner> of an entry: the user who wrote it (ol-owner in its blob), else the bucket's. */
static void
add_owner(struct ol_buf *x, const struct list_params *p, const struct ol_obj_info *in)
{
	const char *v = p->bucket_owner;
	long n = in->meta ? ol_s3_meta_get(in->meta, in->meta_len, "ol-owner", &v) : -1;
	if (n < 0) {
		v = p->bucket_owner;
		n = (long)strlen(v);
	}
	ol_buf_adds(x, "<Owner><ID>");
	ol_s3_xml_esc(x, v, (size_t)n);
	ol_buf_adds(x, "</ID><DisplayName>");
	ol_s3_xml_esc(x, v, (size_t)n);
	ol_buf_adds(x, "</DisplayName></Owner>");
}

static void
add_content(struct list_out *o, const struct list_params *p, const char *key, size_t kl,
	    const struct ol_obj_info *in)
{
	char date[32];
	ol_s3_iso_date(in->mtime_ns / 1000000, date);
	if (p->versions && in->delete_marker) {
		ol_buf_adds(&o->contents, "<DeleteMarker>");
		elem_enc(&o->contents, p, "Key", key, kl);
		ol_s3_xml_elem(&o->contents, "VersionId", in->version_id);
		ol_s3_xml_elem(&o->contents, "IsLatest", in->is_latest ? "true" : "false");
		ol_s3_xml_elem(&o->contents, "LastModified", date);
		add_owner(&o->contents, p, in);
		ol_buf_adds(&o->contents, "</DeleteMarker>");
		return;
	}
	ol_buf_adds(&o->contents, p->versions ? "<Version>" : "<Contents>");
	elem_enc(&o->contents, p, "Key", key, kl);
	if (p->versions) {
		ol_s3_xml_elem(&o->contents, "VersionId", in->version_id);
		ol_s3_xml_elem(&o->contents, "IsLatest", in->is_latest ? "true" : "false");
	}
	ol_s3_xml_elem(&o->contents, "LastModified", date);
	ol_buf_adds(&o->contents, "<ETag>&quot;");
	ol_s3_xml_esc(&o->contents, in->etag, strlen(in->etag));
	ol_buf_adds(&o->contents, "&quot;</ETag>");
	ol_s3_xml_elemu(&o->contents, "Size", s3_obj_size(in));
	if (!p->v2 || p->fetch_owner)
		add_owner(&o->contents, p, in);
	ol_buf_adds(&o->contents, "<StorageClass>STANDARD</StorageClass>");
	ol_buf_adds(&o->contents, p->versions ? "</Version>" : "</Contents>");
}

static void
set_last(struct list_out *o, const char *k, size_t n)
{
	memcpy(o->last, k, n);
	o->last[n] = '\0';
	o->last_len = n;
}

/* Seek target just past every key starting with cp[0..n): cp with its last byte + 1. */
static int
seek_past(struct ol_iter *it, const char *cp, size_t n)
{
	char tmp[OL_S3_MAX_KEY + 1];
	while (n && (unsigned char)cp[n - 1] == 0xFF)
		n--;
	if (n == 0)
		return 1; /* nothing can follow */
	memcpy(tmp, cp, n);
	tmp[n - 1] = (char)((unsigned char)tmp[n - 1] + 1);
	return ol_store_iter_seek(it, tmp, n);
}

static int
initial_seek(struct ol_iter *it, const struct list_params *p)
{
	if (cmp_bytes(p->after, p->after_len, p->prefix, p->prefix_len) > 0)
		return ol_store_iter_seek(it, p->after, p->after_len);
	return ol_store_iter_seek(it, p->prefix, p->prefix_len);
}

/* Returns 0 or -errno. */
static int
scan(struct ol_iter *it, const struct list_params *p, struct list_out *o)
{
	const char *key;
	size_t kl;
	struct ol_obj_info in;
	int rc = initial_seek(it, p);
	if (rc < 0)
		return rc;
	while ((rc = ol_store_iter_next(it, &key, &kl, &in)) == 1) {
		if (kl < p->prefix_len || memcmp(key, p->prefix, p->prefix_len) != 0) {
			if (cmp_bytes(key, kl, p->prefix, p->prefix_len) > 0)
				break;
			continue;
		}
		size_t el = kl; /* entry length: key or common prefix */
		bool is_cp = false;
		if (p->delim_len) {
			const char *d =
			    memmem(key + p->prefix_len, kl - p->prefix_len, p->delim, p->delim_len);
			if (d) {
				el = (size_t)(d - key) + p->delim_len;
				is_cp = true;
			}
		}
		if (is_cp && cmp_bytes(key, el, p->after, p->after_len) == 0) {
			if ((rc = seek_past(it, key, el)) != 0)
				return rc < 0 ? rc : 0;
			continue; /* the cursor is this common prefix */
		}
		if (cmp_bytes(key, kl, p->after, p->after_len) <= 0)
			continue;
		if (o->count >= p->max_keys) {
			o->truncated = p->max_keys > 0;
			break;
		}
		o->count++;
		set_last(o, key, el);
		if (!is_cp) {
			add_content(o, p, key, kl, &in);
			continue;
		}
		add_prefix(o, p, key, el);
		char cp[OL_S3_MAX_KEY + 1];
		memcpy(cp, key, el);
		if ((rc = seek_past(it, cp, el)) != 0)
			return rc < 0 ? rc : 0;
	}
	return rc < 0 ? rc : 0;
}

/* ---- ListObjectVersions: the same walk over the store's version iterator ---- */

static int
vseek_past(struct ol_viter *it, const char *cp, size_t n)
{
	char tmp[OL_S3_MAX_KEY + 1];
	while (n && (unsigned char)cp[n - 1] == 0xFF)
		n--;
	if (n == 0)
		return 1;
	memcpy(tmp, cp, n);
	tmp[n - 1] = (char)((unsigned char)tmp[n - 1] + 1);
	return ol_store_viter_seek(it, tmp, n);
}

/* Is this version at or before the markers (key-marker, version-id-marker)? *passed tells
 * that the version-id-marker was seen in the marker key. */
static bool
before_markers(const struct list_params *p, const char *key, size_t kl, const char *vid,
	       bool *passed)
{
	int c = cmp_bytes(key, kl, p->after, p->after_len);
	if (c != 0 || !p->has_marker)
		return c < 0 || (c == 0 && p->has_marker);
	if (!p->vmarker[0])
		return true; /* key-marker alone: every version of that key was listed */
	if (*passed)
		return false;
	*passed = strcmp(vid, p->vmarker) == 0;
	return true;
}

static int
scan_versions(struct ol_viter *it, const struct list_params *p, struct list_out *o)
{
	const char *key;
	size_t kl;
	struct ol_obj_info in;
	bool passed = false;
	int rc = ol_store_viter_seek(
	    it,
	    cmp_bytes(p->after, p->after_len, p->prefix, p->prefix_len) > 0 ? p->after : p->prefix,
	    cmp_bytes(p->after, p->after_len, p->prefix, p->prefix_len) > 0 ? p->after_len
									    : p->prefix_len);
	if (rc < 0)
		return rc;
	while ((rc = ol_store_viter_next(it, &key, &kl, &in)) == 1) {
		if (kl < p->prefix_len || memcmp(key, p->prefix, p->prefix_len) != 0) {
			if (cmp_bytes(key, kl, p->prefix, p->prefix_len) > 0)
				break;
			continue;
		}
		size_t el = kl;
		bool is_cp = false;
		if (p->delim_len) {
			const char *d =
			    memmem(key + p->prefix_len, kl - p->prefix_len, p->delim, p->delim_len);
			if (d) {
				el = (size_t)(d - key) + p->delim_len;
				is_cp = true;
			}
		}
		if (is_cp && cmp_bytes(key, el, p->after, p->after_len) == 0) {
			char cp[OL_S3_MAX_KEY + 1];
			memcpy(cp, key, el);
			if ((rc = vseek_past(it, cp, el)) != 0)
				return rc < 0 ? rc : 0;
			continue; /* the marker is this common prefix */
		}
		if (before_markers(p, key, kl, in.version_id, &passed))
			continue;
		if (o->count >= p->max_keys) {
			o->truncated = p->max_keys > 0;
			break;
		}
		o->count++;
		set_last(o, key, el);
		o->last_vid[0] = '\0';
		if (!is_cp) {
			snprintf(o->last_vid, sizeof(o->last_vid), "%s", in.version_id);
			add_content(o, p, key, kl, &in);
			continue;
		}
		add_prefix(o, p, key, el);
		char cp[OL_S3_MAX_KEY + 1];
		memcpy(cp, key, el);
		if ((rc = vseek_past(it, cp, el)) != 0)
			return rc < 0 ? rc : 0;
	}
	return rc < 0 ? rc : 0;
}

static void
write_result(struct s3_req *r, const struct list_params *p, struct list_out *o)
{
	struct ol_buf x = {0};
	const char *root = p->versions ? "ListVersionsResult" : "ListBucketResult";
	ol_s3_xml_open_root(&x, root);
	ol_s3_xml_elem(&x, "Name", r->rt.bucket);
	/* ListObjects (V1) returns Prefix as sent even with encoding-type=url: AWS does, and
	 * the SDKs decode only Delimiter, Marker, NextMarker and the keys of a V1 listing (an
	 * encoded Prefix reaches the caller encoded). V2 and ListObjectVersions encode it. */
	if (!p->v2 && !p->versions)
		ol_s3_xml_elemn(&x, "Prefix", p->prefix, p->prefix_len);
	else
		elem_enc(&x, p, "Prefix", p->prefix, p->prefix_len);
	if (p->v2) {
		if (p->has_token)
			ol_s3_xml_elem(&x, "ContinuationToken", p->token);
		if (p->has_start_after)
			elem_enc(&x, p, "StartAfter", p->start_after, strlen(p->start_after));
		ol_s3_xml_elemu(&x, "KeyCount", o->count);
	} else if (p->versions) {
		elem_enc(&x, p, "KeyMarker", p->after, p->after_len);
		ol_s3_xml_elem(&x, "VersionIdMarker", p->vmarker);
	} else {
		elem_enc(&x, p, "Marker", p->after, p->after_len);
	}
	ol_s3_xml_elemu(&x, "MaxKeys", p->max_keys);
	if (p->delim_len)
		elem_enc(&x, p, "Delimiter", p->delim, p->delim_len);
	if (p->url)
		ol_s3_xml_elem(&x, "EncodingType", "url");
	ol_s3_xml_elem(&x, "IsTruncated", o->truncated ? "true" : "false");
	if (o->truncated && p->v2) {
		struct ol_buf t = {0};
		ol_buf_adds(&t, "1-");
		for (size_t i = 0; i < o->last_len; i++)
			ol_buf_addf(&t, "%02x", (unsigned char)o->last[i]);
		ol_s3_xml_elem(&x, "NextContinuationToken", ol_buf_cstr(&t));
		ol_buf_free(&t);
	} else if (o->truncated && p->versions) {
		elem_enc(&x, p, "NextKeyMarker", o->last, o->last_len);
		if (o->last_vid[0])
			ol_s3_xml_elem(&x, "NextVersionIdMarker", o->last_vid);
	} else if (o->truncated) {
		elem_enc(&x, p, "NextMarker", o->last, o->last_len);
	}
	if (o->contents.len)
		ol_buf_add(&x, o->contents.p, o->contents.len);
	if (o->prefixes.len)
		ol_buf_add(&x, o->prefixes.p, o->prefixes.len);
	ol_buf_addf(&x, "</%s>", root);
	s3_send_xml(r, 200, &x);
}

void
s3_list_objects(struct s3_req *r, int kind)
{
	struct list_params *p = ol_xmalloc(sizeof(*p));
	struct list_out *o = ol_xcalloc(1, sizeof(*o));
	struct ol_iter *it = NULL;
	r->op = kind == 2 ? "ListObjectsV2" : kind == 3 ? "ListObjectVersions" : "ListObjects";
	int prc = parse_params(r, p, kind);
	if (prc < 0) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT,
			 prc == -2   ? "The continuation token provided is incorrect"
			 : prc == -3 ? "Provided max-keys not an integer or within integer range"
			 : prc == -4 ? "Invalid version id specified"
			 : prc == -5
			     ? "A version-id marker cannot be specified without a key marker."
			     : NULL);
		goto out;
	}
	int rc;
	if (kind == 3) {
		struct ol_viter *vi = NULL;
		rc = ol_store_viter_open(r->srv->st, r->rt.bucket, &vi);
		if (rc == 0)
			rc = scan_versions(vi, p, o);
		ol_store_viter_close(vi);
	} else {
		rc = ol_store_iter_open(r->srv->st, r->rt.bucket, &it);
		if (rc == 0)
			rc = scan(it, p, o);
	}
	if (rc < 0) {
		s3_store_error(r, rc == -ENOENT ? -ENXIO : rc, OL_S3E_NO_SUCH_BUCKET);
		goto out;
	}
	write_result(r, p, o);
out:
	ol_store_iter_close(it);
	ol_buf_free(&o->contents);
	ol_buf_free(&o->prefixes);
	free(o);
	free(p);
}
