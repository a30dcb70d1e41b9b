// Background jobs (image and video generation, …). A service declares handlers by job type;
// the runtime supplies the queue: a durable in-process runner on Node, Cloudflare Queues on
// the edge. The job's own state lives in the service's tables; a message only names it.
export interface JobMessage {
  service: string;
  type: string;
  id: string;
}

export interface JobQueue {
  enqueue(msg: JobMessage, opts?: { delayMs?: number }): Promise<void>;
}

/** Thrown by a handler to ask for another attempt later. */
export class RetryJob extends Error {
  readonly delayMs: number;
  constructor(message: string, delayMs = 1000) {
    super(message);
    this.delayMs = delayMs;
  }
}
