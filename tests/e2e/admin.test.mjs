// The admin endpoints on a real larderd: /metrics read back with a small
// parser of the Prometheus text format (written from the format's
// description), /admin/cache after chat requests, SIGHUP reloads (a changed
// budget applied, a broken file refused), the `larder` client, admin = "off"
// and admin_token. Needs LARDER_BIN and the test model.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Daemon, modelPath, tempDir, removeDir } from './daemon.mjs';

const model = modelPath();
const skip = model ? false : 'test model stories260K.gguf not found (set LARDER_TEST_MODELS)';
const cli = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'clients', 'larder');
const PAGE_BYTES = 20480;  // stories260K: 5 layers * 2 * 16 tokens * 32 * 4 bytes
let dir;

before(() => { dir = tempDir(); });
after(() => { if (dir) removeDir(dir); });

const messages = [
  { role: 'system', content: 'You are a storyteller who tells short and happy stories to small children.' },
  { role: 'user', content: 'Tell me a story about a little cat who lived in a big house with a garden.' },
];

async function chat(d, extra = {}) {
  const r = await fetch(`${d.baseURL}/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: 8, temperature: 0, ...extra }),
  });
  assert.equal(r.status, 200);
  return r.json();
}

async function admin(d, method, path, body, token) {
  const headers = {};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (token) headers.Authorization = `Bearer ${token}`;
  return fetch(`http://127.0.0.1:${d.port}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
}

// Prometheus text format 0.0.4: "# HELP name text", "# TYPE name type",
// samples "name{label="value",...} value".
function parseMetrics(text) {
  const types = new Map(), helps = new Map(), samples = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    let m;
    if ((m = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line))) {
      (m[1] === 'TYPE' ? types : helps).set(m[2], m[3]);
      continue;
    }
    if (line.startsWith('#')) continue;
    m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `not a sample line: ${line}`);
    const labels = {};
    for (const l of (m[2] || '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?/g)) {
      labels[l[1]] = l[2].replace(/\\n/g, '\n').replace(/\\(.)/g, '$1');
    }
    samples.push({ name: m[1], labels, value: m[3] === '+Inf' ? Infinity : Number(m[3]) });
  }
  const value = (name, want = {}) => samples.find((s) => s.name === name &&
    Object.entries(want).every(([k, v]) => s.labels[k] === v))?.value;
  return { types, helps, samples, value };
}

async function waitFor(what, check, ms = 10000) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`timed out waiting for ${what}`);
}

function runCli(d, args, env = {}) {
  const r = spawnSync(cli, ['--url', `http://127.0.0.1:${d.port}`, ...args], {
    encoding: 'utf8', env: { ...process.env, LARDER_ADMIN_TOKEN: '', LARDER_API_KEY: '', ...env },
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

test('/metrics and /admin/cache after chat requests; SIGHUP reloads', { skip }, async () => {
  const config = join(dir, 'reload.toml');
  writeFileSync(config, '[cache.device]\nbudget = "2MiB"\n');
  const d = await Daemon.start({ model, cacheDir: join(dir, 'cache1'), extraArgs: ['--config', config] });
  try {
    const first = await chat(d);
    const second = await chat(d);
    assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
    const cached = second.usage.prompt_tokens_details.cached_tokens;
    // The same prompt again: everything but its last token comes from the
    // cache (whole pages, then the matching part of the last page).
    assert.equal(cached, second.usage.prompt_tokens - 1);

    const report = await (await admin(d, 'GET', '/admin/cache')).json();
    const device = report.tiers.find((t) => t.name === 'device');
    assert.deepEqual(report.tiers.map((t) => t.name), ['device', 'disk']);
    // Every full page of the second prompt but the last position's was found.
    assert.equal(device.hits, Math.floor(cached / 16));
    assert.equal(device.misses, Math.floor((first.usage.prompt_tokens - 1) / 16));
    assert.equal(device.budget_bytes, Math.floor(2 * 1048576 / PAGE_BYTES) * PAGE_BYTES);
    assert.equal(report.page_size, 16);
    assert.equal(report.queue_length, 0);

    const res = await fetch(`http://127.0.0.1:${d.port}/metrics`);
    assert.equal(res.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
    const m = parseMetrics(await res.text());
    for (const s of m.samples) {
      const family = [s.name, s.name.replace(/_(bucket|sum|count)$/, '')].find((n) => m.types.has(n));
      assert.ok(family, `no TYPE for ${s.name}`);
      assert.ok(m.helps.has(family), `no HELP for ${family}`);
      if (m.types.get(family) === 'counter') assert.match(family, /_total$/);
    }
    assert.equal(m.value('larder_http_requests_total', { endpoint: '/v1/chat/completions', code: '200' }), 2);
    assert.equal(m.value('larder_http_requests_total', { endpoint: '/admin/cache', code: '200' }), 1);
    assert.equal(m.value('larder_prompt_tokens_total'), first.usage.prompt_tokens + second.usage.prompt_tokens);
    assert.equal(m.value('larder_prompt_cached_tokens_total'), cached);
    assert.equal(m.value('larder_generation_tokens_total'),
                 first.usage.completion_tokens + second.usage.completion_tokens);
    assert.equal(m.types.get('larder_time_to_first_token_seconds'), 'histogram');
    assert.equal(m.value('larder_time_to_first_token_seconds_count'), 2);
    const buckets = m.samples.filter((s) => s.name === 'larder_inter_token_latency_seconds_bucket');
    assert.ok(buckets.length > 2);
    for (let i = 1; i < buckets.length; ++i) assert.ok(buckets[i].value >= buckets[i - 1].value);
    assert.equal(buckets.at(-1).labels.le, '+Inf');
    assert.equal(buckets.at(-1).value, m.value('larder_inter_token_latency_seconds_count'));
    assert.equal(m.value('larder_cache_hits_total', { tier: 'device' }), Math.floor(cached / 16));
    assert.equal(m.value('larder_cache_evictions_total', { tier: 'device', reason: 'budget' }), 0);
    assert.ok(m.value('larder_cache_spilled_bytes_total', { tier: 'disk' }) > 0);
    assert.equal(m.value('larder_running_sequences'), 0);

    // SIGHUP with a smaller device budget: applied without a restart.
    writeFileSync(config, '[cache.device]\nbudget = "1MiB"\n[sampling]\ntemperature = 0.5\n');
    d.proc.kill('SIGHUP');
    const budgetNow = async () => (await (await admin(d, 'GET', '/admin/cache')).json()).tiers[0].budget_bytes;
    await waitFor('the new budget', async () => (await budgetNow()) === 51 * PAGE_BYTES);  // 1 MiB / 20480 = 51 pages
    // The reload's log line is written after the budget is applied: wait for it too.
    await waitFor('the reload line', () => /config reloaded from .*cache\.device\.budget: "2MiB" -> "1MiB"/.test(d.logs.join('')));

    // A broken file: refused with a line naming the key; the budget stays.
    writeFileSync(config, '[cache.device]\nbudget = "1 potato"\n');
    d.proc.kill('SIGHUP');
    await waitFor('the refusal', () => /config reload failed.*cache\.device\.budget/.test(d.logs.join('')));
    assert.equal(await budgetNow(), 51 * PAGE_BYTES);
    // A key that needs a restart: the reload is refused, naming it.
    writeFileSync(config, '[cache]\npage_size = 32\n');
    const refused = await admin(d, 'POST', '/admin/reload');
    assert.equal(refused.status, 400);
    assert.match((await refused.json()).error.message, /cache\.page_size changed \(16 -> 32\)/);
    assert.equal((await fetch(`http://127.0.0.1:${d.port}/health`)).status, 200);
  } finally {
    assert.equal(await d.stop(), 0);
  }
});

test('the larder client: stats, pin (kept across a restart), unpin, evict, simulate', { skip }, async () => {
  const cacheDir = join(dir, 'cache2');
  const prompt = 'Once upon a time there was a little girl named Lily. She loved to play outside in the park.';
  let d = await Daemon.start({ model, cacheDir });
  try {
    await chat(d);
    let r = runCli(d, ['cache', 'stats']);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^tier +policy +budget/m);
    assert.match(r.out, /^device +lru +/m);
    assert.match(r.out, /^disk +lru +20\.0 GiB/m);
    assert.match(r.out, /^lookups below the device: \d+ restored, \d+ prefilled instead/m);
    r = runCli(d, ['--json', 'cache', 'stats']);
    const stats = JSON.parse(r.out);
    assert.equal(stats.tiers[0].name, 'device');
    // The chat's lookup on the empty disk tier: no prefill rate measured yet, so restore.
    assert.ok(stats.restore_decisions.restore >= 1);
    assert.equal(stats.restore_decisions.recompute, 0);

    r = runCli(d, ['cache', 'pin', '--prompt', prompt]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^pinned \d+ page\(s\)/);
    const msgs = join(dir, 'messages.json');
    writeFileSync(msgs, JSON.stringify(messages));
    r = runCli(d, ['--json', 'cache', 'pin', '--messages', msgs]);
    assert.equal(r.code, 0, r.err);
    const pinned = JSON.parse(r.out);
    assert.equal(pinned.pinned, true);
    assert.ok(pinned.cached_tokens >= 16, 'the chat above cached its pages');
  } finally {
    assert.equal(await d.stop(), 0);
  }
  // After a restart both pins are there.
  d = await Daemon.start({ model, cacheDir });
  try {
    let r = runCli(d, ['--json', 'cache', 'stats']);
    assert.equal(JSON.parse(r.out).pins.prefixes, 2);
    r = runCli(d, ['cache', 'unpin', '--prompt', prompt]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^unpinned \d+ page\(s\)/);
    r = runCli(d, ['cache', 'unpin', '--prompt', prompt]);
    assert.equal(r.code, 1);
    assert.match(r.err, /HTTP 404: .*not pinned/);
    r = runCli(d, ['cache', 'evict', '--all']);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^evicted device \d+, disk \d+/);
    assert.equal(JSON.parse(runCli(d, ['--json', 'cache', 'stats']).out).pins.prefixes, 1);  // pins stay
    r = runCli(d, ['cache', 'evict']);
    assert.equal(r.code, 2);
    assert.match(r.err, /--all/);
    // simulate runs larder-sim (beside larderd) offline: a tiny hand-made
    // trace of one request that misses one page, then hits it.
    const trace = join(dir, 'cli-trace.txt');
    const key = '0'.repeat(31) + 'a';
    writeFileSync(trace, `# larder page-access trace v1\nP 100 200 16\nR 0 1 1\nK 1 ${key} 0 m\nS 1 ${key} 0\n` +
                         `F 1 1\nR 2 2 1\nK 2 ${key} 0 d\nF 3 2\n`);
    const sim = { LARDER_SIM: join(dirname(process.env.LARDER_BIN), 'larder-sim') };
    r = runCli(d, ['cache', 'simulate', '--trace', trace], sim);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /requests 2, pages looked up 2/);
    assert.match(r.out, /device\s+1\s+50\.0%\s+50\.0%/);  // hit rate, then the live one
    r = runCli(d, ['cache', 'simulate', '--trace', join(dir, 'no-such-trace')], sim);
    assert.equal(r.code, 1);
    assert.match(r.err, /cannot read/);
    r = runCli(d, ['cache', 'pin', '--prompt', 'x'.repeat(5000)]);
    assert.equal(r.code, 1);
    assert.match(r.err, /HTTP 400: .*context/);
    // Messages nested too deep to write: a usage error (2), not "cannot reach" (3).
    const deep = join(dir, 'deep.json');
    writeFileSync(deep, `{"messages": [{"role": "user", "content": ${'['.repeat(100000)}${']'.repeat(100000)}}]}`);
    r = runCli(d, ['cache', 'pin', '--messages', deep]);
    assert.equal(r.code, 2, r.err);
    assert.doesNotMatch(r.err, /cannot reach/);
  } finally {
    assert.equal(await d.stop(), 0);
  }
});

test('admin = "off" hides the admin endpoints; admin_token guards them', { skip }, async () => {
  const off = join(dir, 'off.toml');
  writeFileSync(off, '[server]\nadmin = "off"\n');
  let d = await Daemon.start({ model, extraArgs: ['--config', off] });
  try {
    for (const path of ['/admin/cache', '/metrics']) assert.equal((await admin(d, 'GET', path)).status, 404);
    const r = runCli(d, ['cache', 'stats']);
    assert.equal(r.code, 1);
    assert.match(r.err, /admin = "off"/);
  } finally {
    assert.equal(await d.stop(), 0);
  }
  const guarded = join(dir, 'token.toml');
  writeFileSync(guarded, '[server]\nadmin_token = "adm-e2e-1"\napi_keys = ["sk-user-1"]\n');
  d = await Daemon.start({ model, extraArgs: ['--config', guarded] });
  try {
    assert.equal((await admin(d, 'GET', '/metrics')).status, 401);
    assert.equal((await admin(d, 'GET', '/metrics', undefined, 'sk-user-1')).status, 401);
    assert.equal((await admin(d, 'GET', '/metrics', undefined, 'adm-e2e-1')).status, 200);
    assert.equal(runCli(d, ['cache', 'stats'], { LARDER_API_KEY: 'sk-user-1' }).code, 1);
    assert.equal(runCli(d, ['--token', 'adm-e2e-1', 'cache', 'stats']).code, 0);
    assert.equal(runCli(d, ['cache', 'stats'], { LARDER_ADMIN_TOKEN: 'adm-e2e-1' }).code, 0);
    // A web page cannot reach them, whatever the token.
    const page = await fetch(`http://127.0.0.1:${d.port}/admin/cache/evict`, {
      method: 'POST', headers: { Origin: 'http://localhost:3000', 'Content-Type': 'application/json',
                                 Authorization: 'Bearer adm-e2e-1' }, body: '{}',
    });
    assert.equal(page.status, 403);
  } finally {
    assert.equal(await d.stop(), 0);
  }
});
