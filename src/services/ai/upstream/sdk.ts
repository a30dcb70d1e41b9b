// The AI SDK (`ai` and the `@ai-sdk/*` providers), loaded when a call first needs it rather than
// at boot: the chat/completions pass-through, the benchmark's hot path, never does, and the SDK
// is ~2 MB of JavaScript (with OpenTelemetry and the Vercel gateway client it pulls in) that a
// gateway would otherwise keep compiled in memory from its first second. Only translating calls
// (an upstream that does not speak the client's API) and the media, image and embedding calls
// load it, once; a failed load is tried again by the next call.
// Modules under src/ take the SDK's values only from here (`await loadAi()`) or through a
// provider adapter; `import type` from 'ai' costs nothing and is fine anywhere.

/** The `ai` package's exports. */
export type Ai = typeof import('ai');

/** A loader that imports once and then hands out the same module. */
export function once<T>(load: () => Promise<T>): () => Promise<T> {
  let p: Promise<T> | null = null;
  return () => {
    if (!p) {
      p = load();
      p.catch(() => (p = null));
    }
    return p;
  };
}

export const loadAi: () => Promise<Ai> = once(() => import('ai'));

/**
 * Whether `e` is one of the AI SDK's errors, named as the SDK names it (AI_APICallError, …),
 * without loading the SDK. The same test as the SDK's own `X.isInstance` (AISDKError.hasMarker):
 * its errors carry `Symbol.for('vercel.ai.error.<name>') === true`, which holds across copies
 * and versions of the package where `instanceof` would not.
 */
export function isSdkError(e: unknown, name: `AI_${string}`): e is Error & Record<string, any> {
  return e != null && typeof e === 'object' && (e as Record<symbol, unknown>)[Symbol.for(`vercel.ai.error.${name}`)] === true;
}
