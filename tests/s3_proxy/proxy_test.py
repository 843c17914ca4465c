#!/usr/bin/env python3
"""s3-proxy against a real S3-compatible server (s3rver), driven by boto3 (the client libneuronxla
itself uses): requests pass through unchanged (SigV4 still verifies), every fault action does
what tests/s3_proxy/README.md says, conditional writes are enforced atomically, and the stats
carry no header.

Usage: proxy_test.py PATH/TO/s3-proxy
The upstream: S3_PROXY_UPSTREAM=http://127.0.0.1:PORT (an s3rver already running, credentials
S3RVER/S3RVER), else S3RVER_JS or NEURON_CACHE_S3RVER=path/to/s3rver/bin/s3rver.js (started here
on a free port; tests/s3/run-s3-tests.sh sets NEURON_CACHE_S3RVER), else the test is skipped
(exit 77)."""

import hashlib
import http.client
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request
import uuid

import boto3
import botocore.exceptions
from botocore.config import Config

SKIP = 77
PROXY_BINARY = None
UPSTREAM = None
PROCESSES = []
NODE = os.environ.get("NEURON_CACHE_NODE", "node")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port}")


def start_s3rver(script):
    data = tempfile.mkdtemp(prefix="s3rver-")
    port = free_port()
    process = subprocess.Popen(
        [NODE, script, "-d", data, "-a", "127.0.0.1", "-p", str(port), "--silent"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    PROCESSES.append((process, data))
    wait_listening(port)
    return f"http://127.0.0.1:{port}"


def start_proxy(extra=(), upstream=None):
    process = subprocess.Popen([PROXY_BINARY, "--upstream", upstream or UPSTREAM, *extra],
                               stdout=subprocess.PIPE, text=True)
    first = process.stdout.readline()
    match = re.search(r"127\.0\.0\.1:(\d+)", first)
    if not match:
        process.kill()
        raise RuntimeError(f"s3-proxy printed {first!r}")
    PROCESSES.append((process, None))
    return process, f"http://127.0.0.1:{match.group(1)}"


def s3(endpoint, read_timeout=10):
    return boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id="S3RVER", aws_secret_access_key="S3RVER",
        config=Config(s3={"addressing_style": "path"}, read_timeout=read_timeout,
                      connect_timeout=5, retries={"total_max_attempts": 1, "mode": "standard"}))


class Headers:
    """Adds headers to one operation's requests (before signing, as a real client would)."""

    def __init__(self, client, operation, headers):
        self.client, self.event, self.headers = client, f"before-sign.s3.{operation}", headers

    def add(self, request, **_):
        for name, value in self.headers.items():
            request.headers[name] = value

    def __enter__(self):
        self.client.meta.events.register_first(self.event, self.add)

    def __exit__(self, *_):
        self.client.meta.events.unregister(self.event, self.add)


def control(endpoint, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(endpoint + path, data=data, method=method)
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def error_code(error):
    return error.response["Error"]["Code"], error.response["ResponseMetadata"]["HTTPStatusCode"]


class ProxyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.process, cls.url = start_proxy()
        cls.client = s3(cls.url)
        cls.bucket = "proxy-" + uuid.uuid4().hex[:12]
        cls.client.create_bucket(Bucket=cls.bucket)
        cls.body = os.urandom(300_000)
        cls.client.put_object(Bucket=cls.bucket, Key="dir/obj.bin", Body=cls.body)

    def setUp(self):
        control(self.url, "DELETE", "/__proxy/faults")

    def faults(self, rules):
        control(self.url, "POST", "/__proxy/faults", rules)

    def get(self, key="dir/obj.bin", client=None):
        return (client or self.client).get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def test_requests_pass_through_unchanged(self):
        self.assertEqual(self.get(), self.body)
        ranged = self.client.get_object(Bucket=self.bucket, Key="dir/obj.bin", Range="bytes=10-19")
        self.assertEqual(ranged["Body"].read(), self.body[10:20])
        head = self.client.head_object(Bucket=self.bucket, Key="dir/obj.bin")
        self.assertEqual(head["ContentLength"], len(self.body))
        listed = self.client.list_objects_v2(Bucket=self.bucket, Prefix="dir/")
        self.assertEqual([o["Key"] for o in listed["Contents"]], ["dir/obj.bin"])
        # A name SigV4 must encode: signed by boto3 over the raw path the proxy forwards as is.
        key = "neuronxcc-2.21/MODULE_1+ab cd/model.neff"
        self.client.put_object(Bucket=self.bucket, Key=key, Body=b"neff")
        self.assertEqual(self.get(key), b"neff")
        self.assertEqual(self.get(key), b"neff")

    def test_forwards_method_raw_target_headers_and_body_unchanged(self):
        """Against a recording upstream: what arrives is what the client sent, Host and
        Authorization included (SigV4 signs both), the raw target not re-encoded."""
        seen = []

        class Recorder(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_PUT(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                seen.append((self.command, self.path, dict(self.headers.items()), body))
                self.send_response(200)
                self.send_header("ETag", '"abc"')
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def do_HEAD(self):
                seen.append((self.command, self.path, dict(self.headers.items()), b""))
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_):
                pass

        upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
        threading.Thread(target=upstream.serve_forever, daemon=True).start()
        try:
            process, url = start_proxy(upstream=f"http://127.0.0.1:{upstream.server_port}")
            port = int(url.rsplit(":", 1)[1])
            target = "/bucket/neuronxcc-2.21/MODULE_1%2Bab%20cd/model.neff?x-id=PutObject&a=%2F"
            headers = {"Host": "s3.example:9000", "Authorization": "AWS4-HMAC-SHA256 Credential=K/x",
                       "x-amz-content-sha256": "UNSIGNED-PAYLOAD", "x-amz-date": "20260101T000000Z",
                       "If-None-Match": "*", "Content-Type": "application/octet-stream",
                       "Expect": "100-continue"}  # libcurl signs Expect: it must arrive too
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.putrequest("PUT", target, skip_host=True, skip_accept_encoding=True)
            for name, value in headers.items():
                connection.putheader(name, value)
            connection.putheader("Content-Length", "4")
            connection.endheaders(b"body")
            answer = connection.getresponse()
            self.assertEqual((answer.status, answer.read(), answer.getheader("ETag")),
                             (200, b"ok", '"abc"'))
        finally:
            upstream.shutdown()
        # The condition's HEAD went first, to the object's path; then the PUT itself.
        self.assertEqual([(m, p) for m, p, _, _ in seen],
                         [("HEAD", target.split("?")[0]), ("PUT", target)])
        method, path, received, body = seen[-1]
        self.assertEqual((method, path, body), ("PUT", target, b"body"))
        for name, value in headers.items():
            self.assertEqual(received.get(name), value, name)

    def test_multipart_upload_and_download(self):
        key = "multi/big.bin"
        parts = [os.urandom(5 << 20), os.urandom(1 << 20)]
        upload = self.client.create_multipart_upload(Bucket=self.bucket, Key=key)
        done = []
        for number, part in enumerate(parts, 1):
            answer = self.client.upload_part(Bucket=self.bucket, Key=key, PartNumber=number,
                                             UploadId=upload["UploadId"], Body=part)
            done.append({"PartNumber": number, "ETag": answer["ETag"]})
        self.client.complete_multipart_upload(Bucket=self.bucket, Key=key,
                                              UploadId=upload["UploadId"],
                                              MultipartUpload={"Parts": done})
        self.assertEqual(hashlib.sha256(self.get(key)).digest(),
                         hashlib.sha256(b"".join(parts)).digest())

    def test_status_503_slowdown_then_normal(self):
        self.faults({"match": {"method": "GET", "path": "obj\\.bin$"}, "action": "status",
                     "status": 503, "headers": {"Retry-After": "1"}})
        with self.assertRaises(botocore.exceptions.ClientError) as caught:
            self.get()
        self.assertEqual(error_code(caught.exception), ("SlowDown", 503))
        self.assertEqual(self.get(), self.body)  # apply_first defaults to 1

    def test_status_500_on_put(self):
        self.faults({"match": {"method": "PUT"}, "action": "status", "status": 500})
        with self.assertRaises(botocore.exceptions.ClientError) as caught:
            self.client.put_object(Bucket=self.bucket, Key="put500", Body=b"x")
        self.assertEqual(error_code(caught.exception), ("InternalError", 500))
        with self.assertRaises(botocore.exceptions.ClientError):
            self.client.head_object(Bucket=self.bucket, Key="put500")  # never forwarded

    def test_skip_and_apply_first_choose_occurrences(self):
        self.faults({"match": {"method": "GET", "path": "obj"}, "skip": 1, "apply_first": 2,
                     "action": "status", "status": 500})
        self.assertEqual(self.get(), self.body)
        for _ in range(2):
            with self.assertRaises(botocore.exceptions.ClientError):
                self.get()
        self.assertEqual(self.get(), self.body)
        rule = control(self.url, "GET", "/__proxy/faults")[0]
        self.assertEqual((rule["matched"], rule["applied"]), (4, 2))

    def test_drop_closes_without_an_answer(self):
        self.faults({"match": {"method": "GET"}, "action": "drop"})
        with self.assertRaises(botocore.exceptions.BotoCoreError) as caught:
            self.get()
        self.assertNotIsInstance(caught.exception, botocore.exceptions.ClientError)
        # Raw: not one byte comes back.
        self.faults({"match": {"method": "GET"}, "action": "drop"})
        port = int(self.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            raw.sendall(f"GET /{self.bucket}/dir/obj.bin HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            self.assertEqual(raw.recv(100), b"")

    def test_short_body_announces_the_full_length(self):
        self.faults({"match": {"method": "GET"}, "action": "short", "bytes": 1000})
        answer = self.client.get_object(Bucket=self.bucket, Key="dir/obj.bin")
        self.assertEqual(answer["ContentLength"], len(self.body))
        with self.assertRaises(Exception) as caught:
            answer["Body"].read()
        self.assertNotIsInstance(caught.exception, AssertionError)

    def test_corrupt_flips_bytes(self):
        self.faults({"match": {"method": "GET"}, "action": "corrupt", "offset": 200_000,
                     "length": 3})
        got = self.get()
        expected = bytearray(self.body)
        for i in range(200_000, 200_003):
            expected[i] ^= 0xFF
        self.assertEqual(got, bytes(expected))
        self.assertEqual(self.get(), self.body)

    def test_delay_then_forward(self):
        self.faults({"match": {"method": "HEAD"}, "action": "delay", "ms": 700})
        started = time.monotonic()
        self.client.head_object(Bucket=self.bucket, Key="dir/obj.bin")
        self.assertGreaterEqual(time.monotonic() - started, 0.7)

    def test_hang_never_answers(self):
        self.faults({"match": {"method": "GET"}, "action": "hang"})
        with self.assertRaises(botocore.exceptions.ReadTimeoutError):
            self.get(client=s3(self.url, read_timeout=1))

    def test_bad_rule_is_refused(self):
        with self.assertRaises(urllib.error.HTTPError) as caught:
            self.faults({"action": "explode"})
        self.assertEqual(caught.exception.code, 400)

    def test_conditional_put(self):
        key = "index/" + uuid.uuid4().hex + ".json"
        with Headers(self.client, "PutObject", {"If-None-Match": "*"}):
            first = self.client.put_object(Bucket=self.bucket, Key=key, Body=b"one")
            with self.assertRaises(botocore.exceptions.ClientError) as caught:
                self.client.put_object(Bucket=self.bucket, Key=key, Body=b"two")
        self.assertEqual(error_code(caught.exception), ("PreconditionFailed", 412))
        with Headers(self.client, "PutObject", {"If-Match": first["ETag"]}):
            second = self.client.put_object(Bucket=self.bucket, Key=key, Body=b"three")
            with self.assertRaises(botocore.exceptions.ClientError) as caught:
                self.client.put_object(Bucket=self.bucket, Key=key, Body=b"four")  # stale etag
        self.assertEqual(error_code(caught.exception), ("PreconditionFailed", 412))
        self.assertNotEqual(first["ETag"], second["ETag"])
        self.assertEqual(self.get(key), b"three")
        with Headers(self.client, "PutObject", {"If-Match": first["ETag"]}):
            with self.assertRaises(botocore.exceptions.ClientError) as caught:
                self.client.put_object(Bucket=self.bucket, Key=key + ".missing", Body=b"x")
        self.assertEqual(error_code(caught.exception), ("NoSuchKey", 404))

    def test_conditional_complete_multipart_upload(self):
        key = "index/" + uuid.uuid4().hex + ".json"
        for expected in (None, "PreconditionFailed"):
            upload = self.client.create_multipart_upload(Bucket=self.bucket, Key=key)
            part = self.client.upload_part(Bucket=self.bucket, Key=key, PartNumber=1,
                                           UploadId=upload["UploadId"], Body=b"part")
            with Headers(self.client, "CompleteMultipartUpload", {"If-None-Match": "*"}):
                call = lambda: self.client.complete_multipart_upload(
                    Bucket=self.bucket, Key=key, UploadId=upload["UploadId"],
                    MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
                if expected is None:
                    call()
                else:
                    with self.assertRaises(botocore.exceptions.ClientError) as caught:
                        call()
                    self.assertEqual(error_code(caught.exception), (expected, 412))

    def test_racing_conditional_writes_have_one_winner(self):
        keys = ["race/" + uuid.uuid4().hex for _ in range(10)]
        wins = {key: [] for key in keys}

        def writer(name):
            client = s3(self.url)
            with Headers(client, "PutObject", {"If-None-Match": "*"}):
                for key in keys:
                    try:
                        client.put_object(Bucket=self.bucket, Key=key, Body=name.encode())
                        wins[key].append(name)
                    except botocore.exceptions.ClientError as error:
                        self.assertEqual(error_code(error), ("PreconditionFailed", 412))

        threads = [threading.Thread(target=writer, args=(f"w{i}",)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for key in keys:
            self.assertEqual(len(wins[key]), 1, key)
            self.assertEqual(self.get(key), wins[key][0].encode())

    def test_stats_count_methods_and_log_no_headers(self):
        control(self.url, "DELETE", "/__proxy/stats")
        self.get()
        self.client.head_object(Bucket=self.bucket, Key="dir/obj.bin")
        self.faults({"match": {"method": "GET"}, "action": "status", "status": 503})
        with self.assertRaises(botocore.exceptions.ClientError):
            self.get()
        stats = control(self.url, "GET", "/__proxy/stats")
        self.assertEqual(stats["methods"], {"GET": 2, "HEAD": 1})
        self.assertEqual([(e["method"], e["status"], e["fault"]) for e in stats["log"]],
                         [("GET", 200, None), ("HEAD", 200, None), ("GET", 503, "status")])
        self.assertEqual(stats["log"][0]["path"], f"/{self.bucket}/dir/obj.bin")
        for entry in stats["log"]:
            self.assertEqual(set(entry), {"method", "path", "query", "status", "fault"})
        self.assertNotIn("S3RVER", json.dumps(stats))
        self.assertNotIn("AWS4-HMAC", json.dumps(stats))

    def test_faults_file_at_start(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as rules:
            json.dump([{"match": {"method": "GET"}, "action": "status", "status": 503}], rules)
        try:
            process, url = start_proxy(["--faults", rules.name])
            with self.assertRaises(botocore.exceptions.ClientError) as caught:
                self.get(client=s3(url))
            self.assertEqual(error_code(caught.exception), ("SlowDown", 503))
            self.assertEqual(self.get(client=s3(url)), self.body)
        finally:
            os.unlink(rules.name)


def main():
    global PROXY_BINARY, UPSTREAM
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    PROXY_BINARY = sys.argv.pop(1)
    UPSTREAM = os.environ.get("S3_PROXY_UPSTREAM")
    # NEURON_CACHE_S3RVER: set by tests/s3/run-s3-tests.sh, the ctest launcher.
    script = os.environ.get("S3RVER_JS") or os.environ.get("NEURON_CACHE_S3RVER")
    if not UPSTREAM and script:
        if not shutil.which(NODE):
            print("SKIP: node is not installed (s3rver needs it)")
            return SKIP
        UPSTREAM = start_s3rver(script)
    if not UPSTREAM:
        print("SKIP: set S3_PROXY_UPSTREAM=http://127.0.0.1:PORT (a running s3rver) or "
              "S3RVER_JS=.../s3rver/bin/s3rver.js")
        return SKIP
    try:
        result = unittest.main(exit=False, verbosity=2).result
        return 0 if result.wasSuccessful() else 1
    finally:
        for process, data in PROCESSES:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
            if data:
                shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
