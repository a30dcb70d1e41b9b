// Google Gemini through the AI SDK; chat/completions requests are translated.
import { once } from '../upstream/sdk.ts';
import type { ProviderAdapter, ProviderCall } from './types.ts';

const load = once(() => import('@ai-sdk/google'));
const sdk = async (c: ProviderCall) =>
  (await load()).createGoogleGenerativeAI({ baseURL: c.provider.baseUrl, apiKey: c.provider.apiKey, fetch: c.http.fetch });

export const googleAdapter: ProviderAdapter = {
  kind: 'google',
  chatCompletionsUrl: () => null,
  authHeaders: (p) => ({ 'x-goog-api-key': p.apiKey }),
  languageModel: async (c, id) => (await sdk(c))(id),
  embeddingModel: async (c, id) => (await sdk(c)).embedding(id),
};
