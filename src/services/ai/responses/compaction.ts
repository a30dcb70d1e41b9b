// Compaction on upstreams that do not speak the Responses API (Codex's long sessions). OpenAI
// compacts a conversation itself: a `compaction_trigger` item (the last input item) or
// POST /responses/compact answers one `compaction` item whose encrypted_content only OpenAI
// can read, and the client sends that item back in place of the history. On a translated
// upstream citygate does the same with the model it routes to: the model writes the summary
// by COMPACTION_PROMPT, and the item carries the summary sealed by citygate.
//
// The item's encrypted_content is `cgcmp1.<sealed>`: AES-256-GCM under the gateway's master
// key (kernel/secrets.ts, the one every replica and the Worker share), with its own label as
// additional data. Sealed rather than plain, because clients treat the field as opaque and
// may log or sync it (the summary is the user's conversation), and because a sealed blob
// cannot be forged or altered into something citygate would then feed the model as its own
// summary; any process of the gateway opens it, whichever upstream the next turn routes to.
// When the next turn goes to OpenAI, citygate's item becomes the summary as a user message;
// OpenAI's own items are passed back to OpenAI untouched (and only OpenAI can read them).
import { badRequest } from '../../../kernel/errors.ts';
import type { GatewayContext } from '../../../kernel/context.ts';
import { base64url } from '../../../kernel/crypto.ts';

export const COMPACTION_PREFIX = 'cgcmp1.';
const LABEL = 'responses:compaction';

/** What the model is asked, after the conversation, when citygate compacts it. */
export const COMPACTION_PROMPT = `Your context window is about to be replaced by a summary of this conversation, which you will continue from. Write that summary now for yourself: the user's goal and every instruction or constraint they gave; the decisions made and why; the work done so far (files read or changed, commands run and what they showed, errors met and how they were solved); what is left to do, and the very next step. Keep names, paths, identifiers, numbers and exact values as they are. Write only the summary, with no preamble and no tool calls.`;

/** How a summary is given back to a model in place of the conversation it replaces. */
export const summaryText = (summary: string) => `Summary of the conversation so far (its earlier turns were compacted into this):\n\n${summary}`;

const enc = new TextEncoder();
const dec = new TextDecoder();
const fromB64 = (s: string) => Uint8Array.from(atob(s.replace(/-/g, '+').replace(/_/g, '/')), (c) => c.charCodeAt(0));

/** The encrypted_content of a compaction item citygate makes. */
export async function sealSummary(gw: GatewayContext, summary: string): Promise<string> {
  const box = gw.env.secrets;
  // without a master key (a gateway configured without secrets at rest) the summary is only encoded
  return COMPACTION_PREFIX + (box ? base64url(enc.encode(await box.seal(summary, LABEL))) : `plain.${base64url(enc.encode(summary))}`);
}

/** The summary of a compaction item citygate made; a 400 naming the field when it does not open. */
export async function openSummary(gw: GatewayContext, content: string, at: string): Promise<string> {
  const body = content.slice(COMPACTION_PREFIX.length);
  const box = gw.env.secrets;
  try {
    // an unsealed one only where nothing is sealed: with a master key, only what it sealed opens
    if (!box) {
      if (body.startsWith('plain.')) return dec.decode(fromB64(body.slice(6)));
      throw new Error('no master key');
    }
    return await box.open(dec.decode(fromB64(body)), LABEL);
  } catch {
    throw badRequest('invalid_input', `${at}.encrypted_content: this compaction item does not open on this gateway (damaged, or made by another gateway)`, `${at}.encrypted_content`);
  }
}

type Item = Record<string, any>;

const isCompaction = (i: Item) => i?.type === 'compaction' || i?.type === 'compaction_summary';
export const isCitygateCompaction = (i: Item) => isCompaction(i) && typeof i.encrypted_content === 'string' && i.encrypted_content.startsWith(COMPACTION_PREFIX);

/** Whether the input holds a compaction item citygate made (one scan; the common answer is no). */
export const holdsCitygateCompaction = (input: { input: unknown }) => Array.isArray(input.input) && input.input.some(isCitygateCompaction);

/**
 * The input with citygate's compaction items opened into the summary as a user message (the
 * same on every upstream); the input itself when it holds none.
 */
export async function openCompactions<T extends { input: unknown }>(gw: GatewayContext, input: T): Promise<T> {
  const items = input.input;
  if (!Array.isArray(items) || !holdsCitygateCompaction(input)) return input;
  const out: Item[] = [];
  for (let i = 0; i < items.length; i++) {
    const item = items[i] as Item;
    if (!isCitygateCompaction(item)) out.push(item);
    else out.push({ type: 'message', role: 'user', content: [{ type: 'input_text', text: summaryText(await openSummary(gw, item.encrypted_content, `input.${i}`)) }] });
  }
  return { ...input, input: out };
}

/** Whether the request asks to compact (a compaction_trigger item, which must be the last input item). */
export function compactionTriggered(input: { input: unknown }): boolean {
  const items = input.input;
  if (!Array.isArray(items)) return false;
  const at = items.findIndex((i: Item) => i?.type === 'compaction_trigger');
  if (at === -1) return false;
  if (at !== items.length - 1) throw badRequest('invalid_input', `input.${at}: the 'compaction_trigger' item must be the final input item`, `input.${at}.type`);
  return true;
}

/** The conversation to summarize: the input without the trigger, then the compaction prompt as the last user turn. */
export function toCompact<T extends { input: unknown }>(input: T): T {
  const items = typeof input.input === 'string' ? [{ type: 'message', role: 'user', content: input.input }] : (input.input as Item[]).filter((i) => i?.type !== 'compaction_trigger');
  return { ...input, input: [...items, { type: 'message', role: 'user', content: COMPACTION_PROMPT }] };
}

/** The compaction item of a translated answer. */
export async function compactionItem(gw: GatewayContext, id: string, summary: string) {
  return { type: 'compaction', id, encrypted_content: await sealSummary(gw, summary.trim()) };
}

/** The user messages a compaction keeps (POST /responses/compact's output before its compaction item), as output items. */
export function keptUserMessages(input: { input: unknown }): Item[] {
  if (typeof input.input === 'string') return [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: input.input }], status: 'completed' }];
  const out: Item[] = [];
  for (const i of input.input as Item[]) {
    if ((i?.type ?? 'message') !== 'message' || i.role !== 'user') continue;
    const content = typeof i.content === 'string' ? [{ type: 'input_text', text: i.content }] : i.content;
    out.push({ type: 'message', role: 'user', content, status: 'completed', ...(i.id ? { id: i.id } : {}) });
  }
  return out;
}
