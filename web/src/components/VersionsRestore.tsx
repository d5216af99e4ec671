import { useCallback, useMemo, useRef, useSyncExternalStore } from 'react';
import type { Api, ManifestEntry } from '../api/client';
import {
  planFor,
  startRestore,
  type RestoreItem,
  type RestoreJob,
  type RestoreProgress,
  type RestoreSelection,
} from '../restore/restore';
import { sanitizeEntryName } from '../restore/sanitize';
import { FolderTarget, pickFolder, skipPresent } from '../restore/folder';
import { versionLocations } from '../restore/locations';
import { abandonSink, chooseSink, SinkError, writeToSink, type Sink } from '../restore/sink';
import { restoreWorkers, warmRestore } from '../restore/workers';
import { bytes, duration } from './format';
import { ExternalStore } from '../ui/externalStore';

export interface RestoreRequest {
  label: string;
  /** Download name: "x.zip" for archives, the file's own name otherwise. */
  filename: string;
  /** The items, or how to get them (called in the click's task, beside the save dialog). */
  items: RestoreSelection | (() => Promise<RestoreSelection>);
  /** Bytes of file content, known before the items (the in-memory fallback is gated on it). */
  expectedBytes: number;
  /** 'folder': written into a folder the user picks (files already there unchanged are skipped). */
  format: 'zip' | 'file' | 'folder';
  /** The version the items come from (the restore plans from its chunk locations). */
  version: number;
}

export interface RestoreState {
  request: RestoreRequest;
  progress: RestoreProgress | null;
  error?: string;
  done?: boolean;
  /** Restore into a folder: files found there already identical, not fetched. */
  skipped?: { files: number; bytes: number };
  /** Restore into a folder: files of the folder compared with the version's so far. */
  checked?: { files: number; of: number };
  /** Entries of the version that are not restored (symlinks, names no file system takes). */
  leftOut?: number;
  /** Where a download goes (sink.ts): a streamed download, a picked file or a Blob. */
  sink?: Sink['kind'];
}

/** The last segment of a path, safe as a file name. */
export function baseName(path: string) {
  return sanitizeEntryName(path.split('/').pop() ?? '') ?? 'file';
}

/** One file of a manifest as a restore item named by its base name. */
export function fileItem(e: ManifestEntry): RestoreItem {
  return { name: baseName(e.path), path: e.path, kind: 'file', size: e.size, mtime: e.mtime, recipe: e.recipe };
}

/** Downloading one file of `version` under its own name. */
export function fileRequest(version: number, e: ManifestEntry, label = e.path): RestoreRequest {
  return {
    label,
    filename: baseName(e.path),
    items: { items: [fileItem(e)], skipped: 0 },
    expectedBytes: e.size,
    format: 'file',
    version,
  };
}

/**
 * The restore's state, kept outside React's: its progress, reported up to ten times a second,
 * renders only the status line ([`VersionsRestoreStatus`]), not the page that holds it,
 * whose thread also passes every verified chunk on to the assembler.
 */
export type RestoreStore = ExternalStore<RestoreState | null>;

/** Whether there is a restore to show, and whether it runs: all the page around it needs. */
function stage(s: RestoreState | null): 'none' | 'running' | 'ended' {
  return s === null ? 'none' : !s.done && !s.error ? 'running' : 'ended';
}

/**
 * Runs one restore at a time: sink first (user gesture), then plan, fetch, verify, write.
 * Held by the page (App), not by the Versions tab: a restore goes on while another tab is
 * shown, and its progress and Cancel are there again when the Versions tab is.
 */
export type Restore = ReturnType<typeof useRestore>;

export function useRestore(api: Api | null) {
  const store: RestoreStore = useMemo(() => new ExternalStore<RestoreState | null>(null), []);
  const setState = store.set;
  // The page renders again when a restore starts, ends or goes away, not on its progress.
  const shown = useSyncExternalStore(store.subscribe, () => stage(store.get()));
  const job = useRef<RestoreJob | null>(null);
  /**
   * The restore under way, from the click: Cancel aborts it, which stops the check of what a
   * folder holds already, or the job once there is one.
   */
  const running = useRef<AbortController | null>(null);

  /**
   * The chunk locations of `version`, fetched while its items are (both need only its id);
   * a failure is seen where it is awaited, not reported as unhandled before.
   */
  const locate = useCallback(
    (version: number | undefined) => {
      if (version === undefined || !api) return null;
      const p = versionLocations(api, version);
      p.catch(() => {});
      return p;
    },
    [api],
  );

  const run = useCallback(
    async (request: RestoreRequest) => {
      if (running.current || !api) return;
      setState({ request, progress: null });
      const ctl = new AbortController();
      running.current = ctl;
      /** The job from here on: cancelled at once if Cancel came before it. */
      const adopt = (j: RestoreJob) => {
        job.current = j;
        if (ctl.signal.aborted) j.cancel();
        else ctl.signal.addEventListener('abort', () => j.cancel(), { once: true });
        return j;
      };
      // Started now, the workers are ready by the time the plan is (a page's first restore
      // would otherwise start them only then); a failure shows where the restore awaits them.
      warmRestore();
      // The items (a manifest) and the chunk locations are fetched from the click on: a fetch
      // needs no gesture, and the picker or download that does opens before anything here
      // is awaited. A failure is seen where they are awaited.
      const locating = locate(request.version);
      const selecting = typeof request.items === 'function' ? request.items() : Promise.resolve(request.items);
      const listing = selecting.then((sel) => {
        if (sel.skipped) setState((s) => (s ? { ...s, leftOut: sel.skipped } : s));
        return sel.items;
      });
      listing.catch(() => {});
      let sink: Sink | null = null;
      try {
        if (request.format === 'folder') {
          // The picker must come before any other await (it needs the click's gesture).
          const dir = await pickFolder();
          if (!dir) {
            setState(null);
            return;
          }
          const target = new FolderTarget(dir);
          const all = await listing;
          const present = await skipPresent(target, all, await restoreWorkers(), ctl.signal, (files, of) =>
            setState((s) => (s ? { ...s, checked: { files, of } } : s)),
          );
          setState((s) => (s ? { ...s, skipped: { files: present.skippedFiles, bytes: present.skippedBytes } } : s));
          const j = adopt(
            await startRestore({
              api,
              items: present.items,
              format: 'folder',
              folder: target,
              version: request.version,
              locations: locating ? (await locating).locations : undefined,
              onProgress: (progress) => setState((s) => (s ? { ...s, progress } : s)),
            }),
          );
          await j.done;
          setState((s) => (s ? { ...s, done: true } : s));
          return;
        }
        // The sink must come before any other await (a picker or a download needs the click's gesture).
        const choosing = chooseSink(request.filename, request.expectedBytes, request.format === 'zip');
        // The plan is made while the download or the picker opens (the page's thread is free
        // meanwhile), as soon as the items and their locations are here.
        const planning = listing.then(async (items) => ({
          items,
          plan: await planFor({
            api,
            items,
            version: request.version,
            locations: locating ? (await locating).locations : undefined,
          }),
        }));
        planning.catch(() => {}); // seen where it is awaited, unless the sink is refused first
        sink = await choosing;
        if (!sink) {
          setState(null);
          return;
        }
        const kind = sink.kind;
        setState((s) => (s ? { ...s, sink: kind } : s));
        const { items, plan } = await planning;
        const j = adopt(
          await startRestore({
            api,
            items,
            plan,
            format: request.format,
            version: request.version,
            // A streamed download is written by the restore's assembler worker itself.
            output: sink.kind === 'stream' ? sink.download.port : undefined,
            onProgress: (progress) => setState((s) => (s ? { ...s, progress } : s)),
          }),
        );
        if (sink.kind !== 'stream' && j.stream) await writeToSink(sink, j.stream);
        await j.done;
        setState((s) => (s ? { ...s, done: true } : s));
      } catch (e) {
        if (sink) await abandonSink(sink, e);
        // The restore's own message (naming the damaged file) beats the stream's generic one,
        // but not the picked file's refusal, which the restore sees only as "cancelled".
        let message = e instanceof Error ? e.message : String(e);
        if (job.current)
          await job.current.done.catch((x: unknown) => {
            if (!(e instanceof SinkError)) message = x instanceof Error ? x.message : message;
          });
        setState((s) => (s ? { ...s, error: message } : s));
      } finally {
        job.current = null;
        running.current = null;
        if (sink?.kind === 'stream') sink.download.end();
      }
    },
    [api, locate, setState],
  );

  const cancel = useCallback(
    () => running.current?.abort(new DOMException('The restore was cancelled.', 'AbortError')),
    [],
  );
  return { store, shown: shown !== 'none', run, cancel, busy: shown === 'running' };
}

export function VersionsRestoreStatus({ store, onCancel }: { store: RestoreStore; onCancel: () => void }) {
  const state = useSyncExternalStore(store.subscribe, store.get);
  if (!state) return null;
  const p = state.progress;
  const pct = p && p.bytesTotal ? Math.min(100, (100 * p.bytesDone) / p.bytesTotal) : 0;
  return (
    <div className="restore-status" data-testid="restore-status" data-sink={state.sink}>
      <strong>{state.request.label}</strong>
      {p && (
        <>
          <progress max={100} value={pct} />
          <span data-testid="restore-progress">
            {bytes(p.bytesDone)} of {bytes(p.bytesTotal)} · {p.filesDone}/{p.filesTotal} files · {p.mbps.toFixed(1)}{' '}
            MB/s · {p.requestsDone}/{p.requestsTotal} requests · {p.containersRead} container reads (fewest possible{' '}
            {p.containersMin})
            {p.mbps > 0 && !state.done && ` · ${duration((p.bytesTotal - p.bytesDone) / 1e6 / p.mbps)} left`}
          </span>
        </>
      )}
      {!p && !state.error && (
        <span data-testid="restore-preparing">
          {state.checked
            ? `Comparing the folder's files with the version's: ${state.checked.files} of ${state.checked.of}…`
            : 'Preparing…'}
        </span>
      )}
      {state.done && p && (
        <span
          className="ok"
          data-testid="restore-done"
          data-bytes={p.bytesTotal}
          data-ms={Math.round(p.elapsedMs)}
          data-mbps={p.mbps.toFixed(2)}
          data-containers-read={p.containersRead}
          data-containers-min={p.containersMin}
          data-bytes-fetched={p.bytesFetched}
          data-requests={p.requestsDone}
          data-skipped-files={state.skipped?.files ?? 0}
        >
          Restored {p.filesTotal} files, {bytes(p.bytesTotal)}, every chunk verified.
          {state.skipped &&
            ` ${state.skipped.files} files (${bytes(state.skipped.bytes)}) were already in the folder unchanged.`}
          {!!state.leftOut && (
            <span className="warn" data-testid="restore-left-out" data-count={state.leftOut}>
              {' '}
              {state.leftOut} {state.leftOut === 1 ? 'entry was' : 'entries were'} left out: symbolic links, and names
              no file system takes.
            </span>
          )}
        </span>
      )}
      {state.error && (
        <span className="error" data-testid="restore-error">
          {state.error}
        </span>
      )}
      {!state.done && !state.error && (
        <button type="button" data-testid="restore-cancel" onClick={onCancel}>
          Cancel
        </button>
      )}
    </div>
  );
}
