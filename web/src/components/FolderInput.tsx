import { useRef, useState, type DragEvent } from 'react';
import { fromDirectoryHandle, fromEntries, fromFileList, type PickedFolder } from '../input/folder';

/** A drop zone plus a "Choose folder" button: the three ways in, one PickedFolder out. */
export function FolderInput({ onPicked, disabled }: { onPicked: (p: PickedFolder) => void; disabled?: boolean }) {
  const input = useRef<HTMLInputElement>(null);
  const [over, setOver] = useState(false);
  const [error, setError] = useState<string | null>(null);

  const onDrop = (e: DragEvent) => {
    e.preventDefault();
    setOver(false);
    if (disabled) return;
    // Entries (and handles) must be taken synchronously: they are gone after the first await.
    const items = Array.from(e.dataTransfer.items);
    const entries = items.map((item) => item.webkitGetAsEntry());
    // Where the browser gives a handle for one dropped folder, it is kept for "Back up again".
    const handle =
      items.length === 1
        ? (items[0] as DataTransferItem & { getAsFileSystemHandle?: () => Promise<FileSystemHandle | null> })
            .getAsFileSystemHandle?.()
            .catch(() => null)
        : undefined;
    fromEntries(entries)
      .then(async (picked) => {
        const h = await handle;
        return h?.kind === 'directory' ? { ...picked, handle: h as FileSystemDirectoryHandle } : picked;
      })
      .then(onPicked, (err: unknown) => setError(String(err)));
  };

  const choose = async () => {
    setError(null);
    if (window.showDirectoryPicker) {
      try {
        onPicked(await fromDirectoryHandle(await window.showDirectoryPicker({ mode: 'read' })));
      } catch (err) {
        // AbortError is both "cancelled" and "too sensitive a folder"; neither is a failure.
        if (!(err instanceof DOMException && err.name === 'AbortError')) setError(String(err));
      }
      return;
    }
    input.current?.click();
  };

  return (
    <div
      className={`dropzone${over ? ' over' : ''}`}
      data-testid="dropzone"
      onDragOver={(e) => {
        e.preventDefault();
        setOver(true);
      }}
      onDragLeave={() => setOver(false)}
      onDrop={onDrop}
    >
      <p>Drop a folder here, or</p>
      <button type="button" onClick={choose} disabled={disabled}>
        Choose folder…
      </button>
      <input
        ref={input}
        type="file"
        data-testid="folder-input"
        hidden
        // @ts-expect-error non-standard attribute, supported by every current browser
        webkitdirectory=""
        multiple
        onChange={(e) => {
          // An empty folder gives an empty list: passed on, so that the page can say so.
          if (e.target.files) onPicked(fromFileList(e.target.files));
          e.target.value = '';
        }}
      />
      {error && <p className="error">{error}</p>}
    </div>
  );
}
