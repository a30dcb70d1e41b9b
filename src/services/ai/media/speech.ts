// POST /v1/ai/tts (text → audio bytes) and POST /v1/ai/asr (audio → text), through the AI SDK.
import { z } from 'zod';
import { badRequest, forbidden, GatewayError } from '../../../kernel/errors.ts';
import { boundCity } from '../../../kernel/identity.ts';
import { parseJsonBody, validate } from '../../../kernel/input.ts';
import type { ActionContext } from '../../../kernel/service.ts';
import { AiCall } from '../meter.ts';
import type { ModelDef } from '../catalog/registry.ts';
import { resolveModel } from '../catalog/resolve.ts';
import { routeCall, type Target } from '../routing/route.ts';
import { loadAi } from '../upstream/sdk.ts';
import { fetchUntrusted, UnreadableUrl } from '../../../kernel/outbound/policy.ts';
import { CLIENT_CLOSED } from '../upstream/errors.ts';

export const AUDIO_TYPES: Record<string, string> = {
  mp3: 'audio/mpeg',
  wav: 'audio/wav',
  opus: 'audio/ogg',
  aac: 'audio/aac',
  flac: 'audio/flac',
  pcm: 'audio/pcm',
};

export const ttsInput = z.object({
  city_id: z.string().optional(),
  model: z.string().min(1).max(256),
  text: z.string().min(1).max(4096),
  voice: z.string().min(1).max(64).optional(),
  format: z.enum(['mp3', 'wav', 'opus', 'aac', 'flac', 'pcm']).optional(),
  speed: z.number().min(0.25).max(4).optional(),
  instructions: z.string().max(4096).optional(),
});

/** Runs the call through routing (retries, fallbacks); a failure ends the call's meter record. */
async function guarded<T>(ctx: ActionContext<unknown>, call: AiCall, model: ModelDef, operation: string, run: (t: Target, signal: AbortSignal) => Promise<T>): Promise<T> {
  return routeCall(ctx, call, { model, operation }, async (t, d) => {
    const out = await run(t, d.signal);
    d.clear();
    return out;
  });
}

const cannot = (id: string, what: string) => new GatewayError(400, 'mode_not_supported', `The model '${id}' cannot ${what}.`, { param: 'model' });

export async function tts(ctx: ActionContext<z.output<typeof ttsInput>>): Promise<Response> {
  const { input, gateway: gw } = ctx;
  const r = await resolveModel(gw, ctx.identity, input.model, 'tts');
  if (!r.adapter.speechModel) throw new GatewayError(400, 'mode_not_supported', `The model '${input.model}' cannot speak.`, { param: 'model' });
  const call = AiCall.start(gw, ctx.identity, r, 'tts', ctx.requestId, ctx.timing);
  // Speech is priced per input character: input_tokens counts characters here.
  const chars = [...input.text].length;
  await call.reserve({ input_tokens: chars });
  const format = input.format ?? 'mp3';
  const res = await guarded(ctx, call, r.model, 'text_to_speech', async (t, signal) => {
    if (!t.adapter.speechModel) throw cannot(input.model, 'speak');
    const { generateSpeech } = await loadAi();
    return generateSpeech({
      model: await t.adapter.speechModel(t.call, t.upstreamModel),
      text: input.text,
      voice: input.voice ?? 'alloy',
      outputFormat: format,
      speed: input.speed,
      instructions: input.instructions,
      maxRetries: 0,
      abortSignal: signal,
    });
  });
  await call.finish('ok', { input_tokens: chars });
  const bytes = res.audio.uint8Array;
  return new Response(bytes as Uint8Array<ArrayBuffer>, {
    headers: { 'content-type': AUDIO_TYPES[format] ?? res.audio.mediaType ?? 'application/octet-stream', 'content-length': String(bytes.byteLength) },
  });
}

export const asrJson = z
  .object({
    city_id: z.string().optional(),
    model: z.string().min(1).max(256),
    audio: z.string().min(1).optional(),
    url: z.url({ protocol: /^https$/ }).optional(),
    language: z.string().min(2).max(16).optional(),
  })
  .refine((v) => (v.audio === undefined) !== (v.url === undefined), { message: 'give either audio (base64) or url (https)', path: ['audio'] });

/** The JSON form of an asr request (the client types it from here). */
export type AsrJsonInput = z.input<typeof asrJson>;

export const ASR_MAX_BYTES = 25 * 1024 * 1024;

function fromBase64(s: string): Uint8Array {
  const b64 = s.replace(/^data:[^;,]*;base64,/, '');
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(b64)) throw badRequest('invalid_input', 'audio: not base64', 'audio');
  const bin = atob(b64.replace(/-/g, '+').replace(/_/g, '/'));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** JSON `{model, audio | url, language?}` or multipart with a `file` field and `model`. */
async function asrRequest(ctx: ActionContext<unknown>) {
  const raw = await ctx.rawBody();
  const type = ctx.request.headers.get('content-type') ?? '';
  let model: string;
  let audio: Uint8Array | URL;
  let language: string | undefined;
  let cityId: unknown;
  if (/^multipart\/form-data/i.test(type)) {
    let form: FormData;
    try {
      form = await new Request('http://multipart.invalid/', { method: 'POST', headers: { 'content-type': type }, body: raw as Uint8Array<ArrayBuffer> }).formData();
    } catch {
      throw badRequest('invalid_multipart', 'The multipart body could not be read.');
    }
    const file = form.get('file');
    const m = form.get('model');
    if (typeof m !== 'string' || !m) throw badRequest('invalid_input', 'model: required', 'model');
    if (!file || typeof file === 'string') throw badRequest('invalid_input', 'file: an audio file is required', 'file');
    model = m;
    audio = new Uint8Array(await file.arrayBuffer());
    const lang = form.get('language');
    language = typeof lang === 'string' && lang ? lang : undefined;
    cityId = form.get('city_id') ?? undefined;
  } else {
    const input = validate(asrJson, parseJsonBody(raw));
    model = input.model;
    audio = input.audio !== undefined ? fromBase64(input.audio) : new URL(input.url!);
    language = input.language;
    cityId = input.city_id;
  }
  const bound = boundCity(ctx.identity);
  if (bound && cityId != null && cityId !== bound) throw forbidden('city_mismatch', 'city_id does not match the city of this credential.');
  if (audio instanceof Uint8Array && audio.byteLength === 0) throw badRequest('invalid_input', 'audio: empty', 'audio');
  return { model, audio, language };
}

/**
 * Fetches the audio a caller gave by URL, once, before any upstream call: its size is the basis
 * of the estimate when the upstream reports no duration, and an unreadable URL is the caller's
 * 4xx (not an upstream's 502, nor retried on another upstream).
 */
async function fetchAudio(ctx: ActionContext<unknown>, url: URL): Promise<{ data: Uint8Array; mediaType: string | undefined }> {
  const t0 = performance.now();
  try {
    const got = await fetchUntrusted(ctx.gateway, url, { signal: ctx.signal, maxBytes: ASR_MAX_BYTES });
    if (got.data.byteLength === 0) throw badRequest('invalid_input', 'url: the audio is empty', 'url');
    return got;
  } catch (e) {
    if (ctx.signal.aborted) throw new GatewayError(499, CLIENT_CLOSED, 'The client closed the request.');
    if (e instanceof UnreadableUrl) {
      if (e.reason === 'too_large') throw new GatewayError(413, 'audio_too_large', `url: the audio is larger than ${ASR_MAX_BYTES} bytes.`, { param: 'url' });
      throw badRequest('audio_unreadable', `url: the audio could not be read (${e.message}).`, 'url');
    }
    throw e;
  } finally {
    ctx.timing.upstreamMs += performance.now() - t0; // a wait outside citygate, like an upstream's
  }
}

export async function asr(ctx: ActionContext<unknown>) {
  const gw = ctx.gateway;
  const q = await asrRequest(ctx);
  const r = await resolveModel(gw, ctx.identity, q.model, 'asr');
  if (!r.adapter.transcriptionModel) throw new GatewayError(400, 'mode_not_supported', `The model '${q.model}' cannot transcribe.`, { param: 'model' });
  const call = AiCall.start(gw, ctx.identity, r, 'asr', ctx.requestId, ctx.timing);
  // Worst case: compressed speech at 8 kbit/s (1,000 bytes per second). A URL's size is unknown
  // until it is fetched: held for the largest audio accepted (25 MB), before anything is fetched.
  await call.reserve({ seconds: Math.ceil((q.audio instanceof Uint8Array ? q.audio.byteLength : ASR_MAX_BYTES) / 1000) });
  let audio: { data: Uint8Array; mediaType: string | undefined };
  try {
    audio = q.audio instanceof Uint8Array ? { data: q.audio, mediaType: undefined } : await fetchAudio(ctx, q.audio);
  } catch (e) {
    const code = (e as { code?: string }).code ?? 'internal_error';
    await call.finish(code === CLIENT_CLOSED ? 'aborted' : 'error', {}, code); // nothing consumed: the hold is returned
    throw e;
  }
  const res = await guarded(ctx, call, r.model, 'speech_to_text', async (t, signal) => {
    if (!t.adapter.transcriptionModel) throw cannot(q.model, 'transcribe');
    const { transcribe } = await loadAi();
    return transcribe({
      model: await t.adapter.transcriptionModel(t.call, t.upstreamModel),
      // a URL's audio is handed over as fetched above, with the media type its server gave
      audio: q.audio,
      download: async () => audio,
      providerOptions: q.language ? { openai: { language: q.language } } : undefined,
      maxRetries: 0,
      abortSignal: signal,
    });
  });
  // No duration from the upstream: the documented estimate (16 kB per second of the audio
  // actually sent), marked as such.
  const seconds = res.durationInSeconds ?? Math.ceil(audio.data.byteLength / 16_000);
  await call.finish('ok', { seconds, estimated: res.durationInSeconds === undefined });
  return {
    text: res.text,
    ...(res.language ? { language: res.language } : {}),
    ...(res.durationInSeconds !== undefined ? { duration_seconds: res.durationInSeconds } : {}),
    ...(res.segments?.length ? { segments: res.segments.map((s) => ({ text: s.text, start: s.startSecond, end: s.endSecond })) } : {}),
  };
}
