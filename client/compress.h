/* client/compress.h - libopenlake's optional value compression (opts.compress = 1: ExANS).
 *
 * A compressed value is stored as a 16-byte header followed by the payload:
 *   [0..4)  magic "OLZ1"
 *   [4]     codec: 0 = raw (payload is the value as is), 1 = ExANS (docs/exans-format.md)
 *   [5..8)  0 (reserved; a reader rejects other values)
 *   [8..16) original length, u64 little-endian
 * The header is the per-block flag: a value that does not start with it is plain (written by
 * a client with compression off, or stored plain because compressing did not shrink it) and
 * is returned as it is. A compressing client wraps a plain value that itself starts with the
 * magic in a raw header, so its values are never ambiguous. A value whose header says
 * compressed but that fails to decode (bad header, CRC, length) is OL_KV_CORRUPT.
 *
 * Puts gather each value into a per-thread scratch buffer, compress it there and send the
 * compressed bytes; gets read into scratch and decode into the caller's iovs. Batches are cut
 * so a thread's scratch stays under OLZ_SCRATCH_CAP (one value may exceed it alone). */
#ifndef OL_CLIENT_COMPRESS_H
#define OL_CLIENT_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include "openlake/openlake.h"

#define OLZ_MAGIC	"OLZ1"
#define OLZ_HDR		16
#define OLZ_SCRATCH_CAP (64u << 20)

enum olz_codec { OLZ_CODEC_RAW = 0, OLZ_CODEC_EXANS = 1 };

/* Byte counters of one client (relaxed atomics). in = plain bytes, out = stored bytes. */
struct olz_stats {
	_Atomic uint64_t put_in, put_out;	    /* puts: value bytes, bytes sent */
	_Atomic uint64_t get_in, get_out;	    /* gets: bytes received, value bytes returned */
	_Atomic uint64_t put_compressed, put_plain; /* values sent compressed / plain */
	_Atomic uint64_t get_corrupt;		    /* compressed values that failed to decode */
};

/* ol_kv_put / ol_kv_get with compression on: same contract as the plain calls; a get's
 * value_len is the original (decoded) length. */
int olz_put(struct ol_client *c, struct ol_kv_op *ops, size_t n);
int olz_get(struct ol_client *c, struct ol_kv_op *ops, size_t n);

/* Write the client's counters as one JSON object ({"compress":"exans","compress_in_bytes":..})
 * into buf[0..cap). Returns its length, or -ENOSPC. */
int olz_stats_json(struct ol_client *c, char *buf, size_t cap);

/* Parse a stored value's header: 1 and *codec, *orig when it has one, 0 when it is plain,
 * -EBADMSG when it has the magic but an invalid header. Pure. */
int olz_hdr_parse(const uint8_t *v, uint64_t len, unsigned *codec, uint64_t *orig);

#endif
