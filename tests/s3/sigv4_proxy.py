#!/usr/bin/env python3
"""A proxy in front of s3rver that checks every request's AWS Signature Version 4 with botocore's
signer (the one boto3 uses), since s3rver itself does not check SigV4 signatures. A request
whose signature, credential scope or x-amz-content-sha256 is wrong gets S3's 403
SignatureDoesNotMatch and is recorded; the others are forwarded unchanged.
GET /_sigv4 answers {"checked": N, "failed": [reasons]}.

  sigv4_proxy.py UPSTREAM_PORT READY_FILE   (key id and secret: S3RVER / S3RVER, us-east-1)
"""
import hashlib
import http.client
import json
import re
import sys
import threading
from urllib.parse import parse_qsl, quote, unquote
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest, HTTPHeaders
from botocore.credentials import Credentials

KEY, SECRET, REGION = "S3RVER", "S3RVER", "us-east-1"
lock = threading.Lock()
checked = 0
failed = []


class Signer(S3SigV4Auth):
    """botocore's S3 signer, limited to the headers the client says it signed."""

    def __init__(self, signed):
        super().__init__(Credentials(KEY, SECRET), "s3", REGION)
        self.signed = signed

    def headers_to_sign(self, request):
        headers = HTTPHeaders()
        for name in self.signed:
            for value in request.headers.get_all(name) or []:
                headers[name] = value
        return headers


def verify(method, path, headers, body):
    auth = headers.get("authorization", "")
    m = re.match(r"AWS4-HMAC-SHA256 Credential=([^,]+), ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]+)$",
                 auth)
    if not m:
        return "no SigV4 Authorization header: %r" % auth[:40]
    credential, signed, signature = m.groups()
    date = headers.get("x-amz-date", "")
    if credential != "%s/%s/%s/s3/aws4_request" % (KEY, date[:8], REGION):
        return "credential scope %s" % credential
    signed = signed.split(";")
    for required in ("host", "x-amz-date", "x-amz-content-sha256"):
        if required not in signed:
            return "%s is not signed" % required
    declared = headers.get("x-amz-content-sha256")
    if declared != "UNSIGNED-PAYLOAD" and declared != hashlib.sha256(body).hexdigest():
        return "x-amz-content-sha256 is not the body's sha256"
    # The canonical form S3 itself computes: the path and each query parameter decoded, then
    # encoded once with SigV4's rules, parameters sorted.
    raw_path, _, raw_query = path.partition("?")
    canonical_path = quote(unquote(raw_path), safe="/-_.~")
    pairs = sorted((quote(k, safe="-_.~"), quote(v, safe="-_.~"))
                   for k, v in parse_qsl(raw_query, keep_blank_values=True))
    url = "http://" + headers["host"] + canonical_path
    if pairs:
        url += "?" + "&".join("%s=%s" % pair for pair in pairs)
    request = AWSRequest(method=method, url=url, data=body)
    for name, value in headers.items():
        request.headers[name] = value
    request.context["timestamp"] = date
    signer = Signer(signed)
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    if expected != signature:
        return "signature mismatch for %s %s; canonical request:\n%s" % (method, path, canonical)
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle_any(self):
        global checked
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.path == "/_sigv4":
            with lock:
                answer = json.dumps({"checked": checked, "failed": failed}).encode()
            return self.answer(200, {"Content-Type": "application/json"}, answer)
        headers = {k.lower(): v for k, v in self.headers.items()}
        problem = verify(self.command, self.path, headers, body)
        with lock:
            checked += 1
            if problem:
                failed.append(problem)
        if problem:
            error = b"<Error><Code>SignatureDoesNotMatch</Code><Message>proxy check</Message></Error>"
            return self.answer(403, {"Content-Type": "application/xml"}, error)
        upstream = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=120)
        forward = {k: v for k, v in self.headers.items() if k.lower() not in ("connection",)}
        upstream.request(self.command, self.path, body=body if body or length else None,
                         headers=forward)
        response = upstream.getresponse()
        data = response.read()
        headers = {k: v for k, v in response.getheaders()
                   if k.lower() not in ("connection", "transfer-encoding", "content-length",
                                        "keep-alive")}
        if self.command == "HEAD":
            headers["Content-Length"] = response.getheader("Content-Length", "0")
        self.answer(response.status, headers, data)
        upstream.close()

    def answer(self, status, headers, body):
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        if self.command != "HEAD":
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


if __name__ == "__main__":
    UPSTREAM = int(sys.argv[1])
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    server.serve_forever()
