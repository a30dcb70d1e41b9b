// The Node runtime's streamed responses (src/runtimes/node/streamed-response.ts) make their web
// stream and Headers only when something reads them; read any way, they are the Response they
// stand for: body, text(), clone(), bodyUsed, status and headers, over the native Response and
// over @hono/node-server's lightweight one (the global once a server is serving).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { getRequestListener } from '@hono/node-server';
import { makeStreamedResponsesWith, streamingResponse, streamSourceOf } from '../../src/kernel/http.ts';
import { installStreamedResponses, untouchedHeaders } from '../../src/runtimes/node/streamed-response.ts';

const NativeResponse = globalThis.Response;
const enc = new TextEncoder();
const EVENTS = 'data: {"a":1}\n\ndata: [DONE]\n\n';
async function* chunks(): AsyncIterable<Uint8Array> {
  yield enc.encode('data: {"a":1}\n\n');
  yield enc.encode('data: [DONE]\n\n');
}
const init = () => ({ status: 201, headers: { 'content-type': 'text/event-stream; charset=utf-8', 'x-made': 'by the handler' } });

for (const base of ['native', 'lightweight'] as const) {
  test(`over the ${base} Response: untouched, the runtime gets the plain headers and the source; text() and clone() give the whole stream`, async () => {
    if (base === 'lightweight') getRequestListener(() => new Response('')); // the adapter puts its Response in place
    assert.equal(globalThis.Response === NativeResponse, base === 'native');
    installStreamedResponses();
    try {
      const source = chunks();
      const res = streamingResponse(source, init());
      assert.ok(res instanceof Response);
      assert.equal(res.status, 201);
      assert.equal(streamSourceOf(res), source);
      assert.deepEqual(untouchedHeaders(res), init().headers, 'nothing read them: written as made');
      assert.equal(res.bodyUsed, false);
      const copy = res.clone();
      assert.equal(untouchedHeaders(res), null, 'clone() read them');
      assert.equal(copy.headers.get('x-made'), 'by the handler');
      assert.equal(await copy.text(), EVENTS);
      assert.equal(await res.text(), EVENTS);
      assert.equal(res.bodyUsed, true);
    } finally {
      makeStreamedResponsesWith(null);
    }
  });

  test(`over the ${base} Response: a header set after it was made is seen by the runtime, and the body reads as a web stream`, async () => {
    if (base === 'lightweight') getRequestListener(() => new Response(''));
    installStreamedResponses();
    try {
      const res = streamingResponse(chunks(), init());
      res.headers.set('access-control-allow-origin', 'https://app.example.com');
      assert.equal(untouchedHeaders(res), null, 'read (and changed): the runtime writes res.headers');
      assert.equal(res.headers.get('access-control-allow-origin'), 'https://app.example.com');
      assert.equal(res.headers.get('content-type'), 'text/event-stream; charset=utf-8');
      assert.equal(await new Response(res.body).text(), EVENTS);
      // made with a Headers object: not plain, so the runtime reads res.headers
      const other = streamingResponse(chunks(), { status: 200, headers: new Headers({ 'content-type': 'text/plain' }) });
      assert.equal(untouchedHeaders(other), null);
      assert.equal(await other.text(), EVENTS);
    } finally {
      makeStreamedResponsesWith(null);
    }
  });
}
