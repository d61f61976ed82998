// Concurrent streaming clients against a real larderd, through the official
// `openai` SDK: starts the daemon on one model, then for each client count
// runs that many clients for --duration seconds, each looping streaming chat
// requests (a new request as soon as its previous one ends; none started
// after the deadline, the ones in flight finish). Prints a markdown table:
//
//   requests     requests completed (every stream read to its end)
//   errors       requests that failed (an exception, no usage, or an empty
//                completion); must be 0
//   tok/s        aggregate completion tokens per second: the sum of
//                usage.completion_tokens over the wall time of the level
//   TTFT         p50 / p99 time to first token: request sent -> first
//                content chunk, client side
//   ITL          p50 / p99 inter-token latency: the gap between consecutive
//                content chunks of one stream, client side (chunks that
//                arrive in one read come out back to back, near 0 ms)
//   peak RSS     the daemon's VmHWM (/proc/<pid>/status) during the level
//                (reset before each level through /proc/<pid>/clear_refs
//                where the kernel allows it, else the peak since start)
//
// and the ratio of aggregate tok/s at 8 clients to 1 client. A warm-up
// request runs before the first level. Requests: a short system prompt and
// a user message that differs per client and request, max_tokens
// --max-tokens with ignore_eos (so every request decodes that many tokens),
// temperature 0.8 with a per-request seed.
//
// usage: node bench/clients.mjs --bin build/daemon/larderd --model M.gguf
//          [--clients 1,8,32] [--duration 60] [--max-tokens 64]
//          [--threads 0] [--max-running N] [--json FILE]
// --threads: the daemon's --threads (0: all cores); --max-running: the
// daemon's [engine] max_running (default: the daemon's own default, 8);
// --json: also write the rows as JSON. Exits 1 when any request failed.
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import OpenAI from 'openai';

import { Daemon } from '../tests/e2e/daemon.mjs';

function parseArgs(argv) {
  const a = { clients: [1, 8, 32], duration: 60, maxTokens: 64, threads: 0, maxRunning: 0, bin: '', model: '', json: '' };
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i];
    const v = () => {
      if (i + 1 >= argv.length) usage();
      return argv[++i];
    };
    if (k === '--bin') a.bin = v();
    else if (k === '--model') a.model = v();
    else if (k === '--clients') a.clients = v().split(',').map(Number);
    else if (k === '--duration') a.duration = Number(v());
    else if (k === '--max-tokens') a.maxTokens = Number(v());
    else if (k === '--threads') a.threads = Number(v());
    else if (k === '--max-running') a.maxRunning = Number(v());
    else if (k === '--json') a.json = v();
    else usage();
  }
  if (!a.bin || !a.model || !existsSync(a.bin) || !existsSync(a.model)) usage();
  if (a.clients.some((n) => !(n >= 1)) || !(a.duration > 0) || !(a.maxTokens >= 1)) usage();
  return a;
}

function usage() {
  console.error('usage: node bench/clients.mjs --bin LARDERD --model MODEL.gguf [--clients 1,8,32] [--duration 60] ' +
                '[--max-tokens 64] [--threads 0] [--max-running N] [--json FILE]');
  process.exit(2);
}

async function startDaemon(a, dir) {
  const extraArgs = ['--log-level', 'warn'];
  if (a.maxRunning > 0) {
    const cfg = join(dir, 'larder.toml');
    writeFileSync(cfg, `[engine]\nmax_running = ${a.maxRunning}\n`);
    extraArgs.push('--config', cfg);
  }
  return Daemon.start({ model: a.model, bin: a.bin, threads: a.threads, extraArgs, startTimeoutMs: 120000 });
}

function peakKiB(pid) {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

// Resets VmHWM to the current RSS (Linux >= 4.0); false where not allowed.
function resetPeak(pid) {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

function percentile(v, p) {
  if (v.length === 0) return NaN;
  const s = Float64Array.from(v).sort();
  return s[Math.min(s.length - 1, Math.round(p * (s.length - 1)))];
}

const topics = ['a dragon', 'a little boat', 'the moon', 'a red ball', 'a kind dog', 'the garden', 'a big tree', 'rain'];

// One streaming chat request; resolves to its measurements or throws.
async function oneRequest(client, model, a, clientId, n) {
  const t0 = performance.now();
  const stream = await client.chat.completions.create({
    model,
    messages: [
      { role: 'system', content: 'You tell short stories for children.' },
      { role: 'user', content: `Tell me story ${n} about ${topics[(clientId + n) % topics.length]} (reader ${clientId}).` },
    ],
    max_tokens: a.maxTokens,
    ignore_eos: true,
    temperature: 0.8,
    seed: clientId * 100000 + n,
    stream: true,
    stream_options: { include_usage: true },
  });
  let ttft = NaN;
  let last = 0;
  const gaps = [];
  let usage = null;
  let text = '';
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const piece = chunk.choices?.[0]?.delta?.content;
    if (piece) {
      const t = performance.now();
      if (Number.isNaN(ttft)) ttft = t - t0;
      else gaps.push(t - last);
      last = t;
      text += piece;
    }
  }
  if (!usage) throw new Error('the stream ended without usage');
  if (usage.completion_tokens < 1 || text.length === 0) throw new Error('empty completion');
  return { ttft, gaps, tokens: usage.completion_tokens };
}

async function runLevel(client, model, a, nClients, pid) {
  const reset = resetPeak(pid);
  const t0 = performance.now();
  const deadline = t0 + a.duration * 1000;
  const ttfts = [];
  const itls = [];
  let tokens = 0;
  let requests = 0;
  let errors = 0;
  let firstError = '';
  const loop = async (id) => {
    for (let n = 0; performance.now() < deadline; ++n) {
      try {
        const r = await oneRequest(client, model, a, id, n);
        ttfts.push(r.ttft);
        for (const g of r.gaps) itls.push(g);
        tokens += r.tokens;
        ++requests;
      } catch (e) {
        ++errors;
        if (!firstError) firstError = String(e?.message ?? e);
        await new Promise((r) => setTimeout(r, 100));  // no tight loop against a dead daemon
      }
    }
  };
  await Promise.all(Array.from({ length: nClients }, (_, i) => loop(i)));
  const wall = (performance.now() - t0) / 1000;
  return {
    clients: nClients, requests, errors, first_error: firstError, wall_s: wall, completion_tokens: tokens,
    tok_per_s: tokens / wall, ttft_p50_ms: percentile(ttfts, 0.5), ttft_p99_ms: percentile(ttfts, 0.99),
    itl_p50_ms: percentile(itls, 0.5), itl_p99_ms: percentile(itls, 0.99), peak_rss_mib: peakKiB(pid) / 1024,
    peak_since: reset ? 'level' : 'start',
  };
}

const a = parseArgs(process.argv.slice(2));
const dir = mkdtempSync(join(tmpdir(), 'larder-clients-'));
const d = await startDaemon(a, dir);
const rows = [];
try {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${d.port}/v1`, apiKey: 'none', maxRetries: 0, timeout: 600000 });
  const model = (await client.models.list()).data[0].id;
  await oneRequest(client, model, a, 0, -1);  // warm-up
  for (const n of a.clients) {
    const r = await runLevel(client, model, a, n, d.proc.pid);
    rows.push(r);
    console.error(JSON.stringify(r));
  }
} finally {
  await d.stop();
  rmSync(dir, { recursive: true, force: true });
}

const f = (x, digits = 1) => (Number.isFinite(x) ? x.toFixed(digits) : 'n/a');
console.log(`\n${basename(a.model)}: ${a.duration} s per level, max_tokens ${a.maxTokens} (ignore_eos), ` +
            `daemon --threads ${a.threads}${a.maxRunning > 0 ? `, max_running ${a.maxRunning}` : ''}\n`);
console.log('| clients | requests | errors | tok/s | TTFT p50 / p99 ms | ITL p50 / p99 ms | peak RSS MiB |');
console.log('| ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
for (const r of rows) {
  console.log(`| ${r.clients} | ${r.requests} | ${r.errors} | ${f(r.tok_per_s)} | ${f(r.ttft_p50_ms)} / ${f(r.ttft_p99_ms)} | ` +
              `${f(r.itl_p50_ms, 2)} / ${f(r.itl_p99_ms, 2)} | ${f(r.peak_rss_mib)}${r.peak_since === 'start' ? ' (since start)' : ''} |`);
}
const one = rows.find((r) => r.clients === 1);
const eight = rows.find((r) => r.clients === 8);
if (one && eight) console.log(`\naggregate tok/s, 8 clients / 1 client: ${f(eight.tok_per_s / one.tok_per_s, 2)}x`);
for (const r of rows) if (r.first_error) console.log(`\n${r.clients} clients: first error: ${r.first_error}`);
if (a.json) writeFileSync(a.json, JSON.stringify(rows, null, 2));
process.exit(rows.some((r) => r.errors > 0) ? 1 : 0);
