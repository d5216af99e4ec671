import { useState } from 'react';
import type { Api } from '../api/client';
import { bytes } from './format';

/** The answer of `POST /repos/{repo}/verify` (docs/API.md). */
interface VerifyResult {
  ok: boolean;
  chunks: number;
  bytes: number;
  damaged_chunks: string[];
  quarantined: number;
  damaged_versions: { id: number; damaged_chunks: number }[];
}

type State = { running: true } | { running: false; result?: VerifyResult; error?: string };

/**
 * Asks the server to read back every stored chunk and check it against its fingerprint. A
 * damaged chunk is quarantined there: the next backup of the same files uploads it again,
 * which heals every version that uses it.
 */
export function VerifyButton({ api, onDone }: { api: Api; onDone?: () => void }) {
  const [state, setState] = useState<State>({ running: false });
  const run = async () => {
    setState({ running: true });
    try {
      const result = await api.json<VerifyResult>(`/repos/${encodeURIComponent(api.repo)}/verify`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: '{}',
      });
      setState({ running: false, result });
    } catch (e) {
      setState({ running: false, error: e instanceof Error ? e.message : String(e) });
    }
    onDone?.();
  };
  const r = !state.running ? state.result : undefined;
  return (
    <div className="verify" data-testid="verify">
      <button type="button" data-testid="verify-run" disabled={state.running} onClick={run}>
        {state.running ? 'Verifying…' : 'Verify'}
      </button>{' '}
      {!state.running && state.error && (
        <span className="error" data-testid="verify-error">
          {state.error}
        </span>
      )}
      {r && r.ok && (
        <span data-testid="verify-ok">
          All {r.chunks} stored chunks ({bytes(r.bytes)}) read back intact.
        </span>
      )}
      {r && !r.ok && (
        <span
          className="error"
          data-testid="verify-damaged"
          data-versions={r.damaged_versions.map((v) => v.id).join(',')}
        >
          {r.quarantined} damaged chunk{r.quarantined === 1 ? '' : 's'} set aside
          {r.damaged_versions.length > 0 &&
            `; version${r.damaged_versions.length === 1 ? '' : 's'} ${r.damaged_versions
              .map((v) => v.id)
              .join(', ')} cannot be restored whole`}
          . Back up the same files again to heal them.
        </span>
      )}
    </div>
  );
}

/**
 * Marks a version the server knows is damaged: `damaged_chunks` of its chunks are not stored
 * (found damaged, or lost), so it cannot be restored whole until they are uploaded again.
 */
export function DamagedBadge({ version }: { version: object }) {
  const n = 'damaged_chunks' in version && typeof version.damaged_chunks === 'number' ? version.damaged_chunks : 0;
  if (n === 0) return null;
  return (
    <>
      {' '}
      <span
        className="warn"
        data-testid="version-damaged"
        data-chunks={n}
        title="Some of this version's chunks are damaged or lost on the server. Back up the same files again to heal it."
      >
        damaged: {n} chunk{n === 1 ? '' : 's'} missing
      </span>
    </>
  );
}
