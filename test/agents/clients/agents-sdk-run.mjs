// Run by test/agents (copied into the folder where @openai/agents is installed): one agent with
// one function tool, against citygate. Env: CITYGATE_URL (…/v1/ai), CITYGATE_TOKEN, MODEL,
// API = responses | chat, STREAM = 1 for a streamed run. Prints the final output and, on
// stderr, the tool's calls.
import { Agent, run, tool, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } from '@openai/agents';
import OpenAI from 'openai';
import { z } from 'zod';

setTracingDisabled(true);
setDefaultOpenAIClient(new OpenAI({ baseURL: process.env.CITYGATE_URL, apiKey: process.env.CITYGATE_TOKEN }));
setOpenAIAPI(process.env.API === 'chat' ? 'chat_completions' : 'responses');

const getWeather = tool({
  name: 'get_weather',
  description: 'The weather in a city',
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => {
    process.stderr.write(`tool get_weather ${city}\n`);
    return `sunny in ${city}`;
  },
});

const agent = new Agent({ name: 'weather', instructions: 'Answer with the weather tool.', model: process.env.MODEL, tools: [getWeather] });
const stream = process.env.STREAM === '1';
const result = await run(agent, 'What is the weather in Paris?', { stream });
if (stream) {
  for await (const _ of result) {
    /* drain */
  }
  await result.completed;
}
process.stdout.write(String(result.finalOutput));
