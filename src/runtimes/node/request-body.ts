// A request's body on Node, read from the IncomingMessage itself: the chunks as Node's parser
// gives them (Buffers over the socket's read), one of them as it is, or joined. The adapter's
// Request.arrayBuffer() copies the body into a new ArrayBuffer (ArrayBuffer.prototype.slice: an
// allocation outside the heap, per request) and goes through its own promise machinery.
import type { IncomingMessage } from 'node:http';
import { CLIENT_CLOSED, GatewayError } from '../../kernel/errors.ts';
import { tooLarge } from '../../kernel/input.ts';

/**
 * The body of the request the adapter handed the gateway with `platform` (its bindings), never
 * more than `limit` bytes (past it: 413 body_too_large, and the rest is left to the adapter, which
 * drains it once the answer is written); null when this request's body is not for us to read
 * (no IncomingMessage, or reading has begun), and the kernel reads it through the Request.
 */
export function readIncomingBody(platform: unknown, limit: number): Promise<Uint8Array> | null {
  // An HTTP exchange's bindings (node-server's incoming and outgoing). A Responses WebSocket's
  // turns carry the upgrade's request alone (for its address): their bodies are not its body.
  const b = platform as { incoming?: IncomingMessage; outgoing?: unknown } | undefined;
  const incoming = b?.outgoing ? b.incoming : undefined;
  if (!incoming || incoming.readableDidRead || incoming.readableEnded || incoming.destroyed) return null;
  return new Promise<Uint8Array>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = () => {
      incoming.off('data', onData);
      incoming.off('end', onEnd);
      incoming.off('error', onGone);
      incoming.off('close', onGone);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.byteLength;
      if (size > limit) {
        done();
        reject(tooLarge(limit));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      done();
      resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
    };
    // The client went away (or its socket broke) before the body's end: nobody reads the
    // answer, and the request log and metrics say so (499, as for a client gone during a call).
    const onGone = () => {
      done();
      reject(new GatewayError(499, CLIENT_CLOSED, 'The client closed the request before its body ended.'));
    };
    incoming.on('data', onData);
    incoming.on('end', onEnd);
    incoming.on('error', onGone);
    incoming.on('close', onGone);
  });
}
