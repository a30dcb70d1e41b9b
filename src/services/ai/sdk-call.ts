// One AI SDK call behind a translated client API (the Messages and Responses APIs on upstreams
// that do not speak them): the deadline, the upstream's errors as citygate's, and the
// AiCall finished exactly once with the usage the upstream reported. The API modules only
// write their own format.
import { generateText, streamText, type LanguageModelUsage, type ModelMessage, type ToolSet } from 'ai';
import { GatewayError } from '../../kernel/errors.ts';
import { streamingResponse } from '../../kernel/http.ts';
import type { ActionContext } from '../../kernel/service.ts';
import { BYTES_PER_TOKEN, byteLength, estimateFromText, type AiCall, type Usage } from './meter.ts';
import { upstreamTimeoutMs, type Resolved } from './resolve.ts';
import { CLIENT_CLOSED, deadline, toGatewayError } from './upstream-errors.ts';
import { headParts } from './chat/translate.ts';

export interface SdkRequest {
  messages: ModelMessage[];
  tools?: ToolSet;
  toolChoice?: any;
  output?: any;
  maxOutputTokens?: number;
  temperature?: number;
  topP?: number;
  topK?: number;
  stopSequences?: string[];
}

export interface Used {
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
}

export function usedOf(u: LanguageModelUsage | undefined): Used {
  return { input_tokens: u?.inputTokens ?? 0, output_tokens: u?.outputTokens ?? 0, cached_tokens: u?.inputTokenDetails?.cacheReadTokens ?? 0 };
}

const reported = (u: LanguageModelUsage | undefined) => u?.inputTokens != null || u?.outputTokens != null;

/**
 * When the upstream reported no usage (a stream cut short, an upstream that omits it), the
 * call is charged meter.ts's documented estimate and its record says so: the input at ~4
 * UTF-8 bytes per token, one output token per relayed piece (text delta or tool call).
 */
const estimate = (inputBytes: number, pieces: number): Used & Usage => ({ ...estimateFromText(inputBytes, 0), input_tokens: Math.ceil(inputBytes / BYTES_PER_TOKEN), output_tokens: pieces, cached_tokens: 0 });

const settings = (r: Resolved, q: SdkRequest, signal: AbortSignal) => ({
  model: r.adapter.languageModel(r.call, r.model.upstream),
  ...q,
  allowSystemInMessages: true,
  maxRetries: 0, // retries are citygate's business, not the SDK's
  abortSignal: signal,
});

/** generateText with the call settled: its result, or a GatewayError thrown. */
export async function sdkGenerate(ctx: ActionContext<unknown>, r: Resolved, call: AiCall, q: SdkRequest, inputBytes: number) {
  const d = deadline(ctx.signal, upstreamTimeoutMs(ctx.gateway));
  const t0 = performance.now();
  try {
    const res = await generateText(settings(r, q, d.signal) as Parameters<typeof generateText>[0]);
    const u = res.totalUsage ?? res.usage;
    const used: Used & Usage = reported(u) ? usedOf(u) : { ...estimate(inputBytes, 0), ...estimateFromText(inputBytes, byteLength(res.text)) } as Used & Usage;
    await call.finish('ok', used);
    return { res, used };
  } catch (e) {
    const ge = toGatewayError(e, d);
    await call.finish(ge.code === CLIENT_CLOSED ? 'aborted' : 'error', {}, ge.code);
    throw ge;
  } finally {
    ctx.timing.upstreamMs += performance.now() - t0;
    d.clear();
  }
}

/** How a client API writes a translated stream: SSE text for each moment. */
export interface StreamWriter {
  start(): string;
  /** One AI SDK stream part (text-delta, tool-call, …). */
  part(p: any): string;
  end(used: Used, finishReason: string): string;
  error(e: GatewayError): string;
}

const enc = new TextEncoder();

/**
 * streamText as a client API's event stream. The upstream's first real part is awaited before
 * answering, so a failing upstream gets its status code (502, 504, 400) rather than a 200
 * stream that carries an error. The call is settled once: by the upstream's usage at the end,
 * or as aborted / failed with what was reported so far.
 */
export async function sdkStream(ctx: ActionContext<unknown>, r: Resolved, call: AiCall, q: SdkRequest, inputBytes: number, w: StreamWriter): Promise<Response> {
  const d = deadline(ctx.signal, upstreamTimeoutMs(ctx.gateway));
  const t0 = performance.now();
  const result = streamText(settings(r, q, d.signal) as Parameters<typeof streamText>[0]);
  const it = (result.fullStream as AsyncIterable<any>)[Symbol.asyncIterator]();
  let head: any[];
  try {
    head = await headParts(it);
  } catch (e) {
    ctx.timing.upstreamMs += performance.now() - t0;
    d.clear();
    const ge = toGatewayError(e, d);
    await call.finish(ge.code === CLIENT_CLOSED ? 'aborted' : 'error', {}, ge.code);
    throw ge;
  }
  ctx.timing.upstreamMs += performance.now() - t0;
  d.stopTimer();

  let used: Used | null = null;
  let pieces = 0;
  let finishReason = 'stop';
  let settled = false;
  const settle = (status: 'ok' | 'error' | 'aborted', code?: string) => {
    if (settled) return;
    settled = true;
    d.clear();
    ctx.gateway.waitUntil(call.finish(status, used ?? estimate(inputBytes, pieces), code));
  };
  async function* parts() {
    yield* head;
    for (;;) {
      const n = await it.next();
      if (n.done) return;
      yield n.value;
    }
  }
  const gen = parts();
  let started = false;
  let done = false;
  const body = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (!started) {
          started = true;
          controller.enqueue(enc.encode(w.start()));
          return;
        }
        try {
          for (;;) {
            const n = await gen.next();
            if (n.done) {
              if (!done) controller.enqueue(enc.encode(w.end(used ?? estimate(inputBytes, pieces), finishReason)));
              controller.close();
              settle(ctx.signal.aborted ? 'aborted' : 'ok');
              return;
            }
            const p = n.value;
            if (p.type === 'error') throw p.error;
            if (p.type === 'finish') {
              if (reported(p.totalUsage)) used = usedOf(p.totalUsage);
              finishReason = p.finishReason;
              continue;
            }
            if (p.type === 'text-delta' || p.type === 'tool-call') pieces++;
            const out = w.part(p);
            if (out) {
              controller.enqueue(enc.encode(out));
              return;
            }
          }
        } catch (e) {
          let ge: GatewayError;
          try {
            ge = toGatewayError(e, d);
          } catch {
            ge = new GatewayError(502, 'upstream_stream_failed', 'The upstream stream broke off.');
          }
          done = true;
          try {
            controller.enqueue(enc.encode(w.error(ge)));
            controller.close();
          } catch {
            /* the client is gone */
          }
          settle(ge.code === CLIENT_CLOSED ? 'aborted' : 'error', ge.code);
        }
      },
      async cancel() {
        d.abort();
        settle('aborted', CLIENT_CLOSED);
        await it.return?.();
      },
    },
    { highWaterMark: 0 },
  );
  return streamingResponse(body, { status: 200, headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' } });
}
