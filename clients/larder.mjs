#!/usr/bin/env node
// larder: the command-line client of larderd's admin endpoints (HTTP only;
// Node.js 18 or later, no packages). See clients/README.md.
//
//   larder [--url URL] [--token TOKEN] [--json] cache stats
//   larder ... cache pin   (--prompt TEXT | --messages FILE) [--salt SALT]
//   larder ... cache unpin (--prompt TEXT | --messages FILE) [--salt SALT]
//   larder ... cache evict (--all | --prompt TEXT | --messages FILE) [--salt SALT]
//   larder ... reload
//   larder cache simulate --trace FILE [--config candidate.toml ...]
//
// Exit status: 0 done; 1 the server refused (its message is printed);
// 2 a usage error; 3 the server could not be reached.
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const USAGE = `usage: larder [--url URL] [--token TOKEN] [--json] COMMAND

commands:
  cache stats                     the cache's tiers, pins and queue (GET /admin/cache)
  cache pin   --prompt TEXT       pin a prompt's pages in every tier, across restarts
  cache pin   --messages FILE     ... a chat's (a JSON array of messages, or {"messages": [...],
                                  "tools": [...]}, as /v1/chat/completions takes them; - for stdin)
  cache unpin --prompt TEXT | --messages FILE
  cache evict --all | --prompt TEXT | --messages FILE
                                  remove everything, or a prompt's pages, from every tier
  cache simulate --trace FILE [--config candidate.toml ...]
                                  replay a page-access trace (cache.trace_file) under other
                                  budgets and policies, offline (runs larder-sim; no server)
  reload                          re-read larderd's config file (POST /admin/reload)

options:
  --url URL       larderd's address (default $LARDER_URL, else http://127.0.0.1:8080)
  --token TOKEN   the admin token, or an API key (default $LARDER_ADMIN_TOKEN, else $LARDER_API_KEY)
  --salt SALT     the cache_salt the prompt's requests use
  --json          print the server's JSON answer as it is
  -h, --help      this text`;

class UsageError extends Error {}

function parseArgs(argv) {
  const opts = { url: process.env.LARDER_URL || 'http://127.0.0.1:8080',
                 token: process.env.LARDER_ADMIN_TOKEN || process.env.LARDER_API_KEY || '',
                 json: false, all: false, words: [] };
  const takesValue = new Set(['--url', '--token', '--prompt', '--messages', '--salt']);
  for (let i = 0; i < argv.length; ++i) {
    let a = argv[i];
    let value;
    const eq = a.indexOf('=');
    if (a.startsWith('--') && eq > 0) [a, value] = [a.slice(0, eq), a.slice(eq + 1)];
    if (a === '-h' || a === '--help') { opts.help = true; continue; }
    if (a === '--json') { opts.json = true; continue; }
    if (a === '--all') { opts.all = true; continue; }
    if (takesValue.has(a)) {
      if (value === undefined) {
        if (i + 1 >= argv.length) throw new UsageError(`${a} needs a value`);
        value = argv[++i];
      }
      opts[a.slice(2)] = value;
      continue;
    }
    if (a.startsWith('-') && a !== '-') throw new UsageError(`unknown option ${a}`);
    opts.words.push(a);
  }
  return opts;
}

// The request body naming a prompt: {"prompt": ...} or {"messages": ...}.
function promptBody(opts, { allowAll }) {
  const given = [opts.prompt !== undefined, opts.messages !== undefined, allowAll && opts.all].filter(Boolean);
  if (given.length > 1) throw new UsageError(`give one of ${allowAll ? '--all, ' : ''}--prompt or --messages`);
  if (given.length === 0) {
    throw new UsageError(allowAll ? 'say what to evict: --all (everything), --prompt TEXT or --messages FILE'
                                  : 'give the prompt: --prompt TEXT or --messages FILE');
  }
  if (opts.all) return { all: true };
  const body = {};
  if (opts.prompt !== undefined) {
    body.prompt = opts.prompt;
  } else {
    let text;
    try {
      text = readFileSync(opts.messages === '-' ? 0 : opts.messages, 'utf8');
    } catch (e) {
      throw new UsageError(`cannot read ${opts.messages}: ${e.message}`);
    }
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch (e) {
      throw new UsageError(`${opts.messages} is not JSON: ${e.message}`);
    }
    if (Array.isArray(parsed)) {
      body.messages = parsed;
    } else if (parsed && typeof parsed === 'object' && Array.isArray(parsed.messages)) {
      body.messages = parsed.messages;
      if (parsed.tools !== undefined) body.tools = parsed.tools;
      if (parsed.cache_salt !== undefined) body.cache_salt = parsed.cache_salt;
    } else {
      throw new UsageError(`${opts.messages} must hold a JSON array of messages or an object with "messages"`);
    }
  }
  if (opts.salt !== undefined) body.cache_salt = opts.salt;
  return body;
}

class ServerError extends Error {}
class ConnectError extends Error {}

async function call(opts, method, path, body) {
  const url = opts.url.replace(/\/+$/, '') + path;
  const headers = { Accept: 'application/json' };
  if (opts.token) headers.Authorization = `Bearer ${opts.token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  // Written before the call: a body JSON cannot hold (messages nested too
  // deep) is the caller's error, not an unreachable server (found in
  // hostile testing: "cannot reach larderd: Maximum call stack size exceeded").
  let payload;
  try {
    payload = body === undefined ? undefined : JSON.stringify(body);
  } catch (e) {
    throw new UsageError(`the request cannot be written as JSON: ${e.message}`);
  }
  let res;
  try {
    res = await fetch(url, { method, headers, body: payload });
  } catch (e) {
    throw new ConnectError(`cannot reach larderd at ${opts.url}: ${e.cause?.message || e.message}`);
  }
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ServerError(`${method} ${path}: HTTP ${res.status}, not JSON: ${text.slice(0, 200)}`);
  }
  if (!res.ok) {
    const msg = json?.error?.message || text;
    const hint = res.status === 404 && json?.error?.code === 'unknown_url'
      ? ' (is [server] admin = "off"?)' : res.status === 401 ? ' (see --token)' : '';
    const err = new ServerError(`HTTP ${res.status}: ${msg}${hint}`);
    err.json = json;
    throw err;
  }
  return json;
}

function bytes(n) {
  if (typeof n !== 'number') return '-';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n, u = 0;
  while (Math.abs(v) >= 1024 && u < units.length - 1) { v /= 1024; ++u; }
  return u === 0 ? `${v} B` : `${v.toFixed(1)} ${units[u]}`;
}

function table(rows) {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => String(r[c]).length)));
  return rows.map((r) => r.map((cell, c) => String(cell).padEnd(widths[c])).join('  ').trimEnd()).join('\n');
}

function printStats(r, url) {
  const dp = r.device_pages || {};
  console.log(`larderd at ${url}: pages of ${r.page_size} tokens (${bytes(r.page_bytes)}); device pages: ` +
              `${dp.budget} of ${dp.pool} in the budget, ${dp.available} available`);
  console.log(`queue ${r.queue_length}, running ${r.running}, preemptions ${r.preemptions}, ` +
              `requests ${r.requests_total}, pinned ${r.pins?.prefixes ?? 0} prefix(es) (${r.pins?.pages ?? 0} pages)`);
  const rd = r.restore_decisions;
  if (rd) {
    console.log(`lookups below the device: ${rd.restore} restored, ${rd.recompute} prefilled instead ` +
                '(prefill measured faster than the tier)');
  }
  console.log('');
  const rows = [['tier', 'policy', 'budget', 'used', 'entries', 'pinned', 'hits', 'misses', 'hit rate',
                 'restored', 'spilled', 'evicted budget/ttl/admin/corrupt']];
  for (const t of r.tiers || []) {
    const looked = t.hits + t.misses;
    const ev = t.evictions || {};
    rows.push([t.name, t.policy || '-', bytes(t.budget_bytes), bytes(t.bytes_used), t.entries, t.pinned, t.hits,
               t.misses, looked > 0 ? `${(100 * t.hits / looked).toFixed(1)}%` : '-', bytes(t.bytes_restored),
               bytes(t.bytes_spilled), `${ev.budget ?? 0}/${ev.ttl ?? 0}/${ev.admin ?? 0}/${ev.corrupt ?? 0}`]);
  }
  console.log(table(rows));
}

// larder-sim (the what-if simulator, a C++ program built with larderd):
// $LARDER_SIM, else beside this script's build tree, else on the PATH.
function simulate(args) {
  const here = dirname(realpathSync(fileURLToPath(import.meta.url)));
  const candidates = [process.env.LARDER_SIM, join(here, '..', 'build', 'daemon', 'larder-sim')].filter(Boolean);
  const sim = candidates.find((p) => existsSync(p)) ?? 'larder-sim';
  const r = spawnSync(sim, args, { stdio: 'inherit' });
  if (r.error) {
    console.error(`larder: cannot run ${sim}: ${r.error.message} (build it with scripts/build.sh --target larder-sim, or set LARDER_SIM to its path)`);
    return 3;
  }
  return r.status ?? 1;
}

async function main(argv) {
  // Offline: its flags go to larder-sim as they are.
  const at = argv.indexOf('simulate');
  if (at > 0 && argv[at - 1] === 'cache') return simulate(argv.slice(at + 1));
  const opts = parseArgs(argv);
  if (opts.help || opts.words.length === 0) {
    console.log(USAGE);
    return opts.help ? 0 : 2;
  }
  const [group, cmd, ...extra] = opts.words;
  if (group === 'reload' && cmd === undefined) {
    const r = await call(opts, 'POST', '/admin/reload');
    if (opts.json) return console.log(JSON.stringify(r, null, 2)), 0;
    console.log(`reloaded ${r.config_file ?? '(no config file)'}`);
    for (const c of r.changed) console.log(`  applied: ${c}`);
    for (const c of r.restart_needed) console.log(`  needs a restart: ${c}`);
    if (r.changed.length === 0 && r.restart_needed.length === 0) console.log('  nothing changed');
    return 0;
  }
  if (group !== 'cache' || cmd === undefined) throw new UsageError(`unknown command: ${opts.words.join(' ')}`);
  if (extra.length > 0) throw new UsageError(`unexpected argument: ${extra[0]}`);
  switch (cmd) {
    case 'stats': {
      const r = await call(opts, 'GET', '/admin/cache');
      if (opts.json) console.log(JSON.stringify(r, null, 2));
      else printStats(r, opts.url);
      return 0;
    }
    case 'pin':
    case 'unpin': {
      const body = promptBody(opts, { allowAll: false });
      const r = await call(opts, cmd === 'pin' ? 'POST' : 'DELETE', '/admin/cache/pin', body);
      if (opts.json) console.log(JSON.stringify(r, null, 2));
      else if (cmd === 'pin') {
        console.log(`pinned ${r.pages} page(s), ${r.tokens} of the prompt's ${r.prompt_tokens} tokens` +
                    (r.already_pinned ? ' (pinned already)' : '') + `; ${r.cached_tokens} were cached before`);
      } else {
        console.log(`unpinned ${r.pages} page(s) (${r.tokens} tokens)`);
      }
      return 0;
    }
    case 'evict': {
      const body = promptBody(opts, { allowAll: true });
      const r = await call(opts, 'POST', '/admin/cache/evict', body);
      if (opts.json) return console.log(JSON.stringify(r, null, 2)), 0;
      const parts = Object.entries(r.evicted).map(([tier, n]) => `${tier} ${n}`);
      console.log(`evicted ${parts.join(', ')}` +
                  (r.device_pages_in_use > 0 ? `; ${r.device_pages_in_use} device page(s) in use stay` : ''));
      return 0;
    }
    default:
      throw new UsageError(`unknown cache command: ${cmd} (stats, pin, unpin, evict, simulate)`);
  }
}

main(process.argv.slice(2)).then((code) => { process.exitCode = code; }, (e) => {
  if (e instanceof UsageError) {
    console.error(`larder: ${e.message}\n(larder --help lists the commands)`);
    process.exitCode = 2;
  } else if (e instanceof ConnectError) {
    console.error(`larder: ${e.message}`);
    process.exitCode = 3;
  } else if (e instanceof ServerError) {
    console.error(`larder: ${e.message}`);
    process.exitCode = 1;
  } else {
    console.error(`larder: ${e.stack || e}`);
    process.exitCode = 1;
  }
});
