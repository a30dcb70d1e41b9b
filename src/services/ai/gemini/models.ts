// GET models and models/{model} in Google's shape: the caller's callable models (within its
// city's allow-list) that a Gemini client can use — chat models (generateContent, its stream,
// countTokens) and embedding models (embedContent, batchEmbedContents).
import type { Identity } from '../../../kernel/identity.ts';
import type { GatewayContext } from '../../../kernel/context.ts';
import { notFound } from '../../../kernel/errors.ts';
import { modesOf } from '../catalog/prices.ts';
import type { ModelDef } from '../catalog/registry.ts';
import { allModels, callerCity, lookupModel } from '../catalog/resolve.ts';
import { cityAllows } from '../catalog/city-prices.ts';
import { candidatesOf } from '../routing/route.ts';
import { upstreamTableOf } from '../routing/upstreams.ts';

const CHAT = ['generateContent', 'streamGenerateContent', 'countTokens'];
const EMBED = ['embedContent', 'batchEmbedContents'];

function methodsOf(gw: GatewayContext, m: ModelDef): string[] {
  const modes = modesOf(gw, m);
  return [...(modes.includes('compat') ? CHAT : []), ...(modes.includes('embeddings') ? EMBED : [])];
}

function entry(m: ModelDef, methods: string[]) {
  return {
    name: `models/${m.id}`,
    baseModelId: m.id,
    version: '1',
    displayName: m.name,
    description: m.description ?? '',
    ...(m.contextWindow ? { inputTokenLimit: m.contextWindow } : {}),
    ...(m.maxOutputTokens ? { outputTokenLimit: m.maxOutputTokens } : {}),
    supportedGenerationMethods: methods,
  };
}

/** The models a Gemini client can call (GET models: `{models}`, one page). */
export async function geminiModels(gw: GatewayContext, identity: Identity) {
  await upstreamTableOf(gw).fresh();
  const city = await callerCity(gw, identity);
  const out = [];
  for (const m of allModels(gw)) {
    if (!cityAllows(city, m.id, m.id) || !candidatesOf(gw, m).length) continue;
    const methods = methodsOf(gw, m);
    if (methods.length) out.push(entry(m, methods));
  }
  return out;
}

/** GET models/{model}: one of them, else Google's 404. */
export async function geminiModel(gw: GatewayContext, identity: Identity, id: string) {
  await upstreamTableOf(gw).fresh();
  const city = await callerCity(gw, identity);
  const m = lookupModel(gw, id);
  const methods = m && cityAllows(city, m.id, id) && candidatesOf(gw, m).length ? methodsOf(gw, m) : [];
  if (!m || !methods.length) throw notFound('model_not_found', `The model '${id}' does not exist.`, 'model');
  return { ...entry(m, methods), name: `models/${id}` };
}
