import { useEffect, useMemo, useState, useSyncExternalStore, type ReactNode } from 'react';
import { Api, type TokenInfo } from './api/client';
import { saveToken, takeTokenFromUrl } from './api/token';
import { JobStore } from './backup/jobstore';
import { BackupPanel } from './components/BackupPanel';
import { Dashboard } from './components/Dashboard';
import { FileHashes } from './components/FileHashes';
import { SearchPanel, searchTabOpens } from './components/SearchPanel';
import { wantSearchWorkers } from './search/workers';
import { SourcesPanel } from './components/SourcesPanel';
import { TokenBadge, TokenProblem, useTokenCheck } from './components/TokenBadge';
import { VersionsPanel } from './components/VersionsPanel';
import { useRestore, type Restore } from './components/VersionsRestore';
import { openClientIndex, type ClientIndex } from './dedupindex/index';
import { indexName, newRunner, type BackupRunner } from './sources/runner';
import { useSchedule } from './sources/schedule';
import { Notice } from './ui/Notice';
import { Tabs, type TabDef } from './ui/Tabs';
import { coreModule } from './wasm/loader';
import { CorePool } from './worker/pool';

type Engine =
  | { state: 'loading' }
  | { state: 'ready'; pool: CorePool; jobs: JobStore; index: ClientIndex | null; indexError?: string }
  | { state: 'failed'; message: string };

type Ready = Extract<Engine, { state: 'ready' }>;

/** What a view needs; each tab below renders its view from this. */
interface Ctx {
  api: Api;
  engine: Ready;
  /** Runs every backup of the page (Back up, Sources, the schedule). */
  runner: BackupRunner;
  /** Switches to another view (an empty view's next step). */
  goTo: (id: string) => void;
  /** What the token may do (null while it is checked): a view offers only that. */
  can: TokenInfo['can'] | null;
  /** The page's restore, which goes on while another view is shown. */
  restore: Restore;
  /** Versions this tab's backups committed (`RunnerState.committed`): lists read again when it grows. */
  committed: number;
}

interface View extends TabDef<string> {
  render: (c: Ctx) => ReactNode;
  /** Called by the click (or key) that selects the view, before it renders: reads it will need. */
  opens?: (api: Api) => void;
  /** Whether a token may use the view (docs/API.md, scopes); absent: every token may. */
  allows?: (can: TokenInfo['can']) => boolean;
}

/** The product's views, in tab order. */
const VIEWS: View[] = [
  {
    id: 'backup',
    label: 'Back up',
    testId: 'tab-backup',
    render: ({ api, engine, runner }) => <BackupPanel api={api} jobs={engine.jobs} runner={runner} />,
  },
  {
    id: 'sources',
    label: 'Sources',
    testId: 'tab-sources',
    render: ({ api, runner }) => <SourcesPanel api={api} runner={runner} />,
  },
  {
    id: 'versions',
    label: 'Versions',
    testId: 'tab-versions',
    render: ({ api, can, goTo, restore, committed }) => (
      <VersionsPanel api={api} restore={restore} can={can} committed={committed} onBackUp={() => goTo('backup')} />
    ),
  },
  {
    id: 'dashboard',
    label: 'Dashboard',
    testId: 'tab-dashboard',
    render: ({ api, goTo, committed }) => <Dashboard api={api} committed={committed} onBackUp={() => goTo('backup')} />,
    // Statistics cover the whole repository, and the chunk sizes come from the container tables.
    allows: (can) => can.browse && can.restore,
  },
  {
    id: 'search',
    label: 'Search',
    testId: 'tab-search',
    render: ({ api, goTo, committed }) => (
      <SearchPanel api={api} committed={committed} onBackUp={() => goTo('backup')} />
    ),
    opens: searchTabOpens,
    allows: (can) => can.restore,
  },
];

/**
 * The engine's smoke test (each file's SHA-1 from the workers), for tests and debugging
 * only: shown with `?dev` in the page's address.
 */
const DEV_VIEWS: View[] = [
  {
    id: 'fingerprints',
    label: 'Fingerprints (dev)',
    testId: 'tab-fingerprints',
    render: ({ engine }) => <FileHashes pool={engine.pool} />,
  },
];

export function App() {
  const [engine, setEngine] = useState<Engine>({ state: 'loading' });
  const [token, setToken] = useState(() => takeTokenFromUrl());
  const api = useMemo(() => (token ? new Api(token) : null), [token]);
  const restore = useRestore(api);
  const [check, recheck] = useTokenCheck(api);
  // Until the server has said what the token may do, every view is offered.
  const views = useMemo(() => {
    const all = new URLSearchParams(location.search).has('dev') ? [...VIEWS, ...DEV_VIEWS] : VIEWS;
    return check.state === 'ok' ? all.filter((v) => v.allows?.(check.info.can) ?? true) : all;
  }, [check]);
  const [tab, setTab] = useState(views[0].id);
  const runner = useMemo(() => (engine.state === 'ready' && api ? newRunner(api, engine) : null), [api, engine]);
  useSchedule(runner);
  // A scheduled backup commits while any view is shown; the views of the repository read it again.
  const committed = useSyncExternalStore(
    (fn) => runner?.subscribe(fn) ?? (() => {}),
    () => runner?.state.committed ?? 0,
  );

  useEffect(() => {
    let pool: CorePool | undefined;
    (async () => {
      pool = await CorePool.create(await coreModule());
      const jobs = await JobStore.open();
      let index: ClientIndex | null = null;
      let indexError: string | undefined;
      try {
        index = await openClientIndex(indexName());
      } catch (e) {
        // The index only saves work; without it every lookup goes to the server.
        indexError = e instanceof Error ? e.message : String(e);
      }
      setEngine({ state: 'ready', pool, jobs, index, indexError });
    })().catch((e: unknown) => setEngine({ state: 'failed', message: e instanceof Error ? e.message : String(e) }));
    return () => pool?.terminate();
  }, []);

  // A token that may search gets idle search workers once the engine is up, so that the
  // Search tab starts reading its device caches as it opens; another token's page has none.
  const maySearch = engine.state === 'ready' && check.state === 'ok' && check.info.can.restore;
  useEffect(() => wantSearchWorkers(maySearch), [maySearch]);

  const usable = api && check.state !== 'refused';
  const view = views.find((v) => v.id === tab) ?? views[0];
  return (
    <div className="app">
      <header className="app-header">
        <div className="app-title">
          <h1>Ditto</h1>
          <span className="tagline">Deduplicating backup, in your browser</span>
        </div>
        <div className="app-status">
          <TokenBadge check={check} />
          {engine.state === 'ready' && (
            <p className="muted" data-testid="engine-ready">
              Engine ready: {engine.pool.size} workers, WebAssembly SIMD.
              {engine.indexError &&
                ` Client index unavailable (${engine.indexError}); the server answers every lookup.`}
            </p>
          )}
        </div>
      </header>
      <main>
        <TokenProblem
          check={check}
          hasToken={!!token}
          onToken={(t) => {
            saveToken(t);
            setToken(t);
          }}
          onRetry={recheck}
        />
        {engine.state === 'failed' && (
          <Notice tone="error" title="The backup engine did not start" data-testid="engine-error">
            <p>{engine.message}</p>
            <p>
              Ditto needs WebAssembly SIMD and module workers (Chrome 91+, Firefox 89+, Safari 16.4+). Reload the page,
              or open it in a current browser.
            </p>
          </Notice>
        )}
        {usable && (
          <Tabs
            tabs={views}
            selected={view.id}
            onSelect={(id) => {
              if (id !== view.id) views.find((v) => v.id === id)?.opens?.(api);
              setTab(id);
            }}
            label="Views"
          >
            {engine.state === 'ready' && runner ? (
              view.render({
                api,
                engine,
                runner,
                goTo: setTab,
                can: check.state === 'ok' ? check.info.can : null,
                restore,
                committed,
              })
            ) : engine.state === 'loading' ? (
              <p className="muted" role="status">
                Loading the engine…
              </p>
            ) : null}
          </Tabs>
        )}
      </main>
    </div>
  );
}
