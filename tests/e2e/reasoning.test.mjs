// Reasoning models end to end with the official openai SDK: stories260K
// with the real Qwen 3 chat template (tests/template/fixtures/templates/
// qwen3.jinja) added to a copy of the GGUF. This model never thinks by
// itself: an assistant prefill that opens a <think> block makes it think,
// and llama.cpp's `grammar` field (an extra body field for the SDK) makes it
// write "<think>\n...\n</think>\n\n...", which under a grammar stays
// content. What this covers: message.reasoning_content and content, the same split streamed as
// delta.reasoning_content / delta.content, the reasoning token count,
// reasoning_format "none", chat_template_kwargs reaching the template, and a
// second turn (the answer sent back without its thinking, which the
// template drops anyway) reusing the first turn's whole prompt from the cache.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { Daemon, modelPath, tempDir, removeDir } from './daemon.mjs';
import { withChatTemplate } from './gguf_template.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const stories = modelPath();
const skip = stories ? false : 'test model stories260K.gguf not found (set LARDER_TEST_MODELS)';
let dir;
let daemon;
let client;
const model = 'stories260K-qwen3';
// Thinking, then an answer: lowercase words, so the split is easy to check.
const grammar = 'root ::= "<think>\\n" [a-z] [a-z ]{2,18} [a-z] "\\n</think>\\n\\n" [a-z] [a-z ]{2,18} [a-z]';
const ask = [{ role: 'user', content: 'Tell me a story.' }];

before(async () => {
  if (!stories) return;
  dir = tempDir();
  const path = join(dir, `${model}.gguf`);
  withChatTemplate(stories, path, readFileSync(join(here, '..', 'template', 'fixtures', 'templates', 'qwen3.jinja'), 'utf8'));
  daemon = await Daemon.start({ model: path });
  client = new OpenAI({ baseURL: daemon.baseURL, apiKey: 'not-needed', maxRetries: 0 });
});
after(async () => {
  if (daemon) await daemon.stop();
  if (dir) removeDir(dir);
});

function create(extra) {
  return client.chat.completions.create({ model, messages: ask, temperature: 0, max_tokens: 64, grammar, ...extra });
}

test('the thinking comes back as reasoning_content, whole and streamed', { skip }, async () => {
  // Under a grammar none of the answer is thinking (README): the grammar's
  // <think> block stays in content.
  const g = await create({});
  assert.equal(g.choices[0].message.reasoning_content, undefined);
  assert.match(g.choices[0].message.content, /^<think>\n[a-z][a-z ]*[a-z]\n<\/think>\n\n[a-z][a-z ]*[a-z]$/);
  assert.equal(g.usage.completion_tokens_details.reasoning_tokens, 0);

  // Without one, an assistant prefill that opens the block makes the model
  // think (it never closes it: cut off by max_tokens, all of it is reasoning).
  const opened = { grammar: undefined, max_tokens: 12, messages: [...ask, { role: 'assistant', content: '<think>\n' }] };
  const r = await create(opened);
  const msg = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.ok(msg.reasoning_content.length > 0);
  assert.equal(msg.reasoning_content, msg.reasoning_content.trim());
  assert.ok(!msg.content);
  const raw = await create({ ...opened, reasoning_format: 'none' });
  const text = raw.choices[0].message.content;
  assert.equal(raw.choices[0].message.reasoning_content, undefined);
  // The same greedy answer, unsplit.
  assert.equal(text.trim(), msg.reasoning_content);
  const details = r.usage.completion_tokens_details;
  assert.ok(details.reasoning_tokens > 2 && details.reasoning_tokens <= r.usage.completion_tokens,
    JSON.stringify(r.usage));
  assert.equal(raw.usage.completion_tokens_details.reasoning_tokens, 0);

  const stream = await create({ ...opened, stream: true, stream_options: { include_usage: true } });
  let reasoning = '';
  let content = '';
  let usage;
  for await (const chunk of stream) {
    const delta = chunk.choices[0]?.delta ?? {};
    if (delta.reasoning_content) reasoning += delta.reasoning_content;
    if (delta.content) content += delta.content;
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(reasoning, msg.reasoning_content);
  assert.equal(content, '');
  assert.equal(usage.completion_tokens_details.reasoning_tokens, details.reasoning_tokens);
});

test('chat_template_kwargs reach the template', { skip }, async () => {
  const on = await create({ max_tokens: 1, grammar: undefined });
  const off = await create({ max_tokens: 1, grammar: undefined, chat_template_kwargs: { enable_thinking: false } });
  // Qwen 3 closes an empty block itself: "<think>\n\n</think>\n\n" more prompt.
  assert.ok(off.usage.prompt_tokens > on.usage.prompt_tokens + 4, `${off.usage.prompt_tokens} vs ${on.usage.prompt_tokens}`);
  await assert.rejects(create({ chat_template_kwargs: { add_generation_prompt: false } }),
    (err) => err.status === 400 && err.param === 'chat_template_kwargs.add_generation_prompt');
  await assert.rejects(create({ reasoning_format: 'sometimes' }), (err) => err.status === 400 && err.param === 'reasoning_format');
});

test('a second turn reuses the whole first prompt although the template drops the thinking', { skip }, async () => {
  const first = await create({ messages: [{ role: 'user', content: 'Once upon a time.' }] });
  // Under the grammar the thinking is content: the client sends back the answer after it.
  const answer = first.choices[0].message.content.replace(/^<think>[\s\S]*<\/think>\s*/, '');
  assert.match(answer, /^[a-z][a-z ]*[a-z]$/);
  const second = await create({
    messages: [{ role: 'user', content: 'Once upon a time.' }, { role: 'assistant', content: answer },
      { role: 'user', content: 'And then?' }],
    max_tokens: 4, grammar: undefined });
  // Turn 1's cache holds its prompt and then "<think>..."; turn 2 renders the
  // same prompt text and then the answer (tests/engine/test_engine_reasoning.cpp
  // checks that its ids are turn 1's prompt ids): exactly those are cached.
  assert.equal(second.usage.prompt_tokens_details.cached_tokens, first.usage.prompt_tokens);
});
