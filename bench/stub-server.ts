// Child-process entry: the OpenAI stub as the benchmark's upstream. Started by bench/stub.ts
// with an IPC channel; reports its URL, answers "stats" messages, exits with its parent.
import { startOpenAIStub } from "../test/stubs/openai.ts";

const stub = await startOpenAIStub({ record: false, apiKey: process.env.STUB_API_KEY ?? "sk-stub" });

type Message = { type: "stats"; id: number };
process.on("message", (msg: Message) => {
  if (msg?.type === "stats") process.send?.({ type: "stats", id: msg.id, requestCount: stub.requestCount, disconnects: stub.disconnects });
});
process.on("disconnect", () => process.exit(0));
process.on("SIGTERM", () => stub.close().then(() => process.exit(0)));
process.send?.({ type: "ready", url: stub.url });
