// llama.cpp side of the comparison (through node-llama-cpp 3.21.1, its
// prebuilt CPU binaries): the same GGUF files and settings as bench_decode.
//   decode  : 256 tokens from BOS, greedy (temperature 0, no repeat penalty),
//             EOS ignored (the generator is simply read on); tok/s = 255 /
//             (time from the first to the 256th token)
//   prefill : the reference.json "long" prompt, tokenized by the model's own
//             tokenizer (model.tokenize keeps the SentencePiece space prefix)
//             with BOS in front; tok/s = prompt tokens / (time from evaluate()
//             to the first generated token), after clearHistory() so nothing
//             is reused.
//   repeat  : with --repeat-tokens N, time to first token of an N-token prompt
//             (the story text repeated, cut to N tokens, BOS first) cold and
//             then sent again on the same sequence: llama.cpp keeps the
//             context's KV, so the repeat erases only the last prompt position
//             and evaluates that one token (what llama.cpp's server does for
//             a repeated prompt). Both after clearHistory() of earlier runs.
// Context 512 (or N + 16 for --repeat-tokens), one sequence, threads as given. Times are performance.now()
// around the generator calls, so they include node-llama-cpp's per-token
// JavaScript overhead (llama.cpp's own llama_perf numbers would be a bit higher).
// Prints one JSON line per (bench, model, threads).
//
// usage: node llama_cpp.mjs [--threads 1,2] [--runs 5] [--decode-tokens 256]
//                           [--max-seconds 4] [--reference FILE]
//                           [--repeat-tokens N] MODEL.gguf...
// --max-seconds caps one decode run: with 2 threads on a busy 2-core machine
// llama.cpp's spinning worker threads can fall to a few tokens per second, and
// the run then stops early; tok/s is computed over the tokens it did get
// ("tokens" in the JSON line is the smallest count of any run).
import fs from "node:fs";
import path from "node:path";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

function parseArgs(argv) {
    const a = {threads: [1, 2], runs: 5, decodeTokens: 256, maxSeconds: 4, reference: "", repeatTokens: 0, models: []};
    for (let i = 0; i < argv.length; i++) {
        const s = argv[i];
        const next = () => {
            if (i + 1 >= argv.length) usage();
            return argv[++i];
        };
        if (s === "--threads") a.threads = next().split(",").map(Number);
        else if (s === "--runs") a.runs = Number(next());
        else if (s === "--decode-tokens") a.decodeTokens = Number(next());
        else if (s === "--max-seconds") a.maxSeconds = Number(next());
        else if (s === "--reference") a.reference = next();
        else if (s === "--repeat-tokens") a.repeatTokens = Number(next());
        else if (s.startsWith("-")) usage();
        else a.models.push(s);
    }
    if (a.models.length === 0 || !(a.runs >= 1) || !(a.decodeTokens >= 2)) usage();
    return a;
}

function usage() {
    console.error("usage: node llama_cpp.mjs [--threads 1,2] [--runs N] [--decode-tokens N] [--max-seconds S] [--reference reference.json] [--repeat-tokens N] MODEL.gguf...");
    process.exit(2);
}

function median(xs) {
    const v = [...xs].sort((x, y) => x - y);
    const n = v.length;
    return n % 2 === 1 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

function referencePath(args) {
    if (args.reference) return args.reference;
    const env = process.env.LARDER_TEST_MODELS;
    if (env && fs.existsSync(path.join(env, "reference.json"))) return path.join(env, "reference.json");
    return path.join(path.dirname(args.models[0]), "reference.json");
}

function line(obj) {
    process.stdout.write(JSON.stringify(obj) + "\n");
}

const args = parseArgs(process.argv.slice(2));
const reference = JSON.parse(fs.readFileSync(referencePath(args), "utf8"));
const promptText = reference.cases.find((c) => c.name === "long").prompt;

const llama = await getLlama({build: "never", gpu: false, logLevel: LlamaLogLevel.error});

// Time from evaluate() to its first generated token, in ms.
async function ttftMs(sequence, tokens, evalOptions) {
    const t0 = performance.now();
    const it = sequence.evaluate(tokens, evalOptions);
    await it.next();
    const ms = performance.now() - t0;
    await it.return();
    return ms;
}

async function benchRepeat(model, modelPath) {
    const bos = model.tokens.bos;
    let text = promptText;
    let ids = model.tokenize(text);
    while (ids.length + 1 < args.repeatTokens) {
        text += " " + promptText;
        ids = model.tokenize(text);
    }
    const prompt = (bos != null ? [bos, ...ids] : ids).slice(0, args.repeatTokens);
    for (const threads of args.threads) {
        const context = await model.createContext({
            contextSize: args.repeatTokens + 16,
            batchSize: 512,
            sequences: 1,
            threads: {ideal: threads, min: threads}
        });
        const sequence = context.getSequence();
        const evalOptions = {temperature: 0, repeatPenalty: false};
        await ttftMs(sequence, prompt, evalOptions);  // warm-up
        const cold = [], repeat = [];
        for (let r = 0; r < args.runs; r++) {
            await sequence.clearHistory();
            cold.push(await ttftMs(sequence, prompt, evalOptions));
            const t0 = performance.now();
            await sequence.eraseContextTokenRanges([{start: prompt.length - 1, end: sequence.nextTokenIndex}]);
            const it = sequence.evaluate([prompt[prompt.length - 1]], evalOptions);
            await it.next();
            repeat.push(performance.now() - t0);
            await it.return();
        }
        line({bench: "repeat_ttft", impl: "llama.cpp", model: path.basename(modelPath), threads,
            prompt_tokens: prompt.length, cold_ms: median(cold), repeat_ms: median(repeat), cold_runs: cold,
            repeat_runs: repeat});
        await context.dispose();
    }
}

for (const modelPath of args.models) {
    const model = await llama.loadModel({modelPath});
    if (args.repeatTokens > 0) {
        await benchRepeat(model, modelPath);
        await model.dispose();
        continue;
    }
    const bos = model.tokens.bos;
    let prompt = model.tokenize(promptText);
    if (bos != null && prompt[0] !== bos) prompt = [bos, ...prompt];
    const start = bos != null ? [bos] : model.tokenize("Once");

    for (const threads of args.threads) {
        const context = await model.createContext({
            contextSize: 512,
            batchSize: 512,
            sequences: 1,
            threads: {ideal: threads, min: threads}
        });
        const sequence = context.getSequence();
        const evalOptions = {temperature: 0, repeatPenalty: false};

        // Warm-up: a few tokens, so that the first timed run does not pay for
        // graph allocation.
        {
            await sequence.clearHistory();
            let n = 0;
            const t0 = performance.now();
            for await (const _ of sequence.evaluate(start, evalOptions)) {
                if (++n >= 16 || performance.now() - t0 > args.maxSeconds * 1000) break;
            }
        }

        const decodeRuns = [];
        let minDecoded = args.decodeTokens - 1;
        for (let r = 0; r < args.runs; r++) {
            await sequence.clearHistory();
            let n = 0;
            let t1 = 0;
            for await (const _ of sequence.evaluate(start, evalOptions)) {
                n++;
                if (n === 1) t1 = performance.now();
                if (n >= args.decodeTokens) break;
                if (n > 1 && performance.now() - t1 > args.maxSeconds * 1000) break;
            }
            const seconds = (performance.now() - t1) / 1000;
            minDecoded = Math.min(minDecoded, n - 1);
            decodeRuns.push((n - 1) / seconds);
        }

        const prefillRuns = [];
        for (let r = 0; r < args.runs; r++) {
            await sequence.clearHistory();
            const t0 = performance.now();
            const it = sequence.evaluate(prompt, evalOptions);
            await it.next();
            const seconds = (performance.now() - t0) / 1000;
            await it.return();
            prefillRuns.push(prompt.length / seconds);
        }

        const name = path.basename(modelPath);
        line({bench: "decode", impl: "llama.cpp", model: name, threads, tokens: minDecoded,
            tok_per_s: median(decodeRuns), runs: decodeRuns});
        line({bench: "prefill", impl: "llama.cpp", model: name, threads, tokens: prompt.length,
            tok_per_s: median(prefillRuns), runs: prefillRuns});
        await context.dispose();
    }
    await model.dispose();
}
await llama.dispose();
