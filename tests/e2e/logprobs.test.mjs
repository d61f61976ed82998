// Token log-probabilities end to end with the official openai SDK: chat
// `logprobs` / `top_logprobs` (plain and streamed), completions `logprobs: N`
// with `echo` (the prompt's logprobs, as lm-eval-harness asks for them with
// max_tokens 0), checked against llama.cpp's values in
// tests/engine/fixtures/logprobs_llamacpp.json (node-llama-cpp 3.21.1,
// tests/reference/logprobs_reference.mjs), and the 400s for bad values.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { Daemon, modelPath, tempDir, removeDir } from './daemon.mjs';

const model = modelPath();
const skip = model ? false : 'test model stories260K.gguf not found (set LARDER_TEST_MODELS)';
const fixture = JSON.parse(readFileSync(new URL('../engine/fixtures/logprobs_llamacpp.json', import.meta.url)));
const ref = fixture.models['stories260K.gguf'];
// Largest |larder - llama.cpp| allowed for a logprob on the F32 model
// (measured: 6e-6; see README "Logprobs").
const kTol = 1e-4;

let d;
let c;
let dir;
before(async () => {
  if (!model) return;
  // llama.cpp's values are for F32 K/V (larder's default is f16, whose
  // logprobs differ by ~1e-3 on this model).
  dir = tempDir();
  const config = join(dir, 'f32-kv.toml');
  writeFileSync(config, '[cache]\nkv_dtype = "f32"\n');
  d = await Daemon.start({ model, extraArgs: ['--config', config] });
  c = new OpenAI({ baseURL: d.baseURL, apiKey: 'not-needed', maxRetries: 0 });
});
after(async () => {
  if (d) await d.stop();
  if (dir) removeDir(dir);
});

function near(got, want, what) {
  assert.ok(Math.abs(got - want) < kTol, `${what}: ${got} vs llama.cpp ${want}`);
}

// The values of a top list against the fixture's [[id, logprob], ...].
function checkTop(got, want, what) {
  assert.equal(got.length, want.length, what);
  for (let k = 0; k < got.length; k++) {
    near(got[k], want[k][1], `${what} top ${k}`);
    if (k > 0) assert.ok(got[k - 1] >= got[k], `${what}: sorted`);
  }
}

const utf8 = new TextDecoder();

test('chat: logprobs with top_logprobs 5 match llama.cpp', { skip }, async () => {
  const chat = ref.chat;
  const r = await c.chat.completions.create({
    model: 'stories260K', messages: [{ role: 'user', content: fixture.chat_user_message }],
    temperature: 0, max_tokens: chat.greedy.length, logprobs: true, top_logprobs: 5,
  });
  const content = r.choices[0].logprobs.content;
  assert.equal(r.choices[0].logprobs.refusal, null);
  assert.ok(content.length > 0);
  assert.ok(content.length <= chat.greedy.length);
  // Each entry is the token llama.cpp picked greedily, at llama.cpp's logprob.
  const bytes = [];
  for (let j = 0; j < content.length; j++) {
    const e = content[j];
    near(e.logprob, chat.greedy[j].logprob, `token ${j}`);
    checkTop(e.top_logprobs.map((t) => t.logprob), chat.greedy[j].top.slice(0, 5), `token ${j}`);
    assert.equal(e.top_logprobs[0].logprob, e.logprob, 'greedy: the token is the top entry');
    assert.equal(e.top_logprobs[0].token, e.token);
    assert.equal(utf8.decode(Uint8Array.from(e.bytes)), e.token);
    bytes.push(...e.bytes);
  }
  // The pieces make up the answer (the first loses the space "Assistant:" is followed by).
  const text = utf8.decode(Uint8Array.from(bytes));
  assert.equal(text.replace(/^ /, ''), r.choices[0].message.content.replace(/^ /, ''));
  assert.equal(r.usage.prompt_tokens, chat.prompt_tokens.length);
});

test('chat: streamed chunks carry the entries of their tokens', { skip }, async () => {
  const req = {
    model: 'stories260K', messages: [{ role: 'user', content: fixture.chat_user_message }],
    temperature: 0, max_tokens: 8, logprobs: true, top_logprobs: 2,
  };
  const whole = await c.chat.completions.create(req);
  const stream = await c.chat.completions.create({ ...req, stream: true });
  const entries = [];
  let text = '';
  for await (const chunk of stream) {
    for (const ch of chunk.choices) {
      if (ch.delta?.content) {
        text += ch.delta.content;
        assert.ok(ch.logprobs?.content?.length > 0, 'a chunk with text has its entries');
      }
      if (ch.logprobs) entries.push(...ch.logprobs.content);
    }
  }
  assert.equal(text, whole.choices[0].message.content);
  assert.deepEqual(entries, whole.choices[0].logprobs.content);
});

test('completions: echo with logprobs and max_tokens 0 gives the prompt logprobs', { skip }, async () => {
  const comp = ref.completion;
  const r = await c.completions.create({
    model: 'stories260K', prompt: comp.prompt_text, max_tokens: 0, echo: true, logprobs: 5,
  });
  const ch = r.choices[0];
  assert.equal(ch.text, comp.prompt_text);
  assert.equal(r.usage.completion_tokens, 0);
  assert.equal(r.usage.prompt_tokens_details.cached_tokens, 0);
  const lp = ch.logprobs;
  assert.equal(lp.tokens.length, comp.prompt_tokens.length);
  assert.equal(lp.token_logprobs[0], null);
  assert.equal(lp.top_logprobs[0], null);
  for (let i = 1; i < lp.tokens.length; i++) {
    near(lp.token_logprobs[i], comp.prompt[i - 1].logprob, `prompt token ${i}`);
    const top = Object.values(lp.top_logprobs[i]).sort((a, b) => b - a);
    checkTop(top, comp.prompt[i - 1].top.slice(0, top.length), `prompt token ${i}`);
    assert.ok(top.length >= 1 && top.length <= 5);
  }
  // text_offset indexes the returned text (the piece after BOS, " Once",
  // lost its space in the text, as SentencePiece decodes a text's start).
  assert.equal(lp.text_offset[1], 0);
  for (let i = 2; i < lp.tokens.length; i++) {
    assert.equal(ch.text.slice(lp.text_offset[i], lp.text_offset[i] + lp.tokens[i].length), lp.tokens[i]);
  }
  // lm-eval-harness's loglikelihood: the sum over the continuation's tokens.
  const ctxlen = 10;
  const sum = lp.token_logprobs.slice(ctxlen).reduce((a, b) => a + b, 0);
  const want = comp.prompt.slice(ctxlen - 1).reduce((a, e) => a + e.logprob, 0);
  assert.ok(Math.abs(sum - want) < kTol * 10, `${sum} vs ${want}`);

  // A second time (the prompt's first page is cached now): the same values.
  const again = await c.completions.create({
    model: 'stories260K', prompt: comp.prompt_text, max_tokens: 0, echo: true, logprobs: 5,
  });
  assert.deepEqual(again.choices[0].logprobs.token_logprobs, lp.token_logprobs);
});

test('completions: logprobs of the generated tokens, echoed and streamed', { skip }, async () => {
  const comp = ref.completion;
  const n = comp.greedy.length;
  const req = {
    model: 'stories260K', prompt: comp.prompt_text, max_tokens: n, temperature: 0, logprobs: 3,
    echo: true, ignore_eos: true,
  };
  const r = await c.completions.create(req);
  const lp = r.choices[0].logprobs;
  const np = comp.prompt_tokens.length;
  assert.equal(lp.tokens.length, np + n);
  assert.ok(r.choices[0].text.startsWith(comp.prompt_text));
  for (let j = 0; j < n; j++) {
    near(lp.token_logprobs[np + j], comp.greedy[j].logprob, `generated ${j}`);
    const top = Object.values(lp.top_logprobs[np + j]).sort((a, b) => b - a);
    checkTop(top, comp.greedy[j].top.slice(0, top.length), `generated ${j}`);
  }
  assert.equal(lp.tokens.slice(np).join(''), r.choices[0].text.slice(comp.prompt_text.length));
  assert.equal(lp.text_offset[np], comp.prompt_text.length);

  const stream = await c.completions.create({ ...req, stream: true });
  const got = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let text = '';
  for await (const chunk of stream) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    text += ch.text;
    if (ch.logprobs) for (const k of Object.keys(got)) got[k].push(...ch.logprobs[k]);
  }
  assert.equal(text, r.choices[0].text);
  assert.deepEqual(got, lp);
});

test('completions: echo with logprobs and n = 2: each choice echoes the prompt with its logprobs', { skip }, async () => {
  const comp = ref.completion;
  for (const max_tokens of [0, 3]) {
    const r = await c.completions.create({
      model: 'stories260K', prompt: comp.prompt_text, max_tokens, echo: true, logprobs: 2, n: 2, seed: 5,
    });
    assert.equal(r.choices.length, 2);
    for (const ch of r.choices) {
      assert.ok(ch.text.startsWith(comp.prompt_text), `choice ${ch.index}`);
      const lp = ch.logprobs;
      assert.equal(lp.token_logprobs[0], null);
      assert.equal(lp.tokens.length, comp.prompt_tokens.length + max_tokens);
      for (let i = 1; i < comp.prompt_tokens.length; i++) {
        near(lp.token_logprobs[i], comp.prompt[i - 1].logprob, `choice ${ch.index} prompt token ${i}`);
      }
    }
    assert.equal(r.usage.completion_tokens, 2 * max_tokens);
  }
});

// The {piece: logprob} objects of a raw completions body or chunk, each as
// its [key, value] pairs in the order written (JSON.parse would put keys
// that look like integers first, so the order is read off the text).
function rawTopLogprobs(text) {
  const start = text.indexOf('"top_logprobs":[');
  assert.ok(start >= 0, text);
  const dicts = [];
  let i = start + '"top_logprobs":['.length;
  for (;;) {
    if (text.startsWith('null', i)) { dicts.push(null); i += 4; }
    else {
      assert.equal(text[i], '{');
      const pairs = [];
      const re = /"((?:[^"\\]|\\.)*)":(-?[0-9.eE+-]+)([,}])/y;
      i += 1;
      if (text[i] === '}') i += 1;
      else for (;;) {
        re.lastIndex = i;
        const m = re.exec(text);
        assert.ok(m, text.slice(i, i + 80));
        pairs.push([JSON.parse(`"${m[1]}"`), Number(m[2])]);
        i = re.lastIndex;
        if (m[3] === '}') break;
      }
      dicts.push(pairs);
    }
    if (text[i] === ']') return dicts;
    assert.equal(text[i], ',');
    i += 1;
  }
}

test('completions: top_logprobs objects list their keys in rank order (raw bytes)', { skip }, async () => {
  const comp = ref.completion;
  const body = {
    model: 'stories260K', prompt: comp.prompt_text, max_tokens: 4, temperature: 0, echo: true, logprobs: 5,
  };
  const checkRanked = (dicts, what) => {
    let n = 0;
    for (const [k, dict] of dicts.entries()) {
      if (dict === null) continue;
      for (let j = 1; j < dict.length; j++) {
        assert.ok(dict[j - 1][1] >= dict[j][1], `${what} entry ${k}: ${JSON.stringify(dict)} is not in rank order`);
      }
      n += dict.length > 1 ? 1 : 0;
    }
    return n;
  };
  const res = await fetch(`${d.baseURL}/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  assert.equal(res.status, 200);
  const text = await res.text();
  const dicts = rawTopLogprobs(text);
  assert.equal(dicts.length, comp.prompt_tokens.length + 4);
  assert.ok(checkRanked(dicts, 'body') > 10);
  // The prompt's: the fixture's (llama.cpp's) values in its order (where
  // no two of the top 5 share a text, which leaves fewer keys).
  for (let i = 1; i < comp.prompt_tokens.length; i++) {
    const want = comp.prompt[i - 1].top;
    near(dicts[i][0][1], want[0][1], `prompt token ${i} top 0`);
    if (dicts[i].length === 5) dicts[i].forEach(([, lp], k) => near(lp, want[k][1], `prompt token ${i} top ${k}`));
  }

  const sres = await fetch(`${d.baseURL}/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body, stream: true }),
  });
  const sse = await sres.text();
  const streamed = [];
  for (const line of sse.split('\n')) {
    if (!line.startsWith('data: ') || !line.includes('"top_logprobs":[')) continue;
    streamed.push(...rawTopLogprobs(line.slice(6)));
  }
  assert.deepEqual(streamed, dicts);
});

test('logprobs: bad values are 400s naming the field', { skip }, async () => {
  const messages = [{ role: 'user', content: 'Hi' }];
  const bad = async (p, param) => {
    await assert.rejects(p, (e) => e.status === 400 && e.error?.param === param);
  };
  await bad(c.chat.completions.create({ model: 'stories260K', messages, top_logprobs: 2 }), 'top_logprobs');
  await bad(c.chat.completions.create({ model: 'stories260K', messages, logprobs: true, top_logprobs: 21 }),
            'top_logprobs');
  await bad(c.completions.create({ model: 'stories260K', prompt: 'Hi', logprobs: 21 }), 'logprobs');
  await bad(c.completions.create({ model: 'stories260K', prompt: 'Hi', max_tokens: 0 }), 'max_tokens');
  await bad(c.chat.completions.create({ model: 'stories260K', messages, echo: true }), 'echo');
});
