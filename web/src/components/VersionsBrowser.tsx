import { useEffect, useMemo, useState } from 'react';
import type { Api, Manifest, VersionInfo } from '../api/client';
import { holdLocations } from '../restore/locations';
import { selectItems, type RestoreItem } from '../restore/restore';
import { sanitizeEntryName } from '../restore/sanitize';
import { FileHistory } from './FileHistory';
import { useFocusOnOpen } from './FileChange';
import { FilePreview } from './FilePreview';
import { bytes } from './format';
import { Button } from '../ui/Button';
import { baseName, fileItem, fileRequest, type RestoreRequest } from './VersionsRestore';

interface Node {
  name: string;
  path: string;
  kind: 'file' | 'dir' | 'symlink';
  size: number;
  files: number;
  children: Map<string, Node>;
}

/** The folder tree of a manifest; parents missing from the manifest are made up. */
export function buildTree(manifest: Manifest): Node {
  const root: Node = { name: '', path: '', kind: 'dir', size: 0, files: 0, children: new Map() };
  for (const e of manifest.entries) {
    const segs = e.path.split('/');
    let node = root;
    const chain: Node[] = [root];
    segs.forEach((seg, i) => {
      const path = segs.slice(0, i + 1).join('/');
      let child = node.children.get(seg);
      if (!child) {
        child = { name: seg, path, kind: 'dir', size: 0, files: 0, children: new Map() };
        node.children.set(seg, child);
      }
      if (i === segs.length - 1) child.kind = e.kind;
      node = child;
      chain.push(child);
    });
    if (e.kind === 'file') for (const n of chain) ((n.size += e.size), n.files++);
  }
  return root;
}

function sorted(n: Node): Node[] {
  return [...n.children.values()].sort((a, b) =>
    a.kind === 'dir' && b.kind !== 'dir' ? -1 : b.kind === 'dir' && a.kind !== 'dir' ? 1 : a.name.localeCompare(b.name),
  );
}

interface Props {
  api: Api;
  version: VersionInfo;
  busy: boolean;
  onRestore: (r: RestoreRequest) => void;
  onClose: () => void;
}

export function VersionsBrowser({ api, version, busy, onRestore, onClose }: Props) {
  const [manifest, setManifest] = useState<Manifest | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [open, setOpen] = useState<Set<string>>(new Set(['']));
  const [preview, setPreview] = useState<RestoreItem | null>(null);
  const [history, setHistory] = useState<string | null>(null);
  // Browse on a row far above the tree brings the tree into view.
  const heading = useFocusOnOpen<HTMLHeadingElement>();

  // A version open here is likely restored from next: its chunk locations are ready by the
  // first click (the restore workers are started by the list this browser opens from).
  useEffect(() => {
    return holdLocations(api, version.id);
  }, [api, version.id]);

  /** Counts reads of the manifest ("Try again" asks anew); only the latest one's answer is shown. */
  const [reads, setReads] = useState(0);
  useEffect(() => {
    let current = true;
    setManifest(null);
    setError(null);
    api.version(version.id).then(
      (v) => current && setManifest(v.manifest),
      (e: unknown) => current && setError(e instanceof Error ? e.message : String(e)),
    );
    return () => {
      current = false;
    };
  }, [api, version.id, reads]);

  const tree = useMemo(() => (manifest ? buildTree(manifest) : null), [manifest]);
  const stamp = new Date(version.time).toISOString().slice(0, 19).replace(/[:T]/g, '-');
  const zipName = (folder: string) =>
    `${sanitizeEntryName(version.source)?.replace(/\//g, '_') ?? 'ditto'}-v${version.id}-${stamp}${folder ? '-' + baseName(folder) : ''}.zip`;

  const restoreFolder = (folder: string) => {
    if (!manifest) return;
    const selection = selectItems(manifest, folder);
    onRestore({
      label: `${folder || 'Version ' + version.id} as zip`,
      filename: zipName(folder),
      items: selection,
      expectedBytes: selection.items.reduce((n, i) => n + (i.kind === 'file' ? i.size : 0), 0),
      format: 'zip',
      version: version.id,
    });
  };
  const restoreFile = (path: string) => {
    if (!manifest) return;
    const e = manifest.entries.find((x) => x.path === path && x.kind === 'file');
    if (e) onRestore(fileRequest(version.id, e));
  };

  const render = (n: Node, depth: number): React.ReactNode =>
    sorted(n).map((c) => (
      <li key={c.path} data-testid="tree-node" data-path={c.path} data-kind={c.kind}>
        <span className="tree-row" style={{ paddingLeft: `${depth}rem` }}>
          {c.kind === 'dir' ? (
            <button
              type="button"
              className="link"
              data-testid="tree-toggle"
              onClick={() =>
                setOpen((o) => {
                  const s = new Set(o);
                  if (s.has(c.path)) s.delete(c.path);
                  else s.add(c.path);
                  return s;
                })
              }
            >
              {open.has(c.path) ? '▾' : '▸'} {c.name}/
            </button>
          ) : (
            <span>{c.kind === 'symlink' ? `${c.name} → (link)` : c.name}</span>
          )}
          <span className="num" data-testid="tree-size" data-bytes={c.size}>
            {c.kind === 'dir' ? `${c.files} files, ${bytes(c.size)}` : c.kind === 'file' ? bytes(c.size) : ''}
          </span>
          {c.kind === 'dir' && (
            <button
              type="button"
              data-testid="download-folder"
              data-path={c.path}
              disabled={busy}
              onClick={() => restoreFolder(c.path)}
            >
              Zip
            </button>
          )}
          {c.kind === 'file' && (
            <button
              type="button"
              data-testid="download-file"
              data-path={c.path}
              disabled={busy}
              onClick={() => restoreFile(c.path)}
            >
              Download
            </button>
          )}
          {c.kind === 'file' && (
            <button
              type="button"
              data-testid="preview-file"
              data-path={c.path}
              onClick={() => {
                const e = manifest?.entries.find((x) => x.path === c.path && x.kind === 'file');
                if (e) setPreview(fileItem(e));
              }}
            >
              Preview
            </button>
          )}
          {c.kind === 'file' && (
            <button
              type="button"
              data-testid="history-file"
              data-path={c.path}
              aria-label={`History of ${c.path}`}
              onClick={() => setHistory(c.path)}
            >
              History
            </button>
          )}
        </span>
        {c.kind === 'dir' && open.has(c.path) && <ul className="tree">{render(c, depth + 1)}</ul>}
      </li>
    ));

  return (
    <section className="browser" data-testid="version-browser" data-version={version.id}>
      <h3 ref={heading} tabIndex={-1}>
        {version.source} · version {version.id} · {new Date(version.time).toLocaleString()}{' '}
        <button type="button" onClick={onClose}>
          Close
        </button>
      </h3>
      {error && (
        <p className="error" role="alert" data-testid="version-browser-error">
          Reading version {version.id} failed: {error} <Button onClick={() => setReads((n) => n + 1)}>Try again</Button>
        </p>
      )}
      {!manifest && !error && <p>Loading the version…</p>}
      {tree && (
        <>
          <p>
            {tree.files} files, {bytes(tree.size)}{' '}
            <button type="button" data-testid="download-version" disabled={busy} onClick={() => restoreFolder('')}>
              Download as zip
            </button>
          </p>
          {preview && (
            <FilePreview
              key={preview.path}
              api={api}
              version={version.id}
              item={preview}
              onClose={() => setPreview(null)}
            />
          )}
          {history && (
            <FileHistory
              key={history}
              api={api}
              source={version.source}
              path={history}
              busy={busy}
              onRestore={onRestore}
              onClose={() => setHistory(null)}
            />
          )}
          <ul className="tree">{render(tree, 0)}</ul>
        </>
      )}
    </section>
  );
}
