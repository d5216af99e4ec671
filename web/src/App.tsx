import { useEffect, useState } from 'react';
import { takeTokenFromUrl } from './api/token';
import { FileHashes } from './components/FileHashes';
import { compileCore } from './wasm/loader';
import { CorePool } from './worker/pool';

type Engine = { state: 'loading' } | { state: 'ready'; pool: CorePool } | { state: 'failed'; message: string };

export function App() {
  const [engine, setEngine] = useState<Engine>({ state: 'loading' });
  const [token] = useState(() => takeTokenFromUrl());

  useEffect(() => {
    let pool: CorePool | undefined;
    compileCore()
      .then((module) => CorePool.create(module))
      .then(
        (p) => {
          pool = p;
          setEngine({ state: 'ready', pool: p });
        },
        (e: unknown) => setEngine({ state: 'failed', message: e instanceof Error ? e.message : String(e) }),
      );
    return () => pool?.terminate();
  }, []);

  return (
    <main>
      <header>
        <h1>Ditto</h1>
        <span className="tagline">Deduplicating backup, in your browser</span>
        {!token && <span className="warn">No access token: open the link that `npm start` printed.</span>}
      </header>
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
          </p>
          <FileHashes pool={engine.pool} />
        </>
      )}
    </main>
  );
}
