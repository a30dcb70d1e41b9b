// Google Gemini through the AI SDK; chat/completions requests are translated.
import { createGoogleGenerativeAI } from '@ai-sdk/google';
import type { ProviderAdapter } from './types.ts';

export const googleAdapter: ProviderAdapter = {
  kind: 'google',
  chatCompletionsUrl: () => null,
  authHeaders: (p) => ({ 'x-goog-api-key': p.apiKey }),
  languageModel: (c, id) =>
    createGoogleGenerativeAI({ baseURL: c.provider.baseUrl, apiKey: c.provider.apiKey, fetch: c.http.fetch })(id),
  embeddingModel: (c, id) =>
    createGoogleGenerativeAI({ baseURL: c.provider.baseUrl, apiKey: c.provider.apiKey, fetch: c.http.fetch }).embedding(id),
};
