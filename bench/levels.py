#!/usr/bin/env python3
"""Compression levels and layouts over a real repository's chunks (issue 17; docs/BENCHMARKS.md,
"Delta and recompression levels").

Reads every live table slot of the containers in DATA_DIR/repos/1/containers (format:
docs/FORMAT.md, "Container"), decodes whole chunks (codec 0/1) and deltas (codec 2, against
their base chains) to raw bytes, then prints the stored bytes and compression time of:
- the whole chunks compressed one frame per chunk at several zstd levels,
- the same chunks in shared frames of ~1 MiB and ~4 MiB of raw bytes (storage order),
- the deltas re-encoded against their bases at several levels.

Usage: python3 bench/levels.py DATA_DIR   (needs `pip install zstandard`; a data dir from
`node bench/reduction.mjs --keep DIR`, stopped cleanly)
"""
import glob
import struct
import sys
import time

import zstandard as zs


def slots(data_dir):
    """(fingerprint, codec, stored bytes, raw length) of every in-use slot, storage order."""
    for path in sorted(glob.glob(f"{data_dir}/repos/1/containers/*.dct")):
        b = open(path, "rb").read()
        capacity = struct.unpack_from("<I", b, 12)[0]
        for i in range(capacity):
            s = 64 + 40 * i
            if not b[s + 21] & 1:
                continue
            offset, stored_len, raw_len = struct.unpack_from("<QII", b, s + 24)
            yield b[s : s + 20], b[s + 20], b[offset : offset + stored_len], raw_len


def prefix_dict(base):
    return zs.ZstdCompressionDict(base, dict_type=zs.DICT_TYPE_RAWCONTENT)


def decode_all(data_dir, live=None):
    """Every in-use slot of DATA_DIR (only those whose fingerprint is in `live`, if given):
    (whole raw chunks in storage order, deltas as (fp, stored, raw_len), raw bytes by
    fingerprint, stored length by fingerprint, base by fingerprint of each delta)."""
    whole, deltas, raw, stored_len, base = [], [], {}, {}, {}
    for fp, codec, stored, raw_len in slots(data_dir):
        if live is not None and fp not in live:
            continue
        stored_len[fp] = len(stored)
        if codec == 2:
            deltas.append((fp, stored, raw_len))
            base[fp] = stored[:20]
        else:
            r = zs.ZstdDecompressor().decompress(stored, max_output_size=raw_len) if codec == 1 else stored
            raw[fp] = r
            whole.append(r)
    pending = deltas
    while pending:
        left = []
        for fp, stored, raw_len in pending:
            b = raw.get(stored[:20])
            if b is None:
                left.append((fp, stored, raw_len))
                continue
            d = zs.ZstdDecompressor(dict_data=prefix_dict(b))
            raw[fp] = d.decompress(stored[21:], max_output_size=raw_len)
        if len(left) == len(pending):
            sys.exit(f"{len(left)} deltas have no decodable base")
        pending = left
    return whole, deltas, raw, stored_len, base


def main(data_dir):
    whole, deltas, raw, _, _ = decode_all(data_dir)
    print(f"whole chunks: {len(whole)}, raw {sum(map(len, whole))} bytes; deltas: {len(deltas)}")

    def framed(level, size):
        out, cur, n = 0, [], 0
        c = zs.ZstdCompressor(level=level)
        for r in whole:
            cur.append(r)
            n += len(r)
            if n >= size:
                out += len(c.compress(b"".join(cur)))
                cur, n = [], 0
        if cur:
            out += len(c.compress(b"".join(cur)))
        return out

    print("level | per chunk | s | 1 MiB frames | 4 MiB frames")
    for level in (3, 9, 12, 15, 19):
        t = time.perf_counter()
        c = zs.ZstdCompressor(level=level)
        per = sum(len(c.compress(r)) for r in whole)
        secs = time.perf_counter() - t
        print(f"{level} | {per} | {secs:.2f} | {framed(level, 1 << 20)} | {framed(level, 4 << 20)}")

    print("delta level | stored (21-byte header included) | s")
    for level in (3, 9, 12, 19):
        t = time.perf_counter()
        total = 0
        for fp, stored, _ in deltas:
            c = zs.ZstdCompressor(level=level, dict_data=prefix_dict(raw[stored[:20]]),
                                  write_content_size=True, write_dict_id=False)
            total += 21 + len(c.compress(raw[fp]))
        print(f"{level} | {total} | {time.perf_counter() - t:.2f}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
