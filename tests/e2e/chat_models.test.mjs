// A chat "from the wild" end to end with the official openai SDK: larderd
// serving random-weight models with the real byte-level BPE vocabulary ids,
// control tokens and Jinja chat templates of Qwen 2.5 and Llama 3.2
// (tests/support/chat_models.h; the GGUF files, ~20 MB each, are written at
// test time by `test_engine "[.chat-model-write]"` from the build directory).
//
// Qwen 2.5 (its template prints no date, so the daemon's prompt is the one
// of tests/engine/fixtures/chat_qwen2_5.json): the streamed greedy answer to
// the fixture's conversation (CJK, emoji) equals llama.cpp's text, ends with
// finish_reason "stop" at <|im_end|>, and prompt_tokens equals llama.cpp's
// count for Jinja2's rendering. Both models: the returning chat (answer sent
// back, one more user turn with CJK / emoji / combining characters) reports
// cached_tokens covering turn 1's full pages, and non-ASCII text goes in and
// comes back as valid JSON strings.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { Daemon, tempDir, removeDir } from './daemon.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const bin = process.env.LARDER_BIN;
const writer = bin ? join(dirname(dirname(bin)), 'tests', 'test_engine') : null;
const skip = writer && existsSync(writer) ? false : `model writer ${writer} not built`;
const fixture = (name) =>
  JSON.parse(readFileSync(join(here, '..', 'engine', 'fixtures', `chat_${name}.json`), 'utf8'));

let dir;
const daemons = {};
const clients = {};

before(async () => {
  if (skip) return;
  dir = tempDir();
  execFileSync(writer, ['[.chat-model-write]'], { env: { ...process.env, LARDER_CHAT_MODEL_OUT: dir }, stdio: 'ignore' });
  for (const name of ['qwen2_5', 'llama3_2']) {
    daemons[name] = await Daemon.start({ model: join(dir, `${name}.gguf`), cacheDir: join(dir, `cache-${name}`),
      extraArgs: ['--ctx', '1024'] });
    clients[name] = new OpenAI({ baseURL: daemons[name].baseURL, apiKey: 'not-needed', maxRetries: 0 });
  }
});
after(async () => {
  for (const d of Object.values(daemons)) await d.stop();
  if (dir) removeDir(dir);
});

// Streams one greedy chat; returns the text, finish reason and usage.
async function streamChat(name, messages, maxTokens) {
  const stream = await clients[name].chat.completions.create({
    model: name, messages, stream: true, temperature: 0, max_tokens: maxTokens,
    stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (choice?.delta?.content) {
      text += choice.delta.content;
      ++chunks;
    }
    if (choice?.finish_reason) finish = choice.finish_reason;
    if (chunk.usage) usage = chunk.usage;
  }
  return { text, finish, usage, chunks };
}

test('Qwen 2.5: the streamed greedy answer is llama.cpp\'s, then the returning chat hits the cache', { skip }, async () => {
  const fx = fixture('qwen2_5');
  const turn1 = fx.turn1.messages;
  const r1 = await streamChat('qwen2_5', turn1, fx.max_steps);
  assert.equal(r1.usage.prompt_tokens, fx.turn1.prompt_ids.length);
  assert.equal(r1.text, fx.answer.text);
  assert.equal(r1.finish, fx.answer.ends_with_eog ? 'stop' : 'length');
  assert.equal(r1.usage.completion_tokens, fx.answer.ids.length);
  assert.ok(r1.chunks > 1, `${r1.chunks} content chunks`);

  const turn2 = [...turn1, { role: 'assistant', content: r1.text }, { role: 'user', content: fx.turn2.messages.at(-1).content }];
  const r2 = await streamChat('qwen2_5', turn2, 4);
  assert.equal(r2.usage.prompt_tokens, fx.turn2.prompt_ids.length);
  // The answer's text holds U+FFFD where the model wrote bytes that are not
  // UTF-8 (the fixture's seed), so it is tokenized from its text: the cache
  // covers turn 1's prompt pages at least.
  const cached = r2.usage.prompt_tokens_details.cached_tokens;
  assert.ok(cached >= Math.floor(fx.turn1.prompt_ids.length / 16) * 16, `cached ${cached}`);
});

test('Llama 3.2: a streaming chat, then the returning chat reuses turn 1\'s pages', { skip }, async () => {
  const fx = fixture('llama3_2');
  const turn1 = fx.turn1.messages;
  const r1 = await streamChat('llama3_2', turn1, fx.max_steps);
  assert.ok(['stop', 'length'].includes(r1.finish));
  assert.ok(r1.usage.prompt_tokens > 100);  // the template's system header, the date, the message
  const turn2 = [...turn1, { role: 'assistant', content: r1.text }, { role: 'user', content: 'And in 中文? 🦙🦙' }];
  const r2 = await streamChat('llama3_2', turn2, 4);
  const cached = r2.usage.prompt_tokens_details.cached_tokens;
  assert.ok(cached >= Math.floor(r1.usage.prompt_tokens / 16) * 16, `cached ${cached} of ${r2.usage.prompt_tokens}`);
  assert.ok(cached < r2.usage.prompt_tokens);
  // An answer that ended at <|eot_id|> and that the template prints as it is
  // (Llama 3.2 trims the content; U+FFFD marks bytes that were not UTF-8)
  // comes back as its sampled ids: every position of the prompt and the
  // answer (the end-of-turn token itself was never fed back) is reused, the
  // last partly filled page included.
  if (r1.finish === 'stop' && r1.text === r1.text.trim() && r1.text !== '' && !r1.text.includes('\uFFFD')) {
    const computed = r1.usage.prompt_tokens + r1.usage.completion_tokens - 1;
    assert.equal(cached, computed);
  }
});

test('non-ASCII user text goes in and comes back in both models', { skip }, async () => {
  const texts = ['日本語のテキストです。中文也可以。한국어도요.', '🦙🦙 👩‍👩‍👧 🇯🇵 emoji', 'combining e\u0301 and ñ; Ελληνικά; العربية'];
  for (const name of ['qwen2_5', 'llama3_2']) {
    let messages = [];
    let lastPrompt = 0;
    for (const t of texts) {
      messages.push({ role: 'user', content: t });
      const r = await clients[name].chat.completions.create({ model: name, messages, temperature: 0, max_tokens: 12 });
      const content = r.choices[0].message.content;
      assert.equal(typeof content, 'string');
      assert.ok(!content.includes('\u0000'));
      assert.ok(r.usage.prompt_tokens > lastPrompt);
      // The previous turn's full pages are reused.
      if (lastPrompt > 0) {
        assert.ok(r.usage.prompt_tokens_details.cached_tokens >= Math.floor(lastPrompt / 16) * 16,
          `${name}: cached ${r.usage.prompt_tokens_details.cached_tokens}, previous prompt ${lastPrompt}`);
      }
      lastPrompt = r.usage.prompt_tokens;
      messages.push({ role: 'assistant', content });
    }
  }
});
