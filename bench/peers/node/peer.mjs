// Peer client for `make bench`: Node's `got` with its retry options.
//
// Usage: node peer.mjs BASE_URL KEYS_FILE [CONCURRENCY]
// GETs BASE_URL + KEY for every key (one per line), CONCURRENCY (default 30)
// requests at a time. got's retry: limit 6, statusCodes with 429 and 5xx,
// GET only; otherwise got's defaults (Retry-After honoured, up to the request
// timeout of 10 s; without it 1 s * 2^(n-1) plus up to 100 ms noise). Each
// request carries X-Client-Id: KEY. Prints one line: ok=N failed=N.
import { readFileSync } from 'node:fs';
import got from 'got';

const [base, keysFile, concArg] = process.argv.slice(2);
if (!base || !keysFile) {
  console.error('usage: node peer.mjs BASE_URL KEYS_FILE [CONCURRENCY]');
  process.exit(2);
}
const conc = concArg ? parseInt(concArg, 10) : 30;
const keys = readFileSync(keysFile, 'utf8').split('\n').map((s) => s.trim()).filter(Boolean);

const client = got.extend({
  retry: {
    limit: 6,
    methods: ['GET'],
    statusCodes: [408, 429, 500, 502, 503, 504],
  },
  timeout: { request: 10000 },
});

let next = 0;
let ok = 0;
let failed = 0;
async function worker() {
  while (next < keys.length) {
    const key = keys[next++];
    try {
      const r = await client.get(base + key, { headers: { 'X-Client-Id': key } });
      if (r.statusCode === 200) ok++; else failed++;
    } catch {
      failed++;
    }
  }
}
await Promise.all(Array.from({ length: conc }, worker));
console.log(`ok=${ok} failed=${failed}`);
