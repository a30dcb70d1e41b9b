// Generated media on Node: files under a local directory, served by the gateway at
// /v1/ai/files/<key> (keys are unguessable). The content type is kept beside each file.
import { mkdir, readdir, readFile, rename, rm, rmdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import type { BlobStore, StoredObject } from '../../kernel/storage.ts';

export class LocalFileStore implements BlobStore {
  readonly root: string;
  constructor(root: string) {
    this.root = resolve(root);
  }

  #path(key: string): string {
    const p = resolve(join(this.root, key));
    if (!p.startsWith(this.root + sep)) throw new Error('invalid storage key');
    return p;
  }

  async put(key: string, data: Uint8Array, contentType: string): Promise<void> {
    const p = this.#path(key);
    await mkdir(dirname(p), { recursive: true });
    await writeFile(`${p}.type`, contentType);
    await writeFile(`${p}.tmp`, data);
    await rename(`${p}.tmp`, p); // readers never see half a file
  }

  async get(key: string): Promise<StoredObject | null> {
    const p = this.#path(key);
    try {
      const [body, type] = await Promise.all([readFile(p), readFile(`${p}.type`, 'utf8').catch(() => 'application/octet-stream')]);
      return { body: new Uint8Array(body), contentType: type, size: body.byteLength };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw e;
    }
  }

  async delete(keys: string[]): Promise<void> {
    const dirs = new Set<string>();
    for (const key of keys) {
      const p = this.#path(key);
      await rm(p, { force: true });
      await rm(`${p}.type`, { force: true });
      dirs.add(dirname(p));
    }
    // a directory left empty goes too (request logs keep one per day); a full one stays
    for (const d of dirs) if (d !== this.root) await rmdir(d).catch(() => {});
  }

  async deleteUnder(prefix: string): Promise<number> {
    if (!prefix.endsWith('/')) throw new Error('a folder prefix ends with /');
    const dir = this.#path(prefix);
    let files: string[];
    try {
      files = await readdir(dir, { recursive: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return 0;
      throw e;
    }
    await rm(dir, { recursive: true, force: true });
    return files.filter((f) => !f.endsWith('.type') && !f.endsWith('.tmp')).length; // an object is its file; .type is its content type
  }

  publicUrl(): string | null {
    return null;
  }
}
