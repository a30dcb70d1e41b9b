// The upstream of every benchmark case: test/stubs/openai.ts in its own process.
import type { ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { spawnServer, type ServerProcess } from "./processes.ts";

export type StubStats = { requestCount: number; disconnects: number };

export type StubProcess = {
  /** OpenAI base URL, e.g. http://127.0.0.1:1234/v1 */
  url: string;
  apiKey: string;
  process: ServerProcess;
  /** Requests the stub has received so far (and client disconnects). */
  stats(): Promise<StubStats>;
  stop(): Promise<void>;
};

type FromChild = { type: "ready"; url: string } | ({ type: "stats"; id: number } & StubStats);

export async function startStubProcess(apiKey = "sk-stub"): Promise<StubProcess> {
  let url: string | undefined;
  let nextId = 0;
  const waiting = new Map<number, (s: StubStats) => void>();
  const onMessage = (msg: FromChild) => {
    if (msg.type === "ready") url = msg.url;
    else if (msg.type === "stats") {
      waiting.get(msg.id)?.({ requestCount: msg.requestCount, disconnects: msg.disconnects });
      waiting.delete(msg.id);
    }
  };
  const proc = await spawnServer({
    name: "stub",
    args: [fileURLToPath(new URL("./stub-server.ts", import.meta.url))],
    env: { STUB_API_KEY: apiKey },
    ipc: true,
    onSpawn: (child: ChildProcess) => child.on("message", onMessage),
    ready: async () => url !== undefined,
  });
  return {
    url: url!,
    apiKey,
    process: proc,
    stats() {
      const id = ++nextId;
      return new Promise((resolve) => {
        waiting.set(id, resolve);
        proc.child.send({ type: "stats", id });
      });
    },
    stop: () => proc.stop(),
  };
}
