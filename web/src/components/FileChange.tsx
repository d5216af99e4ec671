import { useEffect, useRef, useState } from 'react';
import './history.css';
import type { Api, ManifestEntry } from '../api/client';
import type { TextDiff } from '../history/diff';
import { DIFF_MAX_BYTES, diffFiles, type FileDiff } from '../history/filediff';
import { restoreHead } from '../restore/head';
import { bytes } from './format';
import { fileItem } from './VersionsRestore';

/** Lines of a text diff shown at most; the rest is counted, not drawn. */
const DIFF_LINES = 2000;

/** An error as one line for the page. */
export const message = (e: unknown) => (e instanceof Error ? e.message : String(e));

/** A signed size difference: "+1.20 kB", "−300 B", "±0 B". */
export function sizeDelta(n: number): string {
  return n > 0 ? `+${bytes(n)}` : n < 0 ? `−${bytes(-n)}` : '±0 B';
}

/**
 * Moves focus to a view that just opened (it may be far below the control that opened it),
 * and back to that control when the view closes.
 */
export function useFocusOnOpen<T extends HTMLElement>() {
  const ref = useRef<T>(null);
  useEffect(() => {
    const opener = document.activeElement instanceof HTMLElement ? document.activeElement : null;
    ref.current?.scrollIntoView({ block: 'start' });
    ref.current?.focus();
    return () => {
      if (opener?.isConnected) opener.focus();
    };
  }, []);
  return ref;
}

interface Side {
  version: number;
  entry: ManifestEntry;
}

/**
 * What changed in one file between two versions: both sides restored into the page (only
 * their own chunks are fetched) and compared, as lines when both are text.
 */
export function FileChange({ api, path, older, newer }: { api: Api; path: string; older: Side; newer: Side }) {
  const [diff, setDiff] = useState<FileDiff | null>(null);
  const [error, setError] = useState<string | null>(null);
  const a = older.entry;
  const b = newer.entry;
  const link = a.kind === 'symlink' || b.kind === 'symlink';
  const large = Math.max(a.size, b.size) > DIFF_MAX_BYTES;

  useEffect(() => {
    if (link || large) return;
    const abort = new AbortController();
    Promise.all([
      restoreHead(api, older.version, fileItem(a), DIFF_MAX_BYTES, abort.signal),
      restoreHead(api, newer.version, fileItem(b), DIFF_MAX_BYTES, abort.signal),
    ]).then(
      ([x, y]) => setDiff(diffFiles(x.bytes, y.bytes, { maxLines: DIFF_LINES })),
      (e: unknown) => !abort.signal.aborted && setError(message(e)),
    );
    return () => abort.abort();
  }, [api, older.version, newer.version, a, b, link, large]);

  const describe = (e: ManifestEntry) =>
    e.kind === 'symlink' ? `a link to ${e.target ?? '?'}` : `a file of ${bytes(e.size)}`;
  return (
    <div className="file-change" data-testid="file-change" data-path={path}>
      {link && (
        <p data-testid="diff-link">
          Was {describe(a)}, now {describe(b)}.
        </p>
      )}
      {large && !link && (
        <p data-testid="diff-too-large">
          Too large to compare in the page (over {bytes(DIFF_MAX_BYTES)}): download both versions from the history and
          compare them with a desktop tool.
        </p>
      )}
      {error && (
        <p className="error" role="alert" data-testid="diff-error">
          Reading the file failed: {error}
        </p>
      )}
      {!diff && !error && !link && !large && <p>Reading both versions of the file…</p>}
      {diff?.kind === 'too-large' && <p data-testid="diff-too-large">{diff.why}: download both versions instead.</p>}
      {diff?.kind === 'binary' && (
        <p
          data-testid="diff-binary"
          data-changed={Math.max(diff.span.oldChanged, diff.span.newChanged)}
          data-offset={diff.span.prefix}
        >
          Binary, {Math.max(diff.span.oldChanged, diff.span.newChanged)} bytes changed (from offset {diff.span.prefix};{' '}
          {bytes(a.size)} → {bytes(b.size)}).
        </p>
      )}
      {diff?.kind === 'text' && <TextDiffView diff={diff.diff} older={older.version} newer={newer.version} />}
    </div>
  );
}

function TextDiffView({ diff, older, newer }: { diff: TextDiff; older: number; newer: number }) {
  if (!diff.hunks.length)
    return (
      <p data-testid="diff-text-same">
        {diff.newlineAtEndChanged
          ? 'The only change is the newline at the end of the file.'
          : 'No line differs: the bytes are the same (stored as other chunks), or differ only where they are not valid UTF-8.'}
      </p>
    );
  return (
    <>
      <p data-testid="diff-text-summary" data-added={diff.added} data-removed={diff.removed}>
        {diff.added} line{diff.added === 1 ? '' : 's'} added, {diff.removed} removed
        {diff.newlineAtEndChanged ? '; the newline at the end changed' : ''}.
      </p>
      <table className="diff" data-testid="diff-text">
        <caption className="history-sr-only">
          Lines of version {older} (left number) and version {newer} (right number); − removed, + added
        </caption>
        {diff.hunks.map((h, i) => (
          <tbody key={i}>
            <tr className="diff-hunk" data-testid="diff-hunk">
              <td colSpan={3}>
                @@ −{h.aStart},{h.aCount} +{h.bStart},{h.bCount} @@
              </td>
            </tr>
            {h.lines.map((l, j) => (
              <tr
                key={j}
                className={`diff-${l.kind}`}
                data-testid="diff-line"
                data-kind={l.kind}
                data-a={l.aLine ?? ''}
                data-b={l.bLine ?? ''}
              >
                <td className="num">{l.aLine ?? ''}</td>
                <td className="num">{l.bLine ?? ''}</td>
                <td>
                  <span aria-hidden="true">{l.kind === 'del' ? '−' : l.kind === 'add' ? '+' : ' '}</span>
                  {l.kind !== 'same' && (
                    <span className="history-sr-only">{l.kind === 'del' ? 'removed: ' : 'added: '}</span>
                  )}
                  <code>{l.text}</code>
                </td>
              </tr>
            ))}
          </tbody>
        ))}
      </table>
      {diff.omittedLines > 0 && (
        <p data-testid="diff-truncated" data-omitted={diff.omittedLines}>
          {diff.omittedLines} more diff lines are not shown: download both versions to see them all.
        </p>
      )}
    </>
  );
}
