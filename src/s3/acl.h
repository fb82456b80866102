/* s3/acl.h - S3 access control lists: canned ACLs, x-amz-grant-* headers, the
 * AccessControlPolicy document, a compact stored form, and the permission check.
 *
 * Pure code over buffers (no store, no sockets): unit-tested in tests/unit/test_s3.c and
 * fuzzed by tests/fuzz/fuzz_s3xml.c. Users are named by their OpenLake user name, which is
 * also their canonical ID and display name in ACL documents.
 * Return codes: 0 or -errno (-EINVAL bad input, -E2BIG too many grants, -ENOTSUP a grantee
 * kind OpenLake cannot resolve: e-mail addresses). */
#ifndef OL_S3_ACL_H
#define OL_S3_ACL_H

#include <stdbool.h>
#include <stddef.h>

#include "s3/s3util.h"

/* Permissions (bits). FULL_CONTROL is all four. */
#define OL_ACL_READ	 1u
#define OL_ACL_WRITE	 2u
#define OL_ACL_READ_ACP	 4u
#define OL_ACL_WRITE_ACP 8u
#define OL_ACL_FULL	 15u

#define OL_ACL_MAX_GRANTS 32
#define OL_ACL_ID_MAX	  64

enum ol_acl_grantee {
	OL_ACL_USER = 'U',	   /* id = user name */
	OL_ACL_ALL_USERS = 'A',	   /* http://acs.amazonaws.com/groups/global/AllUsers */
	OL_ACL_AUTH_USERS = 'T',   /* http://acs.amazonaws.com/groups/global/AuthenticatedUsers */
	OL_ACL_LOG_DELIVERY = 'L', /* http://acs.amazonaws.com/groups/s3/LogDelivery */
};

struct ol_acl_grant {
	char type; /* enum ol_acl_grantee */
	unsigned char perm;
	char id[OL_ACL_ID_MAX]; /* OL_ACL_USER only, else "" */
};

struct ol_acl {
	char owner[OL_ACL_ID_MAX];
	unsigned n;
	struct ol_acl_grant g[OL_ACL_MAX_GRANTS];
};

/* A user name usable as owner or grantee: 1..63 bytes of [A-Za-z0-9._@+=,-]. */
bool ol_acl_id_ok(const char *id, size_t n);
/* The ACL a canned name gives (owner gets FULL_CONTROL; bucket_owner for the bucket-owner-*
 * ones, may be NULL). -EINVAL for an unknown name. */
int ol_acl_canned(struct ol_acl *a, const char *canned, const char *owner,
		  const char *bucket_owner);
/* Add the grantees of one x-amz-grant-<perm> header value: comma-separated id="name",
 * uri="group URI" or emailAddress="..." (-ENOTSUP). perm: OL_ACL_* bits. */
int ol_acl_add_header(struct ol_acl *a, unsigned perm, const char *value);
/* Add one grant (an exact repeat is dropped; S3 lists a grantee once per permission).
 * -E2BIG when full. */
int ol_acl_add(struct ol_acl *a, char type, const char *id, unsigned perm);
/* Permission name (READ, WRITE, READ_ACP, WRITE_ACP, FULL_CONTROL) -> bits, 0 unknown. */
unsigned ol_acl_perm_parse(const char *s, size_t n);
/* Group URI -> OL_ACL_ALL_USERS / _AUTH_USERS / _LOG_DELIVERY in *type, or -EINVAL. */
int ol_acl_grantee_uri(const char *u, size_t n, char *type);
/* Stored form: "owner grant grant ...", each grant <type><perm hex><id>. */
void ol_acl_encode(const struct ol_acl *a, struct ol_buf *b);
int ol_acl_decode(const char *s, size_t n, struct ol_acl *a);
/* Permissions the ACL gives a requester (user NULL: anonymous). The owner always holds
 * READ_ACP and WRITE_ACP, as in S3. */
unsigned ol_acl_perms(const struct ol_acl *a, const char *user);
/* The AccessControlPolicy document. */
void ol_acl_xml(const struct ol_acl *a, struct ol_buf *x);
/* Parse an AccessControlPolicy body into a (owner from <Owner><ID>, may be "").
 * -EBADMSG malformed, -EINVAL a bad grantee or permission, -E2BIG, -ENOTSUP (e-mail). */
int ol_acl_parse_xml(const char *xml, size_t n, struct ol_acl *a);

/* ---- bucket attribute blob (kept by the store in the bucket record) ----
 * "name=<decimal length>:<bytes>\n" per entry; names hold no '='. */
/* Value of name: its length and *val (points into blob), or -ENOENT (also on a bad blob). */
long ol_s3_attr_get(const char *blob, size_t n, const char *name, const char **val);
/* Append to out the blob with name set to val (vl bytes), or removed when vl < 0. */
void ol_s3_attr_set(struct ol_buf *out, const char *blob, size_t n, const char *name,
		    const char *val, long vl);
#endif
