/**
 * Where a restore goes. With the File System Access API (Chromium) the user picks a file and
 * the stream is written straight to it with backpressure: no size limit, flat memory. Without
 * it, the stream is collected into a Blob and handed to an `<a download>`; that holds the whole
 * archive (Chrome keeps blobs in memory up to ~2 GB before paging to disk, Firefox keeps them
 * in memory, Safari may peak at several times the size), so it is gated at BLOB_LIMIT.
 */

export const BLOB_LIMIT = 512 * 1024 * 1024;

interface SaveFilePickerOptions {
  suggestedName?: string;
  types?: { description?: string; accept: Record<string, string[]> }[];
}
type SavePicker = (opts?: SaveFilePickerOptions) => Promise<FileSystemFileHandle>;

export type Sink =
  { kind: 'picker'; name: string; writable: Promise<FileSystemWritableFileStream> } | { kind: 'blob'; name: string };

export class SinkError extends Error {}

/**
 * Chooses the sink. Call it first in a click handler, before any `await`: the picker needs
 * the user's gesture. Returns null when the user dismissed the picker.
 */
export async function chooseSink(name: string, expectedBytes: number, zip: boolean): Promise<Sink | null> {
  const picker = (window as unknown as { showSaveFilePicker?: SavePicker }).showSaveFilePicker;
  if (typeof picker === 'function') {
    try {
      const handle = await picker({
        suggestedName: name,
        types: zip ? [{ description: 'Zip archive', accept: { 'application/zip': ['.zip'] } }] : undefined,
      });
      return { kind: 'picker', name, writable: handle.createWritable() };
    } catch (e) {
      if (e instanceof DOMException && e.name === 'AbortError') return null;
      throw e;
    }
  }
  if (expectedBytes > BLOB_LIMIT)
    throw new SinkError(
      `This browser cannot stream a download to disk, and ${Math.round(expectedBytes / 1e6)} MB is too much to assemble in memory (limit ${BLOB_LIMIT / 1e6} MB). Use a Chromium-based browser, or restore a folder at a time.`,
    );
  return { kind: 'blob', name };
}

/** Pours the stream into the sink; resolves when the file is complete. */
export async function writeToSink(sink: Sink, stream: ReadableStream<Uint8Array>, mime: string): Promise<void> {
  if (sink.kind === 'picker') {
    // pipeTo closes the file on success (Chrome then swaps the .crswap in) and aborts it on error.
    await stream.pipeTo(await sink.writable);
    return;
  }
  // Each block becomes a Blob as it comes (its bytes move to the browser's blob storage and
  // the page's copy can go); the archive is the Blob of those, which copies nothing.
  const parts: Blob[] = [];
  const reader = stream.getReader();
  for (;;) {
    const r = await reader.read();
    if (r.done) break;
    parts.push(new Blob([r.value as Uint8Array<ArrayBuffer>]));
  }
  const blob = new Blob(parts, { type: mime });
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = sink.name;
  a.style.display = 'none';
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
