"""Listing with thousands of keys: ListObjectsV2 and V1 with prefixes, delimiters, pagination
(continuation-token, start-after, marker/NextMarker) and encoding-type=url, each compared
against the answer computed here from a sorted list of the keys."""

import concurrent.futures
import random
import re

import pytest

from test_s3_common import raw

BUCKET = "listing"
SPECIAL = ["a", "a!", "a-b", "a/", "a/x", "a/x/", "a/x/y", "a0", "a b", "a+b", "a%b",
           "a%2Fb", "dir/\u00e9t\u00e9", "dir/\u4e2d", "z/&<>\"'", "zz//double"]


def make_keys():
    keys = set(SPECIAL)
    rnd = random.Random(7)
    for i in range(3000):
        depth = rnd.randint(0, 3)
        parts = ["d%d" % rnd.randint(0, 6) for _ in range(depth)]
        keys.add("/".join(parts + ["k%05d" % i]))
    return sorted(keys, key=lambda s: s.encode())


KEYS = make_keys()


@pytest.fixture(scope="module")
def loaded(s3_client):
    s3_client.create_bucket(Bucket=BUCKET)
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda k: s3_client.put_object(Bucket=BUCKET, Key=k, Body=k.encode()),
                    KEYS))
    return s3_client


def expected(prefix="", delimiter="", after=""):
    """Entries (kind, name) S3 returns, in order: kind 'k' key, 'p' common prefix."""
    out = []
    seen = set()
    for k in KEYS:
        if not k.startswith(prefix):
            continue
        if delimiter:
            i = k.find(delimiter, len(prefix))
            if i >= 0:
                cp = k[:i + len(delimiter)]
                if cp not in seen:
                    seen.add(cp)
                    if cp.encode() > after.encode():
                        out.append(("p", cp))
                continue
        if k.encode() > after.encode():
            out.append(("k", k))
    return out


def page_entries(page):
    ents = [("k", o["Key"]) for o in page.get("Contents", [])]
    ents += [("p", p["Prefix"]) for p in page.get("CommonPrefixes", [])]
    return sorted(ents, key=lambda e: e[1].encode())


def list_all_v2(c, page_size, **kw):
    got, token, pages = [], None, 0
    while True:
        args = dict(Bucket=BUCKET, MaxKeys=page_size, **kw)
        if token:
            args["ContinuationToken"] = token
        r = c.list_objects_v2(**args)
        ents = page_entries(r)
        assert r["KeyCount"] == len(ents)
        assert len(ents) <= page_size
        got += ents
        pages += 1
        if not r["IsTruncated"]:
            assert "NextContinuationToken" not in r
            return got, pages
        token = r["NextContinuationToken"]
        assert re.fullmatch(r"[A-Za-z0-9+/=_-]+", token)


def list_all_v1(c, page_size, **kw):
    got, marker = [], ""
    while True:
        r = c.list_objects(Bucket=BUCKET, MaxKeys=page_size, Marker=marker, **kw)
        ents = page_entries(r)
        got += ents
        if not r["IsTruncated"]:
            return got
        marker = r["NextMarker"]
        assert marker == ents[-1][1]


@pytest.mark.parametrize("prefix,delimiter", [("", ""), ("", "/"), ("d1/", "/"),
                                              ("d2/d3", ""), ("a", "/"), ("dir/", ""),
                                              ("nomatch", "/"), ("", "x/")])
def test_v2_paginated(loaded, prefix, delimiter):
    kw = {"Prefix": prefix}
    if delimiter:
        kw["Delimiter"] = delimiter
    got, pages = list_all_v2(loaded, 397, **kw)
    want = expected(prefix, delimiter)
    assert got == want
    assert pages == max(1, -(-len(want) // 397))


@pytest.mark.parametrize("prefix,delimiter", [("", ""), ("", "/"), ("d4/", "/"), ("a", "")])
def test_v1_paginated(loaded, prefix, delimiter):
    kw = {"Prefix": prefix}
    if delimiter:
        kw["Delimiter"] = delimiter
    assert list_all_v1(loaded, 251, **kw) == expected(prefix, delimiter)


def test_default_page_is_1000(loaded):
    r = loaded.list_objects_v2(Bucket=BUCKET)
    assert r["KeyCount"] == 1000 and r["IsTruncated"] and r["MaxKeys"] == 1000
    assert [o["Key"] for o in r["Contents"]] == KEYS[:1000]
    r = loaded.list_objects_v2(Bucket=BUCKET, MaxKeys=5000)
    assert r["KeyCount"] == 1000


def test_start_after(loaded):
    after = KEYS[1234]
    r = loaded.list_objects_v2(Bucket=BUCKET, StartAfter=after, MaxKeys=10)
    assert [o["Key"] for o in r["Contents"]] == KEYS[1235:1245]
    assert r["StartAfter"] == after
    got, _ = list_all_v2(loaded, 1000, StartAfter="d3/", Delimiter="/")
    assert got == expected("", "/", "d3/")


def test_max_keys_zero(loaded):
    r = loaded.list_objects_v2(Bucket=BUCKET, MaxKeys=0)
    assert r["KeyCount"] == 0 and not r.get("Contents") and r["IsTruncated"] is False
    r = loaded.list_objects(Bucket=BUCKET, MaxKeys=0)
    assert not r.get("Contents")


def test_paginator_matches(loaded):
    keys = []
    for page in loaded.get_paginator("list_objects_v2").paginate(Bucket=BUCKET,
                                                               PaginationConfig={"PageSize": 700}):
        keys += [o["Key"] for o in page.get("Contents", [])]
    assert keys == KEYS
    for o in loaded.list_objects_v2(Bucket=BUCKET, Prefix="a", MaxKeys=3)["Contents"]:
        assert re.fullmatch(r'"[0-9a-f]{32}"', o["ETag"])
        assert o["Size"] == len(o["Key"].encode())
        assert o["StorageClass"] == "STANDARD"


def test_encoding_type_url_raw(s3_daemon, loaded):
    st, _, body = raw(s3_daemon.s3_url, "GET",
                      f"/{BUCKET}?list-type=2&prefix=a&encoding-type=url", body=None)
    assert st == 200
    assert b"<EncodingType>url</EncodingType>" in body
    assert b"<Key>a%20b</Key>" in body and b"<Key>a%2Bb</Key>" in body
    assert b"<Key>a%25b</Key>" in body and b"<Key>a%252Fb</Key>" in body
    st, _, body = raw(s3_daemon.s3_url, "GET", f"/{BUCKET}?list-type=2&prefix=z", body=None)
    assert b"<Key>z/&amp;&lt;&gt;&quot;&apos;</Key>" in body
    assert b"EncodingType" not in body
    st, _, body = raw(s3_daemon.s3_url, "GET",
                      f"/{BUCKET}?prefix=dir%2F&delimiter=%2F&encoding-type=url&marker=dir%2F",
                      body=None)
    assert b"<Key>dir/%C3%A9t%C3%A9</Key>" in body
    assert b"<Delimiter>%2F</Delimiter>" not in body and b"<Delimiter>/</Delimiter>" in body


def test_bad_continuation_token(loaded):
    from botocore.exceptions import ClientError
    with pytest.raises(ClientError) as e:
        loaded.list_objects_v2(Bucket=BUCKET, ContinuationToken="not-a-token!")
    assert e.value.response["Error"]["Code"] == "InvalidArgument"


def test_empty_continuation_token_lists_from_the_start(loaded):
    # ceph s3-tests' test_bucket_listv2_continuationtoken_empty: an empty token is no
    # cursor, and the answer echoes it.
    r = loaded.list_objects_v2(Bucket=BUCKET, ContinuationToken="", MaxKeys=5)
    assert r["ContinuationToken"] == ""
    first = loaded.list_objects_v2(Bucket=BUCKET, MaxKeys=5)
    assert [o["Key"] for o in r["Contents"]] == [o["Key"] for o in first["Contents"]]


def test_v1_prefix_is_returned_as_sent(s3_daemon, loaded):
    # AWS returns a V1 listing's Prefix unencoded even with encoding-type=url, and the SDKs
    # decode only Delimiter, Marker, NextMarker and the keys of V1: boto3 would hand an
    # encoded prefix to its caller. V2 encodes it.
    assert loaded.list_objects(Bucket=BUCKET, Prefix="\n")["Prefix"] == "\n"
    assert loaded.list_objects(Bucket=BUCKET, Prefix="a b")["Prefix"] == "a b"
    assert loaded.list_objects_v2(Bucket=BUCKET, Prefix="a b")["Prefix"] == "a b"
    st, _, body = raw(s3_daemon.s3_url, "GET", f"/{BUCKET}?prefix=a%20b&encoding-type=url",
                      body=None)
    assert st == 200 and b"<Prefix>a b</Prefix>" in body
    st, _, body = raw(s3_daemon.s3_url, "GET",
                      f"/{BUCKET}?list-type=2&prefix=a%20b&encoding-type=url", body=None)
    assert st == 200 and b"<Prefix>a%20b</Prefix>" in body
