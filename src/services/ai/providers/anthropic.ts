// Anthropic through the AI SDK; chat/completions requests are translated.
import { once } from '../upstream/sdk.ts';
import type { ProviderAdapter } from './types.ts';

const load = once(() => import('@ai-sdk/anthropic'));

export const anthropicAdapter: ProviderAdapter = {
  kind: 'anthropic',
  chatCompletionsUrl: () => null,
  authHeaders: (p) => ({ 'x-api-key': p.apiKey, 'anthropic-version': '2023-06-01' }),
  nativeUrl: (p, api) => (api === 'messages' || api === 'messages/count_tokens' ? `${p.baseUrl}/${api}` : null),
  languageModel: async (c, id) =>
    (await load()).createAnthropic({ baseURL: c.provider.baseUrl, apiKey: c.provider.apiKey, fetch: c.http.fetch })(id),
};
