"""Gives the fuzzed repository something to find: one stored chunk and one version.

Usage: seed.py URL TOKEN. Writes a bundle (docs/FORMAT.md) and commits a manifest that uses
its chunk, so version and container ids exist for the fuzzer to reach. Prints the chunk's
fingerprint and the id of the container that holds it, for the pass that reads them.
"""

import hashlib
import json
import struct
import sys
import time
import urllib.request

url, token = sys.argv[1], sys.argv[2]
base = f"{url}/api/v1/repos/default"
raw = b"ditto fuzz seed " * 64
fp = hashlib.sha1(raw).digest()
bundle = b"DTB1" + struct.pack("<HHII", 1, 0, 1, 0)
bundle += fp + bytes([0, 0, 0, 0]) + struct.pack("<II", len(raw), len(raw)) + raw


def call(path, body=None, ctype=None):
    req = urllib.request.Request(f"{base}{path}", data=body, method="POST" if body else "GET")
    req.add_header("Authorization", f"Bearer {token}")
    if ctype:
        req.add_header("Content-Type", ctype)
    with urllib.request.urlopen(req) as r:
        return r.status, r.read()


call("/bundles", bundle, "application/x-ditto-bundle")
manifest = {
    "source": "seed",
    "time": 1700000000000,
    "entries": [
        {"path": "seed.txt", "kind": "file", "size": len(raw), "mtime": 1700000000000,
         "recipe": [fp.hex()]},
    ],
}
status, _ = call("/versions", json.dumps(manifest).encode(), "application/json")
print("seeded: version commit answered", status, file=sys.stderr)


def holder():
    containers = json.loads(call("/containers")[1])["containers"]
    return next(c["id"] for c in containers if any(k["fp"] == fp.hex() for k in c["chunks"]))


# The delta pass after the commit re-stores the chunk in a new container: its id is the one
# the listing has kept for two seconds (at most thirty).
held, since, start = holder(), time.monotonic(), time.monotonic()
while time.monotonic() - since < 2 and time.monotonic() - start < 30:
    time.sleep(0.25)
    now = holder()
    if now != held:
        held, since = now, time.monotonic()
print(fp.hex(), held)
