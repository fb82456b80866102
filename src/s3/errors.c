/* s3/errors.c - the S3 error table and error documents. */
#include "s3/s3util.h"

#include <errno.h>
#include <string.h>

#include "store/store.h"

static const struct ol_s3_errinfo table[OL_S3E__COUNT] = {
    [OL_S3E_NONE] = {"OK", 200, "OK"},
    [OL_S3E_ACCESS_DENIED] = {"AccessDenied", 403, "Access Denied"},
    [OL_S3E_AUTH_HEADER_MALFORMED] = {"AuthorizationHeaderMalformed", 400,
				      "The authorization header is malformed"},
    [OL_S3E_AUTH_QUERY_ERROR] = {"AuthorizationQueryParametersError", 400,
				 "Error parsing the X-Amz-Credential parameter"},
    [OL_S3E_BAD_DIGEST] = {"BadDigest", 400,
			   "The Content-MD5 or checksum you specified did not match what we "
			   "received."},
    [OL_S3E_BUCKET_EXISTS_OWNED] = {"BucketAlreadyOwnedByYou", 409,
				    "Your previous request to create the named bucket "
				    "succeeded and you already own it."},
    [OL_S3E_BUCKET_NOT_EMPTY] = {"BucketNotEmpty", 409,
				 "The bucket you tried to delete is not empty"},
    [OL_S3E_ENTITY_TOO_LARGE] = {"EntityTooLarge", 400,
				 "Your proposed upload exceeds the maximum allowed size"},
    [OL_S3E_ENTITY_TOO_SMALL] = {"EntityTooSmall", 400,
				 "Your proposed upload is smaller than the minimum allowed "
				 "object size."},
    [OL_S3E_INCOMPLETE_BODY] = {"IncompleteBody", 400,
				"You did not provide the number of bytes specified by the "
				"Content-Length HTTP header."},
    [OL_S3E_INTERNAL] = {"InternalError", 500,
			 "We encountered an internal error. Please try again."},
    [OL_S3E_INVALID_ACCESS_KEY] = {"InvalidAccessKeyId", 403,
				   "The AWS Access Key Id you provided does not exist in our "
				   "records."},
    [OL_S3E_INVALID_ARGUMENT] = {"InvalidArgument", 400, "Invalid Argument"},
    [OL_S3E_INVALID_BUCKET_NAME] = {"InvalidBucketName", 400, "The specified bucket is not valid."},
    [OL_S3E_INVALID_DIGEST] = {"InvalidDigest", 400,
			       "The Content-MD5 or checksum you specified is not valid."},
    [OL_S3E_INVALID_PART] = {"InvalidPart", 400,
			     "One or more of the specified parts could not be found. The part "
			     "may not have been uploaded, or the specified entity tag may not "
			     "match the part's entity tag."},
    [OL_S3E_INVALID_PART_ORDER] = {"InvalidPartOrder", 400,
				   "The list of parts was not in ascending order. Parts must be "
				   "ordered by part number."},
    [OL_S3E_INVALID_RANGE] = {"InvalidRange", 416, "The requested range is not satisfiable"},
    [OL_S3E_INVALID_REQUEST] = {"InvalidRequest", 400, "Invalid Request"},
    [OL_S3E_INVALID_URI] = {"InvalidURI", 400, "Couldn't parse the specified URI."},
    [OL_S3E_KEY_TOO_LONG] = {"KeyTooLongError", 400, "Your key is too long"},
    [OL_S3E_MALFORMED_XML] = {"MalformedXML", 400,
			      "The XML you provided was not well-formed or did not validate "
			      "against our published schema"},
    [OL_S3E_METHOD_NOT_ALLOWED] = {"MethodNotAllowed", 405,
				   "The specified method is not allowed against this "
				   "resource."},
    [OL_S3E_MISSING_CONTENT_LENGTH] = {"MissingContentLength", 411,
				       "You must provide the Content-Length HTTP header."},
    [OL_S3E_NO_SUCH_BUCKET] = {"NoSuchBucket", 404, "The specified bucket does not exist"},
    [OL_S3E_NO_SUCH_KEY] = {"NoSuchKey", 404, "The specified key does not exist."},
    [OL_S3E_NO_SUCH_UPLOAD] = {"NoSuchUpload", 404,
			       "The specified upload does not exist. The upload ID may be "
			       "invalid, or the upload may have been aborted or completed."},
    [OL_S3E_NOT_IMPLEMENTED] = {"NotImplemented", 501,
				"A header or query you provided implies functionality that is "
				"not implemented."},
    [OL_S3E_PRECONDITION_FAILED] = {"PreconditionFailed", 412,
				    "At least one of the pre-conditions you specified did not "
				    "hold"},
    [OL_S3E_REQUEST_TIME_SKEWED] = {"RequestTimeTooSkewed", 403,
				    "The difference between the request time and the current "
				    "time is too large."},
    [OL_S3E_SERVICE_UNAVAILABLE] = {"ServiceUnavailable", 503,
				    "Not enough drives are online to serve this request."},
    [OL_S3E_SIGNATURE_MISMATCH] = {"SignatureDoesNotMatch", 403,
				   "The request signature we calculated does not match the "
				   "signature you provided. Check your key and signing method."},
    [OL_S3E_SHA256_MISMATCH] = {"XAmzContentSHA256Mismatch", 400,
				"The provided 'x-amz-content-sha256' header does not match what "
				"was computed."},
    [OL_S3E_ILLEGAL_LOCATION] = {"IllegalLocationConstraintException", 400,
				 "The specified location-constraint is not valid for this "
				 "endpoint."},
    [OL_S3E_MISSING_SECURITY_HEADER] = {"MissingSecurityHeader", 400,
					"Your request is missing a required header."},
    [OL_S3E_INVALID_STORAGE_CLASS] = {"InvalidStorageClass", 400,
				      "The storage class you specified is not valid"},
    [OL_S3E_STORAGE_FULL] = {"XOpenLakeStorageFull", 507, "Storage is full"},
    [OL_S3E_SLOW_DOWN] = {"SlowDown", 503, "Please reduce your request rate."},
};

/* Object-store results as S3 errors; -ENOENT is the caller's (ol_s3_errno_err). */
static const struct {
	int rc;
	bool write; /* writes only (s3_write_error) */
	enum ol_s3_err err;
	const char *message; /* NULL: the error's own */
} errno_table[] = {
    {-ENXIO, false, OL_S3E_NO_SUCH_BUCKET, NULL},
    {-EEXIST, false, OL_S3E_BUCKET_EXISTS_OWNED, NULL},
    {-ENOTEMPTY, false, OL_S3E_BUCKET_NOT_EMPTY, NULL},
    {-EINVAL, false, OL_S3E_INVALID_ARGUMENT, NULL},
    {-EIO, false, OL_S3E_SERVICE_UNAVAILABLE, NULL},
    /* the drives refused a commit: a newer set leader wrote since (a cluster's fencing) */
    {-ESTALE, false, OL_S3E_SERVICE_UNAVAILABLE,
     "The erasure set got a newer leader while this request was served, and the drives "
     "refused its commit. Retry."},
    /* a read-only view of the store (a cluster node serving reads) was asked to write:
     * routing sends writes to the serving leader, so only a race with a leadership change
     * reaches this */
    {-EROFS, false, OL_S3E_SERVICE_UNAVAILABLE,
     "This node serves reads only and cannot write now; retry (writes go to the serving "
     "leader)."},
    /* a write whose data a cluster node wrote itself and whose commit did not reach the
     * serving leader (none known, not serving, not reachable: surely not applied), or whose
     * answer did not come back in time (it may have been applied: the client's retry writes
     * the same bytes again); SDKs retry SlowDown */
    {-EAGAIN, true, OL_S3E_SLOW_DOWN,
     "No node serves this cluster's store now, or its leader cannot be reached to commit this "
     "write; retry shortly."},
    {-ETIMEDOUT, true, OL_S3E_SLOW_DOWN,
     "The serving leader did not answer this write's commit in time; retry."},
    /* a read-only view found the version it resolved reclaimed by the writer (overwritten
     * or deleted meanwhile), again after resolving the key once more */
    {-EAGAIN, false, OL_S3E_SERVICE_UNAVAILABLE,
     "The object was replaced while this node read it; retry."},
    {OL_STORE_ECORRUPT, false, OL_S3E_INTERNAL,
     "The stored data failed its checksums on too many drives to be rebuilt."},
    {-ENOSPC, false, OL_S3E_STORAGE_FULL, NULL},
    {-ECANCELED, true, OL_S3E_PRECONDITION_FAILED, NULL},
    {-ENODATA, true, OL_S3E_NO_SUCH_KEY, NULL},
};

enum ol_s3_err
ol_s3_errno_err(int rc, bool write, enum ol_s3_err enoent, const char **msg)
{
	*msg = NULL;
	if (rc == -ENOENT)
		return enoent;
	for (size_t i = 0; i < sizeof(errno_table) / sizeof(errno_table[0]); i++) {
		if (errno_table[i].rc != rc || (errno_table[i].write && !write))
			continue;
		*msg = errno_table[i].message;
		return errno_table[i].err;
	}
	return OL_S3E_INTERNAL;
}

const struct ol_s3_errinfo *
ol_s3_errinfo(enum ol_s3_err e)
{
	if ((int)e < 0 || e >= OL_S3E__COUNT || !table[e].code)
		return &table[OL_S3E_INTERNAL];
	return &table[e];
}

void
ol_s3_error_xml(struct ol_buf *b, const char *code, const char *message, const char *resource,
		const char *request_id, const char *extra)
{
	ol_buf_adds(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error>");
	ol_s3_xml_elem(b, "Code", code);
	ol_s3_xml_elem(b, "Message", message ? message : "");
	if (extra)
		ol_buf_adds(b, extra);
	ol_s3_xml_elem(b, "Resource", resource ? resource : "");
	ol_s3_xml_elem(b, "RequestId", request_id ? request_id : "");
	ol_buf_adds(b, "</Error>");
}
