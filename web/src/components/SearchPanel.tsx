import { memo, useEffect, useMemo, useRef, useState } from 'react';
import '../search/search.css';
import type { Api, VersionInfo } from '../api/client';
import type { SearchQuery } from '../search/protocol';
import {
  cachedChunks,
  clearDeviceCache,
  compareOutcomes,
  dedupSearch,
  QueryRefused,
  deviceCacheOn,
  loadDeviceCache,
  naiveSearch,
  preloadScope,
  prepareJobs,
  readAhead,
  readAheadOn,
  reserveWorkerMemory,
  setReadAhead,
  type ReadAheadProgress,
  setDeviceCache,
  type FileHits,
  type SearchOutcome,
  type SearchProgress,
  type SearchScope,
  type SearchWhere,
} from '../search/search';
import { deviceCacheBytes } from '../search/deviceCache';
import { ChunkCache, snippet, type Snippet } from '../search/snippet';
import type { RestoreItem } from '../restore/restore';
import { prestartSearchWorkers, takeSearchWorkers, type SearchWorkers } from '../search/workers';
import { Button } from '../ui/Button';
import { Card } from '../ui/Card';
import { Input, Select } from '../ui/Field';
import { EmptyState, Notice } from '../ui/Notice';
import { Progress } from '../ui/Progress';
import { bytes } from './format';
import { FilePreview } from './FilePreview';
import { TEXT_PREVIEW_BYTES, type ByteRange } from '../restore/preview';

/**
 * An outcome, the number of the run that produced it (tests wait for their run) and whether
 * its keywords were hex (labelled as searched, whatever the box says now).
 */
type Shown = SearchOutcome & { seq: number; hex: boolean };

/** Files listed at first, and how many more each "Show more" adds; the counts cover every match. */
const FILES_SHOWN = 300;
const FILES_MORE = 300;
/**
 * A search looks busy (its progress, the previous results dimmed, the form's controls
 * disabled, a Cancel button) once it has run this long: a repeat search takes tens of
 * milliseconds, and the style, layout and paint that a busy look costs at the click would
 * take the page's thread (and a core) from the search's own messages.
 */
const PROGRESS_AFTER_MS = 150;
/** Hits per file with a snippet. */
const SNIPPETS_PER_FILE = 3;
/** The scope the tab reads ahead and grows the workers' memory for: the default one. */
const READ_AHEAD_SCOPE: SearchScope = { versions: null, pathFilter: '', where: 'auto' };

/**
 * Starts reading what a first search of the default scope reads (the repository's state,
 * the manifests, the chunk locations: [`preloadScope`]). The tab calls it from the click that
 * opens it, before its first render, and again as it mounts (the same read, not a second).
 */
export function searchTabOpens(api: Api): void {
  void preloadScope(api, READ_AHEAD_SCOPE);
}

const ms = (v: number) => `${Math.round(v)} ms`;
const seconds = (v: number) => (v < 1000 ? ms(v) : `${(v / 1000).toFixed(1)} s`);
const plural = (n: number, one: string, many = `${one}s`) => `${n.toLocaleString('en')} ${n === 1 ? one : many}`;

/** The read-ahead's line: what it read, or why it read nothing. */
function readAheadStatus(a: ReadAheadProgress | null, on: boolean): string {
  if (!a) return on ? 'waiting for the repository' : 'off';
  const read = bytes(a.storedBytes);
  switch (a.state) {
    case 'none':
      return 'nothing to read';
    case 'running':
      return `reading: ${a.done} of ${plural(a.total, 'range')}, ${read}`;
    case 'done':
      return `${read} read, ready${a.kept ? ', kept on this device' : ''}`;
    case 'stopped':
      return `stopped after ${read}: a search reads the rest`;
    case 'failed':
      return `stopped after ${read} by an error: a search reads the rest`;
  }
}

function keywordLabel(k: Uint8Array, hex: boolean): string {
  return hex ? [...k].map((b) => b.toString(16).padStart(2, '0')).join(' ') : new TextDecoder().decode(k);
}

/** Search the contents of stored versions: DedupSearch, with the naive search beside it. */
export function SearchPanel({
  api,
  committed = 0,
  onBackUp,
}: {
  api: Api;
  /** Versions this tab's backups committed: the versions to choose from are read again when it grows. */
  committed?: number;
  onBackUp?: () => void;
}) {
  /** Null until loaded. */
  const [versions, setVersions] = useState<VersionInfo[] | null>(null);
  const [keywords, setKeywords] = useState('');
  const [hex, setHex] = useState(false);
  const [filesOnly, setFilesOnly] = useState(false);
  const [chosen, setChosen] = useState<number[]>([]);
  const [pathFilter, setPathFilter] = useState('');
  const [where, setWhere] = useState<SearchWhere>('auto');
  const [busy, setBusy] = useState<null | 'dedup' | 'naive'>(null);
  /** The running search has passed `PROGRESS_AFTER_MS`. */
  const [slow, setSlow] = useState(false);
  const [progress, setProgress] = useState<SearchProgress | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [outcomes, setOutcomes] = useState<{ key?: string; dedup?: Shown; naive?: Shown }>({});
  const workers = useRef<Promise<SearchWorkers> | null>(null);
  /** The device cache's size, and the run whose idle work (its writing included) last ended. */
  const [device, setDevice] = useState({ bytes: 0, settled: 0 });
  /** Bytes the workers' memory grew by for the first search (`reserveWorkerMemory`), once it has. */
  const [memoryReady, setMemoryReady] = useState<number | null>(null);
  const [keepOnDevice, setKeepOnDevice] = useState(deviceCacheOn);
  const [readingAhead, setReadingAhead] = useState(readAheadOn);
  /** How the tab's read-ahead went; null before it reports (or when it is off). */
  const [ahead, setAhead] = useState<ReadAheadProgress | null>(null);
  const refreshDevice = (settled?: number) =>
    void deviceCacheBytes().then(
      (b) => setDevice((d) => ({ bytes: b, settled: settled ?? d.settled })),
      () => {},
    );
  /** The read-ahead's progress shown; the device line's size read again once it is kept. */
  const aheadReport = (p: ReadAheadProgress) => {
    setAhead(p);
    if (p.kept) refreshDevice();
  };

  useEffect(() => {
    let current = true;
    // Read alongside the list, not after it (a repository with nothing to search reads little).
    searchTabOpens(api);
    api.versions().then(
      (v) => current && setVersions(v),
      (e: unknown) => current && setError(e instanceof Error ? e.message : String(e)),
    );
    return () => {
      current = false;
    };
  }, [api, committed]);
  // With something to search, the workers start and the default scope (every version) is
  // read while the keywords are typed, so a first search starts with its scan.
  const searchable = !!versions?.length;
  useEffect(() => {
    if (!searchable) return;
    workers.current ??= takeSearchWorkers();
    void workers.current
      .then(async (w) => {
        await loadDeviceCache(api, w);
        await prepareJobs(api, w, READ_AHEAD_SCOPE);
        await readAhead(api, w, READ_AHEAD_SCOPE, aheadReport);
        setMemoryReady(await reserveWorkerMemory(api, w, READ_AHEAD_SCOPE));
      })
      .catch(() => {});
    refreshDevice();
  }, [api, searchable]);
  /** Ends the workers (a pool that failed to start has nothing to end). */
  const endWorkers = () => {
    void workers.current?.then(
      (w) => w.terminate('search cancelled'),
      () => {},
    );
    workers.current = null;
  };
  useEffect(
    () => () => {
      endWorkers();
      // Idle workers for the tab's next opening (App starts the first ones).
      prestartSearchWorkers();
    },
    [],
  );

  const shown = outcomes.dedup ?? outcomes.naive;
  /** The search running has run for `PROGRESS_AFTER_MS`: the form shows it (see there). */
  const looksBusy = busy !== null && slow;
  // The snippets of the results shown. A new search cancels what they still fetch; the
  // results it leaves on the page (the other engine's, when it checks them) fetch theirs
  // afresh once it ends.
  const [searchesEnded, setSearchesEnded] = useState(0);
  const snippets = useMemo(
    () => new ChunkCache(api, async (fps) => (workers.current ? cachedChunks(await workers.current, fps) : new Map())),
    [api, shown, searchesEnded],
  );
  useEffect(() => () => snippets.abort(), [snippets]);

  // Progress appears once a search has run for `PROGRESS_AFTER_MS`, then is drawn once per
  // frame at most.
  const shownProgress = useRef({ latest: null as SearchProgress | null, frame: 0, since: 0 });
  const report = (p: SearchProgress) => {
    const s = shownProgress.current;
    s.latest = p;
    s.frame ||= requestAnimationFrame(() => {
      s.frame = 0;
      if (performance.now() - s.since >= PROGRESS_AFTER_MS) setProgress(s.latest);
      else s.frame = requestAnimationFrame(() => ((s.frame = 0), report(s.latest!)));
    });
  };

  const runs = useRef(0);
  /** The run Cancel was last pressed for. */
  const cancelled = useRef(0);
  /**
   * A search runs, from its click on: another click starts nothing, though the form's
   * controls are disabled only once the search looks busy (`PROGRESS_AFTER_MS`).
   */
  const running = useRef(false);
  const run = async (engine: 'dedup' | 'naive') => {
    if (running.current) return;
    running.current = true;
    const seq = ++runs.current;
    shownProgress.current.since = performance.now();
    snippets.abort();
    setError(null);
    setBusy(engine);
    setProgress(null);
    setSlow(false);
    const showBusy = setTimeout(() => runs.current === seq && setSlow(true), PROGRESS_AFTER_MS);
    const query: SearchQuery = { keywords, hex, filesOnly };
    const scope: SearchScope = { versions: chosen.length ? chosen : null, pathFilter, where };
    // The previous results stay on the page (marked stale) until these replace them: taking
    // them down now would cost the search's first milliseconds on the page's thread.
    try {
      workers.current ??= takeSearchWorkers();
      const w = await workers.current;
      const outcome = await (engine === 'dedup' ? dedupSearch : naiveSearch)(api, w, query, scope, report);
      // A search the server answered ends normally after Cancel: its results are not shown.
      if (cancelled.current === seq) throw new Error('search cancelled');
      // Outcomes of another query, scope or repository state (a backup or a delete since)
      // are not comparable: start a new pair.
      const key = JSON.stringify([query, scope.versions, scope.pathFilter, outcome.state]);
      setOutcomes((o) =>
        o.key === key ? { ...o, [engine]: { ...outcome, seq, hex } } : { key, [engine]: { ...outcome, seq, hex } },
      );
      void outcome.settled?.then(() => refreshDevice(seq));
    } catch (e) {
      setOutcomes({});
      // After Cancel, whatever the ended workers or the aborted request failed with is the
      // cancel's doing.
      setError(cancelled.current === seq ? 'search cancelled' : e instanceof Error ? e.message : String(e));
      // A failed worker may be in any state: start afresh next time. A refused query (its
      // keywords, or too many matches) leaves them as they were, with what they hold.
      if (!(e instanceof QueryRefused)) endWorkers();
    } finally {
      clearTimeout(showBusy);
      running.current = false;
      setBusy(null);
      setSearchesEnded((n) => n + 1);
    }
  };

  const pool = async () => (workers.current ? await workers.current.catch(() => null) : null);
  const clearDevice = async () => {
    if (running.current) return;
    await clearDeviceCache(await pool());
    refreshDevice();
  };
  const toggleKeep = async (on: boolean) => {
    if (running.current) return;
    setKeepOnDevice(on);
    await setDeviceCache(on, await pool());
    refreshDevice();
  };

  const toggleReadAhead = async (on: boolean) => {
    setReadingAhead(on);
    const w = await pool();
    setReadAhead(on, w);
    if (on && w) await readAhead(api, w, READ_AHEAD_SCOPE, aheadReport);
  };

  const cancel = () => {
    cancelled.current = runs.current;
    endWorkers();
  };

  const compared = useMemo(
    () => (outcomes.dedup && outcomes.naive ? compareOutcomes(outcomes.dedup, outcomes.naive) : null),
    [outcomes],
  );

  if (versions?.length === 0)
    return (
      <EmptyState
        title="Nothing to search yet"
        data-testid="search-no-versions"
        action={
          onBackUp && (
            <Button variant="primary" onClick={onBackUp}>
              Back up a folder
            </Button>
          )
        }
      >
        <p>
          Search looks inside the files of stored versions. Back up a folder in the <strong>Back up</strong> tab first.
        </p>
      </EmptyState>
    );
  return (
    <section className="search" data-testid="search-panel" data-memory-ready={memoryReady ?? undefined}>
      <Card>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void run('dedup');
          }}
        >
          <label>
            Keywords, one per line ({hex ? 'hex bytes, e.g. de ad be ef' : 'case-sensitive text'}; up to 2048 bytes
            each)
            <textarea
              data-testid="search-keywords"
              rows={3}
              value={keywords}
              onChange={(e) => setKeywords(e.target.value)}
              spellCheck={false}
            />
          </label>
          <div className="search-options">
            <label>
              <input
                type="checkbox"
                data-testid="search-hex"
                checked={hex}
                onChange={(e) => setHex(e.target.checked)}
              />{' '}
              Hex
            </label>
            <label>
              <input
                type="checkbox"
                data-testid="search-files-only"
                checked={filesOnly}
                onChange={(e) => setFilesOnly(e.target.checked)}
              />{' '}
              Files only (first hit per keyword)
            </label>
            <Input
              label="Path contains"
              hint="Letter case is ignored"
              data-testid="search-path"
              value={pathFilter}
              onChange={(e) => setPathFilter(e.target.value)}
            />
            <Select
              label="Run the search"
              data-testid="search-where"
              value={where}
              onChange={(e) => setWhere(e.target.value as SearchWhere)}
            >
              <option value="auto">where it is fastest (auto)</option>
              <option value="page">in this page</option>
              <option value="server">on the server</option>
            </Select>
            <Select
              label="Versions"
              hint="None selected: all"
              multiple
              data-testid="search-versions"
              value={chosen.map(String)}
              onChange={(e) => setChosen([...e.target.selectedOptions].map((o) => Number(o.value)))}
            >
              {(versions ?? []).map((v) => (
                <option key={v.id} value={v.id}>
                  #{v.id} · {v.source} · {new Date(v.time).toLocaleString()}
                </option>
              ))}
            </Select>
          </div>
          <button type="submit" data-testid="search-start" disabled={looksBusy || !keywords.trim()}>
            Search
          </button>{' '}
          <button
            type="button"
            data-testid="search-naive"
            disabled={looksBusy || !keywords.trim()}
            onClick={() => void run('naive')}
            title="Reassembles every file and scans it from start to end: slower, and the reference the search must equal"
          >
            Check by reading every file
          </button>{' '}
          {looksBusy && (
            <button type="button" data-testid="search-cancel" onClick={cancel}>
              Cancel
            </button>
          )}
        </form>
        <p
          className="search-device"
          data-testid="search-device-cache"
          data-bytes={device.bytes}
          data-settled={device.settled}
        >
          <label>
            <input
              type="checkbox"
              data-testid="search-device-keep"
              checked={keepOnDevice}
              disabled={looksBusy}
              onChange={(e) => void toggleKeep(e.target.checked)}
            />{' '}
            Keep the chunks searches decode on this device, for the first search after a reload
          </label>{' '}
          ({device.bytes > 0 ? `${bytes(device.bytes)} kept` : keepOnDevice ? 'nothing kept yet' : 'nothing kept'}){' '}
          <button
            type="button"
            data-testid="search-device-clear"
            disabled={looksBusy || device.bytes === 0}
            onClick={() => void clearDevice()}
          >
            Clear
          </button>
        </p>
        <p
          className="search-device"
          data-testid="search-read-ahead"
          data-state={ahead?.state ?? (readingAhead ? 'idle' : 'off')}
          data-stored-bytes={ahead?.storedBytes ?? 0}
          data-kept={ahead?.kept ? 'true' : 'false'}
        >
          <label>
            <input
              type="checkbox"
              data-testid="search-read-ahead-on"
              checked={readingAhead}
              onChange={(e) => void toggleReadAhead(e.target.checked)}
            />{' '}
            Read the stored chunks ahead while the keywords are typed, so that the first search scans from memory
          </label>{' '}
          ({readAheadStatus(ahead, readingAhead)})
        </p>
      </Card>
      {looksBusy && progress && (
        <div data-testid="search-progress" data-phase={progress.phase}>
          <Progress
            label={`${busy === 'dedup' ? 'Searching' : 'Reading every file'}: ${progress.phase}`}
            value={progress.total ? progress.done : null}
            max={progress.total || 1}
            detail={`${progress.done} of ${progress.total}`}
          />
        </div>
      )}
      {error && (
        <Notice tone="error" data-testid="search-error" data-seq={runs.current}>
          <p>{error}</p>
        </Notice>
      )}
      <div className={looksBusy ? 'stale' : undefined} aria-busy={looksBusy} data-testid="search-outcome">
        {(['dedup', 'naive'] as const).map((k) => {
          const o = outcomes[k];
          return o && <Summary key={k} o={o} />;
        })}
        {compared && (
          <p
            data-testid="search-compare"
            data-identical={String(compared.onlyA === 0 && compared.onlyB === 0)}
            className={compared.onlyA === 0 && compared.onlyB === 0 ? 'ok' : 'error'}
          >
            {compared.onlyA === 0 && compared.onlyB === 0
              ? `Checked: reading every file found the same ${outcomes.dedup!.matches} matches (search ${seconds(outcomes.dedup!.totalMs)}, check ${seconds(outcomes.naive!.totalMs)}).`
              : `Results differ: ${compared.onlyA} matches only from the search, ${compared.onlyB} only from reading every file.`}
          </p>
        )}
        {shown && <Results key={shown.seq} api={api} cache={snippets} o={shown} />}
      </div>
    </section>
  );
}

/** Memoised, as `Results`: progress renders the panel once a frame while a search runs. */
const Summary = memo(function Summary({ o }: { o: Shown }) {
  // A first search the server answered while this page caches the repository behind it.
  const [filled, setFilled] = useState(false);
  /** Why the page could not cache it, if it could not. */
  const [fillFailed, setFillFailed] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    void o.filling?.then((failed) => {
      if (!live) return;
      setFilled(true);
      setFillFailed(failed);
    });
    return () => {
      live = false;
    };
  }, [o.filling]);
  const records = o.db && {
    chunk_results: o.db.chunkResults,
    chunk_result_bytes: o.db.chunkResultBytes,
    location_lists: o.db.locationLists,
    long_location_lists: o.db.longLocationLists,
    location_list_bytes: o.db.locationListBytes,
    tiny: o.physical!.tinyRecords,
    tiny_bytes: o.physical!.tinyBytes,
    tiny_lookups: o.logical?.tinyLookups,
    infix_lists: o.db.infixLists,
  };
  return (
    <div
      className="search-summary"
      data-testid="search-done"
      data-engine={o.engine}
      data-where={o.where}
      data-seq={o.seq}
      data-matches={o.matches}
      data-files={o.results.length}
      data-files-searched={o.filesSearched}
      data-phase-ms={JSON.stringify(o.phaseMs)}
      data-total-ms={o.totalMs}
      data-stored-bytes-read={o.storedBytesRead}
      data-ranges-read={o.physical?.rangesRead}
      data-delta-chunks={o.physical?.deltaChunks}
      data-bases-fetched={o.physical?.basesFetched}
      data-bases-bytes={o.physical?.basesBytes}
      data-base-jobs={o.physical?.baseJobs}
      data-base-requests={o.physical?.baseRequests}
      data-links-in-range={o.physical?.linksInRange}
      data-chunks={o.physical?.chunks}
      data-ruled-out={o.physical?.ruledOut}
      data-bytes-scanned={o.physical?.bytes}
      data-ruled-out-bytes={o.physical?.ruledOutBytes}
      data-prepare-cached={o.prepareCached === undefined ? undefined : String(o.prepareCached)}
      data-filled={o.filling ? (fillFailed ? 'failed' : String(filled)) : undefined}
      data-records={records ? JSON.stringify(records) : undefined}
    >
      <p data-testid="search-summary">
        {o.engine === 'naive' && <strong>Check (every file read in full): </strong>}
        {o.matches === 0
          ? `No matches in ${plural(o.filesSearched, 'file')}`
          : `Found ${plural(o.matches, 'match', 'matches')} in ${o.results.length} of ${plural(o.filesSearched, 'file')}`}{' '}
        ({bytes(o.logicalBytes)} searched) in {seconds(o.totalMs)}
        {o.where === 'server' ? ', on the server' : ''}.
      </p>
      <details className="search-details">
        <summary>How the search ran</summary>
        <ul>
          <li>
            {o.engine === 'dedup'
              ? 'DedupSearch: each stored chunk scanned once, however many files and versions share it.'
              : 'Naive search: every file reassembled and scanned from start to end.'}
          </li>
          <li>
            Stages:{' '}
            {Object.entries(o.phaseMs)
              .map(([k, v]) => `${k} ${ms(v)}`)
              .join(', ')}
            .
          </li>
          {o.filling && (
            <li data-testid="search-filling">
              {fillFailed
                ? `This page held nothing of this repository, so the server answered; caching it in the page failed (${fillFailed}); the next search tries again.`
                : filled
                  ? 'This page held nothing of this repository, so the server answered; the page has since cached it, and the next searches run here.'
                  : 'This page holds nothing of this repository yet, so the server answered; the page is caching it for the next searches.'}
            </li>
          )}
          <li>Read {bytes(o.storedBytesRead)} from the server.</li>
          {o.physical && (
            <li>
              {plural(o.physical.containers, 'container')}, {plural(o.physical.rangesRead, 'byte range')} fetched (the
              rest from the workers' cache); {o.physical.chunks} chunks, {bytes(o.physical.bytes)} scanned once
              {o.prepareCached
                ? '; manifests and chunk locations read before the search (when the tab opened, or by an earlier one)'
                : ''}
              .
            </li>
          )}
          {o.physical && o.physical.deltaChunks > 0 && (
            <li>
              {plural(o.physical.deltaChunks, 'delta chunk')} decoded against their bases before scanning (
              {plural(o.physical.linksInRange, 'base')} read with them, {plural(o.physical.basesFetched, 'base')}{' '}
              fetched, {bytes(o.physical.basesBytes)}, in {plural(o.physical.baseRequests, 'request')} for{' '}
              {plural(o.physical.baseJobs, 'job')}).
            </li>
          )}
          {o.physical && o.physical.ruledOutBytes > 0 && (
            <li>
              {bytes(o.physical.ruledOutBytes)} of cached chunks could not start a keyword (their trigram summaries, per
              1 KiB block, say so) and were not read; {plural(o.physical.ruledOut, 'chunk')} of them wholly, read at
              their ends only for matches that cross into the next chunk.
            </li>
          )}
          {o.naiveBytes !== undefined && <li>{bytes(o.naiveBytes)} reassembled and scanned.</li>}
          {records && (
            <li>
              Index records: {records.chunk_results} chunk-results, {records.location_lists} location-lists (
              {records.long_location_lists} long), {records.tiny} tiny ({records.tiny_lookups} looked up),{' '}
              {records.infix_lists} infix.
            </li>
          )}
        </ul>
      </details>
    </div>
  );
});

/** Memoised: the previous results stay while the next search runs, and its progress renders the panel. */
const Results = memo(function Results(props: { api: Api; cache: ChunkCache; o: Shown }) {
  const { api, cache, o } = props;
  const [shown, setShown] = useState(FILES_SHOWN);
  // The file previewed in the page (one at a time), by its id.
  const [preview, setPreview] = useState<number | null>(null);
  if (o.results.length === 0)
    return (
      <p className="muted" data-testid="search-empty">
        No matches. Keywords are case-sensitive: check the spelling, or widen the path and version filters.
      </p>
    );
  const byVersion = new Map<number, FileHits[]>();
  for (const r of o.results.slice(0, shown))
    byVersion.set(r.file.version, [...(byVersion.get(r.file.version) ?? []), r]);
  return (
    <div className="search-results">
      {o.results.length > shown && (
        <p className="muted" data-testid="search-more">
          Showing the first {shown} of {o.results.length} files with matches.{' '}
          <Button onClick={() => setShown((n) => n + FILES_MORE)}>
            Show {Math.min(FILES_MORE, o.results.length - shown)} more
          </Button>
        </p>
      )}
      {[...byVersion].map(([version, rows]) => (
        <details key={version} open>
          <summary>
            Version {version} ({rows[0].file.source}): {rows.length} files
          </summary>
          <ul>
            {rows.map((r) => (
              <li
                key={r.file.id}
                data-testid="search-file"
                data-version={version}
                data-path={r.file.path}
                data-hits={JSON.stringify(r.hits.slice(0).map((h) => [h.keyword, h.offset]))}
              >
                <span className="path">{r.file.path}</span> — {r.hits.length} hit{r.hits.length === 1 ? '' : 's'}{' '}
                <Button
                  data-testid="search-preview"
                  aria-expanded={preview === r.file.id}
                  onClick={() => setPreview((id) => (id === r.file.id ? null : r.file.id))}
                >
                  Preview
                </Button>
                <ul>
                  {r.hits.slice(0, SNIPPETS_PER_FILE).map((h) => (
                    <HitLine
                      key={`${h.keyword}@${h.offset}`}
                      cache={cache}
                      r={r}
                      keyword={o.keywords[h.keyword]}
                      label={keywordLabel(o.keywords[h.keyword], o.hex)}
                      offset={h.offset}
                    />
                  ))}
                </ul>
                {preview === r.file.id && (
                  <ResultPreview api={api} r={r} keywords={o.keywords} onClose={() => setPreview(null)} />
                )}
              </li>
            ))}
          </ul>
        </details>
      ))}
    </div>
  );
});

/**
 * A result's file previewed in the page, the search's hits marked (those in the part a text
 * preview shows; hits come by offset). The item and ranges are made once, so that the panel
 * rendering again does not restore the file again.
 */
function ResultPreview(props: { api: Api; r: FileHits; keywords: readonly Uint8Array[]; onClose: () => void }) {
  const { api, r, keywords, onClose } = props;
  const item = useMemo<RestoreItem>(() => {
    const { path, size, recipe } = r.file;
    return { name: path.slice(path.lastIndexOf('/') + 1), path, kind: 'file', size, mtime: 0, recipe };
  }, [r]);
  const hits = useMemo(() => {
    const out: ByteRange[] = [];
    for (let i = 0; i < r.hits.length && r.hits.offset(i) < TEXT_PREVIEW_BYTES; i++)
      out.push([r.hits.offset(i), r.hits.offset(i) + keywords[r.hits.keyword(i)].byteLength]);
    return out;
  }, [r, keywords]);
  return <FilePreview api={api} version={r.file.version} item={item} hits={hits} onClose={onClose} />;
}

function HitLine(props: { cache: ChunkCache; r: FileHits; keyword: Uint8Array; label: string; offset: number }) {
  const { cache, r, keyword, label, offset } = props;
  const [snip, setSnip] = useState<Snippet | string | null>(null);
  useEffect(() => {
    let live = true;
    snippet(cache, r.file, offset, keyword.byteLength).then(
      (s) => live && setSnip(s),
      (e: unknown) => {
        // Cancelled because a new search started: this list is about to be replaced.
        if (!live || (e instanceof DOMException && e.name === 'AbortError')) return;
        setSnip(`snippet unavailable: ${e instanceof Error ? e.message : String(e)}`);
      },
    );
    return () => {
      live = false;
    };
  }, [cache, r, keyword, offset]);
  return (
    <li className="hit">
      <code className="offset">@{offset}</code> <span className="kw">{label}</span>{' '}
      {typeof snip === 'string' ? (
        <span className="error">{snip}</span>
      ) : snip ? (
        <code className="snippet" data-testid="search-snippet">
          {snip.before}
          <mark>{snip.hit}</mark>
          {snip.after}
        </code>
      ) : (
        <span className="muted">…</span>
      )}
    </li>
  );
}
