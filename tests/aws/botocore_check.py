#!/usr/bin/env python3
"""Proves the AWS credential stand-ins (aws_stand_in.py) faithful: botocore, the reference the
C++ client follows (issue 23), resolves every credential source against a running stand-in to
exactly the values its config says, refuses what AWS would have it refuse, and the raw answers
(status codes, headers, formats, faults) are what tests/aws/README.md says. One line per check,
never a secret; exits 1 on any mismatch.

  botocore_check.py [--config CONFIG.json] [--endpoints auto|variables|create-client]

Each source gets a fresh botocore Session in a cleaned environment (a temporary HOME, config and
credentials files, no AWS_* or proxy variable from outside) with AWS_EC2_METADATA_DISABLED=true
except where IMDS is the source under test. Every connection this process opens is checked: one
to anything but 127.0.0.1 is refused and fails the check (botocore must never reach
169.254.169.254, 169.254.170.2, fd00:ec2::254 or an AWS host).
"""
import argparse
import ctypes
import hashlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ElementTree

HERE = os.path.dirname(os.path.abspath(__file__))
STS_NS = "{https://sts.amazonaws.com/doc/2011-06-15/}"

# --- loopback only --------------------------------------------------------------------------
# Installed before botocore is imported: every name lookup and connect of this process goes
# through here, so a provider that reaches past the stand-in fails loudly instead of asking AWS.
BLOCKED = []
_getaddrinfo, _connect = socket.getaddrinfo, socket.socket.connect


def _loopback_getaddrinfo(host, *args, **kwargs):
    if host not in ("127.0.0.1", "localhost", b"127.0.0.1"):
        BLOCKED.append(str(host))
        raise socket.gaierror(socket.EAI_NONAME, "botocore_check: only 127.0.0.1 may be reached")
    return _getaddrinfo("127.0.0.1", *args, **kwargs)


def _loopback_connect(sock, address):
    if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] != "127.0.0.1":
        BLOCKED.append(str(address[0]))
        raise ConnectionRefusedError("botocore_check: only 127.0.0.1 may be reached")
    return _connect(sock, address)


socket.getaddrinfo = _loopback_getaddrinfo
socket.socket.connect = _loopback_connect


class Failure(Exception):
    pass


def require(condition, what):
    if not condition:
        raise Failure(what)


# --- the stand-in ---------------------------------------------------------------------------

def die_with_parent():
    """The stand-in gets SIGTERM when this process dies (ctest's timeout kills only us)."""
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class StandIn:
    def __init__(self, config_file, work, env):
        self.config_file = config_file
        with open(config_file) as f:
            self.config = json.load(f)
        port_file = os.path.join(work, "port")
        self.output = open(os.path.join(work, "stand-in.log"), "w+")
        self.process = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "aws_stand_in.py"), "--config", config_file,
             "--port-file", port_file], stdout=self.output, stderr=subprocess.STDOUT, env=env,
            preexec_fn=die_with_parent)
        deadline = time.monotonic() + 20
        while not os.path.exists(port_file):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise Failure("the stand-in did not start:\n" + self.log_text())
            time.sleep(0.02)
        with open(port_file) as f:
            self.port = int(f.read())
        self.url = "http://127.0.0.1:%d" % self.port

    def log_text(self):
        self.output.seek(0)
        return self.output.read()

    def stop(self):
        self.process.terminate()
        self.process.wait(10)

    def request(self, method, path, body=None, headers=None, port=None):
        """(status, headers, body) of one raw request."""
        connection = http.client.HTTPConnection("127.0.0.1", port or self.port, timeout=10)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            return response.status, response, response.read()
        finally:
            connection.close()

    def admin(self, what, document=None):
        status, _, body = self.request("POST" if document is not None or what in (
            "rotate", "reset") else "GET", "/_admin/" + what,
            json.dumps(document) if document is not None else None)
        require(status == 200, "/_admin/%s answered %d" % (what, status))
        return json.loads(body)

    def fault(self, endpoint, mode, **extra):
        self.admin("fault", dict(endpoint=endpoint, mode=mode, **extra))

    def log_since(self, mark):
        return self.admin("log")[mark:]

    def expires_in(self, source):
        """The lifetime the stand-in gives `source` (README: the source's, the endpoint's, the
        top-level expires_in_seconds)."""
        endpoint = "sts" if source in ("web_identity", "assume_role") else source
        section = self.config["sts"][source] if endpoint == "sts" else self.config[source]
        for where in (section, self.config[endpoint], self.config):
            if "expires_in_seconds" in where:
                return where["expires_in_seconds"]
        return 3600

    def expected(self, source, generation=0):
        """The credentials of `source` after `generation` rotations, by README's rule."""
        section = self.config["sts"][source] if source in ("web_identity", "assume_role") \
            else self.config[source]
        return {k: v if generation == 0 else v[:-4] + "R%03d" % generation
                for k, v in section["credentials"].items()}


# --- the checks -----------------------------------------------------------------------------

class Check:
    def __init__(self, stand_in, home, base_env, endpoints):
        self.s = stand_in
        self.home = home
        self.base_env = base_env
        self.endpoints = endpoints
        self.aws = os.path.join(home, ".aws")
        os.makedirs(os.path.join(self.aws, "sso", "cache"))
        self.write_files()

    # The environment each source sees: the base (temporary HOME, config files, IMDS off)
    # plus what the source needs, nothing inherited.
    def environment(self, **extra):
        os.environ.clear()
        os.environ.update(self.base_env)
        for name, value in extra.items():  # None: the base's variable removed
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if self.endpoints == "variables":
            # AWS_ENDPOINT_URL_<SERVICE ID>, the documented per-service endpoint variables (the
            # SDKs and the CLI read them too), where botocore has them (ConfiguredEndpointProvider).
            os.environ["AWS_ENDPOINT_URL_STS"] = self.s.url
            os.environ["AWS_ENDPOINT_URL_SSO"] = self.s.url

    def session(self):
        import botocore.session
        session = botocore.session.Session()
        if self.endpoints == "create-client":
            # Debian 12's botocore 1.29.27 predates AWS_ENDPOINT_URL_<SERVICE>. Its credential
            # providers create their STS and SSO clients through session.create_client (the
            # web-identity and assume-role providers through a closure calling it, the SSO
            # provider through the bound method taken when the resolver is built, which is after
            # this), so wrapping it on this session hands those clients endpoint_url=stand-in:
            # the same path as an explicit endpoint_url, identical in 1.29 and 1.43. Not
            # AWS_DATA_PATH: an endpoints.json override is not what 1.43's endpoint rule sets
            # read, so it would not be one mechanism for both versions.
            create_client = session.create_client

            def create_stand_in_client(service_name, *args, **kwargs):
                if service_name in ("sts", "sso") and kwargs.get("endpoint_url") is None:
                    kwargs["endpoint_url"] = self.s.url
                return create_client(service_name, *args, **kwargs)

            session.create_client = create_stand_in_client
        return session

    def write_files(self):
        c = self.s.config
        sso, source = c["sso"], c["sts"]["assume_role"]["source_credentials"]
        process = "%s %s %s" % (sys.executable, os.path.join(HERE, "credential_process.py"),
                                self.s.config_file)
        with open(os.path.join(self.aws, "config"), "w") as f:
            f.write("""[default]
region = {region}

[profile assume]
role_arn = {role_arn}
source_profile = source
region = {region}

[profile bad-signer]
role_arn = {role_arn}
source_profile = wrong-secret
region = {region}

[profile sso]
sso_session = {session}
sso_account_id = {account}
sso_role_name = {role}
region = {region}

[profile sso-legacy]
sso_start_url = {start_url}
sso_region = {sso_region}
sso_account_id = {account}
sso_role_name = {role}
region = {region}

[sso-session {session}]
sso_start_url = {start_url}
sso_region = {sso_region}
sso_registration_scopes = sso:account:access

[profile process]
credential_process = {process}
""".format(region=c["region"], role_arn=c["sts"]["assume_role"]["role_arn"],
           session=sso["session_name"], account=sso["account_id"], role=sso["role_name"],
           start_url=sso["start_url"], sso_region=sso["region"], process=process))
        with open(os.path.join(self.aws, "credentials"), "w") as f:
            f.write("[source]\naws_access_key_id = %s\naws_secret_access_key = %s\n\n"
                    "[wrong-secret]\naws_access_key_id = %s\naws_secret_access_key = %s\n"
                    % (source["AccessKeyId"], source["SecretAccessKey"], source["AccessKeyId"],
                       "not" + source["SecretAccessKey"][3:]))
        self.write_sso_token(expires_in=3600)
        self.web_token = os.path.join(self.home, "web-identity-token")
        with open(self.web_token, "w") as f:
            f.write(c["sts"]["web_identity"]["token"])
        self.wrong_web_token = os.path.join(self.home, "wrong-web-identity-token")
        with open(self.wrong_web_token, "w") as f:
            f.write(c["sts"]["web_identity"]["token"][:-4] + "XXXX")
        # EKS Pod Identity's token file carries no newline: botocore sends the file as it is.
        self.container_token = os.path.join(self.home, "eks-pod-identity-token")
        with open(self.container_token, "w") as f:
            f.write(c["container"]["authorization_token"])

    def write_sso_token(self, expires_in):
        """The cached tokens `aws sso login` leaves: ~/.aws/sso/cache/<sha1>.json named by the
        sso-session's name, and by the start URL for a legacy profile."""
        sso = self.s.config["sso"]
        expires_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + expires_in))
        token = {"startUrl": sso["start_url"], "region": sso["region"],
                 "accessToken": sso["access_token"], "expiresAt": expires_at}
        for key in (sso["session_name"], sso["start_url"]):
            name = hashlib.sha1(key.encode()).hexdigest() + ".json"
            with open(os.path.join(self.aws, "sso", "cache", name), "w") as f:
                json.dump(token, f)

    def resolve(self, expect_source, expect_method, generation=0, **env):
        """Resolves credentials with a fresh session in `env`; they must be `expect_source`'s."""
        self.environment(**env)
        creds = self.session().get_credentials()
        require(creds is not None, "botocore found no credentials")
        self.compare(creds, expect_source, expect_method, generation)
        return creds

    def compare(self, creds, source, method, generation=0):
        frozen = creds.get_frozen_credentials()
        expected = self.s.expected(source, generation)
        require(creds.method == method, "botocore says the source is %r, expected %r"
                % (creds.method, method))
        require(frozen.access_key == expected["AccessKeyId"], "access key id %s, expected %s"
                % (frozen.access_key, expected["AccessKeyId"]))
        require(frozen.secret_key == expected["SecretAccessKey"], "the secret access key differs")
        require(frozen.token == expected["SessionToken"], "the session token differs")
        expiry = getattr(creds, "_expiry_time", None)
        if source != "process" or expiry is not None:
            # Right to the second (a few seconds of slack): a timestamp read in the wrong zone
            # or unit would be hours or years off.
            require(expiry is not None, "botocore took the credentials as never expiring")
            lifetime = self.s.expires_in(source) if source != "process" else \
                self.s.config["process"].get("expires_in_seconds",
                                             self.s.config.get("expires_in_seconds", 3600))
            off = expiry.timestamp() - (time.time() + lifetime)
            require(-30 < off < 5, "botocore reads the expiry %+.0f s off" % off)

    def requests(self, mark, endpoint, header=None, count=None, absent=None):
        """The stand-in's log since `mark`: `endpoint` was asked (`count` times), each request
        answered 200 and carrying `header` (a name) and never `absent`."""
        entries = [e for e in self.s.log_since(mark) if e["endpoint"] == endpoint]
        require(entries, "botocore never asked the %s stand-in" % endpoint)
        if count is not None:
            require(len(entries) == count, "%d %s requests, expected %d"
                    % (len(entries), endpoint, count))
        for e in entries:
            names = [h.lower() for h in e["headers"]]
            require(e["status"] == 200 and e["listener"] == "main",
                    "%s %s answered %s" % (e["method"], e["path"], e["status"]))
            require(header is None or header.lower() in names,
                    "%s %s without %s" % (e["method"], e["path"], header))
            require(absent is None or absent.lower() not in names,
                    "%s %s with %s" % (e["method"], e["path"], absent))
        return entries

    # -- each source -------------------------------------------------------------------------

    def imds_env(self):
        """IMDS as the source: the endpoint variable, and more than botocore's default 1 s and
        1 attempt, since CI runs this beside compilers on two cores."""
        return dict(AWS_EC2_METADATA_DISABLED=None,
                    AWS_EC2_METADATA_SERVICE_ENDPOINT=self.s.url + "/",
                    AWS_METADATA_SERVICE_TIMEOUT="10", AWS_METADATA_SERVICE_NUM_ATTEMPTS="2")

    def imds(self):
        mark = len(self.s.admin("log"))
        creds = self.resolve("imds", "iam-role", **self.imds_env())
        token_requests = [e for e in self.s.log_since(mark) if e["path"] == "/latest/api/token"]
        require(token_requests and token_requests[0]["method"] == "PUT", "no IMDSv2 token PUT")
        gets = [e for e in self.requests(mark, "imds") if e["method"] == "GET"]
        require([e["path"] for e in gets] == [
            "/latest/meta-data/iam/security-credentials/",
            "/latest/meta-data/iam/security-credentials/" + self.s.config["imds"]["role_name"]],
            "IMDS requests %r" % [e["path"] for e in gets])
        require(all("x-aws-ec2-metadata-token" in [h.lower() for h in e["headers"]]
                    for e in gets), "an IMDS GET without the token")
        return "%s (%s, IMDSv2 at AWS_EC2_METADATA_SERVICE_ENDPOINT)" % (creds.access_key,
                                                                        creds.method)

    def imds_region(self):
        from botocore.utils import IMDSRegionProvider
        self.environment(**self.imds_env())
        region = IMDSRegionProvider(self.session()).provide()
        require(region == self.s.config["region"], "botocore read the region %r from IMDS" % region)
        status, _, body = self.imds_get("/latest/meta-data/placement/region")
        require(status == 200 and body.decode() == region, "placement/region: %d" % status)
        return "%s (botocore's IMDSRegionProvider, from placement/availability-zone/)" % region

    def container(self):
        mark = len(self.s.admin("log"))
        c = self.s.config["container"]
        creds = self.resolve("container", "container-role",
                             AWS_CONTAINER_CREDENTIALS_FULL_URI=self.s.url + c["full_uri_path"],
                             AWS_CONTAINER_AUTHORIZATION_TOKEN=c["authorization_token"])
        self.requests(mark, "container", header="Authorization")
        account = getattr(creds, "account_id", None)  # botocore >= 1.37 reads AccountId
        require(account in (None, self.s.config["account_id"]), "account id %r" % account)
        return "%s (%s, AWS_CONTAINER_CREDENTIALS_FULL_URI + AWS_CONTAINER_AUTHORIZATION_TOKEN)" \
            % (creds.access_key, creds.method)

    def container_token_file(self):
        import botocore.credentials
        if not hasattr(botocore.credentials.ContainerProvider, "ENV_VAR_AUTH_TOKEN_FILE"):
            return None  # botocore 1.29 predates EKS Pod Identity's token file
        mark = len(self.s.admin("log"))
        c = self.s.config["container"]
        creds = self.resolve("container", "container-role",
                             AWS_CONTAINER_CREDENTIALS_FULL_URI=self.s.url + c["full_uri_path"],
                             AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=self.container_token)
        self.requests(mark, "container", header="Authorization")
        return "%s (%s, AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE)" % (creds.access_key, creds.method)

    def container_relative(self):
        # AWS_CONTAINER_CREDENTIALS_RELATIVE_URI always goes to 169.254.170.2: botocore's fetcher
        # builds http://<IP_ADDRESS><relative URI>, so its IP_ADDRESS becomes the stand-in's
        # address for this check (the relative URI itself is botocore's unchanged path).
        from botocore.utils import ContainerMetadataFetcher
        saved = ContainerMetadataFetcher.IP_ADDRESS
        ContainerMetadataFetcher.IP_ADDRESS = "127.0.0.1:%d" % self.s.port
        try:
            mark = len(self.s.admin("log"))
            creds = self.resolve("container", "container-role",
                                 AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=self.s.config["container"][
                                     "relative_uri"])
            self.requests(mark, "container", absent="Authorization")
        finally:
            ContainerMetadataFetcher.IP_ADDRESS = saved
        return "%s (%s, AWS_CONTAINER_CREDENTIALS_RELATIVE_URI)" % (creds.access_key, creds.method)

    def web_identity(self):
        mark = len(self.s.admin("log"))
        w = self.s.config["sts"]["web_identity"]
        creds = self.resolve("web_identity", "assume-role-with-web-identity",
                             AWS_WEB_IDENTITY_TOKEN_FILE=self.web_token,
                             AWS_ROLE_ARN=w["role_arn"],
                             AWS_ROLE_SESSION_NAME=w.get("role_session_name"))
        entries = self.requests(mark, "sts", count=1, absent="Authorization")
        require(entries[0]["action"] == "AssumeRoleWithWebIdentity", "action %s"
                % entries[0]["action"])
        return "%s (%s, AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN, STS %s)" \
            % (creds.access_key, creds.method, self.how_sts())

    def assume_role(self):
        mark = len(self.s.admin("log"))
        creds = self.resolve("assume_role", "assume-role", AWS_PROFILE="assume")
        entries = self.requests(mark, "sts", count=1, header="Authorization")
        require(entries[0]["action"] == "AssumeRole", "action %s" % entries[0]["action"])
        return "%s (%s, role_arn + source_profile, SigV4 checked, STS %s)" \
            % (creds.access_key, creds.method, self.how_sts())

    def sso(self, profile="sso"):
        mark = len(self.s.admin("log"))
        creds = self.resolve("sso", "sso", AWS_PROFILE=profile)
        entries = self.requests(mark, "sso", count=1, header="x-amz-sso_bearer_token")
        require("account_id=%s" % self.s.config["sso"]["account_id"] in entries[0]["path"],
                "portal path %s" % entries[0]["path"])
        kind = "sso_session" if profile == "sso" else "legacy sso_start_url"
        return "%s (%s, %s + cached token, portal %s)" % (creds.access_key, creds.method, kind,
                                                          self.how_sts())

    def process(self):
        creds = self.resolve("process", "custom-process", AWS_PROFILE="process")
        return "%s (%s, Version 1 JSON from credential_process.py)" % (creds.access_key,
                                                                       creds.method)

    def how_sts(self):
        return "at AWS_ENDPOINT_URL_<SERVICE>" if self.endpoints == "variables" \
            else "via session.create_client(endpoint_url=)"

    # -- what botocore must refuse -----------------------------------------------------------

    def expect_error(self, **env):
        """The exception resolving credentials in `env` raises (a check fails without one)."""
        self.environment(**env)
        try:
            creds = self.session().get_credentials()
            if creds is not None:
                creds.get_frozen_credentials()
        except Exception as error:  # what botocore raises is the point
            return error
        raise Failure("botocore accepted it")

    def client_error_code(self, error):
        response = getattr(error, "response", None)
        require(response is not None, "not an AWS error answer: %r" % error)
        return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]

    def assume_role_bad_signature(self):
        code = self.client_error_code(self.expect_error(AWS_PROFILE="bad-signer"))
        require(code == ("SignatureDoesNotMatch", 403), "botocore got %r" % (code,))
        return "botocore raises %s (%d) for a wrong secret key" % code

    def web_identity_bad_token(self):
        w = self.s.config["sts"]["web_identity"]
        code = self.client_error_code(self.expect_error(
            AWS_WEB_IDENTITY_TOKEN_FILE=self.wrong_web_token, AWS_ROLE_ARN=w["role_arn"],
            AWS_ROLE_SESSION_NAME=w.get("role_session_name")))
        require(code == ("InvalidIdentityToken", 400), "botocore got %r" % (code,))
        return "botocore raises %s (%d) for a token STS does not know" % code

    def sso_expired(self):
        """The portal refuses the token (the `expired` fault): botocore tells to log in again."""
        self.s.fault("sso", "expired")
        try:
            error = self.expect_error(AWS_PROFILE="sso")
        finally:
            self.s.fault("sso", "none")
        message = str(error)
        require("aws sso login" in message and "expired" in message,
                "botocore said %s: %s" % (type(error).__name__, message))
        return "%s: %s" % (type(error).__name__, message)

    def sso_expired_cache(self):
        """The cached token's expiresAt has passed (and the portal would refuse it too)."""
        self.write_sso_token(expires_in=-60)
        self.s.fault("sso", "expired")
        mark = len(self.s.admin("log"))
        try:
            legacy = self.expect_error(AWS_PROFILE="sso-legacy")
            session = self.expect_error(AWS_PROFILE="sso")
        finally:
            self.s.fault("sso", "none")
            self.write_sso_token(expires_in=3600)
        asked = len([e for e in self.s.log_since(mark) if e["endpoint"] == "sso"])
        require("aws sso login" in str(legacy), "legacy profile: %s" % legacy)
        require("expired" in str(session).lower(), "sso_session profile: %s" % session)
        return "legacy: %s; sso_session: %s (%d portal requests)" % (
            type(legacy).__name__, session, asked)

    # -- refresh -----------------------------------------------------------------------------

    def refresh(self):
        """Container credentials live expires_in_seconds (300 in the example, under botocore's
        10-minute mandatory refresh): after /_admin/rotate the same credentials object hands out
        the new ones."""
        c = self.s.config["container"]
        creds = self.resolve("container", "container-role",
                             AWS_CONTAINER_CREDENTIALS_FULL_URI=self.s.url + c["full_uri_path"],
                             AWS_CONTAINER_AUTHORIZATION_TOKEN=c["authorization_token"])
        rotated = self.s.admin("rotate")
        require(rotated["generation"] == 1, "generation %r" % rotated["generation"])
        for source, values in rotated["credentials"].items():
            require(values == self.s.expected(source, 1), "/_admin/rotate's %s credentials do "
                    "not follow the README's rule" % source)
        self.compare(creds, "container", "container-role", generation=1)
        new_key = creds.get_frozen_credentials().access_key
        self.s.admin("reset")
        return "%s -> %s after POST /_admin/rotate" % (self.s.expected("container")["AccessKeyId"],
                                                       new_key)

    # -- raw protocol, without botocore ------------------------------------------------------

    def imds_get(self, path, token=True, headers=None):
        headers = dict(headers or {})
        if token:
            status, _, body = self.s.request("PUT", "/latest/api/token",
                                             headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"})
            require(status == 200, "token PUT answered %d" % status)
            headers["X-aws-ec2-metadata-token"] = body.decode()
        return self.s.request("GET", path, headers=headers)

    def imds_protocol(self):
        put = "/latest/api/token"
        ttl = "X-aws-ec2-metadata-token-ttl-seconds"
        for headers, status in (({}, 400), ({ttl: "0"}, 400), ({ttl: "21601"}, 400),
                                ({ttl: "abc"}, 400), ({ttl: "21600", "X-Forwarded-For": "10.0.0.1"},
                                                      403), ({ttl: "21600"}, 200)):
            got, response, body = self.s.request("PUT", put, headers=headers)
            require(got == status, "PUT token with %r answered %d" % (headers, got))
        require(response.getheader("X-Aws-Ec2-Metadata-Token-Ttl-Seconds") == "21600"
                and response.getheader("Content-Type") == "text/plain", "token answer headers")
        creds_path = "/latest/meta-data/iam/security-credentials/"
        got = self.imds_get(creds_path, token=False)[0]
        require(got == 401, "IMDSv1 (no token) answered %d" % got)
        got = self.imds_get(creds_path, token=False,
                            headers={"X-aws-ec2-metadata-token": "AQAEAforged"})[0]
        require(got == 401, "an unknown token answered %d" % got)
        got, response, body = self.imds_get(creds_path + self.s.config["imds"]["role_name"])
        document = json.loads(body)
        require(got == 200 and document["Code"] == "Success" and document["Type"] == "AWS-HMAC"
                and response.getheader("Server") == "EC2ws", "credentials document")
        for field in ("LastUpdated", "Expiration"):
            time.strptime(document[field], "%Y-%m-%dT%H:%M:%SZ")
        got = self.imds_get("/latest/meta-data/no-such-thing")[0]
        require(got == 404, "an unknown path answered %d" % got)
        return "token TTL 1..21600 else 400, X-Forwarded-For 403, no or unknown token 401"

    def sts_protocol(self):
        body = "Action=AssumeRole&Version=2011-06-15&RoleArn=%s&RoleSessionName=raw" % \
            self.s.config["sts"]["assume_role"]["role_arn"]
        status, response, answer = self.s.request(
            "POST", "/", body, {"Content-Type": "application/x-www-form-urlencoded"})
        root = ElementTree.fromstring(answer)
        require(status == 403 and root.tag == STS_NS + "ErrorResponse"
                and root.findtext(STS_NS + "Error/" + STS_NS + "Type") == "Sender"
                and root.findtext(STS_NS + "Error/" + STS_NS + "Code") ==
                "MissingAuthenticationToken" and response.getheader("x-amzn-RequestId")
                and response.getheader("Content-Type") == "text/xml",
                "unsigned AssumeRole answered %d %s" % (status, answer[:200]))
        status, _, answer = self.s.request(
            "POST", "/", "Action=GetFederationToken&Version=2011-06-15",
            {"Content-Type": "application/x-www-form-urlencoded"})
        require(status == 400 and b"<Code>InvalidAction</Code>" in answer, "unknown action")
        return "unsigned AssumeRole 403 MissingAuthenticationToken, ErrorResponse in STS's " \
               "namespace, unknown action 400"

    def sso_protocol(self):
        sso = self.s.config["sso"]
        path = "/federation/credentials?role_name=%s&account_id=%s" % (sso["role_name"],
                                                                       sso["account_id"])
        status, response, body = self.s.request("GET", path,
                                                headers={"x-amz-sso_bearer_token": "wrong"})
        require(status == 401 and json.loads(body) == {"message": "Session token not found or "
                                                                  "invalid"}
                and response.getheader("x-amzn-ErrorType") == "UnauthorizedException",
                "a wrong token answered %d %s" % (status, body))
        status, _, body = self.s.request(
            "GET", path.replace(sso["role_name"], "OtherRole"),
            headers={"x-amz-sso_bearer_token": sso["access_token"]})
        require(status == 403, "another role answered %d" % status)
        status, _, body = self.s.request("GET", path,
                                         headers={"x-amz-sso_bearer_token": sso["access_token"]})
        expiration = json.loads(body)["roleCredentials"]["expiration"]
        require(status == 200 and isinstance(expiration, int) and
                abs(expiration / 1000 - time.time() - self.s.expires_in("sso")) < 30,
                "roleCredentials.expiration %r is not epoch milliseconds" % expiration)
        return "wrong token 401 UnauthorizedException, other role 403, expiration in epoch ms"

    def container_protocol(self):
        c = self.s.config["container"]
        status = self.s.request("GET", c["full_uri_path"])[0]
        require(status == 401, "full URI without Authorization answered %d" % status)
        status = self.s.request("GET", "/v2/credentials/unknown")[0]
        require(status == 400, "an unknown credentials id answered %d" % status)
        return "full URI without Authorization 401, unknown id 400"

    def faults(self):
        c = self.s.config["container"]
        path, auth = c["full_uri_path"], {"Authorization": c["authorization_token"]}

        def get(**kwargs):
            return self.s.request("GET", path, headers=auth, **kwargs)

        self.s.fault("container", "status500", times=1)
        require(get()[0] == 500, "status500")
        require(get()[0] == 200, "times=1 did not end the fault")
        self.s.fault("container", "malformed")
        status, _, body = get()
        try:
            json.loads(body)
            raise Failure("malformed is JSON")
        except ValueError:
            pass
        self.s.fault("container", "expired")
        expiration = json.loads(get()[2])["Expiration"]
        require(time.strptime(expiration, "%Y-%m-%dT%H:%M:%SZ") < time.gmtime(), "expired")
        self.s.fault("container", "redirect")
        status, response, _ = get()
        location = response.getheader("Location", "")
        require(status == 302 and location.startswith("http://127.0.0.1:")
                and location.endswith(path), "redirect: %d %s" % (status, location))
        other = int(location.split(":")[2].split("/")[0])
        mark = len(self.s.admin("log"))
        require(get(port=other)[0] == 200, "the redirect target does not answer")
        require(self.s.log_since(mark)[0]["listener"] == "redirect-target", "redirect log")
        self.s.fault("container", "huge", times=1)
        connection = http.client.HTTPConnection("127.0.0.1", self.s.port, timeout=10)
        connection.request("GET", path, headers=auth)
        response = connection.getresponse()
        require(response.status == 200 and response.getheader("Content-Length") ==
                str(100 << 20) and len(response.read(1 << 20)) == 1 << 20, "huge")
        connection.close()
        self.s.fault("container", "slow", interval_seconds=0.25, times=1)
        with socket.create_connection(("127.0.0.1", self.s.port), timeout=10) as sock:
            sock.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: %s\r\n\r\n"
                          % (path, auth["Authorization"])).encode())
            start = time.monotonic()
            received = b"".join(sock.recv(1) for _ in range(5))
            took = time.monotonic() - start
        require(received == b"HTTP/" and took >= 0.75, "slow: %r in %.2f s" % (received, took))
        self.s.fault("container", "none")
        require(get()[0] == 200, "mode none")
        return "status500, times, malformed, expired, redirect (+ its logged target), huge " \
               "(100 MiB announced), slow (status line a byte at a time), none"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=os.path.join(HERE, "example-config.json"))
    parser.add_argument("--endpoints", choices=("auto", "variables", "create-client"),
                        default="auto", help="how botocore's STS and SSO clients are pointed at "
                        "the stand-in (auto: the variables where botocore reads them)")
    args = parser.parse_args()
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="aws-stand-in-") as work:
        home = os.path.join(work, "home")
        os.makedirs(home)
        base_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home,
                    "AWS_CONFIG_FILE": os.path.join(home, ".aws", "config"),
                    "AWS_SHARED_CREDENTIALS_FILE": os.path.join(home, ".aws", "credentials"),
                    "AWS_EC2_METADATA_DISABLED": "true"}
        if "PYTHONPATH" in os.environ:  # where botocore is, for this and the stand-in
            base_env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        # HOME before botocore's import: it reads ~/.aws/sso/cache's place then.
        os.environ.clear()
        os.environ.update(base_env)
        try:
            import botocore
            import botocore.configprovider
        except ImportError as error:
            # Like the boto3 cross-checks: .ci/install-deps --tests installs python3-boto3, so a
            # missing botocore is a broken setup, not a reason to skip.
            print("error: botocore is missing (%s): run .ci/install-deps --tests (python3-boto3)"
                  % error, file=sys.stderr)
            return 1
        endpoints = args.endpoints
        if endpoints == "auto":
            endpoints = "variables" if hasattr(botocore.configprovider,
                                               "ConfiguredEndpointProvider") else "create-client"
        print("botocore %s, STS and SSO endpoints %s" % (
            botocore.__version__, "from AWS_ENDPOINT_URL_STS / AWS_ENDPOINT_URL_SSO"
            if endpoints == "variables" else "through a wrapped session.create_client"))
        stand_in = StandIn(args.config, work, dict(base_env))
        try:
            passed, failed, skipped = run_checks(Check(stand_in, home, base_env, endpoints),
                                                 botocore.__version__)
        finally:
            stand_in.stop()
        if "Traceback" in stand_in.log_text():
            failed += 1
            print("FAIL stand-in: it raised (output below)")
        if BLOCKED:
            failed += 1
            print("FAIL loopback-only: tried to reach %s" % ", ".join(sorted(set(BLOCKED))))
        if failed:
            print("stand-in output:\n" + stand_in.log_text())
        print("took %.1f s" % (time.monotonic() - start))
        print("botocore_check: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
        return 1 if failed else 0


def run_checks(check, version):
    """Runs every check, one line each; (passed, failed, skipped)."""
    passed, failed, skipped = 0, 0, 0
    for name, run in [
        ("imds", check.imds), ("imds-region", check.imds_region),
        ("imds-protocol", check.imds_protocol),
        ("container", check.container), ("container-token-file", check.container_token_file),
        ("container-relative", check.container_relative),
        ("container-protocol", check.container_protocol),
        ("web-identity", check.web_identity), ("assume-role", check.assume_role),
        ("sso", check.sso), ("sso-legacy", lambda: check.sso("sso-legacy")),
        ("process", check.process),
        ("assume-role-bad-signature", check.assume_role_bad_signature),
        ("web-identity-bad-token", check.web_identity_bad_token),
        ("sts-protocol", check.sts_protocol), ("sso-protocol", check.sso_protocol),
        ("sso-expired", check.sso_expired), ("sso-expired-cache", check.sso_expired_cache),
        ("refresh", check.refresh), ("faults", check.faults),
    ]:
        try:
            what = run()
        except Failure as failure:
            failed += 1
            print("FAIL %s: %s" % (name, failure))
            continue
        except Exception:
            failed += 1
            print("FAIL %s: %s" % (name, traceback.format_exc().strip().splitlines()[-1]))
            traceback.print_exc()
            continue
        if what is None:
            skipped += 1
            print("skip %s (botocore %s lacks it)" % (name, version))
        else:
            passed += 1
            print("ok %s %s" % (name, what))
    return passed, failed, skipped

if __name__ == "__main__":
    sys.exit(main())
