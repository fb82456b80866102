/* base/driveid.h - a drive's identity record, <drive>/.openlake/format (issue 10): which store,
 * pool, erasure set and position a drive is, and its own random UUID. The one codec and the
 * one atomic writer: the object store checks drives against it (store/format.c), the node
 * plane serves it to the leader that opens its drives (node/). docs/storage-format.md.
 *
 * Text, one "key value" per line after the magic line:
 *   openlake-format 2 / store ID / drive UUID / pool P / sets M / set S / index I /
 *   drives N / parity P
 * Version 1 (multi-set stores before identity records) has only store, sets, set, drives;
 * it parses with drive "" and index, pool, parity unknown (OL_DRIVEID_NONE). */
#ifndef OL_BASE_DRIVEID_H
#define OL_BASE_DRIVEID_H

#include <stdbool.h>
#include <stddef.h>

#define OL_DRIVEID_NAME	 ".openlake/format"
#define OL_DRIVEID_STORE 64 /* store id: 1..63 of [A-Za-z0-9-] (the cluster's deployment id) */
#define OL_DRIVEID_UUID	 33 /* 32 lowercase hex digits + NUL */
#define OL_DRIVEID_NONE	 0xffffffffu
#define OL_DRIVEID_TEXT	 512 /* a record's text is shorter */

struct ol_driveid {
	unsigned version;	      /* 1 or 2 */
	char store[OL_DRIVEID_STORE]; /* the store (deployment) it belongs to */
	char drive[OL_DRIVEID_UUID];  /* this drive's UUID ("" in version 1) */
	unsigned pool, sets, set, index, drives, parity;
};

/* Pure: the record in buf[0..len) into *out. 0, or -EINVAL (not a record, a field missing or
 * out of range: set < sets, index < drives). Hostile input safe; no allocation. */
int ol_driveid_parse(const char *buf, size_t len, struct ol_driveid *out);

/* The version 2 text of id into buf (cap >= OL_DRIVEID_TEXT): its length, or -EINVAL (a field
 * that would not parse back). */
int ol_driveid_format(const struct ol_driveid *id, char *buf, size_t cap);

/* A fresh random drive UUID (getrandom): 32 lowercase hex digits. 0 or -errno. */
int ol_driveid_uuid(char out[OL_DRIVEID_UUID]);

/* Read root's record: 0, -ENOENT (none), -EINVAL (garbled), or -errno (unreadable). */
int ol_driveid_read(const char *root, struct ol_driveid *out);

/* Write root's record atomically as version 2: a temp file written and fsynced, renamed over
 * the record, the directory fsynced. root/.openlake is created when missing (root must
 * exist). 0 or -errno. */
int ol_driveid_write(const char *root, const struct ol_driveid *id);

/* Does root hold an object store's metadata (root/.openlake/meta.mdb exists)? */
bool ol_driveid_used(const char *root);

#endif
