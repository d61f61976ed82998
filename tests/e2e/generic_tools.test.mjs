// Tools on a model whose chat format cannot render them (stories260K has
// no chat template: the plain format), end to end with the official openai
// SDK: the daemon falls back to the generic tool prompt (a system message
// describing the tools and the JSON form of a call, as llama.cpp's server
// does) and parses {"tool_call": ...} / {"tool_calls": [...]} answers into
// tool_calls. Left to itself this model never writes such JSON, so the
// forced paths (tool_choice "required" / a named function, constrained by
// the envelope's grammar) are what shows calls here; their arguments must
// validate against the tools' schemas (ajv, an independent validator).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv from 'ajv';
import { Daemon, modelPath } from './daemon.mjs';

const stories = modelPath();
const skip = stories ? false : 'test model stories260K.gguf not found (set LARDER_TEST_MODELS)';
let daemon;
let client;

const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Current weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 },
      unit: { enum: ['celsius', 'fahrenheit'] } }, required: ['city', 'unit'], additionalProperties: false } } },
  { type: 'function', function: { name: 'get_time', description: 'Local time in a time zone',
    parameters: { type: 'object', properties: { tz: { type: 'string', maxLength: 12 } }, required: ['tz'] } } },
];
const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];

before(async () => {
  if (!stories) return;
  // The tool prompt is a few hundred tokens of this small vocabulary.
  daemon = await Daemon.start({ model: stories, extraArgs: ['--ctx', '2048'] });
  client = new OpenAI({ baseURL: daemon.baseURL, apiKey: 'not-needed', maxRetries: 0 });
});
after(async () => {
  if (daemon) await daemon.stop();
});

function create(extra) {
  return client.chat.completions.create({ model: 'stories260K', temperature: 0, max_tokens: 8, ...extra });
}

test('tools are described to a model without a template instead of a 400', { skip }, async () => {
  const withTools = await create({ messages: ask, tools });
  const plain = await create({ messages: ask });
  // The system message with both schemas in indented JSON.
  assert.ok(withTools.usage.prompt_tokens > plain.usage.prompt_tokens + 200,
    `${withTools.usage.prompt_tokens} vs ${plain.usage.prompt_tokens}`);
  const choice = withTools.choices[0];
  assert.equal(typeof choice.message.content, 'string');  // free text stays content
  assert.equal(choice.message.tool_calls, undefined);
  // tool_choice "none" shows no tools.
  const none = await create({ messages: ask, tools, tool_choice: 'none' });
  assert.equal(none.usage.prompt_tokens, plain.usage.prompt_tokens);
});

test('tool_choice "required" and a named function force calls whose arguments validate (ajv)', { skip }, async () => {
  const ajv = new Ajv();
  const schemas = Object.fromEntries(tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));
  for (let seed = 1; seed <= 3; seed++) {
    const r = await create({
      messages: ask, tools, tool_choice: 'required', parallel_tool_calls: false, temperature: 1, seed, max_tokens: 200,
    });
    const choice = r.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice.message));
    assert.equal(choice.message.tool_calls.length, 1);  // parallel_tool_calls false: one call
    assert.equal(choice.message.content, null);
    const call = choice.message.tool_calls[0];
    assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
    assert.ok(call.function.name in schemas, call.function.name);
    const args = JSON.parse(call.function.arguments);
    assert.ok(schemas[call.function.name](args), JSON.stringify(schemas[call.function.name].errors));
  }
  // A named function is one call, as OpenAI answers it, without
  // parallel_tool_calls false (stories260K kept adding calls until
  // max_tokens when the grammar allowed a list).
  const named = await create({
    messages: ask, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } },
    temperature: 1, seed: 7, max_tokens: 400,
  });
  const calls = named.choices[0].message.tool_calls;
  assert.equal(named.choices[0].finish_reason, 'tool_calls', JSON.stringify(named.choices[0].message));
  assert.equal(calls.length, 1);
  for (const c of calls) {
    assert.equal(c.function.name, 'get_weather');
    assert.ok(schemas.get_weather(JSON.parse(c.function.arguments)), JSON.stringify(schemas.get_weather.errors));
  }
});

test('a forced call streams as delta.tool_calls, and the history goes back as JSON', { skip }, async () => {
  const stream = client.chat.completions.stream({
    model: 'stories260K', messages: ask, tools, tool_choice: { type: 'function', function: { name: 'get_time' } },
    temperature: 1, seed: 3, max_tokens: 400 });
  const final = await stream.finalChatCompletion();
  const msg = final.choices[0].message;
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  assert.equal(msg.tool_calls.length, 1);
  assert.equal(msg.tool_calls[0].function.name, 'get_time');
  const args = JSON.parse(msg.tool_calls[0].function.arguments);
  assert.equal(typeof args.tz, 'string');

  // The call and its result go back; the plain format has no tool role, so
  // they are rendered as JSON turns (more prompt tokens), never refused.
  const history = [...ask, { role: 'assistant', content: null, tool_calls: msg.tool_calls },
    { role: 'tool', tool_call_id: msg.tool_calls[0].id, content: '09:30' }];
  const next = await create({ messages: history, tools });
  const first = await create({ messages: ask, tools });
  assert.ok(next.usage.prompt_tokens > first.usage.prompt_tokens + 10);
  // The shared system prompt and question come from the cache.
  assert.ok(next.usage.prompt_tokens_details.cached_tokens >= 16);
});
