// The chat/completions request every benchmark sends, in both modes (run.ts, cpu.ts, pair.ts).
import type { Mode } from "./report.ts";

export const USER_TEXT = "Reply with a short friendly greeting for the benchmark please";
/** What the stub answers to it. */
export const EXPECTED_REPLY = `Hello from stub: ${USER_TEXT}`;

export function chatBodies(model: string): Record<Mode, string> {
  const messages = [
    { role: "system", content: "You are a load test." },
    { role: "user", content: USER_TEXT },
  ];
  return {
    json: JSON.stringify({ model, messages }),
    stream: JSON.stringify({ model, messages, stream: true, stream_options: { include_usage: true } }),
  };
}
