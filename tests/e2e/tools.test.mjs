// Function calling end to end with the official openai SDK against a real
// larderd. The model is stories260K with the real Qwen 2.5 chat template
// (tests/template/fixtures/templates/qwen2_5.jinja) added to a copy of the
// GGUF, so requests go through the daemon's own template probe and render.
//
// What this covers: the SDK's tool request shapes are accepted (tools,
// tool_choice, parallel_tool_calls, assistant tool_calls history with
// content null and string arguments, tool messages), the tools and the
// history reach the prompt (prompt_tokens), the SDK's stream helpers accept
// the streamed answer, tool_choice "required" and naming a function (the
// grammar forces the model into Qwen's <tool_call> syntax, and the calls'
// arguments validate against the tools' schemas), and the 400s (a function
// not offered, a bad name); a model without a template is in
// generic_tools.test.mjs. Left to itself this model never writes a tool call; parsing calls out of free model text is
// covered by tests/api (test_api_tools.cpp, test_tool_calls.cpp).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import Ajv from 'ajv';
import { Daemon, modelPath, tempDir, removeDir } from './daemon.mjs';
import { withChatTemplate } from './gguf_template.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const stories = modelPath();
const skip = stories ? false : 'test model stories260K.gguf not found (set LARDER_TEST_MODELS)';
let dir;
let daemon;
let client;

const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Current weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } },
  { type: 'function', function: { name: 'get_time', description: 'Local time in a time zone',
    parameters: { type: 'object', properties: { tz: { type: 'string' } }, required: ['tz'] } } },
];
const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];

before(async () => {
  if (!stories) return;
  dir = tempDir();
  const model = join(dir, 'stories260K-qwen-template.gguf');
  const template = readFileSync(join(here, '..', 'template', 'fixtures', 'templates', 'qwen2_5.jinja'), 'utf8');
  withChatTemplate(stories, model, template);
  // The Qwen tool preamble alone is ~400 tokens of this small vocabulary.
  daemon = await Daemon.start({ model, extraArgs: ['--ctx', '2048'] });
  client = new OpenAI({ baseURL: daemon.baseURL, apiKey: 'not-needed', maxRetries: 0 });
});
after(async () => {
  if (daemon) await daemon.stop();
  if (dir) removeDir(dir);
});

function create(extra) {
  return client.chat.completions.create({ model: 'stories260K-qwen-template', temperature: 0, max_tokens: 8, ...extra });
}

test('tools reach the prompt; tool_choice none leaves them out', { skip }, async () => {
  const withTools = await create({ messages: ask, tools, tool_choice: 'auto', parallel_tool_calls: true });
  const none = await create({ messages: ask, tools, tool_choice: 'none' });
  const plain = await create({ messages: ask });
  assert.equal(none.usage.prompt_tokens, plain.usage.prompt_tokens);
  // The template's tool preamble plus both schemas.
  assert.ok(withTools.usage.prompt_tokens > plain.usage.prompt_tokens + 300,
    `${withTools.usage.prompt_tokens} vs ${plain.usage.prompt_tokens}`);
  const choice = withTools.choices[0];
  assert.equal(choice.message.role, 'assistant');
  assert.equal(typeof choice.message.content, 'string');
  assert.ok(['stop', 'length'].includes(choice.finish_reason));
  assert.equal(choice.message.tool_calls, undefined);
});

test('a history with tool calls and tool results is rendered', { skip }, async () => {
  const history = [
    ...ask,
    { role: 'assistant', content: null, tool_calls: [
      { id: 'call_abc', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
      { id: 'call_def', type: 'function', function: { name: 'get_time', arguments: '{"tz":"Europe/Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_abc', content: '{"temp_c": 21}' },
    { role: 'tool', tool_call_id: 'call_def', content: '09:30' },
  ];
  const first = await create({ messages: ask, tools });
  const r = await create({ messages: history, tools });
  // Qwen 2.5 renders each call as <tool_call>{"name": ..., "arguments": {...}}</tool_call>
  // and the results as <tool_response> blocks: many more tokens.
  assert.ok(r.usage.prompt_tokens > first.usage.prompt_tokens + 60,
    `${r.usage.prompt_tokens} vs ${first.usage.prompt_tokens}`);
  // The second request starts with the first one's prompt: its pages are reused.
  assert.ok(r.usage.prompt_tokens_details.cached_tokens > 0);
});

test('streaming with tools through the SDK stream helper', { skip }, async () => {
  const stream = client.chat.completions.stream({
    model: 'stories260K-qwen-template', messages: ask, tools, temperature: 0, max_tokens: 8,
    stream_options: { include_usage: true } });
  let deltas = '';
  stream.on('content.delta', ({ delta }) => { deltas += delta; });
  const final = await stream.finalChatCompletion();
  const msg = final.choices[0].message;
  assert.equal(msg.role, 'assistant');
  assert.equal(msg.content, deltas);
  assert.ok(['stop', 'length'].includes(final.choices[0].finish_reason));
  assert.ok(final.usage.prompt_tokens > 300);
});

test('tool_choice "required" forces a call whose arguments validate against the tool schema (ajv)', { skip }, async () => {
  const ajv = new Ajv();
  const schemas = Object.fromEntries(tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));
  const names = new Set();
  for (let seed = 1; seed <= 4; seed++) {
    // One call each (parallel_tool_calls false): left free, this small model
    // writes call after call until max_tokens, and the answer is cut ("length").
    const r = await create({
      messages: ask, tools, tool_choice: 'required', parallel_tool_calls: false, temperature: 1, seed, max_tokens: 120,
    });
    const choice = r.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice.message));
    assert.ok(choice.message.tool_calls.length >= 1);
    for (const call of choice.message.tool_calls) {
      assert.ok(call.function.name in schemas, call.function.name);
      const args = JSON.parse(call.function.arguments);
      assert.ok(schemas[call.function.name](args), JSON.stringify(schemas[call.function.name].errors));
      names.add(call.function.name);
    }
  }
  // Named.
  const named = await create({
    messages: ask, tools, tool_choice: { type: 'function', function: { name: 'get_time' } },
    parallel_tool_calls: false, temperature: 1, seed: 9, max_tokens: 120,
  });
  assert.equal(named.choices[0].finish_reason, 'tool_calls');
  assert.equal(named.choices[0].message.tool_calls.length, 1);
  assert.equal(named.choices[0].message.tool_calls[0].function.name, 'get_time');
  assert.ok(schemas.get_time(JSON.parse(named.choices[0].message.tool_calls[0].function.arguments)));
});

test('tool_choice naming a function not offered, and a bad function name, get a 400', { skip }, async () => {
  await assert.rejects(create({ messages: ask, tools, tool_choice: { type: 'function', function: { name: 'nope' } } }),
    (err) => err.status === 400 && err.param === 'tool_choice');
  await assert.rejects(create({ messages: ask, tools: [{ type: 'function', function: { name: 'bad name' } }] }),
    (err) => err.status === 400 && err.param === 'tools[0].function.name');
});
