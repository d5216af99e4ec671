/**
 * Zip entry names from manifest paths. A manifest comes from the server, and the server
 * accepts whatever a client committed, so a hostile or broken manifest must not be able to
 * make an archive that writes outside the folder it is unpacked into ("zip slip"): no `..`,
 * no absolute paths, no drive letters, no empty or `.` segments, no control characters, and
 * no two entries with the same name.
 */

const utf8 = new TextEncoder();

/** Characters that are never part of a safe name: C0 controls and DEL. */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/g;

/**
 * A safe relative name (segments joined by `/`), or null when nothing safe is left.
 * `prefix` (a folder path inside the version) is removed first when the path lies inside it.
 */
export function sanitizeEntryName(path: string, prefix = ''): string | null {
  let p = path.replace(/\\/g, '/');
  const pre = prefix.replace(/\\/g, '/').replace(/^\/+|\/+$/g, '');
  if (pre) {
    if (p === pre) return null;
    if (!p.startsWith(pre + '/')) return null;
    p = p.slice(pre.length + 1);
  }
  const out: string[] = [];
  for (const raw of p.split('/')) {
    let seg = raw.replace(CONTROL, '').trim();
    // A Windows drive ("C:") or a segment made only of dots says nothing about a file.
    if (out.length === 0 && /^[A-Za-z]:$/.test(seg)) continue;
    if (/^\.+$/.test(seg)) continue;
    seg = seg.replace(/:/g, '_');
    if (seg === '') continue;
    // Most file systems refuse names above 255 bytes; cut by characters, keep it well-formed.
    // (A UTF-16 code unit is at most 3 bytes of UTF-8: only long segments need counting.)
    if (seg.length > 85) while (utf8.encode(seg).length > 255) seg = Array.from(seg).slice(0, -1).join('');
    out.push(seg);
  }
  return out.length ? out.join('/') : null;
}

/**
 * Hands out unique names: a second "a.txt" becomes "a (2).txt". Unique as the strictest file
 * systems compare names: case-insensitively, and composed and decomposed accents alike (APFS
 * and NTFS would otherwise let the second file replace the first).
 */
export class UniqueNames {
  private taken = new Set<string>();

  claim(name: string): string {
    const key = (s: string) => s.normalize('NFC').toLowerCase();
    let candidate = name;
    for (let n = 2; this.taken.has(key(candidate)); n++) {
      const slash = name.lastIndexOf('/');
      const dot = name.lastIndexOf('.');
      candidate = dot > slash + 1 ? `${name.slice(0, dot)} (${n})${name.slice(dot)}` : `${name} (${n})`;
    }
    this.taken.add(key(candidate));
    return candidate;
  }
}
