/// <reference lib="webworker" />
/**
 * The assembler worker: runs a restore's assembly (assemble.ts) off the page's thread. The
 * page signals it each request's verified chunks (transferred) and is told when it moves to
 * the next window; the output goes into the job's block port or folder.
 */
import { expose, type Context } from '../worker/bridge';
import { AssemblyError, Counter, Windows, assembleFile, assembleFolder, assembleZip } from './assemble';
import { FolderTarget } from './folder';
import { PortWriter } from './port';
import type { AssembleApi, AssembleEvent, AssembleJob, AssembleSignal } from './protocol';

async function assemble(job: AssembleJob, ctx: Context<AssembleEvent, AssembleSignal>) {
  const windows = new Windows(job.plan, (window) => ctx.emit({ type: 'window', window }));
  const counter = new Counter((bytes, files) => ctx.emit({ type: 'progress', bytes, files }));
  const port = job.port ? new PortWriter(job.port, job.consumer) : null;
  const stop = (reason: Error) => {
    windows.stop(reason);
    // A write waiting for the consumer to take a block stops too.
    port?.abort(reason.message);
  };
  ctx.onSignal((s) => {
    if (s.type === 'stop') stop(new AssemblyError(s.message));
    else {
      try {
        windows.add(s);
      } catch (e) {
        stop(e instanceof Error ? e : new AssemblyError(String(e)));
      }
    }
  });
  try {
    if (job.format === 'folder') {
      if (!job.folder) throw new AssemblyError('a restore into a folder needs the folder');
      await assembleFolder(job.items, job.plan, windows, new FolderTarget(job.folder), counter);
    } else {
      if (!port) throw new AssemblyError('a restore needs somewhere to write');
      if (job.format === 'zip') await assembleZip(job.items, job.plan, windows, port, counter);
      else await assembleFile(job.plan, windows, port, counter);
    }
  } catch (e) {
    // The output fails, so a download or file it feeds is discarded, not left truncated.
    port?.abort(e instanceof Error ? e.message : String(e));
    throw e;
  }
  counter.tick(true);
  return { bytes: counter.bytes, files: counter.files };
}

expose<AssembleApi>({ assemble }, () => {});
