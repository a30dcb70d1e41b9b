// OpenAI: chat/completions pass-through, text through the AI SDK's Chat Completions model,
// images, speech and transcriptions through the AI SDK, and video (which the AI SDK's OpenAI
// provider does not cover) through the Videos API directly.
import { once } from '../upstream/sdk.ts';
import { UpstreamStatusError } from '../upstream/errors.ts';
import type { ProviderAdapter, ProviderCall, VideoApi } from './types.ts';

const load = once(() => import('@ai-sdk/openai'));
const sdk = async (c: ProviderCall) =>
  (await load()).createOpenAI({ baseURL: c.provider.baseUrl, apiKey: c.provider.apiKey, fetch: c.http.fetch, name: c.provider.slot.id });

async function openaiJson(c: ProviderCall, method: 'GET' | 'POST', path: string, body?: unknown, signal?: AbortSignal): Promise<any> {
  const res = await c.http.request({
    method,
    url: `${c.provider.baseUrl}${path}`,
    headers: { authorization: `Bearer ${c.provider.apiKey}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body !== undefined ? JSON.stringify(body) : undefined,
    signal,
  });
  const text = await res.text();
  if (res.status >= 400) throw new UpstreamStatusError(res.status, text);
  try {
    return JSON.parse(text);
  } catch {
    throw new UpstreamStatusError(502, text);
  }
}

const video: VideoApi = {
  async start(c, a) {
    const body: Record<string, unknown> = { model: a.model, prompt: a.prompt };
    if (a.seconds !== undefined) body.seconds = String(a.seconds);
    if (a.size) body.size = a.size;
    const v = await openaiJson(c, 'POST', '/videos', body, a.signal);
    if (typeof v?.id !== 'string') throw new UpstreamStatusError(502, 'the video API returned no id');
    const seconds = Number(v.seconds);
    return { ref: v.id, seconds: Number.isFinite(seconds) ? seconds : undefined };
  },
  async poll(c, ref, signal) {
    const v = await openaiJson(c, 'GET', `/videos/${encodeURIComponent(ref)}`, undefined, signal);
    const seconds = Number(v?.seconds);
    const s = Number.isFinite(seconds) ? seconds : undefined;
    if (v?.status === 'completed') return { status: 'succeeded', seconds: s };
    if (v?.status === 'failed') return { status: 'failed', error: String(v?.error?.message ?? 'video generation failed'), seconds: s };
    return { status: v?.status === 'queued' ? 'queued' : 'running', seconds: s };
  },
  async download(c, ref, signal) {
    const res = await c.http.request({
      method: 'GET',
      url: `${c.provider.baseUrl}/videos/${encodeURIComponent(ref)}/content`,
      headers: { authorization: `Bearer ${c.provider.apiKey}` },
      signal,
    });
    if (res.status >= 400) throw new UpstreamStatusError(res.status, await res.text());
    return { data: await res.bytes(), mediaType: res.header('content-type')?.split(';')[0] || 'video/mp4' };
  },
};

export const openaiAdapter: ProviderAdapter = {
  kind: 'openai',
  chatCompletionsUrl: (p) => `${p.baseUrl}/chat/completions`,
  authHeaders: (p) => ({ authorization: `Bearer ${p.apiKey}` }),
  nativeUrl: (p, api) => (api === 'embeddings' || api === 'responses' ? `${p.baseUrl}/${api}` : null),
  languageModel: async (c, id) => (await sdk(c)).chat(id),
  embeddingModel: async (c, id) => (await sdk(c)).embedding(id),
  imageModel: async (c, id) => (await sdk(c)).image(id),
  speechModel: async (c, id) => (await sdk(c)).speech(id),
  transcriptionModel: async (c, id) => (await sdk(c)).transcription(id),
  video,
};
