// The uniform shape of a provider adapter: adding a provider kind means adding one file of
// this shape and listing it in index.ts, not editing a switch.
import type { EmbeddingModel, ImageModel, LanguageModel, SpeechModel, TranscriptionModel } from 'ai';
import type { UpstreamHttp } from '../../../kernel/http.ts';
import type { ProviderKind, ResolvedProvider } from '../catalog/registry.ts';

export interface ProviderCall {
  provider: ResolvedProvider;
  http: UpstreamHttp;
}

/** A started upstream video generation, polled until it ends. */
export interface VideoStatus {
  status: 'queued' | 'running' | 'succeeded' | 'failed';
  error?: string;
  /** Seconds of video, when known. */
  seconds?: number;
}

export interface VideoApi {
  start(c: ProviderCall, a: { model: string; prompt: string; seconds?: number; size?: string; signal?: AbortSignal }): Promise<{ ref: string; seconds?: number }>;
  poll(c: ProviderCall, ref: string, signal?: AbortSignal): Promise<VideoStatus>;
  download(c: ProviderCall, ref: string, signal?: AbortSignal): Promise<{ data: Uint8Array; mediaType: string }>;
}

/** Client APIs an upstream may speak natively (then citygate forwards instead of translating). */
/** 'gemini': Google's own API; the URL is the base that models/{model}:{method} follows. */
export type NativeApi = 'embeddings' | 'responses' | 'messages' | 'messages/count_tokens' | 'gemini';

export interface ProviderAdapter {
  kind: ProviderKind;
  /** URL of an OpenAI-compatible chat/completions endpoint for the byte pass-through, or null. */
  chatCompletionsUrl(p: ResolvedProvider): string | null;
  /** Headers that authenticate a pass-through request. */
  authHeaders(p: ResolvedProvider): Record<string, string>;
  /** URL of the upstream's own endpoint for a client API it speaks natively, or null. */
  nativeUrl?(p: ResolvedProvider, api: NativeApi): string | null;
  // The AI SDK models: async, as the provider's package is loaded when first needed (../sdk.ts).
  languageModel(c: ProviderCall, upstreamId: string): Promise<LanguageModel>;
  embeddingModel?(c: ProviderCall, upstreamId: string): Promise<EmbeddingModel>;
  imageModel?(c: ProviderCall, upstreamId: string): Promise<ImageModel>;
  speechModel?(c: ProviderCall, upstreamId: string): Promise<SpeechModel>;
  transcriptionModel?(c: ProviderCall, upstreamId: string): Promise<TranscriptionModel>;
  video?: VideoApi;
}
