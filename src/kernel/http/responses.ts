// Small changes to a Response on its way out: more headers, a callback at the body's end.

/** Adds headers to a response (a copy when its headers are immutable). */
export function withHeaders(res: Response, headers: Record<string, string>): Response {
  try {
    for (const k in headers) res.headers.set(k, headers[k]);
    return res;
  } catch {
    const copy = new Response(res.body, res);
    for (const k in headers) copy.headers.set(k, headers[k]);
    return copy;
  }
}

/** Calls `done` once the response body has been fully sent (or abandoned). */
export function releasedAtEnd(res: Response, done: () => void): Response {
  if (!res.body) {
    done();
    return res;
  }
  let called = false;
  const once = () => {
    if (!called) {
      called = true;
      done();
    }
  };
  const body = res.body.pipeThrough(new TransformStream({ flush: once }));
  const reader = body.getReader();
  const stream = new ReadableStream({
    async pull(ctrl) {
      const { done: end, value } = await reader.read();
      if (end) ctrl.close();
      else ctrl.enqueue(value);
    },
    cancel(reason) {
      once();
      return reader.cancel(reason);
    },
  });
  return new Response(stream, res);
}
