import { describe, expect, it } from 'vitest';
import { fromEntries, fromFileList, type EntryLike } from './folder';

/** A fake directory tree in the shape of the Entries API, with Chromium's 100-per-call batching. */
function fakeDir(fullPath: string, children: EntryLike[]): EntryLike {
  return {
    name: fullPath.split('/').pop()!,
    fullPath,
    isFile: false,
    isDirectory: true,
    createReader() {
      let pos = 0;
      return {
        readEntries(ok: (e: EntryLike[]) => void) {
          const batch = children.slice(pos, pos + 100);
          pos += batch.length;
          setTimeout(() => ok(batch), 0);
        },
      };
    },
  } as EntryLike;
}

function fakeFile(fullPath: string, content = 'x', fail = false): EntryLike {
  return {
    name: fullPath.split('/').pop()!,
    fullPath,
    isFile: true,
    isDirectory: false,
    file(ok: (f: File) => void, err: (e: unknown) => void) {
      if (fail) err(new DOMException('gone', 'NotFoundError'));
      else ok(new File([content], fullPath.split('/').pop()!));
    },
  } as EntryLike;
}

describe('fromEntries', () => {
  it('reads every batch of a large directory, keeps empty folders and reports failures', async () => {
    const many = Array.from({ length: 250 }, (_, i) => fakeFile(`/Root/big/f${i}.txt`));
    const root = fakeDir('/Root', [
      fakeDir('/Root/big', many),
      fakeDir('/Root/empty', []),
      fakeFile('/Root/a.txt', 'hello'),
      fakeFile('/Root/gone.txt', '', true),
    ]);
    const picked = await fromEntries([root, null]);
    expect(picked.root).toBe('Root');
    expect(picked.files.length).toBe(251);
    expect(picked.files.some((f) => f.path === 'Root/big/f249.txt')).toBe(true);
    expect(picked.dirs).toContain('Root/empty');
    expect(picked.skipped.map((s) => s.path)).toEqual(['(dropped item)', 'Root/gone.txt']);
    expect(picked.skipped[1].reason).toContain('NotFoundError');
  });

  it('gives items dropped together under one name their own names', async () => {
    const picked = await fromEntries([
      fakeDir('/src', [fakeFile('/src/a.txt', 'one')]),
      fakeDir('/src', [fakeFile('/src/a.txt', 'two')]),
      fakeFile('/a.txt', 'three'),
      fakeFile('/a.txt', 'four'),
      fakeFile('/A.TXT', 'five'),
    ]);
    expect(picked.files.map((f) => f.path)).toEqual(['src/a.txt', 'src (2)/a.txt', 'a.txt', 'a (2).txt', 'A.TXT']);
    expect(picked.dirs).toEqual(['src', 'src (2)']);
    expect(await picked.files[1].file.text()).toBe('two');
  });

  it('keeps a way to a fresh File of each dropped file', async () => {
    let content = 'first';
    const entry = {
      ...fakeFile('/R/a.txt'),
      file(ok: (f: File) => void) {
        ok(new File([content], 'a.txt'));
      },
    } as EntryLike;
    const picked = await fromEntries([fakeDir('/R', [entry])]);
    expect(await picked.files[0].file.text()).toBe('first');
    content = 'second, longer';
    const fresh = await picked.files[0].reopen!();
    expect(await fresh.text()).toBe('second, longer');
  });
});

describe('fromFileList', () => {
  it('uses webkitRelativePath and derives the directories', () => {
    const mk = (rel: string) => {
      const f = new File(['1'], rel.split('/').pop()!);
      Object.defineProperty(f, 'webkitRelativePath', { value: rel });
      return f;
    };
    const picked = fromFileList([mk('Top/x/y/z.bin'), mk('Top/a.txt')]);
    expect(picked.root).toBe('Top');
    // A File from an <input> cannot be had again: a file changed since is retried as is.
    expect(picked.files[0].reopen).toBeUndefined();
    expect(picked.files.map((f) => f.path)).toEqual(['Top/x/y/z.bin', 'Top/a.txt']);
    expect(picked.dirs).toEqual(['Top', 'Top/x', 'Top/x/y']);
  });
});
