// One AI SDK attempt behind a translated client API (the Messages and Responses APIs on
// upstreams that do not speak them), made inside routing (routing/route.ts: the deadline,
// retries and fallbacks are its business): the upstream's errors thrown before the answer,
// and the AiCall finished exactly once with the usage the upstream reported. The API modules
// only write their own format.
import type { LanguageModelUsage, ModelMessage, ToolSet } from 'ai';
import { GatewayError } from '../../../kernel/errors.ts';
import { streamingResponse } from '../../../kernel/http.ts';
import type { ActionContext } from '../../../kernel/service.ts';
import { BYTES_PER_TOKEN, byteLength, estimateFromText, type AiCall, type Usage } from '../meter.ts';
import type { GatewayContext } from '../../../kernel/context.ts';
import type { NativeApi } from '../providers/types.ts';
import type { ModelDef } from '../catalog/registry.ts';
import { candidatesOf, nativeUrlOf, type Target } from '../routing/route.ts';
import type { Upstream } from '../routing/upstreams.ts';
import { loadAi, type Ai } from './sdk.ts';
import { downloadFor } from './download.ts';
import { CLIENT_CLOSED, toGatewayError, type Deadline } from './errors.ts';
import { headParts, sdkUsage, touchedParts } from '../chat/translate.ts';
import { DROPPED_TOOLS_HEADER, droppedNote, withDroppedHeader } from './hosted-tools.ts';

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
  seed?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  /** Hosted tools the translation left out (hosted-tools.ts): named in a header and the usage record. */
  dropped?: string[];
}

export interface Used {
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  cache_write_tokens: number;
  cache_write_1h_tokens: number;
}

export const usedOf: (u: LanguageModelUsage | undefined) => Used = sdkUsage;

const reported = (u: LanguageModelUsage | undefined) => u?.inputTokens != null || u?.outputTokens != null;

/**
 * When the upstream reported no usage (a stream cut short, an upstream that omits it), the
 * call is charged meter.ts's documented estimate and its record says so: the input at ~4
 * UTF-8 bytes per token, one output token per relayed piece (text delta or tool call).
 */
const estimate = (inputBytes: number, pieces: number): Used & Usage => ({
  ...estimateFromText(inputBytes, 0),
  input_tokens: Math.ceil(inputBytes / BYTES_PER_TOKEN),
  output_tokens: pieces,
  cached_tokens: 0,
  cache_write_tokens: 0,
  cache_write_1h_tokens: 0,
});

const settings = async (call: AiCall, t: Target, { dropped: _, ...q }: SdkRequest, signal: AbortSignal) => ({
  model: await t.adapter.languageModel(t.call, t.upstreamModel),
  ...q,
  experimental_download: downloadFor(call, call.gw), // never the SDK's own download
  allowSystemInMessages: true,
  maxRetries: 0, // retries are citygate's business, not the SDK's
  abortSignal: signal,
});

/**
 * One generateText attempt: throws the upstream's failure (routing retries it), else returns
 * what answers the client — `json` of the result — and settles the call when it is made.
 */
export async function sdkGenerate(
  call: AiCall,
  q: SdkRequest,
  inputBytes: number,
  t: Target,
  d: Deadline,
  json: (res: Awaited<ReturnType<Ai['generateText']>>, used: Used) => unknown,
  /** How the answer is written (default: as JSON); `json` may then return a promise. */
  reply?: (body: unknown) => Response,
) {
  const { generateText } = await loadAi();
  const res = await generateText((await settings(call, t, q, d.signal)) as Parameters<Ai['generateText']>[0]);
  d.clear();
  const u = res.totalUsage ?? res.usage;
  const used: Used & Usage = reported(u) ? usedOf(u) : ({ ...estimate(inputBytes, 0), ...estimateFromText(inputBytes, byteLength(res.text)) } as Used & Usage);
  if (q.dropped?.length) call.note = droppedNote(q.dropped);
  return async () => {
    await call.finish('ok', used);
    return withDroppedHeader(reply ? reply(await json(res, used)) : Response.json(json(res, used)), q.dropped);
  };
}

/**
 * Which of a model's upstreams serve a client API call: those that speak the API natively
 * (forwarded), and — when the request translates onto the AI SDK — all the others. A request
 * that cannot be translated is the translation's 400 when no upstream speaks the API, else it
 * goes to those that do. Decided before any hold or upstream call.
 */
export async function servingPlan(gw: GatewayContext, model: ModelDef, api: NativeApi, translate: (ai: Ai) => SdkRequest) {
  const all = candidatesOf(gw, model);
  const native = all.filter((u) => nativeUrlOf(u, api) !== null);
  let q: SdkRequest | null = null;
  if (native.length < all.length) {
    const ai = await loadAi(); // only a call that may be translated needs the SDK
    try {
      q = translate(ai);
    } catch (e) {
      if (!native.length) throw e;
    }
  }
  return { q, anyNative: native.length > 0, serves: (u: Upstream) => q !== null || nativeUrlOf(u, api) !== null };
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
 * One streamText attempt as a client API's event stream. The upstream's first real part is
 * awaited inside the attempt, so a failing upstream is retried elsewhere, or gets its status
 * code (502, 504, 400), rather than a 200 stream that carries an error; after it nothing is
 * retried. The call is settled once: by the upstream's usage at the end, or as aborted /
 * failed with what was reported so far.
 */
export async function sdkStream(ctx: ActionContext<unknown>, call: AiCall, q: SdkRequest, inputBytes: number, w: StreamWriter, t: Target, d: Deadline): Promise<() => Response> {
  const { streamText } = await loadAi();
  const result = streamText((await settings(call, t, q, d.signal)) as Parameters<Ai['streamText']>[0]);
  const it = (result.fullStream as AsyncIterable<any>)[Symbol.asyncIterator]();
  const head = await headParts(it);
  d.stopTimer();
  if (q.dropped?.length) call.note = droppedNote(q.dropped);

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
  const parts = () => touchedParts(head, it, d);
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
            // the AI SDK ends an aborted stream quietly: our own deadline's end is an error
            if (p.type === 'abort' && d.expired) throw d.reason;
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
  const headers: Record<string, string> = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' };
  if (q.dropped?.length) headers[DROPPED_TOOLS_HEADER] = q.dropped.join(', ');
  return () => streamingResponse(body, { status: 200, headers });
}
