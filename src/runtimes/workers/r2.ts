// R2 behind the kernel's BlobStore (only when city.json declares storage).
import type { BlobStore, StoredObject } from '../../kernel/storage.ts';
import type { R2Bucket } from './types.ts';

export class R2BlobStore implements BlobStore {
  readonly #bucket: R2Bucket;
  readonly #publicPrefix: string | null;

  /** publicUrlPrefix: the bucket's public URL (custom domain or r2.dev), if it has one. */
  constructor(bucket: R2Bucket, publicUrlPrefix?: string | null) {
    this.#bucket = bucket;
    this.#publicPrefix = publicUrlPrefix ? publicUrlPrefix.replace(/\/+$/, '') : null;
  }

  async put(key: string, data: Uint8Array, contentType: string): Promise<void> {
    await this.#bucket.put(key, data, { httpMetadata: { contentType } });
  }

  async get(key: string): Promise<StoredObject | null> {
    const obj = await this.#bucket.get(key);
    if (!obj) return null;
    return { body: obj.body, contentType: obj.httpMetadata?.contentType ?? 'application/octet-stream', size: obj.size };
  }

  async delete(keys: string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 1000) await this.#bucket.delete(keys.slice(i, i + 1000)); // R2: 1000 keys per call
  }

  async deleteUnder(prefix: string): Promise<number> {
    if (!prefix.endsWith('/')) throw new Error('a folder prefix ends with /');
    let n = 0;
    for (let cursor: string | undefined; ; ) {
      const page = await this.#bucket.list({ prefix, cursor, limit: 1000 });
      const keys = page.objects.map((o) => o.key);
      if (keys.length) await this.#bucket.delete(keys);
      n += keys.length;
      if (!page.truncated) return n;
      cursor = page.cursor;
    }
  }

  publicUrl(key: string): string | null {
    return this.#publicPrefix ? `${this.#publicPrefix}/${key.split('/').map(encodeURIComponent).join('/')}` : null;
  }
}
