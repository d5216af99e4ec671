import { Fragment, useCallback, useEffect, useRef, useState } from 'react';
import '../restore/restore.css';
import type { Api, SkippedFile, TokenInfo, VersionInfo } from '../api/client';
import { forgetCommitted } from '../backup/previous';
import { selectItems } from '../restore/restore';
import { sanitizeEntryName } from '../restore/sanitize';
import { bytes, ratio } from './format';
import { skipText } from './BackupPanel';
import { VersionsBrowser } from './VersionsBrowser';
import { canPickFolder } from '../restore/folder';
import { holdLocations } from '../restore/locations';
import { warmRestore } from '../restore/workers';
import { VersionsRestoreStatus, type Restore } from './VersionsRestore';
import { DamagedBadge, VerifyButton } from './VerifyButton';
import { RetentionPanel } from './RetentionPanel';
import { VersionsDiff } from './VersionsDiff';
import { Button } from '../ui/Button';
import { EmptyState } from '../ui/Notice';

/**
 * The newest version's manifest and chunk locations are read as the list shows it when it
 * has at most this many chunk references (a manifest of a few megabytes, held while the
 * list is shown).
 */
const AHEAD_MAX_REFS = 50_000;

/** What deleting one version frees, as a dry run answered (or could not answer). */
type Freed = { id: number; bytes?: number; error?: string };

/** Every version, grouped by source: look inside, download, delete, expire by a policy. */
/**
 * `can`: what the token may do (docs/API.md, scopes); null (unknown yet) offers everything,
 * and the server refuses what the token may not.
 */
export function VersionsPanel({
  api,
  restore,
  can = null,
  committed = 0,
  onBackUp,
}: {
  api: Api;
  /** The page's restore (`useRestore`): it outlives this tab. */
  restore: Restore;
  can?: TokenInfo['can'] | null;
  /** Versions this tab's backups committed: the list is read again when it grows. */
  committed?: number;
  onBackUp?: () => void;
}) {
  const mayRestore = can?.restore ?? true;
  const mayDelete = can?.delete ?? true;
  const [versions, setVersions] = useState<VersionInfo[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [browsing, setBrowsing] = useState<VersionInfo | null>(null);
  const [comparing, setComparing] = useState(false);
  const [confirming, setConfirming] = useState<number | null>(null);
  /** The bytes deleting the version being confirmed frees (a forget dry run). */
  const [freed, setFreed] = useState<Freed | null>(null);
  /** The last deletion: which version, and what the server's disk got back. */
  const [deleted, setDeleted] = useState<{ id: number; reclaimed: number; pruneError: string | null } | null>(null);
  /** The files an incomplete version lacks, once asked for. */
  const [missing, setMissing] = useState<{ id: number; files: SkippedFile[] } | null>(null);
  /** The last deletion that failed, and why: kept apart from the list's error, which each read clears. */
  const [deleteFailed, setDeleteFailed] = useState<{ id: number; message: string } | null>(null);
  /** The versions whose deletion is under way. */
  const [deleting, setDeleting] = useState<number[]>([]);
  /** Whether a retention policy was applied in this view (its result outlives an empty list). */
  const [retained, setRetained] = useState(false);

  /** Counts list reads: only the latest one's answer is shown (see `load`). */
  const reads = useRef(0);
  /**
   * Reads the list again; settles once it is shown (or its error is). Two deletes in a row
   * each read it, and their answers may arrive in either order: an older one would show a
   * deleted version again, so it is dropped.
   */
  const load = useCallback(() => {
    const read = ++reads.current;
    return api.versions().then(
      (v) => {
        if (read !== reads.current) return;
        setVersions(v);
        setError(null);
      },
      (e: unknown) => {
        if (read === reads.current) setError(e instanceof Error ? e.message : String(e));
      },
    );
  }, [api]);
  useEffect(() => {
    void load();
  }, [load, committed]);
  // Restores start from this list (and from the browser it opens).
  const restorable = mayRestore && (versions?.length ?? 0) > 0;
  useEffect(() => {
    if (restorable) warmRestore();
  }, [restorable]);

  // The newest version is the likeliest to be restored: its manifest and chunk locations are
  // read as the list shows it (when it has at most AHEAD_MAX_REFS chunk references), so that
  // a restore of it plans from the click instead of after reading them.
  const newest = versions?.reduce<VersionInfo | null>((a, v) => (a && a.id > v.id ? a : v), null);
  const aheadId = restorable && newest && newest.stats.chunk_refs <= AHEAD_MAX_REFS ? newest.id : null;
  const ahead = useRef<{ id: number; read: ReturnType<Api['version']> } | null>(null);
  useEffect(() => {
    if (aheadId === null) return;
    const held = { id: aheadId, read: api.version(aheadId) };
    held.read.catch(() => {}); // a restore that needs it reads it again
    ahead.current = held;
    const release = holdLocations(api, aheadId);
    return () => {
      release();
      if (ahead.current === held) ahead.current = null;
    };
  }, [api, aheadId]);
  /** Version `id` with its manifest: the one read ahead, else (or if that read failed) read now. */
  const readVersion = async (id: number) => {
    const held = ahead.current;
    if (held?.id === id)
      try {
        return await held.read;
      } catch {
        // Read again below.
      }
    return api.version(id);
  };

  const showMissing = async (id: number) => {
    if (missing?.id === id) return setMissing(null);
    try {
      setMissing({ id, files: (await api.version(id)).manifest.skipped ?? [] });
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  };

  const askDelete = (id: number) => {
    setConfirming(id);
    setFreed({ id });
    api.forget({ versions: [id], dry_run: true }).then(
      (r) => setFreed((f) => (f?.id === id ? { id, bytes: r.freed_bytes } : f)),
      (e: unknown) => setFreed((f) => (f?.id === id ? { id, error: e instanceof Error ? e.message : String(e) } : f)),
    );
  };

  const cancelDelete = () => {
    setConfirming(null);
    setFreed(null);
  };

  const remove = async (id: number) => {
    cancelDelete();
    setDeleting((d) => [...d, id]);
    setDeleteFailed((f) => (f?.id === id ? null : f));
    try {
      const r = await api.deleteVersion(id);
      setDeleted({ id, reclaimed: r.reclaimed_bytes, pruneError: r.prune_error });
      forgetCommitted(api, id);
      // The browser may have moved to another version while the request ran.
      setBrowsing((b) => (b?.id === id ? null : b));
    } catch (e) {
      setDeleteFailed({ id, message: e instanceof Error ? e.message : String(e) });
    }
    // Also after a failure: the version may be gone although its request failed.
    await load();
    setDeleting((d) => d.filter((x) => x !== id));
  };

  const expired = (ids: number[]) => {
    for (const id of ids) forgetCommitted(api, id);
    setBrowsing((b) => (b && ids.includes(b.id) ? null : b));
    cancelDelete(); // what a pending deletion would free has changed
    setDeleted(null);
    setRetained(true);
    void load();
  };

  const zipWhole = (v: VersionInfo) => {
    // The manifest is fetched when the restore starts, beside the save dialog (unless it was
    // read ahead).
    const items = async () => selectItems((await readVersion(v.id)).manifest);
    const stamp = new Date(v.time).toISOString().slice(0, 19).replace(/[:T]/g, '-');
    const src = sanitizeEntryName(v.source)?.replace(/\//g, '_') ?? 'ditto';
    restore.run({
      label: `Version ${v.id} as zip`,
      filename: `${src}-v${v.id}-${stamp}.zip`,
      items,
      expectedBytes: v.stats.logical_bytes,
      format: 'zip',
      version: v.id,
    });
  };

  const folderWhole = (v: VersionInfo) => {
    const items = async () => selectItems((await readVersion(v.id)).manifest);
    restore.run({
      label: `Version ${v.id} into a folder`,
      filename: '',
      items,
      expectedBytes: v.stats.logical_bytes,
      format: 'folder',
      version: v.id,
    });
  };

  const bySource = new Map<string, VersionInfo[]>();
  for (const v of versions ?? []) bySource.set(v.source, [...(bySource.get(v.source) ?? []), v]);

  return (
    <section className="versions" data-testid="versions-panel" aria-labelledby="versions-title">
      <h2 id="versions-title" className={versions?.length === 0 ? 'visually-hidden' : undefined}>
        Versions
      </h2>
      {error && (
        <p className="error" data-testid="versions-error" role="alert">
          {error} <Button onClick={() => void load()}>Try again</Button>
        </p>
      )}
      {!versions && !error && (
        <p className="muted" role="status">
          Loading the versions…
        </p>
      )}
      {versions && versions.length === 0 && (
        <EmptyState
          title="No versions yet"
          data-testid="versions-empty"
          action={
            onBackUp && (
              <Button variant="primary" onClick={onBackUp}>
                Back up a folder
              </Button>
            )
          }
        >
          <p>Each backup of a folder becomes a version here: browse it, compare it, restore it, or delete it.</p>
        </EmptyState>
      )}
      {versions && versions.length > 0 && mayRestore && <VerifyButton api={api} onDone={load} />}
      {versions && versions.length > 0 && (
        <button
          type="button"
          data-testid="versions-compare"
          aria-expanded={comparing}
          onClick={() => setComparing((c) => !c)}
        >
          Compare versions…
        </button>
      )}
      {/* Kept after an apply that left no version, so that its result stays in view. */}
      {versions && (versions.length > 0 || retained) && mayDelete && (
        <RetentionPanel
          api={api}
          sources={[...bySource.keys()]}
          revision={versions.map((v) => v.id).join(',')}
          onApplied={expired}
        />
      )}
      {deleted && (
        <p
          className="ok version-note"
          data-testid="version-deleted"
          data-version={deleted.id}
          data-value={deleted.reclaimed}
        >
          Version {deleted.id} deleted; {bytes(deleted.reclaimed)} reclaimed on the server.
          {deleted.pruneError && (
            <span className="error" data-testid="version-prune-error">
              {' '}
              Freeing its storage failed ({deleted.pruneError}); the next prune frees it.
            </span>
          )}
        </p>
      )}
      {deleteFailed && (
        <p
          className="error version-note"
          data-testid="version-delete-failed"
          data-version={deleteFailed.id}
          role="alert"
        >
          Deleting version {deleteFailed.id} failed ({deleteFailed.message}). If it is still listed, delete it again to
          retry.
        </p>
      )}
      {deleting.map((id) => (
        <p key={id} className="muted version-note" data-testid="version-deleting" data-version={id} role="status">
          Deleting version {id}…
        </p>
      ))}
      {restore.shown && <VersionsRestoreStatus store={restore.store} onCancel={restore.cancel} />}
      {[...bySource].map(([source, list]) => (
        <div key={source} className="source" data-testid="versions-source" data-source={source}>
          <h3>{source}</h3>
          <table className="files" aria-label={`Versions of ${source}`}>
            <thead>
              <tr>
                <th scope="col">Version</th>
                <th scope="col">Time</th>
                <th scope="col">Folder</th>
                <th scope="col">Files</th>
                <th scope="col">Size</th>
                <th scope="col" title="Chunks this version added, as it uploaded them (compressed in the page)">
                  Stored (uploaded)
                </th>
                <th scope="col">Dedup ratio</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {[...list].reverse().map((v) => (
                <Fragment key={v.id}>
                  <tr data-testid="version-row" data-version={v.id} data-incomplete={(v.stats.skipped_files ?? 0) > 0}>
                    <td>
                      {v.id}
                      <DamagedBadge version={v} />
                      {(v.stats.skipped_files ?? 0) > 0 && (
                        <>
                          {' '}
                          <button
                            type="button"
                            className="warn"
                            data-testid="version-incomplete"
                            data-skipped={v.stats.skipped_files}
                            title="Some picked files are not in this version: show which and why"
                            onClick={() => showMissing(v.id)}
                          >
                            incomplete: {v.stats.skipped_files} file{v.stats.skipped_files === 1 ? '' : 's'} missing
                          </button>
                        </>
                      )}
                    </td>
                    <td>{new Date(v.time).toLocaleString()}</td>
                    <td data-testid="v-folder" data-value={v.folder ?? ''}>
                      {v.folder ?? <span className="muted">not recorded</span>}
                    </td>
                    <td className="num" data-testid="v-files" data-value={v.stats.files}>
                      {v.stats.files}
                    </td>
                    <td className="num" data-testid="v-logical" data-value={v.stats.logical_bytes}>
                      {bytes(v.stats.logical_bytes)}
                    </td>
                    <td className="num" data-testid="v-new-stored" data-value={v.stats.new_stored_bytes}>
                      {bytes(v.stats.new_stored_bytes)}
                    </td>
                    <td className="num" data-testid="v-ratio" data-value={v.stats.dedup_ratio ?? ''}>
                      {ratio(v.stats.dedup_ratio)}
                    </td>
                    <td className="actions">
                      <button type="button" data-testid="version-browse" onClick={() => setBrowsing(v)}>
                        Browse
                      </button>
                      {mayRestore && (
                        <button
                          type="button"
                          data-testid="version-zip"
                          disabled={restore.busy}
                          onClick={() => zipWhole(v)}
                        >
                          Download zip
                        </button>
                      )}
                      {mayRestore && canPickFolder() && (
                        <button
                          type="button"
                          data-testid="version-folder"
                          disabled={restore.busy}
                          onClick={() => folderWhole(v)}
                        >
                          Restore into folder…
                        </button>
                      )}
                      {!mayDelete ? null : confirming === v.id ? (
                        <>
                          <button
                            type="button"
                            className="danger"
                            data-testid="version-delete-confirm"
                            onClick={() => remove(v.id)}
                          >
                            Delete version {v.id}? <FreedText freed={freed?.id === v.id ? freed : null} />
                          </button>
                          <button type="button" data-testid="version-delete-cancel" onClick={cancelDelete}>
                            Keep
                          </button>
                        </>
                      ) : (
                        <button
                          type="button"
                          data-testid="version-delete"
                          disabled={deleting.includes(v.id)}
                          onClick={() => askDelete(v.id)}
                        >
                          {deleting.includes(v.id) ? 'Deleting…' : 'Delete'}
                        </button>
                      )}
                    </td>
                  </tr>
                  {missing?.id === v.id && (
                    <tr data-testid="version-missing" data-version={v.id}>
                      <td colSpan={8}>
                        <ul className="error">
                          {missing.files.map((f, i) => (
                            <li key={i} data-testid="version-missing-file" data-path={f.path} data-reason={f.reason}>
                              {f.path}: not in this version, {skipText(f)}
                            </li>
                          ))}
                        </ul>
                      </td>
                    </tr>
                  )}
                </Fragment>
              ))}
            </tbody>
          </table>
        </div>
      ))}
      {comparing && versions && (
        <VersionsDiff
          api={api}
          versions={versions}
          busy={restore.busy}
          onRestore={restore.run}
          onClose={() => setComparing(false)}
        />
      )}
      {browsing && (
        <VersionsBrowser
          key={browsing.id}
          api={api}
          version={browsing}
          busy={restore.busy}
          onRestore={restore.run}
          onClose={() => setBrowsing(null)}
        />
      )}
    </section>
  );
}

/** The bytes a deletion frees, inside its confirmation: counted, still being counted, or unknown. */
function FreedText({ freed }: { freed: Freed | null }) {
  if (freed?.bytes !== undefined)
    return (
      <span data-testid="version-delete-freed" data-value={freed.bytes}>
        (frees {bytes(freed.bytes)})
      </span>
    );
  if (freed?.error)
    return (
      <span data-testid="version-delete-freed-error" title={freed.error}>
        (space freed unknown)
      </span>
    );
  return <span>(counting what it frees…)</span>;
}
