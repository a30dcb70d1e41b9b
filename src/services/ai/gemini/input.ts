// A Gemini API request (GenerateContentRequest) as citygate reads it, and its translation to an
// AI SDK call for upstreams that do not speak Google's API. Forwarded, the body goes to Google
// as sent; only what citygate needs is read up front (the output limit for the hold). The
// translation reads system instruction, contents (text, inline data, file data, function calls
// and responses), function declarations, the function-calling config and the generation config;
// it ignores what it cannot carry without changing the answer's meaning (safetySettings,
// thinkingConfig, labels, mediaResolution, fields yet unknown) and refuses (400, naming the
// field) only what it cannot carry at all: cachedContent (content stored at Google), several
// candidates, non-text response modalities, enum output. The REST API takes proto field names in
// camelCase and snake_case alike (curl examples use system_instruction): both are read.
import type { ModelMessage, ToolSet } from 'ai';
import { badRequest } from '../../../kernel/errors.ts';
import { HostedTools } from '../upstream/hosted-tools.ts';
import type { SdkRequest } from '../upstream/sdk-call.ts';
import type { Ai } from '../upstream/sdk.ts';

type Obj = Record<string, any>;

const snake = (k: string) => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
/** A proto field, by its camelCase or snake_case name. */
export const field = (o: Obj | undefined | null, name: string): any => (o == null || typeof o !== 'object' ? undefined : (o[name] ?? o[snake(name)]));

const isObj = (v: unknown): v is Obj => v != null && typeof v === 'object' && !Array.isArray(v);

/** The JSON body of a Gemini call: an object, else a 400 naming what is wrong. */
export function requestObject(body: unknown): Obj {
  if (!isObj(body)) throw badRequest('invalid_input', 'the request body must be a JSON object', 'body');
  return body;
}

/** Contents as a list of {role, parts}; a 400 naming the first bad one. */
export function contentsOf(req: Obj, at = 'contents'): Obj[] {
  const contents = field(req, 'contents');
  if (!Array.isArray(contents) || contents.length === 0) throw badRequest('invalid_input', `${at}: required, a non-empty list of contents`, at);
  contents.forEach((c, i) => {
    if (!isObj(c)) throw badRequest('invalid_input', `${at}.${i}: expected a content object {role, parts}`, `${at}.${i}`);
    const parts = field(c, 'parts');
    if (!Array.isArray(parts) || parts.length === 0) throw badRequest('invalid_input', `${at}.${i}.parts: required, a non-empty list of parts`, `${at}.${i}.parts`);
    if (c.role !== undefined && c.role !== 'user' && c.role !== 'model' && c.role !== 'function') {
      throw badRequest('invalid_input', `${at}.${i}.role: expected "user" or "model"`, `${at}.${i}.role`);
    }
    parts.forEach((p, j) => {
      if (!isObj(p)) throw badRequest('invalid_input', `${at}.${i}.parts.${j}: expected a part object`, `${at}.${i}.parts.${j}`);
    });
  });
  return contents;
}

/** The requested output limit (generationConfig.maxOutputTokens), checked. */
export function maxOutputOfRequest(req: Obj): number | undefined {
  const max = field(field(req, 'generationConfig'), 'maxOutputTokens');
  if (max === undefined || max === null) return undefined;
  if (!Number.isInteger(max) || max <= 0) throw badRequest('invalid_input', 'generationConfig.maxOutputTokens: expected a positive integer', 'generationConfig.maxOutputTokens');
  return max;
}

const textOfParts = (c: unknown): string => {
  if (typeof c === 'string') return c;
  const parts = isObj(c) ? field(c, 'parts') : Array.isArray(c) ? c : [];
  return (Array.isArray(parts) ? parts : []).filter((p) => typeof p?.text === 'string' && !p.thought).map((p) => p.text).join('\n');
};

function dataPart(p: Obj, at: string): any {
  const inline = field(p, 'inlineData');
  if (inline) {
    const mediaType = String(field(inline, 'mimeType') ?? '');
    if (typeof inline.data !== 'string' || !mediaType) throw badRequest('invalid_input', `${at}.inlineData: expected {mimeType, data (base64)}`, `${at}.inlineData`);
    return mediaType.startsWith('image/') ? { type: 'image', image: inline.data, mediaType } : { type: 'file', data: inline.data, mediaType };
  }
  const file = field(p, 'fileData');
  const uri = field(file, 'fileUri');
  let url: URL;
  try {
    url = new URL(String(uri));
  } catch {
    throw badRequest('invalid_input', `${at}.fileData.fileUri: expected a URL`, `${at}.fileData.fileUri`);
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.hostname === 'generativelanguage.googleapis.com') throw badRequest('invalid_input', `${at}.fileData.fileUri: files stored at Google are not readable on this model's upstream`, `${at}.fileData.fileUri`);
  const mediaType = String(field(file, 'mimeType') ?? 'application/octet-stream');
  return mediaType.startsWith('image/') ? { type: 'image', image: url, mediaType } : { type: 'file', data: url, mediaType };
}

/** Gemini contents (and system instruction) → AI SDK model messages. Function calls without ids get ids their responses are paired with by name, in order. */
export function toModelMessages(req: Obj): ModelMessage[] {
  const out: ModelMessage[] = [];
  const system = textOfParts(field(req, 'systemInstruction'));
  if (system) out.push({ role: 'system', content: system });
  let pending = new Map<string, string[]>();
  contentsOf(req).forEach((c, i) => {
    const parts: Obj[] = field(c, 'parts');
    if (c.role === 'model') {
      const content: any[] = [];
      pending = new Map();
      parts.forEach((p, j) => {
        const call = field(p, 'functionCall');
        if (call) {
          const name = String(call.name ?? '');
          if (!name) throw badRequest('invalid_input', `contents.${i}.parts.${j}.functionCall.name: required`, `contents.${i}.parts.${j}.functionCall.name`);
          const id = typeof call.id === 'string' && call.id ? call.id : `call_${i}_${j}`;
          pending.set(name, [...(pending.get(name) ?? []), id]);
          content.push({ type: 'tool-call', toolCallId: id, toolName: name, input: call.args ?? {} });
        } else if (typeof p.text === 'string' && p.text && !p.thought) content.push({ type: 'text', text: p.text });
        // thoughts, thought signatures, executable code and its results belong to the model
        // that wrote them: not replayed to another one
      });
      // a turn of thoughts only (written by a Google model) says nothing another model can read
      if (content.length) out.push({ role: 'assistant', content });
      return;
    }
    const results: any[] = [];
    const user: any[] = [];
    parts.forEach((p, j) => {
      const at = `contents.${i}.parts.${j}`;
      const resp = field(p, 'functionResponse');
      if (resp) {
        const name = String(resp.name ?? '');
        const id = typeof resp.id === 'string' && resp.id ? resp.id : (pending.get(name)?.shift() ?? `call_${i}_${j}`);
        results.push({ type: 'tool-result', toolCallId: id, toolName: name || 'tool', output: { type: 'json', value: resp.response ?? {} } });
      } else if (typeof p.text === 'string') {
        if (!p.thought) user.push({ type: 'text', text: p.text });
      } else if (field(p, 'inlineData') || field(p, 'fileData')) user.push(dataPart(p, at));
      else if (!field(p, 'thoughtSignature') && !field(p, 'videoMetadata')) {
        const kind = Object.keys(p)[0] ?? 'empty';
        throw badRequest('invalid_input', `${at}: '${kind}' parts are not supported on this model's upstream`, at);
      }
    });
    if (results.length) out.push({ role: 'tool', content: results });
    if (user.length) out.push({ role: 'user', content: user });
  });
  return out;
}

/** Google's OpenAPI subset (type: "OBJECT", nullable) → JSON Schema. */
export function jsonSchemaOf(s: unknown): any {
  if (Array.isArray(s)) return s.map(jsonSchemaOf);
  if (!isObj(s)) return s;
  const out: Obj = {};
  for (const [k, v] of Object.entries(s)) {
    if (k === 'propertyOrdering' || k === 'property_ordering' || k === 'nullable') continue;
    if (k === 'type' && typeof v === 'string') out.type = v.toLowerCase();
    else if (k === 'properties' && isObj(v)) out.properties = Object.fromEntries(Object.entries(v).map(([n, x]) => [n, jsonSchemaOf(x)]));
    else if (k === 'items' || k === 'anyOf' || k === 'any_of') out[k === 'any_of' ? 'anyOf' : k] = jsonSchemaOf(v);
    else out[k] = v;
  }
  if (s.nullable === true && typeof out.type === 'string') out.type = [out.type, 'null'];
  return out;
}

const HOSTED = ['googleSearch', 'googleSearchRetrieval', 'codeExecution', 'urlContext', 'retrieval', 'fileSearch', 'computerUse', 'googleMaps', 'enterpriseWebSearch'];

function toTools({ jsonSchema }: Ai, req: Obj, hosted: HostedTools, allowed: string[] | null): ToolSet | undefined {
  const tools = field(req, 'tools');
  if (tools === undefined || tools === null) return undefined;
  if (!Array.isArray(tools)) throw badRequest('invalid_input', 'tools: expected a list of tools', 'tools');
  const set: ToolSet = {};
  tools.forEach((t, i) => {
    const decls = field(t, 'functionDeclarations');
    if (Array.isArray(decls)) {
      decls.forEach((d, j) => {
        const name = d?.name;
        if (typeof name !== 'string' || !name) throw badRequest('invalid_input', `tools.${i}.functionDeclarations.${j}.name: required`, `tools.${i}.functionDeclarations.${j}.name`);
        if (allowed && !allowed.includes(name)) return;
        const params = field(d, 'parametersJsonSchema') ?? jsonSchemaOf(d.parameters) ?? { type: 'object', properties: {} };
        set[name] = { description: d.description, inputSchema: jsonSchema(params) } as ToolSet[string];
      });
    }
    // a Google-hosted tool (search, code execution, URL context) runs at Google only
    for (const k of Object.keys(t ?? {})) {
      const camel = k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
      if (HOSTED.includes(camel)) hosted.drop(i, camel, 'Google');
    }
  });
  return Object.keys(set).length ? set : undefined;
}

function toolChoiceOf(req: Obj): { choice: any; allowed: string[] | null } {
  const cfg = field(field(req, 'toolConfig'), 'functionCallingConfig');
  if (!cfg) return { choice: undefined, allowed: null };
  const mode = String(cfg.mode ?? 'AUTO').toUpperCase();
  const names = field(cfg, 'allowedFunctionNames');
  const allowed = Array.isArray(names) && names.length ? names.map(String) : null;
  if (mode === 'NONE') return { choice: 'none', allowed: null };
  if (mode === 'ANY') return allowed?.length === 1 ? { choice: { type: 'tool', toolName: allowed[0] }, allowed } : { choice: 'required', allowed };
  if (mode === 'AUTO' || mode === 'VALIDATED' || mode === 'MODE_UNSPECIFIED') return { choice: 'auto', allowed };
  throw badRequest('invalid_input', 'toolConfig.functionCallingConfig.mode: expected AUTO, ANY, NONE or VALIDATED', 'toolConfig.functionCallingConfig.mode');
}

function toOutput({ jsonSchema, Output }: Ai, g: Obj | undefined): any {
  const mime = field(g, 'responseMimeType');
  if (mime === undefined || mime === 'text/plain') return undefined;
  if (mime !== 'application/json') throw badRequest('invalid_input', `generationConfig.responseMimeType: '${mime}' is not supported on this model's upstream (text/plain or application/json)`, 'generationConfig.responseMimeType');
  const schema = field(g, 'responseJsonSchema') ?? jsonSchemaOf(field(g, 'responseSchema'));
  return schema ? Output.object({ schema: jsonSchema(schema) }) : Output.json();
}

const num = (g: Obj | undefined, name: string): number | undefined => {
  const v = field(g, name);
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw badRequest('invalid_input', `generationConfig.${name}: expected a number`, `generationConfig.${name}`);
  return v;
};

/** The AI SDK call for a generateContent request (`ai`: the loaded SDK, for jsonSchema and Output). */
export function sdkRequest(ai: Ai, req: Obj, strictHosted = false): SdkRequest {
  if (field(req, 'cachedContent')) throw badRequest('invalid_input', "cachedContent: content cached at Google is not readable on this model's upstream", 'cachedContent');
  const g = field(req, 'generationConfig');
  if (g !== undefined && !isObj(g)) throw badRequest('invalid_input', 'generationConfig: expected an object', 'generationConfig');
  const n = num(g, 'candidateCount');
  if (n !== undefined && n !== 1) throw badRequest('invalid_input', "generationConfig.candidateCount: only 1 candidate on this model's upstream", 'generationConfig.candidateCount');
  const modalities = field(g, 'responseModalities');
  if (Array.isArray(modalities) && modalities.some((m) => String(m).toUpperCase() !== 'TEXT')) {
    throw badRequest('invalid_input', "generationConfig.responseModalities: only TEXT on this model's upstream", 'generationConfig.responseModalities');
  }
  const temperature = num(g, 'temperature');
  if (temperature !== undefined && (temperature < 0 || temperature > 2)) throw badRequest('invalid_input', 'generationConfig.temperature: expected a number from 0 to 2', 'generationConfig.temperature');
  const stops = field(g, 'stopSequences');
  if (stops !== undefined && !(Array.isArray(stops) && stops.every((s) => typeof s === 'string'))) throw badRequest('invalid_input', 'generationConfig.stopSequences: expected a list of strings', 'generationConfig.stopSequences');
  const hosted = new HostedTools(strictHosted);
  const { choice, allowed } = toolChoiceOf(req);
  // thinkingConfig (thinkingBudget, thinkingLevel, includeThoughts) is dropped: the target
  // reasons as its upstream does by default (a reasoning option sent to a model without
  // reasoning would fail the call), and no thought summaries come back
  return {
    messages: toModelMessages(req),
    tools: toTools(ai, req, hosted, allowed),
    dropped: hosted.dropped,
    toolChoice: choice,
    output: toOutput(ai, g),
    maxOutputTokens: maxOutputOfRequest(req),
    temperature,
    topP: num(g, 'topP'),
    topK: num(g, 'topK'),
    stopSequences: stops,
    seed: num(g, 'seed'),
    presencePenalty: num(g, 'presencePenalty'),
    frequencyPenalty: num(g, 'frequencyPenalty'),
  };
}

/** Tokens Gemini counts for an image or file part (a fixed 258), for the estimate. */
const MEDIA_TOKENS = 258;

/** countTokens without a Google upstream: an estimate (no tokenizer) of ~4 characters a token, 258 per media part. */
export function estimateTokens(req: Obj): number {
  const inner = field(req, 'generateContentRequest') ?? req;
  let chars = textOfParts(field(inner, 'systemInstruction')).length;
  let media = 0;
  const contents = field(inner, 'contents');
  for (const c of Array.isArray(contents) ? contents : []) {
    for (const p of (field(c, 'parts') ?? []) as Obj[]) {
      if (typeof p?.text === 'string') chars += p.text.length;
      else if (field(p, 'inlineData') || field(p, 'fileData')) media++;
      else if (field(p, 'functionCall')) chars += JSON.stringify(field(p, 'functionCall').args ?? {}).length;
      else if (field(p, 'functionResponse')) chars += JSON.stringify(field(p, 'functionResponse').response ?? {}).length;
    }
  }
  const tools = field(inner, 'tools');
  if (Array.isArray(tools) && tools.length) chars += JSON.stringify(tools).length;
  return Math.ceil(chars / 4) + MEDIA_TOKENS * media;
}
