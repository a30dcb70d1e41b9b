// The Responses API over one WebSocket (OpenAI's WebSocket mode), independent of the runtime:
// the client sends `response.create` events (the body of POST /responses, without `stream`),
// and gets each response's stream events back as text messages, one JSON event each.
//
// Every turn is an ordinary POST /v1/ai/responses made inside the gateway (the upgrade's
// headers, so its credential, with the body of the event and stream: true): the same
// admission, rate limits, routing, holds, charges, usage records and request log as over
// HTTP, nothing copied. What the socket adds is memory: OpenAI keeps the socket's last
// response, so a turn may send only its new input with `previous_response_id`; citygate keeps
// it too (the last response's whole input and its output items) and sends the whole
// conversation, on every upstream, forwarded or translated. Turns run one at a time, in the
// order they arrive (no `stream_id` lanes).

/** What a socket's runtime gives it. */
export interface TurnHost {
  /** The gateway's fetch (one POST /v1/ai/responses per turn). */
  fetch(req: Request): Promise<Response>;
  /** Where turns are posted, e.g. http://<host>/v1/ai/responses. */
  url: string;
  /** The upgrade request's headers (the credential among them). */
  headers: Headers;
  /** Sends one text message to the client. */
  send(text: string): void;
}

type Item = Record<string, any>;

/** An error event as OpenAI's WebSocket mode sends it: the status, and the error in the one shape. */
export function errorEvent(status: number, code: string, message: string, param?: string, type = status >= 500 ? 'api_error' : 'invalid_request_error'): string {
  return JSON.stringify({ type: 'error', status, error: { type, code, message, ...(param ? { param } : {}) } });
}

/** Output items as input again: without their ids (with store: false an upstream keeps no item to refer to). */
const asInput = (item: Item) => {
  const { id: _, ...rest } = item;
  return rest;
};

const FINAL = new Set(['response.completed', 'response.incomplete']);
const dec = new TextDecoder();

export class ResponsesTurns {
  readonly #host: TurnHost;
  /** The last completed response: its id and the conversation it ended (input, then output). */
  #last: { id: string; items: Item[] } | null = null;
  #queue: Promise<void> = Promise.resolve();
  #pending = 0;
  #abort: AbortController | null = null;
  #closed = false;
  /** Called each time the socket has no turn left to run. */
  onIdle: () => void = () => {};

  constructor(host: TurnHost) {
    this.#host = host;
  }

  /** Turns queued or running. */
  get busy(): boolean {
    return this.#pending > 0;
  }

  /** One text message from the client. */
  message(text: string): void {
    let ev: Item | null;
    try {
      ev = JSON.parse(text);
    } catch {
      return this.#host.send(errorEvent(400, 'invalid_json', 'A message must be one JSON event.'));
    }
    if (typeof ev !== 'object' || ev === null || Array.isArray(ev) || ev.type !== 'response.create') {
      return this.#host.send(errorEvent(400, 'invalid_event', `Unsupported event type '${String((ev as Item | null)?.type)}': send response.create.`, 'type'));
    }
    this.#pending++;
    this.#queue = this.#queue
      .then(() => (this.#closed ? undefined : this.#turn(ev as Item)))
      .catch(() => this.#host.send(errorEvent(500, 'internal_error', 'The turn failed inside the gateway.')))
      .finally(() => {
        if (--this.#pending === 0) this.onIdle();
      });
  }

  /** The client went away: the turn in flight is cut (and charged by the estimate rules), none other starts. */
  close(): void {
    this.#closed = true;
    this.#abort?.abort();
  }

  async #turn(ev: Item): Promise<void> {
    const { type: _, previous_response_id: prev, stream_id: __, ...body } = ev;
    if (prev != null) {
      if (!this.#last || prev !== this.#last.id) {
        return this.#host.send(errorEvent(400, 'previous_response_not_found', `Previous response with id '${String(prev)}' not found on this socket (it keeps only its last response).`, 'previous_response_id'));
      }
      const now = typeof body.input === 'string' ? [{ type: 'message', role: 'user', content: body.input }] : Array.isArray(body.input) ? body.input : [];
      body.input = [...this.#last.items, ...now];
    }
    const sent: Item[] = typeof body.input === 'string' ? [{ type: 'message', role: 'user', content: body.input }] : Array.isArray(body.input) ? body.input : [];
    body.stream = true;
    // a failed or cut turn leaves nothing to continue from (as OpenAI evicts it)
    this.#last = null;
    const abort = (this.#abort = new AbortController());
    try {
      await this.#run(body, sent, abort);
    } finally {
      this.#abort = null;
    }
  }

  async #run(body: Item, sent: Item[], abort: AbortController): Promise<void> {
    const headers = new Headers(this.#host.headers);
    headers.set('content-type', 'application/json');
    headers.set('accept', 'text/event-stream');
    const res = await this.#host.fetch(new Request(this.#host.url, { method: 'POST', headers, body: JSON.stringify(body), signal: abort.signal }));
    if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
      // an answer in the one error shape (or a whole JSON answer, which a stream never gets)
      const text = await res.text();
      let err: Item = {};
      try {
        err = JSON.parse(text)?.error ?? {};
      } catch {
        /* not JSON */
      }
      if (res.ok) return this.#host.send(text);
      return this.#host.send(errorEvent(res.status, String(err.code ?? 'error'), String(err.message ?? text), err.param, err.type));
    }
    const reader = res.body!.getReader();
    abort.signal.addEventListener('abort', () => void reader.cancel().catch(() => {}), { once: true });
    let buf = '';
    let done: Item | null = null;
    try {
      for (;;) {
        const { value, done: end } = await reader.read();
        if (end) break;
        buf += dec.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
        for (let i = buf.indexOf('\n\n'); i !== -1; i = buf.indexOf('\n\n')) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const data = block
            .split('\n')
            .filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(5).trimStart())
            .join('\n');
          if (!data || data === '[DONE]') continue;
          if (this.#closed) continue;
          this.#host.send(data);
          const type = /^event:\s*(\S+)/m.exec(block)?.[1] ?? /^\{"type":"([^"]+)"/.exec(data)?.[1];
          if (type && FINAL.has(type)) done = JSON.parse(data).response ?? null;
        }
      }
    } catch {
      /* the client went away (the reader was cancelled): the stream settled itself as aborted */
    }
    if (done?.id && Array.isArray(done.output) && !this.#closed) this.#last = { id: done.id, items: [...sent, ...done.output.map(asInput)] };
  }
}
