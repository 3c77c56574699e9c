// A cheaper stand-in for tests/support/llm_server.py, for the throughput benchmarks only.
//
// It answers OpenAI's POST /v1/chat/completions as that server does with no responder and
// no faults: the same reply text ({"echo": first 40 characters of the last user message,
// "n": 0..999 from a sha256 of the canonical messages}), the same usage estimate, after
// the same latency. Written on Node's http module, it spends a fraction of the Python
// server's CPU per request, so on a 2-core machine the client being measured keeps more of
// a core: the floor a client can reach moves toward the ideal N·L/C.
//
//   node tests/benchmarks/fast_llm_server.mjs --port 0 --latency 0.05 --api-key sk-...
//
// prints "READY http://127.0.0.1:PORT" once listening, and serves until SIGTERM or SIGINT.
import { createHash, randomBytes } from "node:crypto";
import { createServer } from "node:http";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, i, all) => {
    if (arg.startsWith("--")) pairs.push([arg.slice(2), all[i + 1]]);
    return pairs;
  }, []),
);
const latencyMs = Number(args.latency ?? 0) * 1000;
const apiKey = args["api-key"];
const fingerprint = "fp_bench";

// json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

function contentText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .filter((p) => p && typeof p === "object" && typeof p.text === "string")
      .map((p) => p.text)
      .join("\n");
  }
  return "";
}

function estimateTokens(text) {
  const words = text.split(/\s+/).filter(Boolean).length;
  return Math.max(1, Math.floor((words * 4) / 3));
}

// json.dumps(text) with its default ensure_ascii=True: non-ASCII as \uXXXX escapes.
function asciiJSON(text) {
  return JSON.stringify(text).replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

function replyText(messages) {
  const digest = createHash("sha256").update(canonical(messages)).digest();
  let echo = "";
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m && typeof m === "object" && m.role === "user") {
      echo = contentText(m.content);
      break;
    }
  }
  const n = digest.readUInt32BE(0) % 1000;
  return `{"echo": ${asciiJSON(Array.from(echo).slice(0, 40).join(""))}, "n": ${n}}`;
}

function send(res, status, payload) {
  const data = Buffer.from(JSON.stringify(payload));
  res.writeHead(status, { "content-type": "application/json", "content-length": data.length });
  res.end(data);
}

function answer(req, raw) {
  if (req.method !== "POST" || !req.url.endsWith("/chat/completions")) {
    return [404, { error: { message: "not found", type: "invalid_request_error" } }];
  }
  if (apiKey && req.headers.authorization !== `Bearer ${apiKey}`) {
    return [401, { error: { message: "Incorrect API key provided.", type: "invalid_request_error" } }];
  }
  let body;
  try {
    body = JSON.parse(raw);
  } catch {
    return [400, { error: { message: "We could not parse the JSON body of your request.", type: "invalid_request_error" } }];
  }
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0 || typeof body.model !== "string") {
    return [400, { error: { message: "Missing 'model' or 'messages'.", type: "invalid_request_error" } }];
  }
  const text = replyText(messages);
  const prompt = [contentText(body.system ?? body.instructions), ...messages.map((m) => contentText(m?.content))];
  const promptTokens = estimateTokens(prompt.join("\n"));
  const completionTokens = estimateTokens(text);
  return [
    200,
    {
      id: `chatcmpl-${randomBytes(12).toString("hex")}`,
      object: "chat.completion",
      created: Math.floor(Date.now() / 1000),
      model: body.model,
      system_fingerprint: fingerprint,
      choices: [
        { index: 0, message: { role: "assistant", content: text, refusal: null }, logprobs: null, finish_reason: "stop" },
      ],
      usage: {
        prompt_tokens: promptTokens,
        completion_tokens: completionTokens,
        total_tokens: promptTokens + completionTokens,
        prompt_tokens_details: { cached_tokens: 0 },
        completion_tokens_details: { reasoning_tokens: 0 },
      },
    },
  ];
}

const server = createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const [status, payload] = answer(req, Buffer.concat(chunks).toString("utf8"));
    if (latencyMs > 0) setTimeout(() => send(res, status, payload), latencyMs);
    else send(res, status, payload);
  });
});
server.listen(Number(args.port ?? 0), "127.0.0.1", () => {
  process.stdout.write(`READY http://127.0.0.1:${server.address().port}\n`);
});
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => server.close(() => process.exit(0)));
