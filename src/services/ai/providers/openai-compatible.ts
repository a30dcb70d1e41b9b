// Any OpenAI-compatible API (the seed's text provider slot): chat/completions is forwarded
// byte for byte; text and stream go through the AI SDK's openai-compatible provider.
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { ProviderAdapter } from './types.ts';

export const openaiCompatibleAdapter: ProviderAdapter = {
  kind: 'openai-compatible',
  chatCompletionsUrl: (p) => (p.slot.passthrough === false ? null : `${p.baseUrl}/chat/completions`),
  authHeaders: (p) => ({ authorization: `Bearer ${p.apiKey}` }),
  // Embeddings are part of the OpenAI-compatible core; the Responses API is not assumed.
  nativeUrl: (p, api) => (api === 'embeddings' && p.slot.passthrough !== false ? `${p.baseUrl}/embeddings` : null),
  languageModel: (c, id) =>
    createOpenAICompatible({
      name: c.provider.slot.id,
      baseURL: c.provider.baseUrl,
      apiKey: c.provider.apiKey,
      includeUsage: true,
      fetch: c.http.fetch,
    }).chatModel(id),
  embeddingModel: (c, id) =>
    createOpenAICompatible({ name: c.provider.slot.id, baseURL: c.provider.baseUrl, apiKey: c.provider.apiKey, fetch: c.http.fetch }).embeddingModel(id),
};
