#!/usr/bin/env python3
"""The S3 side a user would write instead of neuron-cache, for store-bench
(tests/bench/store_bench.cpp): every file of a list uploaded with boto3's upload_file or
downloaded with download_file, default TransferConfig (multipart from 8 MiB, 10 threads per
file).

  upload   loop|manager SRC_DIR BUCKET PREFIX LIST    SRC_DIR/<path> -> s3://BUCKET/PREFIX/<path>
  download loop|manager BUCKET PREFIX DEST_DIR LIST   s3://BUCKET/PREFIX/<path> -> DEST_DIR/<path>

LIST holds one relative path a line. `loop`: one file after the other, the obvious script.
`manager`: every file submitted to one s3transfer TransferManager (10 transfers at once across
files), which is what `aws s3 cp --recursive` does. The last line printed is "requests N", every
HTTP request boto3 sent (retries included). Endpoint and credentials come from the AWS_*
environment.
"""
import itertools
import os
import sys

import boto3
from boto3.s3.transfer import TransferConfig, create_transfer_manager


def client():
    s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                      region_name=os.environ.get("AWS_REGION", "us-east-1"))
    counter = itertools.count()  # next() is atomic in CPython: safe from the transfer threads

    def count(**_):
        next(counter)  # and return None: a before-send handler's value would be the response

    s3.meta.events.register("before-send.s3", count)
    return s3, counter


def transfers(direction, local_dir, prefix, paths):
    """(local file, key) of every path; download folders made first, outside the transfers."""
    pairs = []
    for path in paths:
        local = os.path.join(local_dir, path)
        if direction == "download":
            os.makedirs(os.path.dirname(local), exist_ok=True)
        pairs.append((local, prefix + "/" + path))
    return pairs


def loop(s3, direction, bucket, pairs):
    for local, key in pairs:
        if direction == "upload":
            s3.upload_file(local, bucket, key)
        else:
            s3.download_file(bucket, key, local)


def manager(s3, direction, bucket, pairs):
    with create_transfer_manager(s3, TransferConfig()) as transfer:
        if direction == "upload":
            futures = [transfer.upload(local, bucket, key) for local, key in pairs]
        else:
            futures = [transfer.download(bucket, key, local) for local, key in pairs]
        for future in futures:
            future.result()


def main():
    direction, how = sys.argv[1], sys.argv[2]
    if direction == "upload":
        local_dir, bucket, prefix, listing = sys.argv[3:7]
    else:
        bucket, prefix, local_dir, listing = sys.argv[3:7]
    with open(listing) as f:
        paths = [line.rstrip("\n") for line in f if line.strip()]
    s3, counter = client()
    pairs = transfers(direction, local_dir, prefix, paths)
    (loop if how == "loop" else manager)(s3, direction, bucket, pairs)
    print("requests %d" % next(counter))


if __name__ == "__main__":
    main()
