// Anthropic through the AI SDK; chat/completions requests are translated.
import { createAnthropic } from '@ai-sdk/anthropic';
import type { ProviderAdapter } from './types.ts';

export const anthropicAdapter: ProviderAdapter = {
  kind: 'anthropic',
  chatCompletionsUrl: () => null,
  authHeaders: (p) => ({ 'x-api-key': p.apiKey, 'anthropic-version': '2023-06-01' }),
  nativeUrl: (p, api) => (api === 'messages' || api === 'messages/count_tokens' ? `${p.baseUrl}/${api}` : null),
  languageModel: (c, id) =>
    createAnthropic({ baseURL: c.provider.baseUrl, apiKey: c.provider.apiKey, fetch: c.http.fetch })(id),
};
