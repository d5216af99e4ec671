/**
 * What dedup saved, per repository and per source: the server's own numbers (GET stats,
 * versions, containers), shown as figures (each in a data-testid'ed element carrying the exact
 * value) and as uPlot charts.
 */
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import type { Api, RepoStats, VersionInfo } from '../api/client';
import { Button } from '../ui/Button';
import { Select } from '../ui/Field';
import { EmptyState, Notice } from '../ui/Notice';
import { UPlotChart, type ChartSeries } from './charts/UPlotChart';
import { eachManifest } from '../history/manifests';
import { bytes, DEDUP_RATIO_MEANS, ratio, REPO_RATIO_MEANS } from './format';
import '../restore/restore.css';

interface ContainerRow {
  id: number;
  size: number;
  chunks: { fp: string; raw_len: number; stored_len: number }[];
}

/** `delta_saved_bytes` is reported by servers that store deltas; older ones leave it out. */
type Stats = RepoStats & { delta_saved_bytes?: number };

interface Data {
  stats: Stats;
  versions: VersionInfo[];
  containers: ContainerRow[];
}

/** Histogram bins of chunk raw sizes: <512 B, [2^k, 2^(k+1)) for k = 9..19, and 1 MiB and more. */
export function chunkHistogram(sizes: Iterable<number>): { labels: string[]; counts: number[] } {
  const lo = 9;
  const hi = 20;
  const counts = new Array(hi - lo + 2).fill(0) as number[];
  for (const s of sizes) {
    const k = s <= 0 ? 0 : Math.floor(Math.log2(s));
    counts[Math.min(hi - lo + 1, Math.max(0, k - lo + 1))]++;
  }
  const kib = (b: number) => (b >= 1 << 20 ? `${b >> 20}M` : b >= 1024 ? `${b >> 10}K` : `${b}`);
  // Each bin is labelled by its lower bound: short labels, so that every one fits.
  const labels = ['<512'];
  for (let k = lo; k <= hi; k++) labels.push(kib(2 ** k));
  return { labels, counts };
}

const MB = (v: number) => bytes(Math.round(v));
/** Ratios on a log axis run from 1× to thousands: no decimals once they stop mattering. */
const X = (v: number) => `${v >= 10 ? Math.round(v).toLocaleString('en') : v.toFixed(1)}×`;
const COUNT = (v: number) => String(Math.round(v));

function Figure(props: { id: string; label: string; value: number | null; text: string; title?: string }) {
  const { id, label, value, text, title } = props;
  return (
    <div className="figure" title={title}>
      <span className="muted">{label}</span>
      <strong data-testid={id} data-value={value ?? ''}>
        {text}
      </strong>
    </div>
  );
}

/**
 * `stored`: the chunks the version stored first as they are stored now (what it uploaded,
 * where the server does not say); `delta`: what those stored as deltas save.
 */
type Row = {
  v: VersionInfo;
  cumLogical: number;
  cumStored: number;
  unique: number | null;
  stored: number;
  delta: number;
};

/** A version as the charts label it: short, so that labels fit side by side. */
const versionLabel = (v: VersionInfo) => `#${v.id}`;

/** The per-version charts of one source: its versions only, so its axis stays readable. */
function SourceCharts({ source, rows, heading }: { source: string; rows: Row[]; heading: boolean }) {
  const charts = useMemo(() => {
    const labels = rows.map((r) => versionLabel(r.v));
    const series = (label: string, color: string, f: (r: Row) => number | null): ChartSeries => ({
      label,
      color,
      values: rows.map(f),
    });
    return {
      labels,
      perVersion: [
        series('Logical', '--chart-1', (r) => r.v.stats.logical_bytes),
        series('Stored now', '--chart-2', (r) => r.stored),
      ],
      ratio: [series('Dedup ratio', '--chart-3', (r) => r.v.stats.dedup_ratio)],
      unbounded: rows.some((r) => r.v.stats.dedup_ratio === null),
      savings: [
        series('Saved by dedup', '--chart-3', (r) => r.v.stats.logical_bytes - r.v.stats.new_raw_bytes),
        series('Saved by compression', '--chart-4', (r) => r.v.stats.new_raw_bytes - r.stored - r.delta),
        // No line for a technique that saved nothing here (the pass off, or nothing similar).
        ...(rows.some((r) => r.delta > 0) ? [series('Saved by delta', '--chart-5', (r) => r.delta)] : []),
      ],
      unique: [series('Only this version', '--chart-5', (r) => r.unique)],
    };
  }, [rows]);
  return (
    <section className="source-charts" data-testid="dash-source-charts" data-source={source}>
      {heading && (
        <h3>
          Source “{source}”: {rows.length} version{rows.length === 1 ? '' : 's'}
        </h3>
      )}
      <div className="charts">
        <UPlotChart
          testId="chart-per-version"
          title="Logical vs stored bytes per version"
          kind="bars"
          xLabels={charts.labels}
          series={charts.perVersion}
          yFormat={MB}
        />
        <UPlotChart
          testId="chart-ratio"
          title="Dedup ratio per version (log scale)"
          kind="lines"
          logY
          xLabels={charts.labels}
          series={charts.ratio}
          yFormat={X}
          note={
            <>
              {DEDUP_RATIO_MEANS}
              {charts.unbounded && ' Gaps: versions that stored nothing new (no ratio).'}
            </>
          }
        />
        <UPlotChart
          testId="chart-savings"
          title="Savings by technique per version"
          kind="lines"
          xLabels={charts.labels}
          series={charts.savings}
          yFormat={MB}
        />
        <UPlotChart
          testId="chart-unique"
          title="Stored bytes only this version references (what deleting it frees)"
          kind="bars"
          xLabels={charts.labels}
          series={charts.unique}
          yFormat={MB}
        />
      </div>
    </section>
  );
}

/**
 * `onBackUp` opens the Back up view: the next step from an empty repository. `committed`
 * counts the versions this tab's backups committed: the numbers are read again when it grows.
 */
export function Dashboard({ api, committed = 0, onBackUp }: { api: Api; committed?: number; onBackUp?: () => void }) {
  const [data, setData] = useState<Data | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [scope, setScope] = useState<string>(''); // '' = the whole repository
  const [sourceChunks, setSourceChunks] = useState<Map<string, number[]>>(new Map());

  const loading = useRef(new Map<string, Data>()); // source -> the data it is being read for
  /**
   * Aborted when the dashboard goes away: its manifest reads are then of no use. Replaced on
   * each mount, before the reads below start (effects run in order).
   */
  const stop = useRef(new AbortController());
  useEffect(() => {
    const c = new AbortController();
    stop.current = c;
    return () => c.abort();
  }, []);
  /** Counts reads: a Refresh's answer may arrive before an older read's, which is dropped. */
  const reads = useRef(0);
  const load = useCallback(async () => {
    const read = ++reads.current;
    try {
      const [stats, versions, c] = await Promise.all([
        api.stats(),
        api.versions(),
        api.json<{ containers: ContainerRow[] }>(`/repos/${encodeURIComponent(api.repo)}/containers`),
      ]);
      if (read !== reads.current) return;
      setData({ stats, versions, containers: c.containers });
      setSourceChunks(new Map());
      // Reads of sources' chunks for the replaced data no longer count, whatever the scope.
      loading.current.clear();
      setError(null);
    } catch (e) {
      if (read === reads.current) setError(e instanceof Error ? e.message : String(e));
    }
  }, [api]);
  useEffect(() => {
    load();
  }, [load, committed]);

  const sources = useMemo(() => [...new Set(data?.versions.map((v) => v.source) ?? [])], [data]);
  const rawLenOf = useMemo(() => {
    const m = new Map<string, number>();
    for (const c of data?.containers ?? []) for (const ch of c.chunks) m.set(ch.fp, ch.raw_len);
    return m;
  }, [data]);

  // A source's chunk sizes need its manifests: the distinct chunks its versions reference,
  // read a few manifests at a time and kept as fingerprints only. Keyed by the data they were
  // read for: a Refresh (new versions, pruned chunks) reads them again.
  useEffect(() => {
    if (!data || !scope || sourceChunks.has(scope) || loading.current.get(scope) === data) return;
    loading.current.set(scope, data);
    const ids = data.versions.filter((v) => v.source === scope).map((v) => v.id);
    const fps = new Set<string>();
    eachManifest(
      api,
      ids,
      (m) => {
        for (const e of m.entries) for (const fp of e.recipe ?? []) fps.add(fp);
      },
      { signal: stop.current.signal },
    )
      .then(
        () => {
          // Read for data a Refresh has replaced since: the reading for the new data counts.
          if (loading.current.get(scope) !== data) return;
          const sizes = [...fps].map((fp) => rawLenOf.get(fp) ?? 0);
          setSourceChunks((m) => new Map(m).set(scope, sizes));
        },
        (e: unknown) => {
          // A version deleted since this read fails it (404): the refreshed data reads again.
          if (loading.current.get(scope) === data) setError(e instanceof Error ? e.message : String(e));
        },
      )
      .finally(() => {
        if (loading.current.get(scope) === data) loading.current.delete(scope);
      });
  }, [api, data, scope, sourceChunks, rawLenOf]);

  const view = useMemo(() => {
    if (!data) return null;
    const vs = scope ? data.versions.filter((v) => v.source === scope) : data.versions;
    let cumLogical = 0;
    let cumStored = 0;
    const pointOf = new Map(data.stats.series.map((p) => [p.id, p]));
    const rows: Row[] = vs.map((v) => {
      cumLogical += v.stats.logical_bytes;
      const p = pointOf.get(v.id);
      const stored = p?.first_stored_bytes ?? v.stats.new_stored_bytes;
      cumStored += stored;
      return {
        v,
        cumLogical,
        cumStored,
        unique: p?.unique_stored_bytes ?? null,
        stored,
        delta: p?.delta_saved_bytes ?? 0,
      };
    });
    const bySource = new Map<string, Row[]>();
    for (const r of rows) bySource.set(r.v.source, [...(bySource.get(r.v.source) ?? []), r]);
    const s = data.stats;
    const sumOf = (f: (v: VersionInfo) => number) => vs.reduce((n, v) => n + f(v), 0);
    const totals = scope
      ? {
          logical: sumOf((v) => v.stats.logical_bytes),
          raw: sumOf((v) => v.stats.new_raw_bytes),
          stored: rows.reduce((n, r) => n + r.stored, 0),
          delta: rows.reduce((n, r) => n + r.delta, 0),
        }
      : { logical: s.logical_bytes, raw: s.raw_bytes, stored: s.stored_bytes, delta: s.delta_saved_bytes ?? 0 };
    const sizes = scope ? sourceChunks.get(scope) : data.containers.flatMap((c) => c.chunks.map((ch) => ch.raw_len));
    const labels = rows.map((r) => versionLabel(r.v));
    return {
      rows,
      bySource,
      totals,
      ratio: scope ? (totals.stored ? totals.logical / totals.stored : null) : s.dedup_ratio,
      hist: sizes ? chunkHistogram(sizes) : null,
      histTotal: sizes?.length ?? null,
      cumulative: {
        labels,
        series: [
          { label: 'Logical', color: '--chart-1', values: rows.map((r) => r.cumLogical) },
          { label: 'Stored', color: '--chart-2', values: rows.map((r) => r.cumStored) },
        ],
      },
    };
  }, [data, scope, sourceChunks]);

  if (error)
    return (
      <Notice tone="error" title="The dashboard could not load the repository’s numbers" data-testid="dash-error">
        <p>{error}</p>
        <p>
          <Button onClick={load}>Try again</Button>
        </p>
      </Notice>
    );
  if (!data || !view)
    return (
      <p className="muted" role="status">
        Loading the repository’s numbers…
      </p>
    );
  if (data.versions.length === 0)
    return (
      <EmptyState
        title="No backups yet"
        data-testid="dash-empty"
        action={
          <>
            {onBackUp && (
              <Button variant="primary" onClick={onBackUp}>
                Back up a folder
              </Button>
            )}{' '}
            <Button onClick={load}>Refresh</Button>
          </>
        }
      >
        <p>
          Back up a folder in the <strong>Back up</strong> tab: how much each version stored, and what dedup and
          compression saved, show here.
        </p>
      </EmptyState>
    );
  const s = data.stats;
  const t = view.totals;
  // The server's stored bytes count delta chunks as stored: what compression saved is what
  // is left once the delta savings are taken out. A source's figures are those of the chunks
  // its versions stored first; no delta figure where deltas saved nothing (or the server
  // makes none).
  const delta = t.delta > 0 ? t.delta : null;
  const compression = t.raw - t.stored - (delta ?? 0);
  return (
    <section className="dashboard" data-testid="dashboard" data-scope={scope}>
      <div className="dash-head">
        <Select label="Show" data-testid="dash-scope" value={scope} onChange={(e) => setScope(e.target.value)}>
          <option value="">Repository “{s.repo}”</option>
          {sources.map((src) => (
            <option key={src} value={src}>
              Source “{src}”
            </option>
          ))}
        </Select>
        <Button data-testid="dash-refresh" onClick={load}>
          Refresh
        </Button>
      </div>
      <div className="figures">
        <Figure id="dash-versions" label="Versions" value={view.rows.length} text={String(view.rows.length)} />
        <Figure
          id="dash-logical"
          label="Logical bytes"
          value={t.logical}
          text={bytes(t.logical)}
          title="The size of every version's files added up, as if each were stored in full"
        />
        <Figure
          id="dash-raw"
          label="Unique chunk bytes"
          value={t.raw}
          text={bytes(t.raw)}
          title="The distinct chunks, before compression"
        />
        <Figure
          id="dash-stored"
          label="Stored bytes"
          value={t.stored}
          text={bytes(t.stored)}
          title="The distinct chunks as stored, after compression"
        />
        <Figure
          id="dash-ratio"
          label="Dedup ratio"
          value={view.ratio}
          text={ratio(view.ratio)}
          title={REPO_RATIO_MEANS}
        />
        <Figure
          id="dash-saved-dedup"
          label="Saved by dedup"
          value={t.logical - t.raw}
          text={bytes(t.logical - t.raw)}
        />
        <Figure
          id="dash-saved-compression"
          label="Saved by compression"
          value={compression}
          text={bytes(compression)}
          title="The distinct chunks before compression, less their compressed size as uploaded"
        />
        {delta !== null && (
          <Figure
            id="dash-saved-delta"
            label="Saved by delta"
            value={delta}
            text={bytes(delta)}
            title="Chunks similar to stored ones kept as differences from them (the server's delta pass), against their compressed size"
          />
        )}
        {!scope && (
          <>
            <Figure id="dash-chunks" label="Chunks" value={s.chunks} text={s.chunks.toLocaleString('en')} />
            <Figure id="dash-containers" label="Containers" value={s.containers} text={String(s.containers)} />
            <Figure
              id="dash-container-bytes"
              label="Container files"
              value={s.container_bytes}
              text={bytes(s.container_bytes)}
            />
          </>
        )}
      </div>
      {!scope && (
        <div className="figures" data-testid="dash-layout">
          <Figure
            id="dash-active-bytes"
            label={`Active (${s.layout.active_containers} container${s.layout.active_containers === 1 ? '' : 's'})`}
            value={s.layout.active_bytes}
            text={bytes(s.layout.active_bytes)}
          />
          <Figure
            id="dash-archival-bytes"
            label={`Archival (${s.layout.archival_containers} container${s.layout.archival_containers === 1 ? '' : 's'})`}
            value={s.layout.archival_bytes}
            text={bytes(s.layout.archival_bytes)}
          />
          <Figure
            id="dash-dead-bytes"
            label="Dead (awaiting compaction)"
            value={s.layout.dead_bytes}
            text={bytes(s.layout.dead_bytes)}
          />
          <Figure
            id="dash-reclaimed"
            label="Reclaimed by expiry"
            value={s.reclaimed_bytes}
            text={bytes(s.reclaimed_bytes)}
          />
        </div>
      )}
      <div className="charts">
        <UPlotChart
          testId="chart-cumulative"
          title={`Cumulative logical vs stored bytes (${scope ? 'this source' : 'all sources'})`}
          kind="lines"
          xLabels={view.cumulative.labels}
          series={view.cumulative.series}
          yFormat={MB}
        />
        {view.hist && (
          <UPlotChart
            testId="chart-chunk-sizes"
            title={`Chunk sizes (${scope ? 'chunks this source references' : 'all chunks'})`}
            note="Each bar counts the chunks from its size up to the next bar’s."
            kind="bars"
            xLabels={view.hist.labels}
            series={[{ label: 'Chunks', color: '--chart-1', values: view.hist.counts }]}
            yFormat={COUNT}
          />
        )}
      </div>
      {[...view.bySource].map(([src, rows]) => (
        <SourceCharts key={src} source={src} rows={rows} heading={view.bySource.size > 1} />
      ))}
      <span hidden data-testid="dash-hist-total" data-value={view.histTotal ?? ''} />
      <table className="files" data-testid="dash-table">
        <caption>Per version</caption>
        <thead>
          <tr>
            <th scope="col">Version</th>
            <th scope="col">Source</th>
            <th scope="col" className="num" title="The size of the version's files">
              Logical
            </th>
            <th scope="col" className="num" title="Chunks this version added, before compression">
              New raw
            </th>
            <th
              scope="col"
              className="num"
              title="Chunks this version added, as it uploaded them (compressed in the page)"
            >
              Stored (uploaded)
            </th>
            <th
              scope="col"
              className="num"
              title="The chunks this version stored first, as the server stores them now (after its delta pass and recompression)"
            >
              Stored now
            </th>
            <th scope="col" className="num" title={DEDUP_RATIO_MEANS}>
              Dedup ratio
            </th>
            <th scope="col" className="num">
              Cumulative logical
            </th>
            <th scope="col" className="num" title="Stored now, summed over this version and the ones above it">
              Cumulative stored
            </th>
            <th
              scope="col"
              className="num"
              title="Stored bytes of the chunks no other version references: what deleting this version alone frees"
            >
              Only this version
            </th>
          </tr>
        </thead>
        <tbody>
          {view.rows.map(({ v, cumLogical, cumStored, unique, stored }) => (
            <tr key={v.id} data-testid="dash-row" data-version={v.id}>
              <td>#{v.id}</td>
              <td>{v.source}</td>
              <td className="num" data-testid="d-logical" data-value={v.stats.logical_bytes}>
                {bytes(v.stats.logical_bytes)}
              </td>
              <td className="num" data-testid="d-new-raw" data-value={v.stats.new_raw_bytes}>
                {bytes(v.stats.new_raw_bytes)}
              </td>
              <td className="num" data-testid="d-new-stored" data-value={v.stats.new_stored_bytes}>
                {bytes(v.stats.new_stored_bytes)}
              </td>
              <td className="num" data-testid="d-stored-now" data-value={stored}>
                {bytes(stored)}
              </td>
              <td className="num" data-testid="d-ratio" data-value={v.stats.dedup_ratio ?? ''}>
                {ratio(v.stats.dedup_ratio)}
              </td>
              <td className="num" data-testid="d-cum-logical" data-value={cumLogical}>
                {bytes(cumLogical)}
              </td>
              <td className="num" data-testid="d-cum-stored" data-value={cumStored}>
                {bytes(cumStored)}
              </td>
              <td className="num" data-testid="d-unique" data-value={unique ?? ''}>
                {unique === null ? '—' : bytes(unique)}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <p className="muted" data-testid="dash-ratio-legend">
        {DEDUP_RATIO_MEANS} {REPO_RATIO_MEANS}
      </p>
    </section>
  );
}
