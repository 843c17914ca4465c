#!/usr/bin/env python3
"""boto3 (Debian's python3-boto3, the client libneuronxla uses for s3:// caches) as the
independent side of the S3 cross-checks; driven by tests/unit/s3_boto3_test.cpp.

  sanity      BUCKET                     boto3 put/get/range/list paging/multipart on the server
  write-tree  BUCKET PREFIX OUT NEFF_MIB  writes a libneuronxla tree; OUT gets {path: sha256}
  read-tree   BUCKET PREFIX EXPECT        downloads everything under PREFIX, compares to EXPECT
  time-upload / time-download BUCKET KEY FILE   upload_file / download_file, prints the seconds

The endpoint and credentials come from the AWS_* environment, as for any boto3 program.
"""
import hashlib
import json
import os
import sys
import tempfile

import boto3
from boto3.s3.transfer import TransferConfig

COMPILER = "neuronxcc-2.21.33363.0+82129205"


def client():
    return boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                        region_name=os.environ.get("AWS_REGION", "us-east-1"))


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check(condition, what):
    if not condition:
        raise SystemExit("boto3 cross-check failed: " + what)


def sanity(bucket):
    s3 = client()
    body = os.urandom(3000)
    s3.put_object(Bucket=bucket, Key="sanity/obj", Body=body)
    check(s3.get_object(Bucket=bucket, Key="sanity/obj")["Body"].read() == body, "get")
    part = s3.get_object(Bucket=bucket, Key="sanity/obj", Range="bytes=100-199")
    check(part["Body"].read() == body[100:200], "range")
    check(part["ResponseMetadata"]["HTTPStatusCode"] == 206, "range status")
    for i in range(25):
        s3.put_object(Bucket=bucket, Key="sanity/list/%02d" % i, Body=b"x")
    keys, token = [], None
    while True:
        args = dict(Bucket=bucket, Prefix="sanity/list/", MaxKeys=10)
        if token:
            args["ContinuationToken"] = token
        page = s3.list_objects_v2(**args)
        keys += [o["Key"] for o in page.get("Contents", [])]
        if not page.get("IsTruncated"):
            break
        token = page["NextContinuationToken"]
    check(keys == ["sanity/list/%02d" % i for i in range(25)], "list paging: %r" % keys)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "big")
        with open(src, "wb") as f:
            f.write(os.urandom(20 << 20))
        config = TransferConfig(multipart_threshold=8 << 20, multipart_chunksize=8 << 20)
        s3.upload_file(src, bucket, "sanity/big", Config=config)
        etag = s3.head_object(Bucket=bucket, Key="sanity/big")["ETag"].strip('"')
        # S3 answers "<md5 of the part md5s>-3"; s3rver the MD5 of the whole content.
        with open(src, "rb") as f:
            whole_md5 = hashlib.md5(f.read()).hexdigest()
        check(etag.endswith("-3") or etag == whole_md5, "multipart etag %s" % etag)
        dst = os.path.join(tmp, "back")
        s3.download_file(bucket, "sanity/big", dst, Config=config)
        check(sha256_file(src) == sha256_file(dst), "multipart round trip")
    print("boto3 sanity ok")


def libneuronxla_tree(neff_mib):
    """The files libneuronxla writes for one compiled graph, and a few more (sizes vary)."""
    module = "MODULE_10469398185562218245+e7fb4e54"
    files = {
        "%s/%s/model.neff" % (COMPILER, module): os.urandom(neff_mib << 20),
        "%s/%s/model.done" % (COMPILER, module): b"",
        "%s/%s/model.hlo_module.pb" % (COMPILER, module): os.urandom(70000),
        "%s/%s/compile_flags.json" % (COMPILER, module):
            json.dumps(["--target=trn1", "--model-type=transformer"]).encode(),
        "%s/MODULE_2+abc/model.neff" % COMPILER: os.urandom(300000),
        "%s/MODULE_2+abc/model.done" % COMPILER: b"",
        "%s/MODULE_2+abc/compile_flags.json" % COMPILER: b'["--target=trn1"]',
    }
    return files


def write_tree(bucket, prefix, out, neff_mib):
    s3 = client()
    expect = {}
    with tempfile.TemporaryDirectory() as tmp:
        for path, content in libneuronxla_tree(int(neff_mib)).items():
            local = os.path.join(tmp, "f")
            with open(local, "wb") as f:
                f.write(content)
            # Default TransferConfig: files of 8 MiB and more go multipart, as libneuronxla's do.
            s3.upload_file(local, bucket, prefix + "/" + path)
            expect[path] = hashlib.sha256(content).hexdigest()
    with open(out, "w") as f:
        json.dump(expect, f)
    print("boto3 wrote %d files" % len(expect))


def read_tree(bucket, prefix, expect_file):
    s3 = client()
    with open(expect_file) as f:
        expect = json.load(f)
    found = {}
    paginator = s3.get_paginator("list_objects_v2")
    with tempfile.TemporaryDirectory() as tmp:
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix + "/"):
            for obj in page.get("Contents", []):
                rel = obj["Key"][len(prefix) + 1:]
                local = os.path.join(tmp, "f")
                s3.download_file(bucket, obj["Key"], local)
                found[rel] = sha256_file(local)
                meta = s3.head_object(Bucket=bucket, Key=obj["Key"]).get("Metadata", {})
                check(meta.get("sha256") == found[rel], "x-amz-meta-sha256 of " + rel)
    check(found == expect, "tree differs:\n%r\n%r" % (sorted(found.items()), sorted(expect.items())))
    print("boto3 read %d files byte for byte" % len(found))


def main():
    mode = sys.argv[1]
    if mode == "sanity":
        sanity(sys.argv[2])
    elif mode == "write-tree":
        write_tree(*sys.argv[2:6])
    elif mode == "read-tree":
        read_tree(*sys.argv[2:5])
    elif mode in ("time-upload", "time-download"):
        import time
        s3 = client()
        bucket, key, path = sys.argv[2:5]
        start = time.monotonic()
        if mode == "time-upload":
            s3.upload_file(path, bucket, key)
        else:
            s3.download_file(bucket, key, path)
        print("%.3f" % (time.monotonic() - start))
    else:
        raise SystemExit("unknown mode " + mode)


if __name__ == "__main__":
    main()
