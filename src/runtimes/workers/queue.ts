// Cloudflare Queues behind the kernel's JobQueue: the Worker produces to its queue binding
// and consumes the same queue in its `queue` handler, which calls gateway.runJob.
import type { Gateway } from '../../kernel/gateway.ts';
import { RetryJob, type JobMessage, type JobQueue } from '../../kernel/jobs.ts';
import type { MessageBatch, Queue } from './types.ts';

/** Queues accept delays up to 12 hours. */
const MAX_DELAY_SECONDS = 43_200;

export class CloudflareJobQueue implements JobQueue {
  readonly #queue: Queue<JobMessage>;

  constructor(queue: Queue<JobMessage>) {
    this.#queue = queue;
  }

  async enqueue(msg: JobMessage, opts?: { delayMs?: number }): Promise<void> {
    const delaySeconds = opts?.delayMs ? Math.min(MAX_DELAY_SECONDS, Math.ceil(opts.delayMs / 1000)) : undefined;
    await this.#queue.send({ service: msg.service, type: msg.type, id: msg.id }, delaySeconds ? { delaySeconds } : undefined);
  }
}

function isJobMessage(b: unknown): b is JobMessage {
  const m = b as JobMessage;
  return !!m && typeof m.service === 'string' && typeof m.type === 'string' && typeof m.id === 'string';
}

/**
 * Runs a batch. A job that ran is acked. A job asking to run again later (RetryJob: a video
 * still rendering) is sent again with its delay and acked, so polling never uses up the
 * queue's retries. A job that threw is retried with back-off, up to the consumer's
 * max_retries.
 */
export async function consumeBatch(gateway: Gateway, batch: MessageBatch, queue?: Queue<JobMessage>): Promise<void> {
  const log = gateway.context.log;
  await Promise.all(
    batch.messages.map(async (m) => {
      if (!isJobMessage(m.body)) {
        log('warn', 'malformed job message dropped', { queue: batch.queue, message_id: m.id });
        m.ack();
        return;
      }
      try {
        await gateway.runJob(m.body);
        m.ack();
      } catch (e) {
        if (e instanceof RetryJob && queue) {
          try {
            await new CloudflareJobQueue(queue).enqueue(m.body, { delayMs: e.delayMs });
            m.ack();
            return;
          } catch (sendError) {
            log('warn', 'job could not be re-sent; retrying the message', { error: String(sendError) });
          }
        }
        const delayMs = e instanceof RetryJob ? e.delayMs : Math.min(60_000, 1000 * 2 ** Math.min(m.attempts, 6));
        log(e instanceof RetryJob ? 'info' : 'error', 'job retried', {
          service: m.body.service,
          type: m.body.type,
          attempts: m.attempts,
          error: String((e as Error)?.message ?? e),
        });
        m.retry({ delaySeconds: Math.min(MAX_DELAY_SECONDS, Math.ceil(delayMs / 1000)) });
      }
    }),
  );
}
