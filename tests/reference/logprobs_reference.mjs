// llama.cpp's token log-probabilities for the logprobs tests (through
// node-llama-cpp 3.21.1 and its prebuilt CPU binaries): for a fixed prompt
// (BOS first) and its greedy continuation, the log-softmax of the model's
// raw logits at every position, i.e. what OpenAI's `logprobs` and
// llama.cpp's `n_probs` report (no temperature, top-k/p or penalties).
//
// node-llama-cpp hands out probabilities (float32 softmax, temperature 1,
// top-k/top-p/min-p off), not logits; log(p) of a float32 p differs from
// the double log-softmax by a relative 1e-7 of p, far below the tolerance
// the tests use.
//
// Output (stdout, one JSON object): models[file][case] for the cases
// "completion" and "chat" (see kCases):
//   prompt_tokens  the prompt ids, BOS first
//   prompt[i]      for prompt token i >= 1: {"token", "logprob", "top": [[id, logprob] x TOP]}
//                  (the distribution after prompt tokens 0..i-1)
//   greedy[j]      the j-th generated token (argmax, ties to the lower id):
//                  {"token", "logprob", "top"} from the distribution it was drawn from
//
// usage: node tests/reference/logprobs_reference.mjs [--node-modules DIR] [--tokens N] [--top N] MODEL.gguf...
//   DIR: a node_modules folder holding node-llama-cpp (default: bench/node_modules)
import path from "node:path";
import {pathToFileURL} from "node:url";

// "completion": a raw prompt; "chat": what larder's plain chat format
// (stories260K has no template) renders for one user message
// {"role": "user", "content": kChatUser}.
const kPrompt = "Once upon a time, there was a little girl named Lily. She loved to play";
const kChatUser = "Tell me a story about a cat.";
const kCases = {completion: kPrompt, chat: `User: ${kChatUser}\nAssistant:`};

function parseArgs(argv) {
    const a = {nodeModules: "bench/node_modules", tokens: 12, top: 20, models: []};
    for (let i = 0; i < argv.length; i++) {
        const s = argv[i];
        if (s === "--node-modules") a.nodeModules = argv[++i];
        else if (s === "--tokens") a.tokens = Number(argv[++i]);
        else if (s === "--top") a.top = Number(argv[++i]);
        else a.models.push(s);
    }
    if (a.models.length === 0) {
        console.error("usage: node logprobs_reference.mjs [--node-modules DIR] [--tokens N] [--top N] MODEL.gguf...");
        process.exit(2);
    }
    return a;
}

// [id, logprob] of the whole distribution, best first, ties to the lower id.
function sortedLogprobs(probabilities) {
    const all = [...probabilities.entries()].map(([id, p]) => [id, Math.log(p)]);
    all.sort((x, y) => (y[1] - x[1]) || (x[0] - y[0]));
    return all;
}

function entry(token, probabilities, top) {
    const p = probabilities.get(token);
    return {token, logprob: Math.log(p), top: sortedLogprobs(probabilities).slice(0, top)};
}

const args = parseArgs(process.argv.slice(2));
const pkg = path.resolve(args.nodeModules, "node-llama-cpp/dist/index.js");
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(pkg).href);
const llama = await getLlama({build: "never", gpu: false, logLevel: LlamaLogLevel.error});
const kNext = {generateNext: {probabilities: true, options: {temperature: 1, topK: 0, topP: 1, minP: 0}}};

const out = {
    description: "log-softmax of llama.cpp's logits (node-llama-cpp 3.21.1, CPU) for fixed prompts (BOS first) and their greedy continuations; made by tests/reference/logprobs_reference.mjs",
    chat_user_message: kChatUser,
    models: {},
};

async function runCase(model, sequence, text) {
    await sequence.clearHistory();
    const promptTokens = [model.tokens.bos, ...model.tokenize(text)];
    // Every prompt position gives the distribution of the next token.
    const evaluated = await sequence.controlledEvaluate(promptTokens.map(t => [t, kNext]));
    const prompt = [];
    for (let i = 1; i < promptTokens.length; i++) {
        prompt.push(entry(promptTokens[i], evaluated[i - 1].next.probabilities, args.top));
    }
    const greedy = [];
    let probs = evaluated[promptTokens.length - 1].next.probabilities;
    for (let j = 0; j < args.tokens; j++) {
        const best = sortedLogprobs(probs)[0][0];
        greedy.push(entry(best, probs, args.top));
        const [next] = await sequence.controlledEvaluate([[best, kNext]]);
        probs = next.next.probabilities;
    }
    let sum = 0;
    for (const p of probs.values()) sum += p;
    return {prompt_text: text, n_vocab: probs.size, prob_sum_last: sum, prompt_tokens: promptTokens, prompt, greedy};
}

for (const modelPath of args.models) {
    const model = await llama.loadModel({modelPath});
    // F32 K/V and no flash attention (llama.cpp defaults to F16 K/V and, on
    // the CPU, a flash attention that rounds Q to F16): the model's own
    // values, as larder computes them with its default kv_dtype "f32".
    const context = await model.createContext({contextSize: 256, batchSize: 256, threads: 1,
                                               experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
                                               flashAttention: false});
    const sequence = context.getSequence();
    const cases = {};
    for (const [name, text] of Object.entries(kCases)) cases[name] = await runCase(model, sequence, text);
    out.models[path.basename(modelPath)] = cases;
    await context.dispose();
    await model.dispose();
}
console.log(JSON.stringify(out, (k, v) => (typeof v === "number" && !Number.isInteger(v) ? Number(v.toPrecision(9)) : v)));
