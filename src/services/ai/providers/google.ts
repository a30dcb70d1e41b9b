// Google Gemini through the AI SDK; chat/completions requests are translated, Gemini API calls forwarded.
import { once } from '../upstream/sdk.ts';
import type { ProviderAdapter, ProviderCall } from './types.ts';

const load = once(() => import('@ai-sdk/google'));
const sdk = async (c: ProviderCall) =>
  (await load()).createGoogleGenerativeAI({ baseURL: c.provider.baseUrl, apiKey: c.provider.apiKey, fetch: c.http.fetch });

export const googleAdapter: ProviderAdapter = {
  kind: 'google',
  chatCompletionsUrl: () => null,
  authHeaders: (p) => ({ 'x-goog-api-key': p.apiKey }),
  // Google's Gemini API is forwarded (gemini/): the base, before models/{model}:{method}
  nativeUrl: (p, api) => (api === 'gemini' ? p.baseUrl.replace(/\/+$/, '') : null),
  languageModel: async (c, id) => (await sdk(c))(id),
  embeddingModel: async (c, id) => (await sdk(c)).embedding(id),
};
