// Image and video jobs: created by a request (the credit hold is made then, 402 at once),
// run by the runtime's job queue (durable runner on Node, Cloudflare Queues on the edge),
// polled by the owner. A job handler may run more than once (a restart mid-job re-runs it):
// it starts from the row's state and ends by writing a final status exactly once.
import { z } from 'zod';
import type { GatewayContext } from '../../../kernel/context.ts';
import { newId, randomToken } from '../../../kernel/crypto.ts';
import { badRequest, notFound } from '../../../kernel/errors.ts';
import type { Identity } from '../../../kernel/identity.ts';
import { RetryJob, type JobMessage } from '../../../kernel/jobs.ts';
import type { ActionContext } from '../../../kernel/service.ts';
import { AiCall, type CallState } from '../meter.ts';
import type { Prices } from '../../../kernel/metering.ts';
import type { Mode } from '../catalog/registry.ts';
import { findModel, resolveModel, upstreamTimeoutMs } from '../catalog/resolve.ts';
import { upstreamTableOf } from '../routing/upstreams.ts';
import { route } from '../routing/route.ts';
import { loadAi } from '../upstream/sdk.ts';
import { getJob, getOwnedJob, insertJob, updateJob, type JobRow } from '../store.ts';
import { deadline, toGatewayError } from '../upstream/errors.ts';
import { publicOriginOrNull } from '../../../kernel/public-url.ts';

export const SERVICE = 'ai';
/** Seconds of a video when the request names none (OpenAI's default for sora-2). */
export const DEFAULT_VIDEO_SECONDS = 4;
const size = z.string().regex(/^\d{2,5}x\d{2,5}$/, 'WIDTHxHEIGHT, e.g. 1024x1024');

export const imageCreateInput = z.object({
  city_id: z.string().optional(),
  model: z.string().min(1).max(256),
  prompt: z.string().min(1).max(32_000),
  size: size.optional(),
  n: z.number().int().min(1).max(10).optional(),
});
export const jobIdInput = z.object({ city_id: z.string().optional(), job_id: z.string().min(1).max(100) });
export const videoInput = z
  .object({
    city_id: z.string().optional(),
    job_id: z.string().min(1).max(100).optional(),
    model: z.string().min(1).max(256).optional(),
    prompt: z.string().min(1).max(32_000).optional(),
    seconds: z.number().int().min(1).max(60).optional(),
    size: size.optional(),
  })
  .refine((v) => v.job_id !== undefined || (v.model !== undefined && v.prompt !== undefined), {
    message: 'give job_id to poll, or model and prompt to start',
    path: ['model'],
  });

interface StoredFile {
  key?: string;
  data_url?: string;
  media_type: string;
}

const EXT: Record<string, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/webp': 'webp',
  'video/mp4': 'mp4',
  'video/webm': 'webm',
  'audio/mpeg': 'mp3',
};

/** Generated media get unguessable keys; without a blob store they are kept inline. */
async function store(gw: GatewayContext, jobId: string, data: Uint8Array, mediaType: string): Promise<StoredFile> {
  if (!gw.storage) {
    let s = '';
    for (const b of data) s += String.fromCharCode(b);
    return { data_url: `data:${mediaType};base64,${btoa(s)}`, media_type: mediaType };
  }
  const key = `ai/${jobId}/${randomToken(24)}.${EXT[mediaType] ?? 'bin'}`;
  await gw.storage.put(key, data, mediaType);
  return { key, media_type: mediaType };
}

export const FILES_PREFIX = '/v1/ai/files/';

function fileUrl(gw: GatewayContext, req: Request, f: StoredFile): string {
  if (f.data_url) return f.data_url;
  // without a known public URL: a path on this gateway, never a URL made from the Host header
  return gw.storage?.publicUrl(f.key!) ?? `${publicOriginOrNull(gw, req) ?? ''}${FILES_PREFIX}${f.key}`;
}

async function createJob(
  ctx: ActionContext<unknown>,
  kind: 'image' | 'video',
  modelId: string,
  input: Record<string, unknown>,
  worst: Parameters<AiCall['reserve']>[0],
) {
  const gw = ctx.gateway;
  const r = await resolveModel(gw, ctx.identity, modelId, kind);
  const jobId = newId(kind === 'image' ? 'img' : 'vid', 15);
  const call = AiCall.start(gw, ctx.identity, r, kind, ctx.requestId);
  await call.reserve(worst, { durable: true }); // settled by whichever process runs the job, even after a restart
  const id = ctx.identity;
  const now = Date.now();
  await insertJob(gw.db, {
    job_id: jobId,
    kind,
    city_id: id.kind === 'user' || id.kind === 'bureau' ? id.cityId : null,
    user_id: id.kind === 'user' ? id.userId : null,
    identity: id.kind,
    model: r.model.id,
    status: 'queued',
    input: JSON.stringify(input),
    result: null,
    error: null,
    upstream_ref: null,
    call: JSON.stringify({ ...call.state, prices: call.prices, basePrices: call.basePrices }), // charged at the prices it was held at
    attempts: 0,
    created_at: now,
    updated_at: now,
    finished_at: null,
  });
  await gw.jobs.enqueue({ service: SERVICE, type: kind, id: jobId });
  return { job_id: jobId, status: 'queued' as const };
}

export async function imageCreate(ctx: ActionContext<z.output<typeof imageCreateInput>>) {
  const { input } = ctx;
  const n = input.n ?? 1;
  return createJob(ctx, 'image', input.model, { prompt: input.prompt, size: input.size, n }, { images: n });
}

export async function jobView(ctx: ActionContext<unknown>, jobId: string, kind: 'image' | 'video') {
  const row = await getOwnedJob(ctx.gateway.db, jobId, ctx.identity);
  if (!row || row.kind !== kind) throw notFound('job_not_found', `No ${kind} job '${jobId}'.`, 'job_id');
  const out: Record<string, unknown> = { job_id: row.job_id, status: row.status, model: row.model, created_at: row.created_at };
  if (row.status === 'succeeded' && row.result) {
    const files = (JSON.parse(row.result).files ?? []) as StoredFile[];
    const items = files.map((f) => ({ url: fileUrl(ctx.gateway, ctx.request, f), media_type: f.media_type }));
    out[kind === 'image' ? 'images' : 'videos'] = items;
  }
  if (row.status === 'failed') out.error = JSON.parse(row.error ?? '{}');
  return out;
}

export async function imageResult(ctx: ActionContext<z.output<typeof jobIdInput>>) {
  return jobView(ctx, ctx.input.job_id, 'image');
}

export async function video(ctx: ActionContext<z.output<typeof videoInput>>) {
  const { input } = ctx;
  if (input.job_id !== undefined) return jobView(ctx, input.job_id, 'video');
  // The upstream is asked for exactly the seconds held (its own default might be longer).
  const seconds = input.seconds ?? DEFAULT_VIDEO_SECONDS;
  return createJob(ctx, 'video', input.model!, { prompt: input.prompt, seconds, size: input.size }, { seconds });
}

// ---- running ---------------------------------------------------------------------------

/** The job's call, priced as its hold was (jobs saved before issue 26: the model's price now, at its city's prices). */
async function restoreCall(gw: GatewayContext, row: JobRow, mode: Mode): Promise<AiCall> {
  const { prices, basePrices, ...state } = JSON.parse(row.call) as CallState & { prices?: Prices | null; basePrices?: Prices | null };
  if (prices !== undefined) return new AiCall(gw, { ...state, mode }, null, undefined, { prices, basePrices: basePrices === undefined ? prices : basePrices });
  await upstreamTableOf(gw).fresh();
  const city = row.identity === 'user' && row.city_id ? await gw.cities.settings(row.city_id) : undefined;
  return new AiCall(gw, { ...state, mode }, findModel(gw, row.model) ?? null, city);
}

function identityOf(row: JobRow): Identity {
  if (row.identity === 'user') return { kind: 'user', cityId: row.city_id!, userId: row.user_id!, expiresAt: 0 };
  return { kind: 'admin' };
}

async function fail(gw: GatewayContext, row: JobRow, call: AiCall, e: unknown, used = {}): Promise<void> {
  let code = 'job_failed';
  let message = String((e as Error)?.message ?? e);
  try {
    const ge = toGatewayError(e);
    code = ge.code;
    message = ge.message;
  } catch {
    gw.log('error', 'ai: job failed with an unexpected error', { job_id: row.job_id, error: message });
    message = 'The job failed.';
  }
  await updateJob(gw.db, row.job_id, { status: 'failed', error: JSON.stringify({ code, message }), finished_at: Date.now() });
  await call.finish('error', used, code);
}

const VIDEO_POLL_MS = 5000;
const pollMs = (gw: GatewayContext) => {
  const v = Number(gw.env.get('AI_VIDEO_POLL_MS'));
  return Number.isFinite(v) && v > 0 ? v : VIDEO_POLL_MS;
};

export async function runImage(msg: JobMessage, gw: GatewayContext): Promise<void> {
  const row = await getJob(gw.db, msg.id);
  if (!row || row.status === 'succeeded' || row.status === 'failed') return;
  const call = await restoreCall(gw, row, 'image');
  await updateJob(gw.db, row.job_id, { status: 'running', attempts: row.attempts + 1 });
  const input = JSON.parse(row.input) as { prompt: string; size?: `${number}x${number}`; n: number };
  try {
    const r = await resolveModel(gw, identityOf(row), row.model, 'image');
    const res = await route(gw, { model: r.model, operation: 'image', signal: new AbortController().signal, observer: call }, async (t, d) => {
      if (!t.adapter.imageModel) throw badRequest('mode_not_supported', `The model '${row.model}' cannot make images.`);
      const { generateImage } = await loadAi();
      const out = await generateImage({
        model: await t.adapter.imageModel(t.call, t.upstreamModel),
        prompt: input.prompt,
        n: input.n,
        size: input.size,
        maxRetries: 0,
        abortSignal: d.signal,
      });
      d.clear();
      return out;
    });
    const files: StoredFile[] = [];
    for (const img of res.images) files.push(await store(gw, row.job_id, img.uint8Array, img.mediaType || 'image/png'));
    await updateJob(gw.db, row.job_id, { status: 'succeeded', result: JSON.stringify({ files }), finished_at: Date.now() });
    await call.finish('ok', { images: files.length });
  } catch (e) {
    await fail(gw, row, call, e);
  }
}

export async function runVideo(msg: JobMessage, gw: GatewayContext): Promise<void> {
  const row = await getJob(gw.db, msg.id);
  if (!row || row.status === 'succeeded' || row.status === 'failed') return;
  const call = await restoreCall(gw, row, 'video');
  const input = JSON.parse(row.input) as { prompt: string; seconds?: number; size?: string };
  let r;
  try {
    // A video job polls the upstream that started it: it is not routed (the first candidate serves it).
    r = await resolveModel(gw, identityOf(row), row.model, 'video');
    if (!r.adapter.video) throw badRequest('mode_not_supported', `The model '${row.model}' cannot make videos.`);
  } catch (e) {
    return fail(gw, row, call, e);
  }
  const api = r.adapter.video;
  const d = deadline(undefined, upstreamTimeoutMs(gw));
  let seconds = input.seconds ?? 0;
  try {
    if (!row.upstream_ref) {
      const started = await api.start(r.call, { model: r.target.upstreamModel, prompt: input.prompt, seconds: input.seconds, size: input.size, signal: d.signal });
      await updateJob(gw.db, row.job_id, { status: 'running', upstream_ref: started.ref, attempts: row.attempts + 1 });
      throw new RetryJob('video started', pollMs(gw));
    }
    const st = await api.poll(r.call, row.upstream_ref, d.signal);
    seconds = st.seconds ?? seconds;
    if (st.status === 'queued' || st.status === 'running') {
      if (row.status !== 'running') await updateJob(gw.db, row.job_id, { status: 'running' });
      throw new RetryJob('video not ready', pollMs(gw));
    }
    if (st.status === 'failed') {
      await updateJob(gw.db, row.job_id, { status: 'failed', error: JSON.stringify({ code: 'generation_failed', message: st.error ?? 'failed' }), finished_at: Date.now() });
      await call.finish('error', {}, 'generation_failed');
      return;
    }
    const file = await api.download(r.call, row.upstream_ref, d.signal);
    const stored = await store(gw, row.job_id, file.data, file.mediaType);
    await updateJob(gw.db, row.job_id, { status: 'succeeded', result: JSON.stringify({ files: [stored], seconds }), finished_at: Date.now() });
    await call.finish('ok', { seconds });
  } catch (e) {
    if (e instanceof RetryJob) throw e;
    await fail(gw, row, call, e);
  } finally {
    d.clear();
  }
}

