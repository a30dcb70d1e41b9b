// The slice of the Workers runtime this runtime uses, typed structurally so the shared
// TypeScript setup needs no ambient Workers typings (they clash with the DOM lib).
export type { D1Database } from '../../db/dialects/d1.ts';

export interface ExecutionContext {
  waitUntil(promise: Promise<unknown>): void;
  passThroughOnException?(): void;
}

export interface Queue<T = unknown> {
  send(body: T, options?: { delaySeconds?: number; contentType?: string }): Promise<void>;
}

export interface QueueMessage<T = unknown> {
  readonly id: string;
  readonly body: T;
  readonly attempts: number;
  ack(): void;
  retry(options?: { delaySeconds?: number }): void;
}

export interface MessageBatch<T = unknown> {
  readonly queue: string;
  readonly messages: readonly QueueMessage<T>[];
}

export interface R2Object {
  body: ReadableStream<Uint8Array>;
  size: number;
  httpMetadata?: { contentType?: string };
}

export interface R2Bucket {
  put(key: string, value: Uint8Array | ArrayBuffer | string, options?: { httpMetadata?: { contentType?: string } }): Promise<unknown>;
  get(key: string): Promise<R2Object | null>;
  delete(keys: string | string[]): Promise<void>;
  list(options: { prefix?: string; cursor?: string; limit?: number }): Promise<{ objects: { key: string }[]; truncated: boolean; cursor?: string }>;
}

/** The Worker's `env`: bindings (objects) and vars (strings). */
export type WorkerEnv = Record<string, unknown>;
