#!/usr/bin/env python3
"""Loopback stand-ins for the AWS credential endpoints botocore reads (issue 23): the EC2 instance
metadata service (IMDSv2), the ECS / EKS Pod Identity container credentials endpoint, the STS
query API (AssumeRole, SigV4-checked, and AssumeRoleWithWebIdentity) and the IAM Identity Center
(SSO) portal's GetRoleCredentials, with faults on demand. tests/aws/README.md describes the
config, the admin API and the faults; tests/aws/botocore_check.py proves it faithful with botocore.

  aws_stand_in.py --config CONFIG.json --port-file FILE

Listens on 127.0.0.1 on a free port (written to FILE once it listens, by rename, so a reader never
sees half a number), plus a second free port that the `redirect` fault sends clients to.
Standard library only, but for AssumeRole: its signature is checked with botocore's signer.
"""
import argparse
import calendar
import json
import os
import re
import secrets
import sys
import threading
import time
import traceback
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, quote, unquote, urlsplit
from xml.sax.saxutils import escape

STS_NS = "https://sts.amazonaws.com/doc/2011-06-15/"
ENDPOINTS = ("imds", "container", "sts", "sso")
MODES = ("none", "huge", "slow", "malformed", "expired", "redirect", "status500")
# The sources whose credentials the stand-in hands out (keys of the config, see README).
SOURCES = ("imds", "container", "web_identity", "assume_role", "sso")
IMDS_MAX_TTL = 21600
# STS refuses a signature dated more than 15 minutes away from its clock.
SIGV4_SKEW_SECONDS = 15 * 60


def iso8601(epoch):
    """AWS's credential timestamps: 2026-12-03T12:00:00Z (UTC, no fraction)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def rotated(value, generation):
    """Generation 0 is the configured value; after N rotations its last four characters are
    RNNN (README, /_admin/rotate), so a test knows the new values without asking."""
    return value if generation == 0 else value[:-4] + "R%03d" % generation


class State:
    """Everything the handlers share, behind one lock."""

    def __init__(self, config):
        self.config = config
        self.lock = threading.Lock()
        self.generation = 0
        self.imds_tokens = {}  # token -> monotonic expiry
        self.faults = {}  # endpoint -> {"mode", "times", "interval_seconds", "bytes"}
        self.log = []
        self.redirect_port = 0

    def section(self, source):
        if source in ("web_identity", "assume_role"):
            return self.config["sts"][source]
        return self.config[source]

    def expires_in(self, source):
        """Seconds the handed-out credentials live: the source's own expires_in_seconds, else its
        endpoint's (sts), else the top-level one."""
        endpoint = "sts" if source in ("web_identity", "assume_role") else source
        for where in (self.section(source), self.config[endpoint], self.config):
            if "expires_in_seconds" in where:
                return where["expires_in_seconds"]
        return 3600

    def credentials(self, source):
        base = self.section(source)["credentials"]
        with self.lock:
            generation = self.generation
        return {k: rotated(base[k], generation)
                for k in ("AccessKeyId", "SecretAccessKey", "SessionToken")}

    def all_credentials(self):
        return {source: self.credentials(source) for source in SOURCES}

    def take_fault(self, endpoint):
        """The fault set for `endpoint` (None when none), counted down when it has `times`."""
        with self.lock:
            fault = self.faults.get(endpoint)
            if not fault:
                return None
            if "times" in fault:
                fault["times"] -= 1
                if fault["times"] <= 0:
                    del self.faults[endpoint]
            return dict(fault)

    def record(self, entry):
        with self.lock:
            self.log.append(entry)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state = None  # set in main()
    # Until setup_request: what http.server's own errors (a malformed request line) go through.
    entry, recorded, server_header = {}, True, None

    def log_message(self, *args):
        pass

    # --- plumbing -------------------------------------------------------------------------

    def setup_request(self):
        self.entry = {"listener": self.server.listener, "method": self.command, "path": self.path,
                      "headers": list(self.headers.keys()), "endpoint": None, "status": None}
        self.server_header = None
        self.recorded = False
        length = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(min(length, 1 << 20)) if length > 0 else b""

    def send_response(self, code, message=None):
        # Only the headers the real services send: a Server header only where AWS sends one
        # (IMDS's "EC2ws"), never Python's.
        self.send_response_only(code, message)
        self.send_header("Date", self.date_time_string())
        if self.server_header:
            self.send_header("Server", self.server_header)
        self.entry["status"] = code

    def end_headers(self):
        # Logged before the client can read the answer: a test reading /_admin/log right after
        # its request always finds it.
        self.record()
        super().end_headers()

    def record(self):
        if not self.recorded:
            self.recorded = True
            self.state.record(self.entry)

    def answer(self, status, body, content_type, headers=()):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        if body or content_type:
            self.send_header("Content-Type", content_type)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def handle_any(self):
        self.setup_request()
        path = urlsplit(self.path).path
        try:
            if path.startswith("/_admin/"):
                self.recorded = True  # not logged: the log is what clients did
                return self.admin(path)
            if path == "/latest" or path.startswith("/latest/"):
                self.server_header = "EC2ws"
                self.imds(path)
            elif self.is_container(path):
                self.container(path)
            elif path == "/federation/credentials":
                self.sso()
            elif path == "/" and self.command in ("POST", "GET"):
                self.sts()
            else:
                self.answer(404, "Not Found", "text/plain")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (huge, slow): nothing to answer
        except Exception:  # a stand-in bug: say so loudly rather than hang the client
            traceback.print_exc()
            self.close_connection = True
            self.entry["status"] = 599
        self.record()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = handle_any

    def fault(self, endpoint):
        """The fault to play on this request: none on the redirect target, where a followed
        `redirect` would otherwise loop."""
        if self.server.listener == "redirect-target":
            return None
        return self.state.take_fault(endpoint)

    def deliver(self, endpoint, fault, status, content_type, body_of, headers=()):
        """Answers a successful credentials request, or the fault set for its endpoint.
        body_of(expired) renders the document, with an Expiration in the past when asked."""
        mode = fault["mode"] if fault else "none"
        if mode != "none":
            self.entry["fault"] = mode
        if mode == "status500":
            return self.server_error(endpoint)
        if mode == "redirect":
            # AWS never redirects these requests; a client that follows leaks the request
            # (and its Authorization / token headers) to another origin: the log shows it.
            location = "http://127.0.0.1:%d%s" % (self.state.redirect_port, self.path)
            return self.answer(302, b"", None, [("Location", location)])
        body = body_of(mode == "expired").encode()
        if mode == "malformed":
            # A document cut in the middle: neither JSON nor XML parses it.
            return self.answer(status, body[:len(body) // 2], content_type, headers)
        if mode == "huge":
            return self.stream_huge(content_type, body, fault.get("bytes", 100 << 20))
        if mode == "slow":
            return self.trickle(status, content_type, body, headers,
                                fault.get("interval_seconds", 2.0))
        self.answer(status, body, content_type, headers)

    def stream_huge(self, content_type, body, size):
        """A 200 whose announced and sent body is `size` bytes (100 MiB by default): the
        document's start, then padding, written as it goes so the stand-in holds none of it."""
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        head = body[:len(body) // 2]
        self.wfile.write(head[:size])
        left = size - min(len(head), size)
        block = b" " * (64 << 10)
        while left > 0:
            self.wfile.write(block[:left])
            left -= min(left, len(block))

    def trickle(self, status, content_type, body, headers, interval):
        """The whole response, status line included, one byte every `interval` seconds: only a
        client with an overall deadline (not just a per-read timeout) gets out early."""
        self.close_connection = True
        lines = ["HTTP/1.1 %d %s" % (status, self.responses[status][0]),
                 "Date: " + self.date_time_string(), "Content-Type: " + content_type,
                 "Content-Length: %d" % len(body), "Connection: close"]
        lines += ["Server: " + self.server_header] if self.server_header else []
        lines += ["%s: %s" % h for h in headers]
        raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
        self.entry["status"] = status
        self.record()
        for i in range(len(raw)):
            self.wfile.write(raw[i:i + 1])
            time.sleep(interval)

    def server_error(self, endpoint):
        """The 500 each service answers, in its own error format."""
        request_id = str(uuid.uuid4())
        if endpoint == "sts":
            return self.sts_error(500, "InternalFailure",
                                  "The request processing has failed because of an unknown error, "
                                  "exception or failure.", kind="Receiver")
        if endpoint == "sso":
            return self.answer(500, json.dumps({"message": "Internal failure"}),
                               "application/json",
                               [("x-amzn-RequestId", request_id),
                                ("x-amzn-ErrorType", "InternalServerException")])
        if endpoint == "container":
            return self.answer(500, json.dumps({"code": "InternalServerError",
                                                "message": "internal error"}), "application/json")
        self.answer(500, html_page("500 - Internal Server Error"), "text/html")

    # --- IMDSv2 ---------------------------------------------------------------------------

    def imds(self, path):
        self.entry["endpoint"] = "imds"
        config = self.state.config["imds"]
        if path == "/latest/api/token":
            if self.command != "PUT":
                return self.answer(405, html_page("405 - Method Not Allowed"), "text/html")
            return self.imds_token()
        if self.command != "GET":
            return self.answer(405, html_page("405 - Method Not Allowed"), "text/html")
        token = self.headers.get("X-aws-ec2-metadata-token")
        if token is None and config.get("require_token", True):
            # HttpTokens=required: IMDSv1 (no token) is refused.
            return self.answer(401, html_page("401 - Unauthorized"), "text/html")
        headers = []
        if token is not None:
            with self.state.lock:
                expiry = self.state.imds_tokens.get(token)
            if expiry is None or expiry <= time.monotonic():
                return self.answer(401, html_page("401 - Unauthorized"), "text/html")
            headers = [("X-Aws-Ec2-Metadata-Token-Ttl-Seconds",
                        str(int(expiry - time.monotonic())))]
        # IMDS answers leaves and folders with or without the trailing slash (botocore asks
        # placement/availability-zone/ with one).
        path = path.rstrip("/")
        role = config["role_name"]
        region = self.state.config["region"]
        creds_path = "/latest/meta-data/iam/security-credentials"
        if path == creds_path:
            return self.answer(200, role, "text/plain", headers)
        if path == creds_path + "/" + role:
            return self.deliver("imds", self.fault("imds"), 200, "text/plain",
                                self.imds_document, headers)
        if path == "/latest/meta-data/iam/info":
            return self.answer(200, json.dumps({
                "Code": "Success", "LastUpdated": iso8601(time.time() - 60),
                "InstanceProfileArn": "arn:aws:iam::%s:instance-profile/%s"
                                      % (self.state.config["account_id"], role),
                "InstanceProfileId": "AIPAEXAMPLEPROFILE0001"}, indent=2), "text/plain", headers)
        if path == "/latest/meta-data/placement/region":
            return self.answer(200, region, "text/plain", headers)
        if path == "/latest/meta-data/placement/availability-zone":
            zone = self.state.config.get("availability_zone", region + "a")
            return self.answer(200, zone, "text/plain", headers)
        self.answer(404, html_page("404 - Not Found"), "text/html", headers)

    def imds_token(self):
        # IMDS refuses token requests that went through a proxy (X-Forwarded-For).
        if "X-Forwarded-For" in self.headers:
            return self.answer(403, html_page("403 - Forbidden"), "text/html")
        ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
        if not re.fullmatch(r"[0-9]{1,5}", ttl) or not 1 <= int(ttl) <= IMDS_MAX_TTL:
            return self.answer(400, html_page("400 - Bad Request"), "text/html")
        token = "AQAEA" + secrets.token_urlsafe(42)
        with self.state.lock:
            self.state.imds_tokens[token] = time.monotonic() + int(ttl)
        self.answer(200, token, "text/plain", [("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", ttl)])

    def imds_document(self, expired):
        now = time.time()
        creds = self.state.credentials("imds")
        expiration = now - 3600 if expired else now + self.state.expires_in("imds")
        return json.dumps({"Code": "Success", "LastUpdated": iso8601(now - 60),
                           "Type": "AWS-HMAC", "AccessKeyId": creds["AccessKeyId"],
                           "SecretAccessKey": creds["SecretAccessKey"],
                           "Token": creds["SessionToken"], "Expiration": iso8601(expiration)},
                          indent=2)

    # --- container credentials (ECS, EKS Pod Identity) ------------------------------------

    def is_container(self, path):
        config = self.state.config["container"]
        return (self.path in (config.get("relative_uri"), config.get("full_uri_path"))
                or path.startswith("/v2/credentials/"))

    def container(self, path):
        self.entry["endpoint"] = "container"
        config = self.state.config["container"]
        if self.command != "GET":
            return self.answer(405, json.dumps({"code": "MethodNotAllowed"}), "application/json")
        full = self.path == config.get("full_uri_path")
        if not full and self.path != config.get("relative_uri"):
            # The ECS agent's answer for a credentials id it does not know.
            return self.answer(400, json.dumps({
                "code": "InvalidIdInRequest", "message": "CredentialsV2Request: Credentials not "
                "found", "HTTPErrorCode": 400}), "application/json")
        # The relative URI (ECS) is its own secret; the full URI (Pod Identity, Greengrass...)
        # needs the Authorization header the client read from AWS_CONTAINER_AUTHORIZATION_TOKEN
        # (_FILE).
        token = config.get("authorization_token")
        if full and token is not None and self.headers.get("Authorization") != token:
            return self.answer(401, json.dumps({"message": "Authorization token is missing or "
                                                "invalid"}), "application/json")

        def document(expired):
            now = time.time()
            creds = self.state.credentials("container")
            body = {"RoleArn": config["role_arn"], "AccessKeyId": creds["AccessKeyId"],
                    "SecretAccessKey": creds["SecretAccessKey"], "Token": creds["SessionToken"],
                    "Expiration": iso8601(now - 3600 if expired
                                          else now + self.state.expires_in("container"))}
            if full:  # the Pod Identity agent also says the account
                body["AccountId"] = self.state.config["account_id"]
            return json.dumps(body)

        self.deliver("container", self.fault("container"), 200, "application/json",
                     document)

    # --- STS query API --------------------------------------------------------------------

    def sts(self):
        self.entry["endpoint"] = "sts"
        params = dict(parse_qsl(urlsplit(self.path).query, keep_blank_values=True))
        if self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
            params.update(parse_qsl(self.body.decode("utf-8", "replace"), keep_blank_values=True))
        action, version = params.get("Action", ""), params.get("Version", "")
        self.entry["action"] = action
        if action not in ("AssumeRole", "AssumeRoleWithWebIdentity") or version != "2011-06-15":
            return self.sts_error(400, "InvalidAction", "Could not find operation %s for version %s"
                                  % (action, version or "NO_VERSION_SPECIFIED"))
        which = "assume_role" if action == "AssumeRole" else "web_identity"
        config = self.state.config["sts"][which]
        if action == "AssumeRole":
            problem = self.sigv4_problem(config["source_credentials"])
            if problem:
                return self.sts_error(*problem)
        session = params.get("RoleSessionName")
        if session is None or not re.fullmatch(r"[\w+=,.@-]{2,64}", session):
            return self.sts_error(400, "ValidationError", "1 validation error detected: Value %s "
                                  "at 'roleSessionName' failed to satisfy constraint: Member must "
                                  "satisfy regular expression pattern: [\\w+=,.@-]*"
                                  % ("null" if session is None else "'%s'" % session))
        duration = params.get("DurationSeconds", "3600")
        if not duration.isdigit() or not 900 <= int(duration) <= 43200:
            return self.sts_error(400, "ValidationError", "1 validation error detected: Value '%s' "
                                  "at 'durationSeconds' failed to satisfy constraint: Member must "
                                  "have value between 900 and 43200" % duration)
        role_arn = params.get("RoleArn", "")
        if action == "AssumeRole":
            if role_arn != config["role_arn"]:
                caller = config["source_credentials"].get("principal_arn", "the caller")
                return self.sts_error(403, "AccessDenied", "User: %s is not authorized to perform: "
                                      "sts:AssumeRole on resource: %s" % (caller, role_arn))
        else:
            if params.get("WebIdentityToken") != config["token"]:
                return self.sts_error(400, "InvalidIdentityToken", "The web identity token that "
                                      "was passed could not be validated by AWS. Get a new "
                                      "identity token from the identity provider and then retry "
                                      "the request.")
            if role_arn != config["role_arn"]:
                return self.sts_error(403, "AccessDenied",
                                      "Not authorized to perform sts:AssumeRoleWithWebIdentity")
            if config.get("role_session_name") not in (None, session):
                return self.sts_error(403, "AccessDenied",
                                      "Not authorized to perform sts:AssumeRoleWithWebIdentity")

        request_id = str(uuid.uuid4())

        def document(expired):
            now = time.time()
            creds = self.state.credentials(which)
            expiration = now - 3600 if expired else now + self.state.expires_in(which)
            account, role = role_arn.split(":")[4], role_arn.split("/")[-1]
            lines = ['<%sResponse xmlns="%s">' % (action, STS_NS), "  <%sResult>" % action]
            if action == "AssumeRoleWithWebIdentity":
                lines += ["    <SubjectFromWebIdentityToken>system:serviceaccount:ci:neuron-cache"
                          "</SubjectFromWebIdentityToken>",
                          "    <Audience>sts.amazonaws.com</Audience>",
                          "    <Provider>arn:aws:iam::%s:oidc-provider/oidc.example</Provider>"
                          % account]
            lines += ["    <AssumedRoleUser>",
                      "      <Arn>arn:aws:sts::%s:assumed-role/%s/%s</Arn>"
                      % (account, escape(role), escape(session)),
                      "      <AssumedRoleId>AROA3EXAMPLEROLEID00:%s</AssumedRoleId>"
                      % escape(session),
                      "    </AssumedRoleUser>",
                      "    <Credentials>",
                      "      <AccessKeyId>%s</AccessKeyId>" % escape(creds["AccessKeyId"]),
                      "      <SecretAccessKey>%s</SecretAccessKey>"
                      % escape(creds["SecretAccessKey"]),
                      "      <SessionToken>%s</SessionToken>" % escape(creds["SessionToken"]),
                      "      <Expiration>%s</Expiration>" % iso8601(expiration),
                      "    </Credentials>",
                      "  </%sResult>" % action,
                      "  <ResponseMetadata>",
                      "    <RequestId>%s</RequestId>" % request_id,
                      "  </ResponseMetadata>",
                      "</%sResponse>" % action, ""]
            return "\n".join(lines)

        self.deliver("sts", self.fault("sts"), 200, "text/xml", document,
                     [("x-amzn-RequestId", request_id)])

    def sts_error(self, status, code, message, kind="Sender"):
        request_id = str(uuid.uuid4())
        body = ('<ErrorResponse xmlns="%s">\n  <Error>\n    <Type>%s</Type>\n    <Code>%s</Code>\n'
                '    <Message>%s</Message>\n  </Error>\n  <RequestId>%s</RequestId>\n'
                '</ErrorResponse>\n' % (STS_NS, kind, code, escape(message), request_id))
        self.answer(status, body, "text/xml", [("x-amzn-RequestId", request_id)])

    def sigv4_problem(self, source):
        """None when the request carries a valid SigV4 signature (service sts) by `source`,
        else (status, code, message) of STS's answer."""
        mismatch = 403, "SignatureDoesNotMatch"
        invalid_key = 403, "InvalidClientTokenId", "The security token included in the request " \
                                                   "is invalid."
        auth = self.headers.get("Authorization")
        if not auth:
            return 403, "MissingAuthenticationToken", "Request is missing Authentication Token"
        m = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^/,]+)/([0-9]{8})/([^/,]+)/([^/,]+)/"
                         r"aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})",
                         auth)
        if not m:
            return 400, "IncompleteSignature", "Authorization header requires 'Credential', " \
                                               "'Signature' and 'SignedHeaders' parameters."
        key, day, region, service, signed, signature = m.groups()
        if key != source["AccessKeyId"]:
            return invalid_key
        if source.get("SessionToken") and \
                self.headers.get("X-Amz-Security-Token") != source["SessionToken"]:
            return invalid_key
        if service != "sts":
            return (*mismatch, "Credential should be scoped to correct service: 'sts'. ")
        # The stand-in is one endpoint for the regional and the global (us-east-1) one.
        if region not in (self.state.config["region"], "us-east-1"):
            return (*mismatch, "Credential should be scoped to a valid region. ")
        stamp = self.headers.get("X-Amz-Date", "")
        try:
            signed_at = calendar.timegm(time.strptime(stamp, "%Y%m%dT%H%M%SZ"))
        except ValueError:
            return 400, "IncompleteSignature", "Date must be in ISO-8601 'basic format'. Got " \
                                               "'%s'." % stamp
        if stamp[:8] != day:
            return (*mismatch, "Date in Credential scope does not match YYYYMMDD from ISO-8601 "
                    "version of date from HTTP: '%s' != '%s'" % (day, stamp[:8]))
        now = time.time()
        if abs(now - signed_at) > SIGV4_SKEW_SECONDS:
            basic = "%Y%m%dT%H%M%SZ"
            return (*mismatch, "Signature expired: %s is now earlier than %s (%s - 15 min.)"
                    % (stamp, time.strftime(basic, time.gmtime(now - SIGV4_SKEW_SECONDS)),
                       time.strftime(basic, time.gmtime(now))))
        if "host" not in signed.split(";"):
            return (*mismatch, "'Host' must be a 'SignedHeader' in the AWS Authorization.")
        expected = expected_signature(self.command, self.path, self.headers, self.body,
                                      signed.split(";"), source, region, stamp)
        if expected != signature:
            return (*mismatch, "The request signature we calculated does not match the signature "
                    "you provided. Check your AWS Secret Access Key and signing method. Consult "
                    "the service documentation for details.")
        return None

    # --- SSO portal -----------------------------------------------------------------------

    def sso(self):
        self.entry["endpoint"] = "sso"
        config = self.state.config["sso"]
        request_id = str(uuid.uuid4())

        def error(status, kind, message):
            # restJson errors: the type in x-amzn-ErrorType, {"message"} in the body.
            self.answer(status, json.dumps({"message": message}), "application/json",
                        [("x-amzn-RequestId", request_id), ("x-amzn-ErrorType", kind)])

        if self.command != "GET":
            return self.answer(404, json.dumps({"message": "Not Found"}), "application/json")
        query = dict(parse_qsl(urlsplit(self.path).query, keep_blank_values=True))
        fault = self.fault("sso")
        # The portal's answer for a token it does not know, or whose session expired (the
        # `expired` fault: the portal never hands out expired role credentials, its token expires).
        if self.headers.get("x-amz-sso_bearer_token") != config["access_token"] or \
                (fault and fault["mode"] == "expired"):
            if fault and fault["mode"] == "expired":
                self.entry["fault"] = "expired"
            return error(401, "UnauthorizedException", "Session token not found or invalid")
        if "role_name" not in query or "account_id" not in query:
            return error(400, "InvalidRequestException", "role_name and account_id are required")
        if query["role_name"] != config["role_name"] or query["account_id"] != config["account_id"]:
            return error(403, "ForbiddenException", "No access")

        def document(expired):
            creds = self.state.credentials("sso")
            return json.dumps({"roleCredentials": {
                "accessKeyId": creds["AccessKeyId"], "secretAccessKey": creds["SecretAccessKey"],
                "sessionToken": creds["SessionToken"],
                # Epoch milliseconds, unlike every other source.
                "expiration": int((time.time() + self.state.expires_in("sso")) * 1000)}})

        self.deliver("sso", fault, 200, "application/json", document,
                     [("x-amzn-RequestId", request_id)])

    # --- admin ----------------------------------------------------------------------------

    def admin(self, path):
        state = self.state
        if path == "/_admin/log" and self.command == "GET":
            with state.lock:
                log = list(state.log)
            return self.answer(200, json.dumps(log, indent=1), "application/json")
        if path == "/_admin/credentials" and self.command == "GET":
            return self.answer(200, json.dumps(self.admin_credentials()), "application/json")
        if path == "/_admin/rotate" and self.command == "POST":
            with state.lock:
                state.generation += 1
            return self.answer(200, json.dumps(self.admin_credentials()), "application/json")
        if path == "/_admin/reset" and self.command == "POST":
            with state.lock:
                state.generation, state.faults, state.log, state.imds_tokens = 0, {}, [], {}
            return self.answer(200, "{}", "application/json")
        if path == "/_admin/fault" and self.command == "POST":
            try:
                fault = json.loads(self.body)
                assert fault["endpoint"] in ENDPOINTS and fault["mode"] in MODES
                assert set(fault) <= {"endpoint", "mode", "times", "interval_seconds", "bytes"}
                assert isinstance(fault.get("times", 1), int) and fault.get("times", 1) >= 1
                assert isinstance(fault.get("bytes", 0), int) and fault.get("bytes", 0) >= 0
                assert isinstance(fault.get("interval_seconds", 0), (int, float))
            except (ValueError, KeyError, TypeError, AssertionError):
                usage = 'expected {"endpoint": %s, "mode": %s[, "times", "interval_seconds", ' \
                        '"bytes"]}' % ("|".join(ENDPOINTS), "|".join(MODES))
                return self.answer(400, json.dumps({"error": usage}), "application/json")
            with state.lock:
                if fault["mode"] == "none":
                    state.faults.pop(fault["endpoint"], None)
                else:
                    state.faults[fault["endpoint"]] = fault
            return self.answer(200, json.dumps(fault), "application/json")
        self.answer(404, json.dumps({"error": "unknown admin request"}), "application/json")

    def admin_credentials(self):
        with self.state.lock:
            generation = self.state.generation
        return {"generation": generation, "credentials": self.state.all_credentials()}


def html_page(title):
    """IMDS's error pages are small HTML documents."""
    return ('<?xml version="1.0" encoding="iso-8859-1"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD '
            'XHTML 1.0 Transitional//EN"\n\t"http://www.w3.org/TR/xhtml1/DTD/'
            'xhtml1-transitional.dtd">\n<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en" '
            'lang="en">\n <head>\n  <title>%s</title>\n </head>\n <body>\n  <h1>%s</h1>\n '
            '</body>\n</html>\n'
            % (title, title))


def expected_signature(method, path, headers, body, signed, source, region, stamp):
    """The SigV4 signature botocore's signer (the reference the SDKs agree with) computes over
    this request, restricted to the headers the client says it signed."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest, HTTPHeaders
    from botocore.credentials import Credentials

    class Signer(SigV4Auth):
        def headers_to_sign(self, request):
            chosen = HTTPHeaders()
            for name in signed:
                for value in request.headers.get_all(name) or []:
                    chosen[name] = value
            return chosen

    # The canonical form STS computes: path and each query parameter decoded, then encoded once
    # with SigV4's rules, parameters sorted.
    raw_path, _, raw_query = path.partition("?")
    url = "http://" + headers["Host"] + quote(unquote(raw_path), safe="/-_.~")
    pairs = sorted((quote(k, safe="-_.~"), quote(v, safe="-_.~"))
                   for k, v in parse_qsl(raw_query, keep_blank_values=True))
    if pairs:
        url += "?" + "&".join("%s=%s" % pair for pair in pairs)
    request = AWSRequest(method=method, url=url, data=body)
    for name, value in headers.items():
        request.headers[name] = value
    request.context["timestamp"] = stamp
    signer = Signer(Credentials(source["AccessKeyId"], source["SecretAccessKey"],
                                source.get("SessionToken")), "sts", region)
    canonical = signer.canonical_request(request)
    return signer.signature(signer.string_to_sign(request, canonical), request)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="the JSON config (tests/aws/README.md)")
    parser.add_argument("--port-file", required=True, help="gets the port once listening")
    args = parser.parse_args()
    with open(args.config) as f:
        Handler.state = State(json.load(f))

    def listener(name):
        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.listener = name
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    redirect_target = listener("redirect-target")
    Handler.state.redirect_port = redirect_target.server_address[1]
    main_server = listener("main")
    port = main_server.server_address[1]
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(port))
    os.rename(args.port_file + ".tmp", args.port_file)
    print("aws-stand-in listening on 127.0.0.1:%d (redirect target 127.0.0.1:%d)"
          % (port, Handler.state.redirect_port), flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    sys.exit(main())
