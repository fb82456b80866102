/* s3/attributes.c - GetObjectAttributes (GET ?attributes): the attributes the
 * x-amz-object-attributes header names (ETag, Checksum, ObjectParts, StorageClass, ObjectSize)
 * of the object or of the version asked for, parts paged by the x-amz-max-parts and
 * x-amz-part-number-marker headers. */
#include "s3/s3int.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

enum { A_ETAG = 1, A_CHECKSUM = 2, A_PARTS = 4, A_CLASS = 8, A_SIZE = 16 };

/* The x-amz-object-attributes list: its flags, 0 when missing or empty, -1 for an unknown
 * name. */
static int
wanted(const char *h)
{
	static const struct {
		const char *name;
		int flag;
	} names[] = {{"ETag", A_ETAG},
		     {"Checksum", A_CHECKSUM},
		     {"ObjectParts", A_PARTS},
		     {"StorageClass", A_CLASS},
		     {"ObjectSize", A_SIZE}};
	int flags = 0;
	while (h && *h) {
		size_t n, i;
		while (*h == ' ' || *h == ',')
			h++;
		n = strcspn(h, ", ");
		if (n == 0)
			break;
		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (strlen(names[i].name) == n && memcmp(h, names[i].name, n) == 0)
				break;
		if (i == sizeof(names) / sizeof(names[0]))
			return -1;
		flags |= names[i].flag;
		h += n;
	}
	return flags;
}

/* <Checksum><ChecksumCRC32>...</ChecksumCRC32></Checksum> from the stored x-amz-checksum-*. */
static void
checksum_xml(const struct ol_obj_info *in, struct ol_buf *x)
{
	struct ol_s3_meta_kv kv;
	size_t pos = 0;
	char name[32];
	bool any = false;
	while (ol_s3_meta_next(in->meta, in->meta_len, &pos, &kv)) {
		size_t sl = kv.name_len - 15;
		if (kv.name_len <= 15 || strncmp(kv.name, "x-amz-checksum-", 15) != 0 || sl > 16)
			continue;
		memcpy(name, "Checksum", 8);
		for (size_t i = 0; i < sl; i++)
			name[8 + i] = (char)toupper((unsigned char)kv.name[15 + i]);
		name[8 + sl] = '\0';
		if (!any)
			ol_buf_adds(x, "<Checksum>");
		any = true;
		ol_buf_addf(x, "<%s>", name);
		ol_s3_xml_esc(x, kv.value, kv.value_len);
		ol_buf_addf(x, "</%s>", name);
	}
	if (any)
		ol_buf_adds(x, "</Checksum>");
}

/* <ObjectParts> of a multipart object, from part-number-marker, at most max-parts. 0, or -1
 * with the error sent. */
static int
parts_xml(struct s3_req *r, struct ol_get *g, const struct ol_obj_info *in, struct ol_buf *x)
{
	const char *mh = ol_http_header(r->h, "x-amz-max-parts");
	const char *ph = ol_http_header(r->h, "x-amz-part-number-marker");
	unsigned max = 1000, marker = 0, n, shown = 0, i;
	uint64_t *sizes;
	if ((mh && ol_s3_parse_count(mh, &max) < 0) || (ph && ol_s3_parse_count(ph, &marker) < 0)) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT,
			 "x-amz-max-parts and x-amz-part-number-marker take a non-negative "
			 "integer");
		return -1;
	}
	if (!in->n_parts)
		return 0; /* AWS lists the parts of multipart objects only */
	sizes = ol_xmalloc(OL_S3_MAX_PARTS * sizeof(*sizes));
	n = ol_store_get_part_sizes(g, sizes, OL_S3_MAX_PARTS);
	if (n > OL_S3_MAX_PARTS)
		n = OL_S3_MAX_PARTS;
	for (unsigned k = 0; k < n && s3_sse_meta_mode(in->meta, in->meta_len); k++)
		sizes[k] = s3_sse_plain_len(sizes[k]); /* the plaintext's, as S3 shows them */
	if (max > 1000)
		max = 1000;
	ol_buf_adds(x, "<ObjectParts>");
	ol_s3_xml_elemu(x, "PartsCount", n); /* TotalPartsCount in the API */
	ol_s3_xml_elemu(x, "PartNumberMarker", marker);
	/* per-part checksums kept by complete (multipart.c: ol-part-cks, ol-ck-alg) */
	const char *cks = NULL, *alg = NULL;
	long cl = ol_s3_meta_get(in->meta, in->meta_len, "ol-part-cks", &cks);
	long al = ol_s3_meta_get(in->meta, in->meta_len, "ol-ck-alg", &alg);
	const char *cp = cl > 0 && al > 0 && al < 16 ? cks : NULL, *cend = cp ? cks + cl : NULL;
	for (unsigned k = 0; cp && k < marker; k++) { /* skip to the first part shown */
		const char *comma = memchr(cp, ',', (size_t)(cend - cp));
		cp = comma ? comma + 1 : NULL;
	}
	for (i = marker; i < n && shown < max; i++, shown++) {
		ol_buf_adds(x, "<Part>");
		ol_s3_xml_elemu(x, "PartNumber", i + 1);
		ol_s3_xml_elemu(x, "Size", sizes[i]);
		if (cp && cp < cend) {
			const char *comma = memchr(cp, ',', (size_t)(cend - cp));
			size_t vl = (size_t)((comma ? comma : cend) - cp);
			ol_buf_addf(x, "<Checksum%.*s>%.*s</Checksum%.*s>", (int)al, alg, (int)vl,
				    cp, (int)al, alg);
			cp = comma ? comma + 1 : NULL;
		}
		ol_buf_adds(x, "</Part>");
	}
	ol_s3_xml_elemu(x, "NextPartNumberMarker", i);
	ol_s3_xml_elemu(x, "MaxParts", max);
	ol_s3_xml_elem(x, "IsTruncated", i < n ? "true" : "false");
	ol_buf_adds(x, "</ObjectParts>");
	free(sizes);
	return 0;
}

void
s3_get_object_attributes(struct s3_req *r)
{
	struct ol_get *g = NULL;
	struct ol_obj_info in;
	struct ol_buf x = {0};
	struct ol_http_header h[4];
	char lm[32];
	size_t hn;
	int want = wanted(ol_http_header(r->h, "x-amz-object-attributes"));
	r->op = "GetObjectAttributes";
	if (want <= 0) {
		s3_error(r, OL_S3E_INVALID_ARGUMENT,
			 want < 0
			     ? "Invalid attribute name specified."
			     : "x-amz-object-attributes header specifying the attributes to be "
			       "retrieved is either missing or empty");
		return;
	}
	if (!s3_open_object(r, &g, &in))
		return;
	if (s3_sse_meta_mode(in.meta, in.meta_len) == S3_SSE_C) {
		/* AWS asks for the object's customer key here too (its size, ETag and checksums
		 * are the plaintext's) */
		struct s3_sse_req q;
		struct s3_sse e;
		int rc = s3_sse_parse(r, false, &q);
		if (rc == 0)
			rc = s3_sse_open(r, in.meta, in.meta_len, &q, &e);
		s3_sse_req_fini(&q);
		if (rc < 0)
			goto out;
		s3_sse_fini(&e);
	}
	ol_s3_xml_open_root(&x, "GetObjectAttributesResponse");
	if (want & A_ETAG)
		ol_s3_xml_elem(&x, "ETag", in.etag);
	if (want & A_CHECKSUM)
		checksum_xml(&in, &x);
	if (want & A_PARTS && parts_xml(r, g, &in, &x) < 0)
		goto out;
	if (want & A_CLASS)
		ol_s3_xml_elem(&x, "StorageClass", "STANDARD");
	if (want & A_SIZE)
		ol_s3_xml_elemu(&x, "ObjectSize", s3_obj_size(&in));
	ol_buf_adds(&x, "</GetObjectAttributesResponse>");
	hn = s3_version_headers(r, &in, h, 0);
	ol_s3_http_date(in.mtime_ns / 1000000, lm);
	h[hn++] = (struct ol_http_header){"Last-Modified", lm};
	s3_send(r, 200, h, hn, x.p, x.len);
out:
	ol_buf_free(&x);
	ol_store_get_close(g);
}
