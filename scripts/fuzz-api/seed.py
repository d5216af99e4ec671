"""Gives the fuzzed repository something to find: one stored chunk and one version.

Usage: seed.py URL TOKEN. Writes a bundle (docs/FORMAT.md) and commits a manifest that uses
its chunk, so version and container ids exist for the fuzzer to reach.
"""

import hashlib
import json
import struct
import sys
import urllib.request

url, token = sys.argv[1], sys.argv[2]
base = f"{url}/api/v1/repos/default"
raw = b"ditto fuzz seed " * 64
fp = hashlib.sha1(raw).digest()
bundle = b"DTB1" + struct.pack("<HHII", 1, 0, 1, 0)
bundle += fp + bytes([0, 0, 0, 0]) + struct.pack("<II", len(raw), len(raw)) + raw


def post(path, body, ctype):
    req = urllib.request.Request(f"{base}{path}", data=body, method="POST")
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("Content-Type", ctype)
    with urllib.request.urlopen(req) as r:
        return r.status


post("/bundles", bundle, "application/x-ditto-bundle")
manifest = {
    "source": "seed",
    "time": 1700000000000,
    "entries": [
        {"path": "seed.txt", "kind": "file", "size": len(raw), "mtime": 1700000000000,
         "recipe": [fp.hex()]},
    ],
}
print("seeded: version commit answered", post("/versions", json.dumps(manifest).encode(), "application/json"))
