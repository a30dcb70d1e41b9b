// Stored media (generated images, video, audio) and request-log bodies: the local directory on
// Node, R2 on the edge.
export interface StoredObject {
  body: ReadableStream<Uint8Array> | Uint8Array;
  contentType: string;
  size?: number;
}

export interface BlobStore {
  put(key: string, data: Uint8Array, contentType: string): Promise<void>;
  get(key: string): Promise<StoredObject | null>;
  /** Deletes objects (absent ones are no error). */
  delete(keys: string[]): Promise<void>;
  /** Deletes every object under a folder (`prefix` ends with '/'); how many there were. */
  deleteUnder(prefix: string): Promise<number>;
  /** A public URL for the object when the store has one (R2 public bucket), else null. */
  publicUrl(key: string): string | null;
}
