import { useState } from 'react';
import type { PickedFolder } from '../input/folder';
import type { CorePool } from '../worker/pool';
import { FolderInput } from './FolderInput';

interface Row {
  path: string;
  size: number;
  sha1?: string;
  error?: string;
}

/** Fingerprints every file of a folder in the worker pool: the engine's smoke test. */
export function FileHashes({ pool }: { pool: CorePool }) {
  const [rows, setRows] = useState<Row[]>([]);
  const [busy, setBusy] = useState(false);
  const [skipped, setSkipped] = useState<PickedFolder['skipped']>([]);

  const run = async (picked: PickedFolder) => {
    setBusy(true);
    setSkipped(picked.skipped);
    const next: Row[] = picked.files.map((f) => ({ path: f.path, size: f.file.size }));
    setRows([...next]);
    await Promise.all(
      picked.files.map(async (f, i) => {
        try {
          next[i] = { ...next[i], sha1: await pool.hashFile(f.file) };
        } catch (e) {
          next[i] = { ...next[i], error: e instanceof Error ? e.message : String(e) };
        }
        setRows([...next]);
      }),
    );
    setBusy(false);
  };

  const done = rows.filter((r) => r.sha1 || r.error).length;
  return (
    <section>
      <FolderInput onPicked={run} disabled={busy} />
      {rows.length > 0 && (
        <p data-testid="hash-status">
          {busy ? 'Hashing' : 'Done'}: {done} of {rows.length} files
        </p>
      )}
      {skipped.length > 0 && (
        <ul className="error">
          {skipped.map((s) => (
            <li key={s.path}>
              Skipped {s.path}: {s.reason}
            </li>
          ))}
        </ul>
      )}
      <table className="files" data-testid="hash-table">
        <tbody>
          {rows.map((r) => (
            <tr key={r.path} data-path={r.path}>
              <td>{r.path}</td>
              <td className="num">{r.size}</td>
              <td className="sha1">{r.sha1 ?? (r.error ? `error: ${r.error}` : '…')}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
