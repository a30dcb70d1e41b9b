// Units that decide money and bytes: the credit hold around a call (with a fake billing and
// metering capability, as the balance and usage services will provide them) and the SSE relay.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import type { GatewayContext } from '../../src/kernel/context.ts';
import { GatewayError } from '../../src/kernel/errors.ts';
import type { Billing, Hold, MeterRecord } from '../../src/kernel/metering.ts';
import { relaySse, type RelayEnd } from '../../src/services/ai/chat/sse.ts';
import { chatUsageNumbers, topLevelObjectMember } from '../../src/services/ai/upstream/json-member.ts';
import { usageToMeasured } from '../../src/services/ai/chat/passthrough.ts';
import { AiCall } from '../../src/services/ai/meter.ts';
import type { ModelDef } from '../../src/services/ai/catalog/registry.ts';
import { isSdkError } from '../../src/services/ai/upstream/sdk.ts';
import { retryAfterOf, toGatewayError } from '../../src/services/ai/upstream/errors.ts';
import { AISDKError, APICallError, DownloadError, StreamProviderError } from 'ai';

function fakeGateway(opts: { short?: boolean } = {}) {
  const events: string[] = [];
  const records: MeterRecord[] = [];
  const billing: Billing = {
    async reserve(a) {
      if (opts.short) throw new GatewayError(402, 'insufficient_credits', 'short');
      events.push(`reserve ${a.credits}`);
      return { id: 'h1', cityId: a.cityId, userId: a.userId, credits: a.credits };
    },
    async settle(h: Hold, credits: number) {
      events.push(`settle ${h.id} ${credits}`);
    },
    async release(h: Hold) {
      events.push(`release ${h.id}`);
    },
  };
  const caps = new Map<string, unknown>([
    ['billing', billing],
    ['metering', { record: (r: MeterRecord) => records.push(r) }],
  ]);
  const env = { get: () => undefined, has: () => false };
  const gw = { env, use: (n: string) => caps.get(n), log: () => {}, cities: { peek: () => undefined } } as unknown as GatewayContext;
  return { gw, events, records };
}

const model: ModelDef = {
  id: 'm',
  name: 'm',
  modes: ['compat'],
  provider: 'textprovider',
  upstream: 'm',
  prices: { input_per_mtok: 1_000_000, output_per_mtok: 2_000_000 }, // 1 and 2 credits per token
};
const user = { kind: 'user' as const, cityId: 'c', userId: 'u', expiresAt: 0 };

describe('credit holds around a call', () => {
  test('reserve the worst case, settle to the measured cost, one meter record', async () => {
    const { gw, events, records } = fakeGateway();
    const call = AiCall.start(gw, user, { model }, 'compat', 'req_1');
    await call.reserve({ input_tokens: 100, output_tokens: 50 });
    await call.finish('ok', { input_tokens: 10, output_tokens: 5 });
    await call.finish('ok', { input_tokens: 10, output_tokens: 5 }); // only once
    assert.deepEqual(events, ['reserve 200', 'settle h1 20']);
    assert.equal(records.length, 1);
    assert.equal(records[0].credits, 20);
    assert.equal(records[0].status, 'ok');
    assert.equal(records[0].city_id, 'c');
  });

  test('an upstream failure before anything was consumed releases the hold and is still recorded', async () => {
    const { gw, events, records } = fakeGateway();
    const call = AiCall.start(gw, user, { model }, 'compat', 'req_2');
    await call.reserve({ input_tokens: 10, output_tokens: 10 });
    await call.finish('error', {}, 'upstream_error');
    assert.deepEqual(events, ['reserve 30', 'release h1']);
    assert.equal(records[0].status, 'error');
    assert.equal(records[0].error_code, 'upstream_error');
    assert.equal(records[0].credits, 0);
  });

  test('a client abort settles by what was consumed', async () => {
    const { gw, events, records } = fakeGateway();
    const call = AiCall.start(gw, user, { model }, 'compat', 'req_3');
    await call.reserve({ input_tokens: 10, output_tokens: 100 });
    await call.finish('aborted', { input_tokens: 10, output_tokens: 3 });
    assert.deepEqual(events, ['reserve 210', 'settle h1 16']);
    assert.equal(records[0].status, 'aborted');
  });

  test('short of credits → the 402 propagates, no upstream call, one error record', async () => {
    const { gw, records } = fakeGateway({ short: true });
    const call = AiCall.start(gw, user, { model }, 'compat', 'req_4');
    await assert.rejects(call.reserve({ input_tokens: 1 }), (e: GatewayError) => e.status === 402);
    assert.equal(records.length, 1);
    assert.equal(records[0].error_code, 'insufficient_credits');
  });

  test('admins and free models are not billed, but metered', async () => {
    const { gw, events, records } = fakeGateway();
    const a = AiCall.start(gw, { kind: 'admin' }, { model }, 'compat', 'req_5');
    await a.reserve({ input_tokens: 10 });
    await a.finish('ok', { input_tokens: 10 });
    const f = AiCall.start(gw, user, { model: { ...model, prices: null } }, 'compat', 'req_6');
    await f.reserve({ input_tokens: 10 });
    await f.finish('ok', { input_tokens: 10 });
    assert.deepEqual(events, []);
    assert.equal(records.length, 2);
    assert.equal(records[1].credits, 0);
  });
});

const enc = new TextEncoder();
/** Chunks as Node's upstream client gives them (Buffers: the relay searches them natively) or as Workers' fetch does (Uint8Arrays). */
let asBuffers = false;
async function relay(chunks: string[], strip: boolean, breakAfter = false) {
  let end: RelayEnd | undefined;
  const src = (async function* () {
    for (const c of chunks) yield asBuffers ? Buffer.from(c) : enc.encode(c);
    if (breakAfter) throw new Error('socket hang up');
  })();
  const out = relaySse(src, { strip, onEnd: (r) => (end = r), errorEvent: () => 'data: {"error":{}}\n\n' });
  let text = '';
  const dec = new TextDecoder();
  for await (const c of out) text += dec.decode(c, { stream: true });
  return { text, end: end! };
}

for (const buffers of [false, true]) describe(`the SSE relay (${buffers ? 'Buffer' : 'Uint8Array'} chunks)`, () => {
  before(() => void (asBuffers = buffers));
  const events = [
    'data: {"choices":[{"delta":{"content":"Hi"}}],"usage":null}\n\n',
    'data: {"choices":[{"delta":{},"finish_reason":"stop"}],"usage":null}\n\n',
    'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":3}}}\n\n',
    'data: [DONE]\n\n',
  ];
  const whole = events.join('');

  test('pass-through keeps every byte and reads the usage, however the bytes are split', async () => {
    for (const size of [1, 7, 64, whole.length]) {
      const chunks: string[] = [];
      for (let i = 0; i < whole.length; i += size) chunks.push(whole.slice(i, i + size));
      const r = await relay(chunks, false);
      assert.equal(r.text, whole);
      assert.deepEqual(r.end.usage, { prompt_tokens: 7, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 3 } });
      assert.equal(r.end.aborted, false);
    }
  });

  test('strip removes the usage event citygate added, however the bytes are split', async () => {
    for (const size of [1, 5, 33, whole.length]) {
      const chunks: string[] = [];
      for (let i = 0; i < whole.length; i += size) chunks.push(whole.slice(i, i + size));
      const r = await relay(chunks, true);
      assert.equal(r.text, events[0] + events[1] + events[3]);
      assert.equal(r.end.usage?.prompt_tokens, 7);
    }
  });

  test('usage on the last content event (some providers): kept when asked, dropped from it otherwise', async () => {
    const e = 'data: {"choices":[{"delta":{"content":"x"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}\n\ndata: [DONE]\n\n';
    assert.equal((await relay([e], false)).text, e);
    const s = await relay([e], true);
    assert.equal(s.text, 'data: {"choices":[{"delta":{"content":"x"}}]}\n\ndata: [DONE]\n\n');
    assert.equal(s.end.usage?.completion_tokens, 1);
  });

  test('only the top-level usage counts, wherever "usage" appears in the event', async () => {
    const e =
      'data: {"choices":[],"meta":{"usage":{}},"note":"\\"usage\\":{}","usage":{"prompt_tokens":7,"completion_tokens":2}}\n\n' +
      'data: {"choices":[{"delta":{"content":"x"}}],"meta":{"usage":{"prompt_tokens":98}}}\n\ndata: [DONE]\n\n';
    for (const strip of [false, true]) {
      const r = await relay([e], strip);
      assert.deepEqual(r.end.usage, { prompt_tokens: 7, completion_tokens: 2 });
      assert.equal(r.text, strip ? e.slice(e.indexOf('\n\n') + 2) : e);
    }
  });

  test('a usage on every event (some providers count up as they go): the last one counts, wherever its member stands', async () => {
    const ev = (n: number) => `data: {"choices":[{"delta":{"content":"${n}"}}],"usage":{"prompt_tokens":5,"completion_tokens":${n}}}\n\n`;
    const usageFirst = 'data: {"usage":{"prompt_tokens":5,"completion_tokens":4},"choices":[{"delta":{}}]}\n\n';
    const afterNull = 'data: {"choices":[{"delta":{}}],"usage":null}\n\ndata: [DONE]\n\n';
    for (const [e, last] of [
      [ev(1) + ev(2) + ev(3) + 'data: [DONE]\n\n', 3],
      [ev(1) + ev(2) + usageFirst + afterNull, 4], // not its object's last member; a usage:null after it
      [ev(1) + 'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9}}', 9], // the last event unfinished
    ] as const) {
      for (const size of [11, e.length]) {
        const chunks: string[] = [];
        for (let i = 0; i < e.length; i += size) chunks.push(e.slice(i, i + size));
        const r = await relay(chunks, false);
        assert.equal(r.text, e);
        assert.deepEqual(r.end.usage, { prompt_tokens: 5, completion_tokens: last }, `split every ${size} bytes`);
        assert.equal((await relay(chunks, true)).end.usage?.completion_tokens, last);
      }
    }
  });

  test('an unfinished last event is relayed once: at the end of the stream and when it breaks', async () => {
    const head = events[0] + events[1];
    for (const strip of [false, true]) {
      // an upstream that ends its last event without the blank line
      const ended = await relay([head, 'data: [DONE]\n'], strip);
      assert.equal(ended.text, head + 'data: [DONE]\n');
      // one that breaks in the middle of an event: what came, then the error event
      const broke = await relay([head, 'data: {"choices":[{"del'], strip, true);
      assert.equal(broke.text, head + 'data: {"choices":[{"del' + 'data: {"error":{}}\n\n');
      assert.equal(broke.end.aborted, false);
      assert.ok(broke.end.error);
    }
  });

  test("without a usage, every data event is counted (the estimate's basis), however the bytes are split", async () => {
    const noUsage = ': keep-alive\n\n' + events[0] + 'event: x\r\ndata: {"choices":[]}\r\n\r\n' + events[1] + events[3];
    for (const size of [1, 6, 40, noUsage.length]) {
      const chunks: string[] = [];
      for (let i = 0; i < noUsage.length; i += size) chunks.push(noUsage.slice(i, i + size));
      for (const strip of [false, true]) {
        const r = await relay(chunks, strip);
        assert.equal(r.text, noUsage);
        assert.equal(r.end.usage, null);
        assert.equal(r.end.events, 3, `split every ${size} bytes`);
      }
    }
  });

  test('a usage event with other lines before its data line, and CRLF line ends', async () => {
    const usage = 'id: 9\r\nevent: chunk\r\ndata: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":1}}\r\n\r\n';
    const e = events[0] + usage + events[3];
    assert.equal((await relay([e], false)).text, e);
    const s = await relay([e], true);
    assert.equal(s.text, events[0] + events[3]);
    assert.deepEqual(s.end.usage, { prompt_tokens: 4, completion_tokens: 1 });
  });
});

describe('the top-level usage of a JSON answer, read from its bytes', () => {
  const enc = new TextEncoder();
  const dec = new TextDecoder();
  /** What JSON.parse makes of the answer's top-level `usage` when it is an object, else null. */
  const byParse = (text: string) => {
    const u = JSON.parse(text)?.usage;
    return u && typeof u === 'object' && !Array.isArray(u) ? u : null;
  };
  const byScan = (text: string) => {
    const b = topLevelObjectMember(enc.encode(text), 'usage');
    return b ? JSON.parse(dec.decode(b)) : null;
  };
  const usage = { prompt_tokens: 12, completion_tokens: 7, prompt_tokens_details: { cached_tokens: 3 } };

  test('agrees with JSON.parse wherever "usage" appears, however the answer is laid out', () => {
    const answers: unknown[] = [
      { id: 'c', choices: [{ message: { content: 'hi' } }], usage, service_tier: 'default', system_fingerprint: 'fp' },
      { usage, choices: [{ message: { content: 'usage first' } }] },
      { choices: [{ message: { content: 'say "usage": {"prompt_tokens": 99}', usage: { prompt_tokens: 98 } } }], x: '\\', y: '\\"usage\\"' },
      { choices: [], usage: null },
      { choices: [], usage: 'none' },
      { choices: [], usage: [usage] },
      { choices: [], meta: { usage: { prompt_tokens: 5 } } },
      { choices: [], usage: {} },
      { choices: [{ message: { content: 'a}b]c{d[e"f\\' } }], usage, tail: ['}', { usage: { prompt_tokens: 1 } }], n: -1.5e3, t: true, f: null },
      { choices: [], usage, note: 'x "usage": {"prompt_tokens": 99} \\', note2: 'a"}"b', usage2: { usage: { prompt_tokens: 97 } } },
      { 'usage\\': { prompt_tokens: 4 }, usag: { prompt_tokens: 5 }, choices: [] },
      {},
    ];
    for (const a of answers) {
      for (const text of [JSON.stringify(a), JSON.stringify(a, null, 2), ` \n${JSON.stringify(a, null, '\t')}\r\n `]) {
        assert.deepEqual(byScan(text), byParse(text), text);
      }
    }
    // duplicate keys: JSON.parse keeps the last
    assert.deepEqual(byScan('{"usage":{"prompt_tokens":1},"choices":[],"usage":{"prompt_tokens":2}}'), { prompt_tokens: 2 });
  });

  test('its numbers read from the bytes are what usageToMeasured reads from the parsed object', () => {
    // a deterministic pseudo-random mix of shapes, values, orders, extra members and layouts
    let seed = 7; // mulberry32
    const rnd = (n: number) => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return (((t ^ (t >>> 14)) >>> 0) % n);
    };
    const values = [0, 1, 25, 123456, 2 ** 40, null, -3, 2.5, 1e3, '12', true, [1, 2], { prompt_tokens: 9 }, 'a"b\\', 4.0];
    const pickValue = () => values[rnd(values.length)];
    let read = 0;
    for (let n = 0; n < 3000; n++) {
      const members: [string, unknown][] = [];
      const count = rnd(6);
      for (let i = 0; i < count; i++) {
        const key = ['prompt_tokens', 'completion_tokens', 'total_tokens', 'prompt_tokens_details', 'completion_tokens_details', 'extra'][rnd(6)];
        let value: unknown = pickValue();
        if (key.endsWith('_details') && rnd(3) > 0) {
          const d: Record<string, unknown> = {};
          for (const k of ['cached_tokens', 'cache_write_tokens', 'audio_tokens', 'cached_tokens'].slice(0, 1 + rnd(4))) d[k] = rnd(2) ? rnd(1000) : pickValue();
          value = rnd(4) ? d : null;
        } else if (key !== 'extra' && rnd(3) > 0) value = rnd(100_000);
        members.push([key, value]);
      }
      // duplicates kept (JSON.parse keeps the last): written out by hand
      const sp = [' ', '', '\n  ', '\t'][rnd(4)];
      const text = `{${sp}${members.map(([k, v]) => `${JSON.stringify(k)}${sp}:${sp}${JSON.stringify(v)}`).join(`,${sp}`)}${sp}}`;
      const bytes = enc.encode(text);
      const fromBytes = chatUsageNumbers(bytes);
      if (fromBytes) read++;
      if (fromBytes) assert.deepEqual(fromBytes, usageToMeasured(JSON.parse(text)), text);
    }
    assert.ok(read > 1000, `most usage objects are read from their bytes (${read})`);
    const openai = enc.encode(JSON.stringify({ prompt_tokens: 19, completion_tokens: 10, total_tokens: 29, prompt_tokens_details: { cached_tokens: 3, audio_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 } }));
    assert.deepEqual(chatUsageNumbers(openai), { input_tokens: 19, output_tokens: 10, cached_tokens: 3, cache_write_tokens: 0 });
    // what it leaves to JSON.parse
    for (const text of ['{"prompt_tokens":1.5}', '{"prompt_tokens":-1}', '{"prompt_tokens":"3"}', '{"prompt_tokens":1e3}', '{"prompt_tokens":01}', '{"prompt\\u005ftokens":3}', '{"prompt_tokens":3,}', '{"x":foo,"prompt_tokens":3}', '{"prompt_tokens":3} ', '{"prompt_tokens":3', '{"a":,"prompt_tokens":3}']) {
      assert.equal(chatUsageNumbers(enc.encode(text)), null, text);
    }
  });

  test('not an object, or cut short: nothing (the caller parses the whole answer)', () => {
    for (const text of ['[{"usage":{"a":1}}]', '"usage"', '', '   ', '{', '}', '{"choices":[],"usage":{"prompt_tokens":1}', '{"a":"b","usage":{"p":1}}}', 'null']) {
      assert.equal(topLevelObjectMember(enc.encode(text), 'usage'), null, text);
    }
  });
});

// upstream-errors.ts and media.ts tell the AI SDK's errors apart without loading the SDK
// (src/services/ai/upstream/sdk.ts): these are the SDK's own errors, made by the SDK.
describe("the AI SDK's errors, recognised without importing the SDK", () => {
  const apiCall = (statusCode?: number, responseHeaders?: Record<string, string>) =>
    new APICallError({ message: 'upstream said no', url: 'http://u/x', requestBodyValues: {}, statusCode, responseHeaders, responseBody: '{"error":{"message":"bad thing"}}' });

  test('isSdkError agrees with the SDK’s own isInstance', () => {
    const cases: [unknown, `AI_${string}`, boolean][] = [
      [apiCall(400), 'AI_APICallError', true],
      [new StreamProviderError({ message: 'x', statusCode: 400 }), 'AI_StreamProviderError', true],
      [new DownloadError({ url: 'https://a/b', statusCode: 404, statusText: 'Not Found' }), 'AI_DownloadError', true],
      [apiCall(400), 'AI_StreamProviderError', false],
      [new AISDKError({ name: 'AI_APICallError', message: 'only named so' }), 'AI_APICallError', false],
      [Object.assign(new Error('x'), { name: 'AI_APICallError' }), 'AI_APICallError', false],
      [null, 'AI_APICallError', false],
      ['AI_APICallError', 'AI_APICallError', false],
    ];
    for (const [e, name, want] of cases) assert.equal(isSdkError(e, name), want, `${(e as Error)?.constructor?.name} as ${name}`);
    assert.equal(isSdkError(apiCall(400), 'AI_APICallError'), APICallError.isInstance(apiCall(400)));
  });

  test('an APICallError, a StreamProviderError and a wrapped APICallError map as before', () => {
    assert.deepEqual(pick(toGatewayError(apiCall(429))), [429, 'upstream_rate_limited']);
    assert.deepEqual(pick(toGatewayError(apiCall(400))), [400, 'upstream_rejected']);
    assert.match(toGatewayError(apiCall(400)).message, /bad thing/);
    assert.deepEqual(pick(toGatewayError(apiCall(undefined))), [502, 'upstream_unavailable']);
    assert.deepEqual(pick(toGatewayError(new StreamProviderError({ message: 'too long', statusCode: 400 }))), [400, 'upstream_rejected']);
    assert.deepEqual(pick(toGatewayError(new Error('wrapper', { cause: apiCall(503) }))), [502, 'upstream_error']);
    assert.equal(retryAfterOf(new Error('wrapper', { cause: apiCall(429, { 'retry-after': '7' }) })), 7000);
  });
});

const pick = (e: GatewayError) => [e.status, e.code];
