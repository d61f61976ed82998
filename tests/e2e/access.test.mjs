// Who may call larderd, end to end: API keys with the official openai SDK
// (right key, wrong key, the key file and LARDER_API_KEY together, keys never
// in the logs or --print-config), and CORS and the Host allow-list in a real
// headless Chromium (Debian's chromium, driven by playwright-core): a page of
// an allowed origin reads responses, a page of another origin reads nothing
// and cannot start a generation even with a "simple" text/plain POST, and a
// DNS-rebound name is refused.
// Needs LARDER_BIN and LARDER_TEST_MODELS (skips without the model) and
// /usr/bin/chromium (or $CHROMIUM) for the browser test.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import OpenAI from 'openai';
import { Daemon, modelPath, tempDir, removeDir } from './daemon.mjs';

const model = modelPath();
const skip = model ? false : 'test model stories260K.gguf not found (set LARDER_TEST_MODELS)';
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
const skipBrowser = skip || (existsSync(chromiumPath) ? false : `${chromiumPath} not found (scripts/install-deps.sh installs chromium)`);
const messages = [{ role: 'user', content: 'Once upon a time' }];
let dir;

before(() => { dir = tempDir(); });
after(() => { if (dir) removeDir(dir); });

test('API keys: the openai SDK with a right key works, a wrong one gets 401 invalid_api_key', { skip }, async () => {
  const envKey = 'sk-e2e-env-7f3a9c';
  const fileKeys = ['sk-e2e-file-one', 'sk-e2e-file-two'];
  const keyFile = join(dir, 'keys.txt');
  writeFileSync(keyFile, `# larder keys\n${fileKeys[0]}\n\n${fileKeys[1]}\n`);
  const d = await Daemon.start({
    model, extraArgs: ['--api-key-file', keyFile, '--log-level', 'debug'], env: { LARDER_API_KEY: envKey },
  });
  try {
    for (const apiKey of [envKey, fileKeys[1]]) {
      const c = new OpenAI({ baseURL: d.baseURL, apiKey, maxRetries: 0 });
      const r = await c.chat.completions.create({ model: 'stories260K', messages, temperature: 0, max_tokens: 4 });
      assert.equal(r.object, 'chat.completion');
      assert.equal(r.usage.completion_tokens, 4);
      const models = await c.models.list();
      assert.equal(models.data[0].id, 'stories260K');
    }
    const wrong = new OpenAI({ baseURL: d.baseURL, apiKey: 'sk-e2e-wrong-key', maxRetries: 0 });
    const isBadKey = (e) => e instanceof OpenAI.AuthenticationError && e.status === 401 &&
      e.code === 'invalid_api_key' && e.type === 'invalid_request_error';
    await assert.rejects(wrong.chat.completions.create({ model: 'stories260K', messages, max_tokens: 4 }), isBadKey);
    await assert.rejects(wrong.models.list(), isBadKey);
    // No key at all (the SDK insists on one, so plain fetch), and /health is open.
    const none = await fetch(`${d.baseURL}/models`);
    assert.equal(none.status, 401);
    assert.equal((await none.json()).error.code, 'invalid_api_key');
    assert.equal((await fetch(`http://127.0.0.1:${d.port}/health`)).status, 200);
  } finally {
    await d.stop();
  }
  const logs = d.logs.join('');
  assert.match(logs, /3 API key\(s\)/);
  assert.match(logs, /refused GET \/v1\/models: wrong API key/);
  for (const k of [envKey, ...fileKeys, 'sk-e2e-wrong-key']) assert.ok(!logs.includes(k), `key ${k} in the logs`);

  // --print-config never shows keys.
  const config = join(dir, 'keys.toml');
  writeFileSync(config, '[server]\napi_keys = ["sk-e2e-in-config"]\n');
  const printed = execFileSync(process.env.LARDER_BIN, ['--config', config, '--print-config']).toString();
  assert.ok(!printed.includes('sk-e2e-in-config'));
  assert.match(printed, /api_keys = \["<redacted>"\]/);
});

// A page that calls fetch() and reports what it could read.
const page = `<!doctype html><title>probe</title><script>
window.probe = async (url, init) => {
  try {
    const r = await fetch(url, init);
    return { status: r.status, type: r.type, body: await r.text() };
  } catch (e) {
    return { error: String(e) };
  }
};
</script>`;

async function pageServer() {
  const srv = createServer((req, res) => { res.writeHead(200, { 'Content-Type': 'text/html' }); res.end(page); });
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  return srv;
}

test('a real browser: an allowed origin reads responses, others cannot, DNS rebinding is refused', { skip: skipBrowser }, async () => {
  const { chromium } = await import('playwright-core');
  const allowed = await pageServer();
  const other = await pageServer();
  const allowedOrigin = `http://127.0.0.1:${allowed.address().port}`;
  const otherOrigin = `http://127.0.0.1:${other.address().port}`;
  const key = 'sk-e2e-browser';
  const config = join(dir, 'cors.toml');
  writeFileSync(config, `[server]\ncors_origins = ["${allowedOrigin}"]\napi_keys = ["${key}"]\n`);
  const d = await Daemon.start({ model, extraArgs: ['--config', config, '--log-level', 'debug'] });
  const profile = tempDir();
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-features=HttpsUpgrades', '--host-resolver-rules=MAP rebind.test 127.0.0.1'],
  });
  try {
    const api = `http://127.0.0.1:${d.port}/v1`;
    const chatInit = (k) => ({
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${k}` },
      body: JSON.stringify({ model: 'stories260K', messages, temperature: 0, max_tokens: 4 }),
    });
    const tab = await browser.newPage();

    // The allowed origin: preflight passes, the answer and the 401 are readable.
    await tab.goto(`${allowedOrigin}/`);
    const ok = await tab.evaluate(([u, init]) => window.probe(u, init), [`${api}/chat/completions`, chatInit(key)]);
    assert.equal(ok.status, 200, JSON.stringify(ok));
    assert.equal(JSON.parse(ok.body).usage.completion_tokens, 4);
    const denied = await tab.evaluate(([u, init]) => window.probe(u, init), [`${api}/chat/completions`, chatInit('sk-nope')]);
    assert.equal(denied.status, 401);
    assert.equal(JSON.parse(denied.body).error.code, 'invalid_api_key');
    const models = await tab.evaluate(([u, k]) => window.probe(u, { headers: { Authorization: `Bearer ${k}` } }), [`${api}/models`, key]);
    assert.equal(models.status, 200);

    // Another origin: nothing is readable, not even with the right key.
    await tab.goto(`${otherOrigin}/`);
    const blocked = await tab.evaluate(([u, init]) => window.probe(u, init), [`${api}/chat/completions`, chatInit(key)]);
    assert.match(blocked.error ?? '', /TypeError/, JSON.stringify(blocked));
    const blockedGet = await tab.evaluate(([u]) => window.probe(u), [`http://127.0.0.1:${d.port}/health`]);
    assert.match(blockedGet.error ?? '', /TypeError/, JSON.stringify(blockedGet));
    // A "simple" request needs no preflight: the browser sends it, the
    // daemon refuses it before any generation, and the page sees an opaque
    // response.
    const simple = await tab.evaluate(([u, k]) => window.probe(u, {
      method: 'POST', mode: 'no-cors', headers: { 'Content-Type': 'text/plain' },
      body: JSON.stringify({ model: 'stories260K', prompt: 'Once', max_tokens: 4, api_key: k }),
    }), [`${api}/completions`, key]);
    assert.equal(simple.type, 'opaque', JSON.stringify(simple));

    // DNS rebinding: the browser reaches 127.0.0.1 under another name.
    const rebound = await tab.goto(`http://rebind.test:${d.port}/health`);
    assert.equal(rebound.status(), 403);
    assert.match(await rebound.text(), /host_not_allowed/);
    const local = await tab.goto(`http://localhost:${d.port}/health`);
    assert.equal(local.status(), 200);
  } finally {
    await browser.close();
    removeDir(profile);
    allowed.close();
    other.close();
    await d.stop();
  }
  const logs = d.logs.join('');
  assert.ok(logs.includes(`refused POST /v1/completions from origin '${otherOrigin}'`), logs);
  assert.ok(logs.includes(`refused the preflight of /v1/chat/completions from origin '${otherOrigin}'`), logs);
  assert.ok(logs.includes("Host 'rebind.test:"), logs);
});
