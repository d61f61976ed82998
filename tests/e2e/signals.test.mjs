// Signals on a real larderd: SIGHUP (also what a closed terminal sends)
// reloads the config and never ends the daemon, a second SIGINT during
// shutdown cuts in-flight responses at once, and both still exit 0 with the
// page writes flushed (the next start restores them).
// Found in hostile testing: SIGHUP and a second Ctrl-C killed the daemon by
// the default action (exit 129 / 130), without flushing.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Daemon, modelPath, tempDir, removeDir } from './daemon.mjs';

const model = modelPath();
const skip = model ? false : 'test model stories260K.gguf not found (set LARDER_TEST_MODELS)';
let cacheDir;

before(() => { if (model) cacheDir = tempDir(); });
after(() => { if (cacheDir) removeDir(cacheDir); });

const prompt = 'Once upon a time there was a little girl named Lily. She loved to play outside in the park with her friends.';

async function complete(d, body) {
  const r = await fetch(`${d.baseURL}/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'stories260K', prompt, temperature: 0, ...body }),
  });
  return r.json();
}

function exited(d) {
  return new Promise((resolve) => {
    if (d.proc.exitCode !== null) resolve(d.proc.exitCode);
    else d.proc.on('exit', (code, signal) => resolve(code ?? signal));
  });
}

test('SIGHUP reloads (here: no config file, nothing changes); two SIGINTs end a busy daemon at once, with exit 0 and pages kept', { skip }, async () => {
  // A context far past the model's 512 tokens: the stream below runs for seconds.
  const extraArgs = ['--ctx', '32768'];
  const d = await Daemon.start({ model, cacheDir, extraArgs });
  d.proc.kill('SIGHUP');
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(d.proc.exitCode, null);
  assert.equal((await fetch(`http://127.0.0.1:${d.port}/health`)).status, 200);
  await new Promise((r) => setTimeout(r, 300));
  assert.match(d.logs.join(''), /config reloaded from \(no file\): nothing changed/);
  const first = await complete(d, { max_tokens: 4 });
  assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);

  // A long stream in flight (ignore_eos: it runs to the end of the context).
  const streaming = fetch(`${d.baseURL}/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: 'x', stream: true, ignore_eos: true, max_tokens: 100000 }),
  }).then((r) => r.text()).catch(() => '');
  await new Promise((r) => setTimeout(r, 300));
  const code = exited(d);
  const t0 = Date.now();
  d.proc.kill('SIGINT');
  await new Promise((r) => setTimeout(r, 100));
  d.proc.kill('SIGINT');
  assert.equal(await code, 0);
  assert.ok(Date.now() - t0 < 5000, 'the second SIGINT skips the 10 s grace period');
  // The stream was cut before its end: no [DONE].
  assert.doesNotMatch(await streaming, /\[DONE\]/);
  assert.match(d.logs.join(''), /again: cancelling in-flight responses now/);

  // The pages of the first request were flushed: a restart restores them.
  const again = await Daemon.start({ model, cacheDir, extraArgs });
  const warm = await complete(again, { max_tokens: 4 });
  assert.ok(warm.usage.prompt_tokens_details.cached_tokens > 0);
  assert.equal(warm.choices[0].text, first.choices[0].text);
  assert.equal(await again.stop(), 0);
});

// Found in hostile testing: a SIGTERM that came while larderd flushed page
// writes after the first one (supervisors and `timeout` may send two) took
// the default action: exit by signal, "stopped" never logged, writes lost.
test('SIGTERMs sent all through the shutdown still end larderd with exit 0 and its pages kept', { skip }, async () => {
  const dir = tempDir();
  try {
    const d = await Daemon.start({ model, cacheDir: dir });
    const first = await complete(d, { max_tokens: 4 });
    const code = exited(d);
    d.proc.on('error', () => {});  // a signal after the exit cannot be delivered
    d.proc.kill('SIGTERM');
    // Another every millisecond until the process is gone: some land while
    // the server has stopped and the engine finishes and flushes.
    for (let i = 0; i < 2000 && d.proc.exitCode === null && d.proc.signalCode === null; ++i) {
      try { d.proc.kill('SIGTERM'); } catch {}
      await new Promise((r) => setTimeout(r, 1));
    }
    assert.equal(await code, 0);
    assert.match(d.logs.join(''), /larderd: stopped/);
    const again = await Daemon.start({ model, cacheDir: dir });
    const warm = await complete(again, { max_tokens: 4 });
    assert.ok(warm.usage.prompt_tokens_details.cached_tokens > 0);
    assert.equal(warm.choices[0].text, first.choices[0].text);
    assert.equal(await again.stop(), 0);
  } finally {
    removeDir(dir);
  }
});
