import { Fragment, useEffect, useMemo, useState } from 'react';
import './history.css';
import type { Api, VersionInfo } from '../api/client';
import { compareManifests, type Changed, type Comparison, type OneSide } from '../history/compare';
import { loadManifests } from '../history/manifests';
import { bytes } from './format';
import { FileChange, message, sizeDelta, useFocusOnOpen } from './FileChange';
import { FileHistory } from './FileHistory';
import type { RestoreRequest } from './VersionsRestore';

/** Rows of each list shown at first, and added per "Show more". */
const PAGE = 200;

export function versionLabel(v: VersionInfo): string {
  return `#${v.id} · ${v.source} · ${new Date(v.time).toLocaleString()}`;
}

interface Props {
  api: Api;
  /** Every version, oldest first (as the server lists them). */
  versions: VersionInfo[];
  busy: boolean;
  onRestore: (r: RestoreRequest) => void;
  onClose: () => void;
}

/** The two newest versions of the source with the newest version, else the two newest of all. */
function defaultPair(versions: VersionInfo[]): [number, number] | null {
  if (versions.length < 2) return null;
  const newest = versions[versions.length - 1];
  const same = versions.filter((v) => v.source === newest.source);
  const pick = same.length >= 2 ? same : versions;
  return [pick[pick.length - 2].id, pick[pick.length - 1].id];
}

/** Two versions (of one source or of two) compared file by file from their manifests. */
export function VersionsDiff({ api, versions, busy, onRestore, onClose }: Props) {
  const pair = defaultPair(versions);
  const [from, setFrom] = useState<number | null>(pair?.[0] ?? null);
  const [to, setTo] = useState<number | null>(pair?.[1] ?? null);
  // A version compared here can be deleted (in this view, or by a retention policy): the
  // comparison then starts over from the default pair of the versions left, or from none
  // when fewer than two are. Set while rendering, so no read of the deleted one starts.
  const [listed, setListed] = useState(versions);
  if (listed !== versions) {
    setListed(versions);
    const gone = (id: number | null) => id !== null && !versions.some((v) => v.id === id);
    if (gone(from) || gone(to)) {
      setFrom(pair?.[0] ?? null);
      setTo(pair?.[1] ?? null);
    }
  }
  const [result, setResult] = useState<{ from: number; to: number; cmp: Comparison } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [filter, setFilter] = useState('');
  /** Bumped by "Try again" after a failed read. */
  const [attempt, setAttempt] = useState(0);
  const heading = useFocusOnOpen<HTMLHeadingElement>();

  useEffect(() => {
    setResult(null);
    setError(null);
    if (from === null || to === null || from === to) return;
    let live = true;
    loadManifests(api, [from, to]).then(
      ([a, b]) => live && setResult({ from, to, cmp: compareManifests(a, b) }),
      (e: unknown) => live && setError(`Reading the versions failed: ${message(e)}`),
    );
    return () => {
      live = false;
    };
  }, [api, from, to, attempt]);

  const bySource = useMemo(() => {
    const m = new Map<string, VersionInfo[]>();
    for (const v of versions) m.set(v.source, [...(m.get(v.source) ?? []), v]);
    return m;
  }, [versions]);
  const info = (id: number) => versions.find((v) => v.id === id);

  const picker = (label: string, value: number | null, set: (v: number) => void, testid: string) => (
    <label>
      {label}{' '}
      <select data-testid={testid} value={value ?? ''} onChange={(e) => set(Number(e.target.value))}>
        {value === null && <option value="">Choose a version</option>}
        {[...bySource].map(([source, list]) => (
          <optgroup key={source} label={source}>
            {[...list].reverse().map((v) => (
              <option key={v.id} value={v.id}>
                {versionLabel(v)}
              </option>
            ))}
          </optgroup>
        ))}
      </select>
    </label>
  );

  const cmp = result?.cmp;
  return (
    <section className="history" data-testid="versions-diff" aria-labelledby="versions-diff-title">
      <h3 id="versions-diff-title" ref={heading} tabIndex={-1}>
        Compare two versions{' '}
        <button type="button" data-testid="versions-diff-close" onClick={onClose}>
          Close
        </button>
      </h3>
      {versions.length < 2 ? (
        <p data-testid="versions-diff-empty">Comparing needs two versions: back up a folder again after it changes.</p>
      ) : (
        <p className="history-pickers">
          {picker('From (older)', from, setFrom, 'diff-from')}
          <button
            type="button"
            data-testid="diff-swap"
            onClick={() => {
              setFrom(to);
              setTo(from);
            }}
          >
            Swap
          </button>
          {picker('To (newer)', to, setTo, 'diff-to')}
        </p>
      )}
      {from !== null && from === to && (
        <p data-testid="diff-same-version">Both sides are the same version: pick another one on either side.</p>
      )}
      {error && (
        <p className="error" role="alert" data-testid="versions-diff-error">
          {error}{' '}
          <button type="button" onClick={() => setAttempt((n) => n + 1)}>
            Try again
          </button>
        </p>
      )}
      {!cmp && !error && from !== null && to !== null && from !== to && <p>Reading both versions…</p>}
      {cmp && result && (
        <Fragment key={`${result.from}-${result.to}`}>
          <p
            data-testid="diff-summary"
            data-from={result.from}
            data-to={result.to}
            data-added={cmp.added.length}
            data-removed={cmp.removed.length}
            data-changed={cmp.changed.length}
            data-unchanged={cmp.unchanged}
            aria-live="polite"
          >
            {cmp.added.length} added, {cmp.removed.length} removed, {cmp.changed.length} changed, {cmp.unchanged}{' '}
            unchanged ({bytes(cmp.unchangedBytes)}, same chunks, so not read). Total {bytes(cmp.oldBytes)} →{' '}
            {bytes(cmp.newBytes)} ({sizeDelta(cmp.newBytes - cmp.oldBytes)}).
          </p>
          {cmp.added.length + cmp.removed.length + cmp.changed.length === 0 && (
            <p data-testid="diff-identical">These two versions hold the same files with the same content.</p>
          )}
          {cmp.added.length + cmp.removed.length + cmp.changed.length > 0 && (
            <p>
              <label>
                Only paths containing{' '}
                <input
                  type="search"
                  data-testid="diff-filter"
                  value={filter}
                  onChange={(e) => setFilter(e.target.value)}
                />
              </label>
            </p>
          )}
          <OneSideList title="Added" testid="diff-added" rows={cmp.added} filter={filter} />
          <OneSideList title="Removed" testid="diff-removed" rows={cmp.removed} filter={filter} />
          <ChangedList
            api={api}
            rows={cmp.changed}
            filter={filter}
            from={result.from}
            to={result.to}
            source={info(result.to)?.source ?? ''}
            busy={busy}
            onRestore={onRestore}
          />
        </Fragment>
      )}
    </section>
  );
}

/** The rows whose path contains `filter` (case-insensitive), shown a page at a time. */
function usePaged<T extends { path: string }>(all: T[], filter: string) {
  const [shown, setShown] = useState(PAGE);
  const rows = useMemo(() => {
    const f = filter.trim().toLowerCase();
    return f ? all.filter((r) => r.path.toLowerCase().includes(f)) : all;
  }, [all, filter]);
  const count = rows.length === all.length ? `${all.length}` : `${rows.length} of ${all.length}`;
  const more =
    rows.length > shown ? (
      <p>
        Showing {shown} of {rows.length}.{' '}
        <button type="button" data-testid="diff-more" onClick={() => setShown((n) => n + PAGE)}>
          Show {Math.min(PAGE, rows.length - shown)} more
        </button>
      </p>
    ) : null;
  return { visible: rows.slice(0, shown), more, count };
}

function OneSideList({
  title,
  testid,
  rows,
  filter,
}: {
  title: string;
  testid: string;
  rows: OneSide[];
  filter: string;
}) {
  const { visible, more, count } = usePaged(rows, filter);
  if (!rows.length) return null;
  return (
    <>
      <h4>
        {title} ({count})
      </h4>
      <table className="files" data-testid={testid}>
        <thead>
          <tr>
            <th>Path</th>
            <th>Size</th>
          </tr>
        </thead>
        <tbody>
          {visible.map((r) => (
            <tr key={r.path} data-testid="diff-row" data-path={r.path} data-size={r.size}>
              <td>
                {r.kind === 'symlink' ? `${r.path} (link)` : r.path}
                {r.skipped && (
                  <span className="warn" data-testid="diff-skipped">
                    {' '}
                    (not removed: the newer version could not read it, {r.skipped})
                  </span>
                )}
              </td>
              <td className="num">{bytes(r.size)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {more}
    </>
  );
}

interface ChangedProps {
  api: Api;
  rows: Changed[];
  filter: string;
  from: number;
  to: number;
  source: string;
  busy: boolean;
  onRestore: (r: RestoreRequest) => void;
}

function ChangedList({ api, rows, filter, from, to, source, busy, onRestore }: ChangedProps) {
  const { visible, more, count } = usePaged(rows, filter);
  const [open, setOpen] = useState<{ path: string; what: 'diff' | 'history' } | null>(null);
  if (!rows.length) return null;
  const toggle = (path: string, what: 'diff' | 'history') =>
    setOpen((o) => (o?.path === path && o.what === what ? null : { path, what }));
  return (
    <>
      <h4>Changed ({count})</h4>
      <table className="files" data-testid="diff-changed">
        <thead>
          <tr>
            <th>Path</th>
            <th>Old size</th>
            <th>New size</th>
            <th>Size change</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {visible.map((r) => (
            <ChangedRow key={r.path} r={r} open={open?.path === r.path ? open.what : null} onToggle={toggle}>
              {open?.path === r.path && open.what === 'diff' && (
                <FileChange
                  api={api}
                  path={r.path}
                  older={{ version: from, entry: r.old }}
                  newer={{ version: to, entry: r.new }}
                />
              )}
              {open?.path === r.path && open.what === 'history' && (
                <FileHistory
                  api={api}
                  source={source}
                  path={r.path}
                  busy={busy}
                  onRestore={onRestore}
                  onClose={() => setOpen(null)}
                />
              )}
            </ChangedRow>
          ))}
        </tbody>
      </table>
      {more}
    </>
  );
}

function ChangedRow({
  r,
  open,
  onToggle,
  children,
}: {
  r: Changed;
  open: 'diff' | 'history' | null;
  onToggle: (path: string, what: 'diff' | 'history') => void;
  children: React.ReactNode;
}) {
  return (
    <>
      <tr data-testid="diff-row" data-path={r.path} data-old-size={r.oldSize} data-new-size={r.newSize}>
        <td>{r.kind === 'kind' ? `${r.path} (file ↔ link)` : r.path}</td>
        <td className="num">{bytes(r.oldSize)}</td>
        <td className="num">{bytes(r.newSize)}</td>
        <td className="num">{sizeDelta(r.newSize - r.oldSize)}</td>
        <td className="actions">
          <button
            type="button"
            data-testid="diff-show"
            aria-expanded={open === 'diff'}
            aria-label={`Show the changes to ${r.path}`}
            onClick={() => onToggle(r.path, 'diff')}
          >
            {open === 'diff' ? 'Hide changes' : 'Show changes'}
          </button>
          <button
            type="button"
            data-testid="diff-history"
            aria-expanded={open === 'history'}
            aria-label={`History of ${r.path}`}
            onClick={() => onToggle(r.path, 'history')}
          >
            History
          </button>
        </td>
      </tr>
      {children && (
        <tr>
          <td colSpan={5}>{children}</td>
        </tr>
      )}
    </>
  );
}
