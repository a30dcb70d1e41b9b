// Proves the OpenAI stub speaks OpenAI's protocol: the real `openai` client talks to it.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI, { toFile } from "openai";
import { startOpenAIStub, type OpenAIStub } from "./openai.ts";

let stub: OpenAIStub;
let client: OpenAI;

before(async () => {
  stub = await startOpenAIStub({ slowMs: 150, streamSlowMs: 20, videoPolls: 2 });
  client = new OpenAI({ baseURL: stub.url, apiKey: "sk-stub", maxRetries: 0 });
});
after(() => stub.close());

async function waitFor(check: () => boolean, ms = 2000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe("chat completions", () => {
  test("JSON: reply, finish_reason, usage by the documented formula; request recorded", async () => {
    stub.reset();
    const res = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [
        { role: "system", content: "You are terse." },
        { role: "user", content: "What is   the weather?" },
      ],
    });
    assert.equal(res.object, "chat.completion");
    assert.equal(res.model, "gpt-4o-mini");
    assert.match(res.id, /^chatcmpl-/);
    assert.equal(res.choices[0].message.role, "assistant");
    assert.equal(res.choices[0].message.content, "Hello from stub: What is the weather?");
    assert.equal(res.choices[0].finish_reason, "stop");
    // prompt: (3 words + 3) + (4 words + 3) = 13; completion: 7 words
    assert.equal(res.usage?.prompt_tokens, 13);
    assert.equal(res.usage?.completion_tokens, 7);
    assert.equal(res.usage?.total_tokens, 20);
    assert.equal(res.usage?.prompt_tokens_details?.cached_tokens, 0);

    assert.equal(stub.requests.length, 1);
    const rec = stub.requests[0];
    assert.equal(rec.method, "POST");
    assert.equal(rec.path, "/v1/chat/completions");
    assert.equal(rec.headers.authorization, "Bearer sk-stub");
    assert.equal((rec.body as { model: string }).model, "gpt-4o-mini");
    assert.equal(stub.disconnects, 0);
  });

  test("stream with include_usage: word chunks, finish chunk, usage chunk with empty choices, [DONE]", async () => {
    const stream = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "stream me please" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    assert.ok(chunks.length >= 6, `expected several chunks, got ${chunks.length}`);
    assert.ok(chunks.every((c) => c.object === "chat.completion.chunk"));
    assert.equal(chunks[0].choices[0].delta.role, "assistant");
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    assert.equal(text, "Hello from stub: stream me please");
    const finish = chunks.at(-2)!;
    assert.equal(finish.choices[0].finish_reason, "stop");
    const last = chunks.at(-1)!;
    assert.deepEqual(last.choices, []);
    assert.equal(last.usage?.prompt_tokens, 3 + 3);
    assert.equal(last.usage?.completion_tokens, 6);
    assert.equal(last.usage?.total_tokens, 12);
    // the raw stream ends with [DONE]
    const raw = await fetch(`${stub.url}/chat/completions`, {
      method: "POST",
      headers: { authorization: "Bearer sk-stub", "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], stream: true }),
    });
    assert.match(raw.headers.get("content-type") ?? "", /^text\/event-stream/);
    const body = await raw.text();
    assert.ok(body.endsWith("data: [DONE]\n\n"));
    assert.ok(!body.includes('"usage"'), "no usage without include_usage");
  });

  test("max_tokens truncates with finish_reason length; stop cuts the reply", async () => {
    const long = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "one two three four five" }],
      max_completion_tokens: 4,
    });
    assert.equal(long.choices[0].message.content, "Hello from stub: one");
    assert.equal(long.choices[0].finish_reason, "length");
    assert.equal(long.usage?.completion_tokens, 4);
    const stopped = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "alpha beta gamma" }],
      stop: ["beta"],
    });
    assert.equal(stopped.choices[0].message.content, "Hello from stub: alpha ");
    assert.equal(stopped.choices[0].finish_reason, "stop");
  });

  test("tool call round trip (JSON), then the tool result comes back in the reply", async () => {
    const tools: OpenAI.Chat.Completions.ChatCompletionTool[] = [
      { type: "function", function: { name: "search", parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] } } },
      { type: "function", function: { name: "weather", parameters: { type: "object", properties: { city: { type: "string" } } } } },
    ];
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: "user", content: "weather in Paris" }];
    const first = await client.chat.completions.create({ model: "gpt-4o-mini", messages, tools, tool_choice: { type: "function", function: { name: "weather" } } });
    const choice = first.choices[0];
    assert.equal(choice.finish_reason, "tool_calls");
    assert.equal(choice.message.content, null);
    const call = choice.message.tool_calls?.[0];
    assert.ok(call && call.type === "function");
    assert.equal(call.function.name, "weather");
    assert.deepEqual(JSON.parse(call.function.arguments), { city: "weather in Paris" });

    messages.push(choice.message, { role: "tool", tool_call_id: call.id, content: "sunny, 21C" });
    const second = await client.chat.completions.create({ model: "gpt-4o-mini", messages, tools });
    assert.equal(second.choices[0].finish_reason, "stop");
    assert.match(second.choices[0].message.content ?? "", /sunny, 21C/);
  });

  test("tool call streamed: arguments arrive in pieces and reassemble", async () => {
    const stream = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "find cheap flights" }],
      tools: [{ type: "function", function: { name: "lookup", parameters: { type: "object", properties: {} } } }],
      stream: true,
    });
    let name = "";
    let args = "";
    let pieces = 0;
    let finish: string | null = null;
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta;
      for (const tc of delta?.tool_calls ?? []) {
        if (tc.function?.name) name += tc.function.name;
        if (tc.function?.arguments) {
          args += tc.function.arguments;
          pieces++;
        }
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(name, "lookup");
    assert.ok(pieces > 1);
    assert.deepEqual(JSON.parse(args), { query: "find cheap flights" });
    assert.equal(finish, "tool_calls");
  });

  test("response_format json_schema and json_object give valid JSON", async () => {
    const res = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "give json" }],
      response_format: {
        type: "json_schema",
        json_schema: { name: "x", schema: { type: "object", properties: { title: { type: "string" }, count: { type: "integer" }, tags: { type: "array", items: { type: "string" } } } } },
      },
    });
    const parsed = JSON.parse(res.choices[0].message.content ?? "");
    assert.deepEqual(parsed, { title: "Hello from stub: give json", count: 5, tags: ["Hello from stub: give json"] });
    const obj = await client.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "x" }], response_format: { type: "json_object" } });
    assert.deepEqual(JSON.parse(obj.choices[0].message.content ?? ""), { reply: "Hello from stub: x" });
  });
});

describe("media", () => {
  const PNG_MAGIC = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

  test("image generation: b64_json PNG, and url served by the stub", async () => {
    const b64 = await client.images.generate({ model: "gpt-image-1", prompt: "a red square", n: 2 });
    assert.equal(b64.data?.length, 2);
    const png = Buffer.from(b64.data![0].b64_json!, "base64");
    assert.deepEqual([...png.subarray(0, 8)], PNG_MAGIC);
    assert.equal(b64.usage?.input_tokens, 3);
    const urls = await client.images.generate({ model: "dall-e-3", prompt: "a red square", response_format: "url" });
    const url = urls.data![0].url!;
    assert.ok(url.startsWith(stub.origin));
    const fetched = Buffer.from(await (await fetch(url)).arrayBuffer());
    assert.deepEqual([...fetched.subarray(0, 8)], PNG_MAGIC);
  });

  test("speech: mp3 frames and a RIFF/WAVE file with the right content types", async () => {
    const mp3 = await client.audio.speech.create({ model: "gpt-4o-mini-tts", voice: "alloy", input: "hello" });
    assert.equal(mp3.headers.get("content-type"), "audio/mpeg");
    const mp3Bytes = Buffer.from(await mp3.arrayBuffer());
    assert.equal(mp3Bytes[0], 0xff);
    assert.equal(mp3Bytes[1] & 0xe0, 0xe0); // frame sync
    const wav = await client.audio.speech.create({ model: "tts-1", voice: "alloy", input: "hello", response_format: "wav" });
    assert.equal(wav.headers.get("content-type"), "audio/wav");
    const wavBytes = Buffer.from(await wav.arrayBuffer());
    assert.equal(wavBytes.toString("latin1", 0, 4), "RIFF");
    assert.equal(wavBytes.toString("latin1", 8, 12), "WAVE");
    const opus = Buffer.from(await (await client.audio.speech.create({ model: "tts-1", voice: "alloy", input: "x", response_format: "opus" })).arrayBuffer());
    assert.equal(opus.toString("latin1", 0, 4), "OggS");
    const flac = Buffer.from(await (await client.audio.speech.create({ model: "tts-1", voice: "alloy", input: "x", response_format: "flac" })).arrayBuffer());
    assert.equal(flac.toString("latin1", 0, 4), "fLaC");
  });

  test("transcription: multipart upload parsed, text from the file size; verbose_json", async () => {
    const audio = Buffer.alloc(64000, 1);
    const res = await client.audio.transcriptions.create({ model: "whisper-1", file: await toFile(audio, "a.wav", { type: "audio/wav" }) });
    assert.equal(res.text, "stub transcript of 64000 bytes");
    const rec = stub.requests.at(-1)!;
    assert.match(String(rec.headers["content-type"]), /^multipart\/form-data/);
    assert.deepEqual((rec.body as Record<string, unknown>).file, { filename: "a.wav", type: "audio/wav", size: 64000 });
    const verbose = await client.audio.transcriptions.create({
      model: "whisper-1",
      file: await toFile(audio, "a.wav"),
      response_format: "verbose_json",
      language: "fr",
    });
    assert.equal(verbose.language, "fr");
    assert.equal(verbose.duration, 2);
    assert.equal(verbose.segments?.length, 1);
    const text = await client.audio.transcriptions.create({ model: "whisper-1", file: await toFile(audio, "a.wav"), response_format: "text" });
    assert.equal(String(text).trim(), "stub transcript of 64000 bytes");
  });

  test("videos: create → queued, retrieve → in_progress → completed, download MP4", async () => {
    const created = await client.videos.create({ model: "sora-2", prompt: "a cat on a train", seconds: "8", size: "1280x720" });
    assert.equal(created.object, "video");
    assert.match(created.id, /^video_/);
    assert.equal(created.status, "queued");
    assert.equal(created.progress, 0);
    assert.equal(created.seconds, "8");
    assert.equal(created.size, "1280x720");
    await assert.rejects(client.videos.downloadContent(created.id), (e: unknown) => e instanceof OpenAI.BadRequestError);
    const p1 = await client.videos.retrieve(created.id);
    assert.equal(p1.status, "in_progress");
    const p2 = await client.videos.retrieve(created.id);
    assert.equal(p2.status, "completed");
    assert.equal(p2.progress, 100);
    const content = await client.videos.downloadContent(created.id);
    assert.equal(content.headers.get("content-type"), "video/mp4");
    const bytes = Buffer.from(await content.arrayBuffer());
    assert.equal(bytes.toString("latin1", 4, 8), "ftyp");
    await assert.rejects(client.videos.retrieve("video_nope"), (e: unknown) => e instanceof OpenAI.NotFoundError);
  });

  test("embeddings: the client's default base64 and explicit float decode to the same unit vectors; token arrays; dimensions", async () => {
    const b64 = await client.embeddings.create({ model: "text-embedding-3-small", input: ["hello world", "a b c"] });
    assert.equal(b64.data.length, 2);
    assert.equal(b64.data[0].embedding.length, 1536);
    assert.equal((stub.requests.at(-1)!.body as any).encoding_format, "base64", "the openai client asks for base64");
    const flt = await client.embeddings.create({ model: "text-embedding-3-small", input: ["hello world", "a b c"], encoding_format: "float" });
    assert.deepEqual(flt.data[1].embedding, b64.data[1].embedding);
    assert.ok(Math.abs(flt.data[0].embedding.reduce((s, x) => s + x * x, 0) - 1) < 1e-4, "unit length");
    assert.deepEqual([flt.usage.prompt_tokens, flt.usage.total_tokens], [5, 5]);
    const tok = await client.embeddings.create({ model: "text-embedding-3-large", input: [[1, 2, 3], [4]], dimensions: 8 });
    assert.deepEqual([tok.data[0].embedding.length, tok.usage.prompt_tokens], [8, 4]);
    await assert.rejects(client.embeddings.create({ model: "text-embedding-3-small", input: [] }), (e: unknown) => e instanceof OpenAI.BadRequestError);
  });

  test("responses: 404 by default (a chat-only API); with responsesApi, plain and streamed like the chat rules", async () => {
    await assert.rejects(client.responses.create({ model: "gpt-4o-mini", input: "hi" }), (e: unknown) => e instanceof OpenAI.NotFoundError);
    const full = await startOpenAIStub({ responsesApi: true });
    try {
      const c = new OpenAI({ baseURL: full.url, apiKey: "sk-stub", maxRetries: 0 });
      const r = await c.responses.create({ model: "gpt-4o-mini", instructions: "be brief", input: "hello there" });
      assert.equal(r.output_text, "Hello from stub: hello there");
      assert.deepEqual([r.usage?.input_tokens, r.usage?.output_tokens], [2 + 3 + 2 + 3, 5]);
      const s = c.responses.stream({ model: "gpt-4o-mini", input: "one two" });
      let text = "";
      s.on("response.output_text.delta", (e) => (text += e.delta));
      const final = await s.finalResponse();
      assert.equal(text, "Hello from stub: one two");
      assert.equal(final.usage?.output_tokens, 5);
      const tool = await c.responses.create({ model: "gpt-4o-mini", input: "Paris", tools: [{ type: "function", name: "w", parameters: { type: "object", properties: { city: { type: "string" } } }, strict: false }] });
      const fc = tool.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
      assert.deepEqual([fc.type, JSON.parse(fc.arguments)], ["function_call", { city: "Paris" }]);
      const back = await c.responses.create({ model: "gpt-4o-mini", input: [{ role: "user", content: "Paris" }, fc, { type: "function_call_output", call_id: fc.call_id, output: "sunny" }] });
      assert.equal(back.output_text, "Tool result received: sunny");
    } finally {
      await full.close();
    }
  });

  test("models list", async () => {
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    assert.ok(ids.includes("gpt-4o-mini"));
    assert.ok(ids.includes("stub-500"));
  });
});

describe("errors and failure triggers", () => {
  const chat = (model: string, content = "hi") => client.chat.completions.create({ model, messages: [{ role: "user", content }] });

  test("wrong or missing key → 401 in OpenAI's error shape", async () => {
    const bad = new OpenAI({ baseURL: stub.url, apiKey: "sk-wrong-key", maxRetries: 0 });
    await assert.rejects(bad.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "x" }] }), (e: unknown) => {
      assert.ok(e instanceof OpenAI.AuthenticationError);
      assert.equal(e.status, 401);
      assert.equal(e.code, "invalid_api_key");
      assert.equal(e.type, "invalid_request_error");
      return true;
    });
    const res = await fetch(`${stub.url}/models`);
    assert.equal(res.status, 401);
    const badJson = await fetch(`${stub.url}/chat/completions`, { method: "POST", headers: { authorization: "Bearer sk-stub", "content-type": "application/json" }, body: "{nope" });
    assert.equal(badJson.status, 400);
    assert.equal(stub.requests.at(-1)?.body, "{nope");
    const body = (await res.json()) as { error: Record<string, unknown> };
    await badJson.arrayBuffer();
    assert.deepEqual(Object.keys(body.error).sort(), ["code", "message", "param", "type"]);
  });

  test("stub-500, stub-429, stub-400, TRIGGER_CONTEXT_LENGTH", async () => {
    await assert.rejects(chat("stub-500"), (e: unknown) => e instanceof OpenAI.InternalServerError && e.status === 500);
    await assert.rejects(chat("stub-429"), (e: unknown) => e instanceof OpenAI.RateLimitError && e.code === "rate_limit_exceeded");
    await assert.rejects(chat("stub-400"), (e: unknown) => e instanceof OpenAI.BadRequestError && e.code === "context_length_exceeded" && e.param === "messages");
    await assert.rejects(chat("gpt-4o-mini", "please TRIGGER_CONTEXT_LENGTH now"), (e: unknown) => e instanceof OpenAI.BadRequestError && e.code === "context_length_exceeded");
    await assert.rejects(client.images.generate({ model: "stub-500", prompt: "x" }), (e: unknown) => e instanceof OpenAI.InternalServerError);
  });

  test("stub-slow answers after slowMs", async () => {
    const t0 = Date.now();
    const res = await chat("stub-slow");
    assert.ok(Date.now() - t0 >= 140);
    assert.equal(res.choices[0].finish_reason, "stop");
  });

  test("stub-stream-slow: a client abort is counted in disconnects", async () => {
    stub.reset();
    const ac = new AbortController();
    const stream = await client.chat.completions.create(
      { model: "stub-stream-slow", messages: [{ role: "user", content: "go" }], stream: true },
      { signal: ac.signal },
    );
    let seen = 0;
    try {
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta.content) seen++;
        if (seen === 2) ac.abort(); // the client ends the stream (quietly or with an AbortError)
      }
    } catch (e) {
      assert.equal((e as Error).name, "APIUserAbortError");
    }
    assert.equal(seen, 2);
    await waitFor(() => stub.disconnects === 1);
    assert.equal(stub.disconnects, 1);
  });

  test("stub-stream-slow streams ~20 content chunks when not aborted", async () => {
    const stream = await client.chat.completions.create({ model: "stub-stream-slow", messages: [{ role: "user", content: "go" }], stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    assert.equal(text.split(" ").length, 20);
    assert.ok(text.startsWith("w1 w2"));
  });
});
