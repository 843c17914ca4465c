#!/usr/bin/env python3
"""A credential_process helper for the tests: prints the "process" credentials of a stand-in
config (tests/aws/README.md) in the Version 1 JSON the AWS SDKs read from such a command.

  credential_process.py CONFIG [--expired | --fail | --malformed]

--expired gives an Expiration in the past; --fail exits 1 with a message on stderr, as a helper
whose login lapsed does; --malformed prints a cut JSON document.
"""
import json
import sys
import time


def main():
    config_file, mode = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
    with open(config_file) as f:
        config = json.load(f)
    if mode == "--fail":
        print("credential helper: not logged in", file=sys.stderr)
        return 1
    section = config["process"]
    lifetime = section.get("expires_in_seconds", config.get("expires_in_seconds", 3600))
    expiration = time.time() + (-3600 if mode == "--expired" else lifetime)
    document = json.dumps({
        "Version": 1,
        "AccessKeyId": section["credentials"]["AccessKeyId"],
        "SecretAccessKey": section["credentials"]["SecretAccessKey"],
        "SessionToken": section["credentials"]["SessionToken"],
        "Expiration": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expiration)),
    }, indent=2)
    print(document[:len(document) // 2] if mode == "--malformed" else document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
