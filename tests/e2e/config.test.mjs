// The config file end to end: --print-config of a file using the cache's old
// key names is a valid config with the new names only (on stdout), while the
// old-name warnings go to stderr with the logs; printing the printed config
// again gives the same text.
// Found while adding the old names: spdlog logged to stdout, so a warning
// made --print-config's output unreadable as TOML.
// Needs LARDER_BIN.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir, removeDir } from './daemon.mjs';

let dir;
before(() => { dir = tempDir(); });
after(() => { if (dir) removeDir(dir); });

function printConfig(file) {
  const r = spawnSync(process.env.LARDER_BIN, ['--config', file, '--print-config', '--cache-dir', '/srv/e2e']);
  assert.equal(r.status, 0, r.stderr.toString());
  return { stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

test('--print-config prints the new cache keys; old-name warnings go to stderr', () => {
  const old = join(dir, 'old.toml');
  writeFileSync(old, '[cache]\nmemory_capacity = "2GiB"\ndisk_capacity = "3GiB"\ndisk.ttl = "1d12h"\n');
  const first = printConfig(old);
  assert.match(first.stderr, /cache\.memory_capacity is an old name, use cache\.device\.budget instead/);
  assert.match(first.stderr, /cache\.disk_capacity is an old name, use cache\.disk\.budget instead/);
  assert.ok(!first.stdout.includes('old name'), first.stdout);
  assert.ok(!first.stdout.includes('capacity'), first.stdout);
  assert.match(first.stdout, /\n\[cache\.device\]\nbudget = "2GiB"\npolicy = "lru"\n/);
  assert.match(first.stdout, /\n\[cache\.disk\]\ndir = "\/srv\/e2e"\nbudget = "3GiB"\nmin_free = "1GiB"\npolicy = "lru"\nttl = "1d12h"\n/);

  const printed = join(dir, 'printed.toml');
  writeFileSync(printed, first.stdout);
  const second = printConfig(printed);
  assert.equal(second.stderr, '');
  assert.equal(second.stdout, first.stdout);
});
