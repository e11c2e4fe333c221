// A program as its users write it: the official OpenAI or Anthropic SDK,
// unchanged but for its base URL (and, for a gateway, its default
// headers), with the SDK's own retries off (maxRetries: 0) unless asked.
// It makes CALLS calls, CONCURRENCY at a time, and prints one JSON line:
//   {"ok": n, "errors": {"429": n, ...}, "streams": n, "whole": n,
//    "first_error": "...", "wall_ms": n}
// "whole": streamed answers that reached their end event (OpenAI: a chunk
// with a finish_reason; Anthropic: message_stop). Test and bench code
// (tests/ai/package.json pins the SDKs); it talks to 127.0.0.1 only.
//   node sdk_client.mjs --vendor openai|anthropic --base URL [--calls N]
//     [--concurrency C] [--stream] [--max-tokens M] [--prompt-chars P]
//     [--sdk-retries R] [--header NAME:VALUE]... [--timeout-ms T]
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";

const args = process.argv.slice(2);
const opt = {vendor: "openai", calls: 10, concurrency: 4, stream: false, maxTokens: 64,
             promptChars: 200, sdkRetries: 0, headers: {}, timeoutMs: 600000};
for (let i = 0; i < args.length; i++) {
  const a = args[i], v = () => args[++i];
  if (a === "--vendor") opt.vendor = v();
  else if (a === "--base") opt.base = v();
  else if (a === "--calls") opt.calls = +v();
  else if (a === "--concurrency") opt.concurrency = +v();
  else if (a === "--stream") opt.stream = true;
  else if (a === "--max-tokens") opt.maxTokens = +v();
  else if (a === "--prompt-chars") opt.promptChars = +v();
  else if (a === "--sdk-retries") opt.sdkRetries = +v();
  else if (a === "--timeout-ms") opt.timeoutMs = +v();
  else if (a === "--header") { const h = v(), c = h.indexOf(":"); opt.headers[h.slice(0, c)] = h.slice(c + 1).trim(); }
  else { console.error("sdk_client: unknown option " + a); process.exit(2); }
}
if (!opt.base) { console.error("sdk_client: --base URL is required"); process.exit(2); }

const prompt = "x".repeat(opt.promptChars);
const common = {baseURL: opt.base, maxRetries: opt.sdkRetries, timeout: opt.timeoutMs,
                defaultHeaders: opt.headers};
const openai = opt.vendor === "openai" ? new OpenAI({apiKey: "sk-test-not-a-secret", ...common}) : null;
const anthropic = opt.vendor === "anthropic" ? new Anthropic({apiKey: "sk-ant-test-not-a-secret", ...common}) : null;

const out = {ok: 0, errors: {}, streams: 0, whole: 0, first_error: null, wall_ms: 0};
function failed(e) {
  const k = String(e && e.status !== undefined ? e.status : (e && e.name) || "error");
  out.errors[k] = (out.errors[k] || 0) + 1;
  if (!out.first_error) out.first_error = String((e && e.message) || e).slice(0, 200);
}

async function one(i) {
  const messages = [{role: "user", content: `call ${i}: ${prompt}`}];
  if (openai) {
    if (!opt.stream) {
      const r = await openai.chat.completions.create({model: "gpt-test", messages, max_tokens: opt.maxTokens});
      if (!r.choices || !r.choices.length) throw new Error("no choices");
      return;
    }
    const s = await openai.chat.completions.create({model: "gpt-test", messages, max_tokens: opt.maxTokens, stream: true});
    out.streams++;
    let done = false;
    for await (const c of s) if (c.choices && c.choices[0] && c.choices[0].finish_reason) done = true;
    if (done) out.whole++;
    return;
  }
  if (!opt.stream) {
    const r = await anthropic.messages.create({model: "claude-test", max_tokens: opt.maxTokens, messages});
    if (!r.content) throw new Error("no content");
    return;
  }
  const s = await anthropic.messages.create({model: "claude-test", max_tokens: opt.maxTokens, messages, stream: true});
  out.streams++;
  let done = false;
  for await (const ev of s) if (ev.type === "message_stop") done = true;
  if (done) out.whole++;
}

const t0 = Date.now();
let next = 0;
async function worker() {
  while (next < opt.calls) {
    const i = next++;
    try { await one(i); out.ok++; } catch (e) { failed(e); }
  }
}
await Promise.all(Array.from({length: Math.min(opt.concurrency, opt.calls)}, worker));
out.wall_ms = Date.now() - t0;
console.log(JSON.stringify(out));
