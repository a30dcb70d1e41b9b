// Request logs (opt-in, REQUEST_LOG=off|metadata|full, per city through cities/update): the
// contract between the kernel, which sees each AI call's request and answer (http/capture.ts),
// and the service that keeps them (usage offers the 'request-logs' capability). The kernel
// only captures: redaction, size caps and storage happen in the keeper, after the response.
import type { Identity } from './identity.ts';

export const REQUEST_LOGS = 'request-logs';

export type RequestLogMode = 'off' | 'metadata' | 'full';
export const REQUEST_LOG_MODES = ['off', 'metadata', 'full'] as const;

/**
 * Rebuilds a streamed answer from its server-sent events (one per API: chat chunks, Responses
 * events, Messages events, the UI message stream), so a log keeps the answer, not the SSE.
 */
export interface StreamAssembler {
  /** One event: its `event:` name (if any) and its `data:` text. */
  event(name: string | undefined, data: string): void;
  /** The answer so far, as JSON (a stream cut short gives what had arrived). */
  result(): unknown;
}

/** How an action's calls are logged: set on the actions that call a model. */
export interface RequestLogSpec {
  /** For event-stream answers: how to assemble them (absent: the events are kept as text). */
  assemble?: () => StreamAssembler;
}

/** One captured call, handed to the keeper once its answer has ended. Nothing here is redacted yet. */
export interface CapturedCall {
  mode: 'metadata' | 'full';
  requestId: string;
  identity: Identity;
  /** The bearer credential the call came with (redacted wherever it appears). */
  credential: string | null;
  /** The action's route, e.g. /v1/ai/chat/completions. */
  route: string;
  method: string;
  /** The request's URL (path and query). */
  url: string;
  /** epoch ms when the request arrived. */
  receivedAt: number;
  request: { headers: [string, string][]; bytes: number; body: Uint8Array | null };
  response: {
    status: number;
    headers: [string, string][];
    bytes: number;
    stream: boolean;
    /** A whole body (bytes), an object answered as JSON, or a stream's chunks (full mode; assembled later). */
    body?: { bytes: Uint8Array } | { json: unknown } | { chunks: Uint8Array[]; sse: boolean; truncated: boolean } | null;
    /** ms from arrival to the response's head, and to its body's end. */
    headMs: number;
    endMs: number;
    /** How the answer ended: whole, or a stream cut short by the client or an error. */
    ended: 'ok' | 'aborted' | 'error';
  };
  error?: { code: string; message: string };
  /** The action's stream assembler (RequestLogSpec.assemble), for an event-stream answer. */
  assemble?: () => StreamAssembler;
}

export interface RequestLogKeeper {
  /** The mode for a caller: its city's setting, else REQUEST_LOG. Cheap: runs on every AI call. */
  mode(identity: Identity): RequestLogMode | Promise<RequestLogMode>;
  /** Takes a finished call; all the work (redact, serialize, store) happens in the background. */
  write(call: CapturedCall): void;
}
