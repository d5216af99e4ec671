import { Fragment, useEffect, useState } from 'react';
import './history.css';
import type { Api, VersionInfo } from '../api/client';
import { fileHistory, heldBefore, type HistoryEntry } from '../history/compare';
import { loadManifests } from '../history/manifests';
import { bytes } from './format';
import { FileChange, message, sizeDelta, useFocusOnOpen } from './FileChange';
import { fileRequest, type RestoreRequest } from './VersionsRestore';

interface Props {
  api: Api;
  source: string;
  path: string;
  busy: boolean;
  onRestore: (r: RestoreRequest) => void;
  onClose: () => void;
}

const CHANGE_TEXT: Record<HistoryEntry<VersionInfo>['change'], string> = {
  added: 'added',
  changed: 'changed',
  same: 'same as before',
  skipped: 'not read by this backup',
};

/** One path through every version of its source: when it changed, and any version of it to download. */
export function FileHistory({ api, source, path, busy, onRestore, onClose }: Props) {
  const [history, setHistory] = useState<HistoryEntry<VersionInfo>[] | null>(null);
  const [progress, setProgress] = useState<{ done: number; total: number } | null>(null);
  const [error, setError] = useState<string | null>(null);
  /** The version whose changes against the previous holder of the path are shown. */
  const [diffOf, setDiffOf] = useState<number | null>(null);
  /** Bumped by "Try again" after a failed read. */
  const [attempt, setAttempt] = useState(0);
  const heading = useFocusOnOpen<HTMLHeadingElement>();

  useEffect(() => {
    let live = true;
    // Closing the history (or asking for another) stops the reading of its manifests.
    const stop = new AbortController();
    setHistory(null);
    setError(null);
    (async () => {
      const all = (await api.versions()).filter((v) => v.source === source);
      all.sort((x, y) => x.time - y.time || x.id - y.id);
      setProgress({ done: 0, total: all.length });
      const manifests = await loadManifests(
        api,
        all.map((v) => v.id),
        (done) => live && setProgress({ done, total: all.length }),
        { signal: stop.signal },
      );
      if (live)
        setHistory(
          fileHistory(
            path,
            all.map((version, i) => ({ version, manifest: manifests[i] })),
          ),
        );
    })().catch((e: unknown) => {
      if (live) setError(`Reading the versions of "${source}" failed: ${message(e)}`);
    });
    return () => {
      live = false;
      stop.abort();
    };
  }, [api, source, path, attempt]);

  return (
    <section className="history file-history" data-testid="file-history" data-path={path} data-source={source}>
      <h4 ref={heading} tabIndex={-1}>
        History of {path} in {source}{' '}
        <button type="button" data-testid="file-history-close" onClick={onClose}>
          Close
        </button>
      </h4>
      {error && (
        <p className="error" role="alert" data-testid="file-history-error">
          {error}{' '}
          <button type="button" onClick={() => setAttempt((n) => n + 1)}>
            Try again
          </button>
        </p>
      )}
      {!history && !error && (
        <p aria-live="polite">
          Reading the versions of {source}
          {progress ? ` (${progress.done} of ${progress.total})` : ''}…
        </p>
      )}
      {history?.length === 0 && (
        <p data-testid="file-history-empty">
          No version of {source} holds {path} (it may have been deleted with its versions).
        </p>
      )}
      {history && history.length > 0 && (
        <table className="files">
          <caption className="history-sr-only">
            Every version of {source} that holds the file or could not read it, oldest first
          </caption>
          <thead>
            <tr>
              <th>Version</th>
              <th>Time</th>
              <th>Size</th>
              <th>Change</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {history.map((h, i) => {
              const before = heldBefore(history, i);
              const entry = h.entry;
              return (
                <Fragment key={h.version.id}>
                  <tr
                    data-testid="history-row"
                    data-version={h.version.id}
                    data-size={entry?.size}
                    data-change={h.change}
                  >
                    <td>{h.version.id}</td>
                    <td>{new Date(h.version.time).toLocaleString()}</td>
                    <td className="num">
                      {entry ? bytes(entry.size) : '—'}
                      {h.change === 'changed' && entry && before && ` (${sizeDelta(entry.size - before.entry.size)})`}
                    </td>
                    <td>
                      {CHANGE_TEXT[h.change]}
                      {h.change === 'skipped' && ` (${h.skipped}; the version is incomplete)`}
                    </td>
                    <td className="actions">
                      {entry?.kind === 'file' && (
                        <button
                          type="button"
                          data-testid="history-download"
                          aria-label={`Download ${path} as in version ${h.version.id}`}
                          disabled={busy}
                          onClick={() =>
                            onRestore(fileRequest(h.version.id, entry, `${path} (version ${h.version.id})`))
                          }
                        >
                          Download
                        </button>
                      )}
                      {h.change === 'changed' && before && (
                        <button
                          type="button"
                          data-testid="history-diff"
                          aria-expanded={diffOf === h.version.id}
                          aria-label={`Changes to ${path} in version ${h.version.id}`}
                          onClick={() => setDiffOf((d) => (d === h.version.id ? null : h.version.id))}
                        >
                          {diffOf === h.version.id ? 'Hide changes' : 'Show changes'}
                        </button>
                      )}
                    </td>
                  </tr>
                  {diffOf === h.version.id && before && entry && (
                    <tr>
                      <td colSpan={5}>
                        <FileChange
                          api={api}
                          path={path}
                          older={{ version: before.version.id, entry: before.entry }}
                          newer={{ version: h.version.id, entry: entry }}
                        />
                      </td>
                    </tr>
                  )}
                </Fragment>
              );
            })}
          </tbody>
        </table>
      )}
    </section>
  );
}
