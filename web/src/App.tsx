import { useEffect, useMemo, useState } from 'react';
import { Api } from './api/client';
import { takeTokenFromUrl } from './api/token';
import { JobStore } from './backup/jobstore';
import { BackupPanel } from './components/BackupPanel';
import { Dashboard } from './components/Dashboard';
import { FileHashes } from './components/FileHashes';
import { SearchPanel } from './components/SearchPanel';
import { SourcesPanel } from './components/SourcesPanel';
import { indexName, newRunner } from './sources/runner';
import { useSchedule } from './sources/schedule';
import { TokenBadge } from './components/TokenBadge';
import { VersionsPanel } from './components/VersionsPanel';
import { openClientIndex, type ClientIndex } from './dedupindex/index';
import { coreModule } from './wasm/loader';
import { CorePool } from './worker/pool';

type Engine =
  | { state: 'loading' }
  | { state: 'ready'; pool: CorePool; jobs: JobStore; index: ClientIndex | null; indexError?: string }
  | { state: 'failed'; message: string };

type Tab = 'backup' | 'sources' | 'fingerprints' | 'versions' | 'dashboard' | 'search';

export function App() {
  const [engine, setEngine] = useState<Engine>({ state: 'loading' });
  const [token] = useState(() => takeTokenFromUrl());
  const [tab, setTab] = useState<Tab>('backup');
  const api = useMemo(() => (token ? new Api(token) : null), [token]);
  const runner = useMemo(() => (engine.state === 'ready' && api ? newRunner(api, engine) : null), [api, engine]);
  useSchedule(runner);

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

  return (
    <main>
      <header>
        <h1>Ditto</h1>
        <span className="tagline">Deduplicating backup, in your browser</span>
        <nav>
          <button
            type="button"
            data-testid="tab-backup"
            className={tab === 'backup' ? 'active' : ''}
            onClick={() => setTab('backup')}
          >
            Back up
          </button>
          <button
            type="button"
            data-testid="tab-sources"
            className={tab === 'sources' ? 'active' : ''}
            onClick={() => setTab('sources')}
          >
            Sources
          </button>
          <button
            type="button"
            data-testid="tab-versions"
            className={tab === 'versions' ? 'active' : ''}
            onClick={() => setTab('versions')}
          >
            Versions
          </button>
          <button
            type="button"
            data-testid="tab-dashboard"
            className={tab === 'dashboard' ? 'active' : ''}
            onClick={() => setTab('dashboard')}
          >
            Dashboard
          </button>
          <button
            type="button"
            data-testid="tab-search"
            className={tab === 'search' ? 'active' : ''}
            onClick={() => setTab('search')}
          >
            Search
          </button>
          <button
            type="button"
            data-testid="tab-fingerprints"
            className={tab === 'fingerprints' ? 'active' : ''}
            onClick={() => setTab('fingerprints')}
          >
            Fingerprints
          </button>
        </nav>
      </header>
      {!token && (
        <p className="warn" data-testid="no-token">
          No access token: open the link that `npm start` printed.
        </p>
      )}
      {api && <TokenBadge api={api} />}
      {engine.state === 'loading' && <p>Loading the engine…</p>}
      {engine.state === 'failed' && (
        <p className="error" data-testid="engine-error">
          {engine.message}
        </p>
      )}
      {engine.state === 'ready' && (
        <>
          <p className="muted" data-testid="engine-ready">
            Engine ready: {engine.pool.size} workers, WebAssembly SIMD.
            {engine.indexError && ` Client index unavailable (${engine.indexError}); the server answers every lookup.`}
          </p>
          {tab === 'backup' && api && runner && <BackupPanel api={api} jobs={engine.jobs} runner={runner} />}
          {tab === 'sources' && api && runner && <SourcesPanel api={api} runner={runner} />}
          {tab === 'fingerprints' && <FileHashes pool={engine.pool} />}
          {tab === 'versions' && api && <VersionsPanel api={api} />}
          {tab === 'dashboard' && api && <Dashboard api={api} />}
          {tab === 'search' && api && <SearchPanel api={api} />}
        </>
      )}
    </main>
  );
}
