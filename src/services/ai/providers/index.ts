import type { ProviderKind } from '../catalog/registry.ts';
import { anthropicAdapter } from './anthropic.ts';
import { googleAdapter } from './google.ts';
import { openaiAdapter } from './openai.ts';
import { openaiCompatibleAdapter } from './openai-compatible.ts';
import type { ProviderAdapter } from './types.ts';

export const adapters: Record<ProviderKind, ProviderAdapter> = {
  'openai-compatible': openaiCompatibleAdapter,
  openai: openaiAdapter,
  anthropic: anthropicAdapter,
  google: googleAdapter,
};
