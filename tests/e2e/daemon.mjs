// Starts and stops a real larderd for end-to-end tests.
import { spawn } from 'node:child_process';
import { mkdtempSync, existsSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// The test model's path, or null when it is absent and a skip is allowed.
// In CI (CI=true) or with LARDER_TEST_MODELS set by hand (scripts/test.sh
// marks its own default with LARDER_TEST_MODELS_DEFAULTED=1) a missing
// model throws: the run fails instead of skipping (tests/support/skip.h).
export function modelPath(file = 'stories260K.gguf') {
  const dir = process.env.LARDER_TEST_MODELS;
  const p = dir ? join(dir, file) : null;
  if (p && existsSync(p)) return p;
  const explicit = dir && process.env.LARDER_TEST_MODELS_DEFAULTED !== '1';
  if (process.env.CI === 'true' || explicit) {
    throw new Error(`test model ${file} not found in ${dir || '(LARDER_TEST_MODELS unset)'}; ` +
                    'in CI, or with LARDER_TEST_MODELS set, it must be present');
  }
  return null;
}

export function tempDir() {
  return mkdtempSync(join(tmpdir(), 'larder-e2e-'));
}

export function removeDir(dir) {
  rmSync(dir, { recursive: true, force: true });
}

async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

export class Daemon {
  constructor(proc, port, logs) {
    this.proc = proc;
    this.port = port;
    this.logs = logs;
    this.baseURL = `http://127.0.0.1:${port}/v1`;
  }

  // env: variables added to larderd's environment (e.g. LARDER_API_KEY);
  // bin: the larderd binary (default: $LARDER_BIN); threads: its --threads
  // (0: all cores); startTimeoutMs: how long to wait for /health (a large
  // model loads for a while).
  static async start({ model, cacheDir, extraArgs = [], env = {}, bin = process.env.LARDER_BIN, threads = 1,
                       startTimeoutMs = 30000 }) {
    if (!bin || !existsSync(bin)) throw new Error(`larderd binary not found: ${bin} (set LARDER_BIN)`);
    const port = await freePort();
    const args = ['--model', model, '--port', String(port), '--threads', String(threads), ...extraArgs];
    // No cache dir given: no disk tier (never the user's ~/.cache/larder).
    args.push('--cache-dir', cacheDir ?? '');
    const logs = [];
    const proc = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    proc.stdout.on('data', (d) => logs.push(d.toString()));
    proc.stderr.on('data', (d) => logs.push(d.toString()));
    const d = new Daemon(proc, port, logs);
    const deadline = Date.now() + startTimeoutMs;
    while (Date.now() < deadline) {
      if (proc.exitCode !== null) throw new Error(`larderd exited ${proc.exitCode}: ${logs.join('')}`);
      try {
        const r = await fetch(`http://127.0.0.1:${port}/health`);
        if (r.ok) return d;
      } catch {}
      await new Promise((r) => setTimeout(r, 100));
    }
    proc.kill('SIGKILL');
    throw new Error(`larderd did not become healthy: ${logs.join('')}`);
  }

  // SIGTERM and wait; resolves to the exit code.
  async stop() {
    if (this.proc.exitCode !== null) return this.proc.exitCode;
    const done = new Promise((resolve) => this.proc.on('exit', (code) => resolve(code)));
    this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), 20000);
    const code = await done;
    clearTimeout(timer);
    return code;
  }
}
