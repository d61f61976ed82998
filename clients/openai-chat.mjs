// A two-turn chat with the official openai SDK; the second turn's
// usage.prompt_tokens_details.cached_tokens shows the prefix cache at work.
//   cd clients && npm install --no-package-lock && node openai-chat.mjs [BASE_URL]
// Set LARDER_API_KEY when the daemon requires a key.
import OpenAI from 'openai';

const baseURL = (process.argv[2] ?? 'http://127.0.0.1:8080') + '/v1';
const client = new OpenAI({ baseURL, apiKey: process.env.LARDER_API_KEY || 'unused' });
const model = (await client.models.list()).data[0].id;
const messages = [{ role: 'user', content: 'Tell me a story about a cat.' }];

for (const next of ['What happened next?', null]) {
  const stream = await client.chat.completions.create({
    model, messages, stream: true, max_tokens: 60, stream_options: { include_usage: true },
  });
  let answer = '';
  for await (const chunk of stream) {
    const text = chunk.choices[0]?.delta?.content ?? '';
    answer += text;
    process.stdout.write(text);
    if (chunk.usage) {
      console.log(`\n[prompt ${chunk.usage.prompt_tokens} tokens, ` +
                  `cached ${chunk.usage.prompt_tokens_details.cached_tokens}]\n`);
    }
  }
  if (next === null) break;
  messages.push({ role: 'assistant', content: answer }, { role: 'user', content: next });
}
