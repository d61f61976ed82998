// Realistic zod schemas through the openai SDK (chat.completions.parse with
// zodResponseFormat, zodFunction tools under tool_choice "required"), in
// zod 3 and in zod 4 (zod/v4): what they send has integer and number
// ranges, zod 3's "nullable": true, zod 4's patterns beside formats. Every
// answer is checked by zod's own parser and by ajv, not by larder.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { zodResponseFormat, zodFunction } from 'openai/helpers/zod';
import { z as z3 } from 'zod';
import { z as z4 } from 'zod/v4';
import Ajv from 'ajv';
import { Daemon, modelPath } from './daemon.mjs';

const model = modelPath();
const skip = model ? false : 'test model stories260K.gguf not found (set LARDER_TEST_MODELS)';
let d;
let c;

before(async () => {
  if (!model) return;
  d = await Daemon.start({ model, cacheDir: '', extraArgs: ['--ctx', '2048'] });  // room for the generic tool prompt
  c = new OpenAI({ baseURL: d.baseURL, apiKey: 'not-needed', maxRetries: 0 });
});
after(async () => { if (d) await d.stop(); });

// Strings are bounded so that the tiny model's answers end within max_tokens.
const profile = (z) => z.object({
  age: z.number().int().min(0).max(150),
  count: z.number().int(),
  score: z.number().positive(),
  ratio: z.number().min(0).max(1),
  nick: z.string().max(8).nullable(),
  id: z.string().uuid(),
  email: z.string().email(),  // unbounded: the grammar bounds an address (64 + 64 characters)
  at: z.string().datetime(),
  tags: z.array(z.enum(['a', 'b'])).max(3),
});

// ajv with the formats zod's output names (ajv checks pattern itself).
function validator(schema) {
  const ajv = new Ajv({ allErrors: true, strict: false });
  ajv.addFormat('uuid', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
  ajv.addFormat('email', /^[^\s@]+@[^\s@]+\.[^\s@]+$/);
  ajv.addFormat('date-time', (s) => !Number.isNaN(Date.parse(s)) && /^\d{4}-\d\d-\d\dT\d\d:\d\d/.test(s));
  return ajv.compile(schema);
}

for (const [version, z] of [['zod 3', z3], ['zod 4', z4]]) {
  test(`${version}: chat.completions.parse with ranges, nullable, uuid, email and datetime returns objects zod and ajv accept`, { skip }, async () => {
    const Profile = profile(z);
    const format = zodResponseFormat(Profile, 'profile');
    const validate = validator(format.json_schema.schema);
    let parsed = 0;
    for (let seed = 1; seed <= 6; seed++) {
      const r = await c.chat.completions.parse({
        model: 'stories260K', messages: [{ role: 'user', content: 'A profile' }],
        temperature: 1, seed, max_tokens: 400, response_format: format,
      });
      const choice = r.choices[0];
      if (choice.finish_reason !== 'stop') continue;  // cut inside an unbounded number
      const doc = choice.message.parsed;
      assert.ok(doc, choice.message.content);
      Profile.parse(doc);  // throws on any violation, with the field
      assert.ok(validate(JSON.parse(choice.message.content)), JSON.stringify(validate.errors) + ' ' + choice.message.content);
      parsed++;
    }
    assert.ok(parsed >= 3, `${parsed} of 6 ended within max_tokens`);
  });

  test(`${version}: a forced zodFunction tool call with bounded parameters parses`, { skip }, async () => {
    const Args = z.object({ age: z.number().int().min(1).max(120), unit: z.enum(['years', 'months']) });
    let checked = 0;
    for (let seed = 1; seed <= 4; seed++) {
      const r = await c.chat.completions.parse({
        model: 'stories260K', messages: [{ role: 'user', content: 'Set the age' }], temperature: 1, seed,
        max_tokens: 200, tools: [zodFunction({ name: 'set_age', parameters: Args })], tool_choice: 'required',
        parallel_tool_calls: false,
      });
      const call = r.choices[0].message.tool_calls?.[0];
      assert.ok(call, JSON.stringify(r.choices[0].message));
      assert.equal(call.function.name, 'set_age');
      Args.parse(call.function.parsed_arguments);
      checked++;
    }
    assert.equal(checked, 4);
  });
}
