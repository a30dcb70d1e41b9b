// Google's usageMetadata as citygate measures it, and an AI SDK answer written as a
// GenerateContentResponse (translated calls).
import type { Measured } from '../../../kernel/metering.ts';
import type { Used } from '../upstream/sdk-call.ts';

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.round(v) : 0);

/**
 * usageMetadata → measured, as Google bills it: the prompt (cached content included, priced
 * apart as cache reads) plus the prompt of tool use, and the candidates plus the thoughts as output.
 */
export function measuredOf(u: any): Partial<Measured> {
  if (!u || typeof u !== 'object') return {};
  return {
    input_tokens: num(u.promptTokenCount) + num(u.toolUsePromptTokenCount),
    cached_tokens: num(u.cachedContentTokenCount),
    output_tokens: num(u.candidatesTokenCount) + num(u.thoughtsTokenCount),
  };
}

/** What a translated call used, as usageMetadata (cached content shown as Google shows it). */
export function usageMetadata(u: Used) {
  return {
    promptTokenCount: u.input_tokens,
    candidatesTokenCount: u.output_tokens,
    totalTokenCount: u.input_tokens + u.output_tokens,
    ...(u.cached_tokens ? { cachedContentTokenCount: u.cached_tokens } : {}),
  };
}

const FINISH: Record<string, string> = { stop: 'STOP', length: 'MAX_TOKENS', 'tool-calls': 'STOP', 'content-filter': 'SAFETY' };
export const finishReason = (f: string) => FINISH[f] ?? 'OTHER';

export interface ResponseMeta {
  /** The model id the caller named (modelVersion). */
  model: string;
  responseId: string;
}

/** AI SDK content parts → Gemini parts (text, functionCall with the upstream's call id). */
export function partsOf(content: any[]): object[] {
  const parts: object[] = [];
  for (const p of content) {
    if (p.type === 'text' && p.text) parts.push({ text: p.text });
    else if (p.type === 'tool-call') parts.push({ functionCall: { id: p.toolCallId, name: p.toolName, args: p.input ?? {} } });
  }
  return parts;
}

export function candidate(parts: object[], finish?: string) {
  return { content: { role: 'model', parts }, ...(finish ? { finishReason: finish } : {}), index: 0 };
}

export function responseJson(meta: ResponseMeta, res: { content: any[]; finishReason: string }, used: Used) {
  const parts = partsOf(res.content);
  return {
    candidates: [candidate(parts.length ? parts : [{ text: '' }], finishReason(res.finishReason))],
    usageMetadata: usageMetadata(used),
    modelVersion: meta.model,
    responseId: meta.responseId,
  };
}
