#!/usr/bin/env python3
"""What storing a version's new chunks in shared frames would take off (issue 17;
docs/BENCHMARKS.md, "Frames of new chunks: a probe").

Reads a typescript-10 data directory as bench/bases.py does (every live chunk decoded to raw
bytes, every version's manifest) and attributes each chunk to the first file, in version
and manifest order, whose recipe names it. Then each version's new chunks, in that order,
are cut into frames of at most FRAME raw bytes, and each frame is compressed once with zstd
at LEVEL against a reference prefix (raw content, as codec 2 uses its base):
- `bases`: the distinct bases today's deltas of the frame's chunks name (their raw bytes),
  in the order the chunks name them;
- `around`: for each of them, the chunks around it in its own file (before, itself,
  after), as bench/bases.py's s2 does;
- `none`: no prefix (the frame alone: what shared frames without deltas give).
A frame pays 21 bytes of header and 20 per base it names; a member chunk would pay a slice
entry (its frame, offset and length), counted apart as metadata, not here. The chunks no
manifest names (the trained dictionaries) stay as they are stored today.

Usage: python3 bench/frames.py DATA_DIR [FRAME_KIB ...]   (default 256 1024 4096; needs
`pip install zstandard`; slow: minutes)
"""
import collections
import sqlite3
import sys
import time

import zstandard as zs

from bases import first_use
from levels import decode_all, prefix_dict

LEVEL = 19


def main(data_dir, frame_kibs):
    db = sqlite3.connect(f"file:{data_dir}/ditto.sqlite3?mode=ro", uri=True)
    live = {bytes(fp) for (fp,) in db.execute("SELECT fp FROM chunks")}
    _, _, raw, stored, base = decode_all(data_dir, live)
    where, first = first_use(db)
    order = collections.defaultdict(list)  # version -> its new chunks, first use first
    for fp in first:
        order[where[fp][2]].append(fp)
    unnamed = live - set(where)
    kept = sum(stored[f] for f in unnamed)
    today = sum(stored[f] for f in where)
    print(f"today: {today + kept} chunk bytes ({today} named, {kept} the dictionaries)")

    def around(b):
        if b not in where:
            return raw[b]
        br, bi, _ = where[b]
        return b"".join(raw[g] for g in br[max(0, bi - 1) : bi + 2])

    def frame_cost(members, variant):
        content = b"".join(raw[f] for f in members)
        inside = set(members)
        named = []
        for f in members:
            b = base.get(f)
            if b is not None and b not in inside and b not in named:
                named.append(b)
        if variant == "none":
            prefix = b""
        elif variant == "bases":
            prefix = b"".join(raw[b] for b in named)
        else:
            prefix = b"".join(around(b) for b in named)
        # The window reaches from the frame's end back over the whole prefix.
        wlog = max(20, (len(prefix) + len(content) - 1).bit_length())
        params = zs.ZstdCompressionParameters.from_level(
            LEVEL, source_size=len(content), window_log=min(wlog, 27), write_dict_id=False
        )
        if prefix:
            c = zs.ZstdCompressor(compression_params=params, dict_data=prefix_dict(prefix))
        else:
            c = zs.ZstdCompressor(compression_params=params)
        return len(c.compress(content)) + 21 + 20 * (len(named) if prefix else 0), len(prefix)

    for kib in frame_kibs:
        limit = kib << 10
        for variant in ("none", "bases", "around"):
            t0 = time.time()
            total = 0
            per_version = []
            frames = 0
            prefixes = []
            for vid in sorted(order):
                v_total = 0
                members, size = [], 0
                for fp in order[vid] + [None]:
                    if fp is None or (members and size + len(raw[fp]) > limit):
                        if members:
                            cost, plen = frame_cost(members, variant)
                            v_total += cost
                            frames += 1
                            prefixes.append(plen)
                        members, size = [], 0
                    if fp is not None:
                        members.append(fp)
                        size += len(raw[fp])
                per_version.append(v_total)
                total += v_total
            prefixes.sort()
            print(
                f"frames {kib} KiB, prefix {variant}: {total + kept} chunk bytes"
                f" ({total} named + {kept} dictionaries; today {today + kept}),"
                f" {frames} frames, median prefix {prefixes[len(prefixes) // 2] if prefixes else 0} B,"
                f" largest {prefixes[-1] if prefixes else 0} B, {time.time() - t0:.0f} s; per version {per_version}",
                flush=True,
            )


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1], [int(a) for a in sys.argv[2:]] or [256, 1024, 4096])
