// OpenAI-shaped error bodies the stub answers with: {"error":{"message","type","param","code"}}.

export type StubError = { status: number; body: string; headers?: Record<string, string> };

export function openaiError(status: number, message: string, type: string, param: string | null = null, code: string | null = null, headers?: Record<string, string>): StubError {
  return { status, body: JSON.stringify({ error: { message, type, param, code } }), headers };
}

function maskKey(key: string): string {
  if (key.length <= 8) return "*".repeat(key.length);
  return key.slice(0, 3) + "*".repeat(Math.max(0, key.length - 7)) + key.slice(-4);
}

export function missingKey(): StubError {
  return openaiError(
    401,
    "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're accessing the API from your browser and are prompted for a username and password. You can obtain an API key from https://platform.openai.com/account/api-keys.",
    "invalid_request_error",
  );
}

export function wrongKey(given: string): StubError {
  return openaiError(
    401,
    `Incorrect API key provided: ${maskKey(given)}. You can find your API key at https://platform.openai.com/account/api-keys.`,
    "invalid_request_error",
    null,
    "invalid_api_key",
  );
}

export function invalidUrl(method: string, path: string): StubError {
  return openaiError(404, `Invalid URL (${method} ${path})`, "invalid_request_error");
}

export function invalidJson(): StubError {
  return openaiError(
    400,
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)",
    "invalid_request_error",
  );
}

export function missingParam(param: string): StubError {
  return openaiError(400, `Missing required parameter: '${param}'.`, "invalid_request_error", param, "missing_required_parameter");
}

export function invalidValue(param: string, message: string): StubError {
  return openaiError(400, message, "invalid_request_error", param, "invalid_value");
}

export function serverError(): StubError {
  return openaiError(500, "The server had an error while processing your request. Sorry about that!", "server_error");
}

export function contextLengthExceeded(promptTokens: number): StubError {
  const claimed = Math.max(promptTokens, 128001);
  return openaiError(
    400,
    `This model's maximum context length is 128000 tokens. However, your messages resulted in ${claimed} tokens. Please reduce the length of the messages.`,
    "invalid_request_error",
    "messages",
    "context_length_exceeded",
  );
}

export function rateLimited(model: string): StubError {
  return openaiError(
    429,
    `Rate limit reached for ${model} in organization org-stub on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s. Visit https://platform.openai.com/account/rate-limits to learn more.`,
    "requests",
    null,
    "rate_limit_exceeded",
    {
      "x-ratelimit-limit-requests": "3",
      "x-ratelimit-remaining-requests": "0",
      "x-ratelimit-reset-requests": "20s",
    },
  );
}

export function notFound(message: string, param: string | null = null): StubError {
  return openaiError(404, message, "invalid_request_error", param, "not_found");
}
