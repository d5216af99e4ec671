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

Chains ("Frames with their chains counted"): a frame is decoded whole with its prefix, so it
needs the frames its bases are members of. A frame's depth is one more than the deepest of
those; FRAMES_CAP=N keeps every frame within N by replacing a base whose frame is too deep
with its own base (as today's pass does at the chain cap). FRAMES_ORDER=depth cuts a
version's new chunks in order of their bases' frame depth instead of first use. Each line
also says what reading the newest version decodes (its frames and every frame they need,
each once) against today's chunks and base chains. FRAMES_VARIANTS picks the prefixes
(default: none bases around).

Usage: python3 bench/frames.py DATA_DIR [FRAME_KIB ...]   (default 256 1024 4096; needs
`pip install zstandard`; slow: minutes)
"""
import collections
import os
import sqlite3
import sys
import time

import zstandard as zs

from bases import first_use, manifests
from levels import decode_all, prefix_dict

LEVEL = 19
CAP = int(os.environ.get("FRAMES_CAP", "1000000"))
ORDER = os.environ.get("FRAMES_ORDER", "first-use")
VARIANTS = os.environ.get("FRAMES_VARIANTS", "none bases around").split()


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

    frame_of, depths, frame_needs, frame_raw = {}, [], [], []
    newest = {bytes.fromhex(f) for e in manifests(db)[max(order)]["entries"] for f in e["recipe"]}

    def closure_bytes(roots, edges, size):
        """Raw bytes decoded to read `roots`: each node once, with what it needs."""
        seen, todo = set(), list(roots)
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(edges(n))
        return sum(size(n) for n in seen)

    today_newest = closure_bytes(newest, lambda f: [base[f]] if f in base else [], lambda f: len(raw[f]))

    def reachable(b):
        """b, or its nearest ancestor whose frame keeps this frame within CAP frames."""
        while b is not None and b in frame_of and depths[frame_of[b]] + 1 > CAP:
            b = base.get(b)
        return b

    def frame_cost(members, variant):
        content = b"".join(raw[f] for f in members)
        inside = set(members)
        named = []
        for f in members:
            b = base.get(f)
            if b is not None and b not in inside:
                b = reachable(b)
            if b is not None and b not in inside and b not in named:
                named.append(b)
        depths.append(1 + max((depths[frame_of[b]] for b in named if b in frame_of), default=0))
        frame_needs.append({frame_of[b] for b in named if b in frame_of})
        frame_raw.append(len(content))
        for f in members:
            frame_of[f] = len(depths) - 1
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
        for variant in VARIANTS:
            for held in (frame_of, depths, frame_needs, frame_raw):
                held.clear()
            t0 = time.time()
            total = 0
            per_version = []
            frames = 0
            prefixes = []
            for vid in sorted(order):
                v_total = 0
                members, size = [], 0
                chunks = order[vid]
                if ORDER == "depth":
                    # Members whose bases sit equally deep share frames, so one deep base
                    # does not make a whole frame deep.
                    def depth_of(f):
                        b = base.get(f)
                        b = reachable(b) if b is not None else None
                        return depths[frame_of[b]] if b in frame_of else 0
                    chunks = sorted(chunks, key=depth_of)
                for fp in chunks + [None]:
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
            newest_frames = closure_bytes(
                {frame_of[f] for f in newest if f in frame_of}, lambda i: frame_needs[i], lambda i: frame_raw[i]
            )
            print(
                f"frames {kib} KiB, prefix {variant}: {total + kept} chunk bytes"
                f" ({total} named + {kept} dictionaries; today {today + kept}),"
                f" {frames} frames, median prefix {prefixes[len(prefixes) // 2] if prefixes else 0} B,"
                f" largest {prefixes[-1] if prefixes else 0} B, depth cap {CAP}, deepest frame {max(depths)},"
                f" newest version decodes {newest_frames} B (today {today_newest} B), {time.time() - t0:.0f} s; per version {per_version}",
                flush=True,
            )


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1], [int(a) for a in sys.argv[2:]] or [256, 1024, 4096])
