// CPU speed, larder against llama.cpp, on the same GGUF files in one run.
//   larder    : larderd started on the file (no disk tier), driven through its
//               OpenAI HTTP API as a client sees it (fetch, times on this side).
//   llama.cpp : node-llama-cpp 3.21.1's prebuilt CPU binaries, in this process.
// Both get the same token ids, so no tokenizer is timed and nothing differs
// but the engines:
//   prefill : a prompt of --prompt-tokens random ids (a new one every run, so
//             neither side reuses a cached prefix) and one generated token;
//             tok/s = prompt tokens / (request sent .. answer received) for
//             larder, (evaluate() .. first token) for llama.cpp.
//   decode  : --decode-tokens greedy tokens after a 16-token prompt, EOS
//             ignored; tok/s = (tokens - 1) / (first token .. last token), from
//             the stream's chunks for larder.
//   load    : seconds from starting the engine on the file to its being ready
//             for a request: larderd's spawn until /health answers (polled
//             every 100 ms), llama.cpp's loadModel and createContext. The
//             file sits in the page cache for both (written or read before).
//   context : with --contexts 4096,16384,...: prefill the first C - 1 tokens
//             of a prompt, then time the last --prompt-tokens of it (prefill
//             at that depth) and --decode-tokens decoded after it.
// The model's shape (from its GGUF metadata) gives the work per token, printed
// beside the speeds so the report can divide by the machine's walls:
//   weight_bytes   the tensor bytes decode reads per token (all matrices; the
//                  token embedding is read whole only when it is also the output);
//   macs_per_token multiply-adds per prompt token in the layers' matrices (the
//                  output matrix runs for the last token only, so it is left out).
// With --walls BIN (bench_walls), the read wall is also probed beside every
// decode run (`bench_walls --read-only` with that run's thread count, just
// before and just after it, the engine idle): a shared machine's bandwidth
// moves by tens of percent within minutes, so a wall measured once before
// the whole bench can be far from the one a run had. Each decode line then
// carries
//   wall_gb_per_s_runs  per run, the mean of the probes before and after it;
//   wall_share_runs     per run, weight_bytes x tok/s / that wall;
//   wall_share          their median.
// Prints one JSON line per (impl, bench, model, threads[, context]).
//
// usage: node cpu.mjs --larder BIN [--walls BIN] [--threads 1,2] [--runs 3] [--prompt-tokens 512]
//                     [--decode-tokens 64] [--contexts 4096,16384] [--skip-llama-cpp]
//                     MODEL.gguf...
import {execFileSync} from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import {getLlama, LlamaLogLevel, readGgufFileInfo} from "node-llama-cpp";
import {Daemon} from "../tests/e2e/daemon.mjs";
import {streamCompletion} from "./larder_stream.mjs";

function parseArgs(argv) {
    const a = {larder: "", walls: "", threads: [1, 2], runs: 3, promptTokens: 512, decodeTokens: 64, contexts: [],
        skipLlamaCpp: false, skipLarder: false, models: []};
    for (let i = 0; i < argv.length; i++) {
        const s = argv[i];
        const next = () => {
            if (i + 1 >= argv.length) usage();
            return argv[++i];
        };
        if (s === "--larder") a.larder = next();
        else if (s === "--walls") a.walls = next();
        else if (s === "--threads") a.threads = next().split(",").map(Number);
        else if (s === "--runs") a.runs = Number(next());
        else if (s === "--prompt-tokens") a.promptTokens = Number(next());
        else if (s === "--decode-tokens") a.decodeTokens = Number(next());
        else if (s === "--contexts") a.contexts = next().split(",").map(Number);
        else if (s === "--skip-llama-cpp") a.skipLlamaCpp = true;
        else if (s === "--skip-larder") a.skipLarder = true;
        else if (s.startsWith("-")) usage();
        else a.models.push(s);
    }
    if (a.models.length === 0 || !(a.runs >= 1) || !(a.decodeTokens >= 2) || !(a.promptTokens >= 1)) usage();
    if (!a.skipLarder && !fs.existsSync(a.larder)) usage();
    if (a.walls && !fs.existsSync(a.walls)) usage();
    return a;
}

function usage() {
    console.error("usage: node cpu.mjs --larder BIN [--walls BIN] [--threads 1,2] [--runs N] [--prompt-tokens N] " +
        "[--decode-tokens N] [--contexts C1,C2] [--skip-llama-cpp] [--skip-larder] MODEL.gguf...");
    process.exit(2);
}

const median = (xs) => {
    const v = [...xs].sort((x, y) => x - y);
    const n = v.length;
    return n % 2 === 1 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
};
const line = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

// A deterministic stream of token ids in [lo, hi) (xorshift32), so both
// engines see the same prompts.
function idStream(seed, lo, hi) {
    let s = (seed * 2654435761) >>> 0 || 1;
    return (n) => Array.from({length: n}, () => {
        s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
        return lo + (s % (hi - lo));
    });
}

const kL3SizedBytes = 64 * 2 ** 20;

// Work per token from the GGUF's metadata and tensor table.
async function modelShape(file) {
    const info = await readGgufFileInfo(file, {readTensorInfo: true});
    const arch = info.metadata.general.architecture;
    const m = info.metadata[arch];
    const tensors = [...(info.fullTensorInfo ?? info.tensorInfo)].sort((x, y) => x.fileOffset - y.fileOffset);
    const tied = !tensors.some((t) => t.name === "output.weight");
    // A tensor's bytes: the distance to the next one (alignment padding included).
    const fileSize = fs.statSync(file).size;
    let weightBytes = 0;
    for (let i = 0; i < tensors.length; i++) {
        const end = i + 1 < tensors.length ? tensors[i + 1].fileOffset : fileSize;
        if (tensors[i].name === "token_embd.weight" && !tied) continue;
        weightBytes += end - tensors[i].fileOffset;
    }
    const nEmbd = m.embedding_length, nFf = m.feed_forward_length, nLayer = m.block_count;
    const nHead = m.attention.head_count, nKv = m.attention.head_count_kv ?? nHead;
    const headDim = nEmbd / nHead;
    const perLayer = nEmbd * nEmbd * 2 + 2 * nEmbd * nKv * headDim + 3 * nEmbd * nFf;
    return {arch, n_layer: nLayer, n_embd: nEmbd, weight_bytes: weightBytes,
        // Weights that fit in the L3 (stories260K) are not streamed from
        // memory by decode: no read-wall probes, no decode share.
        streams_from_memory: weightBytes >= kL3SizedBytes, macs_per_token: perLayer * nLayer,
        attn_macs_per_token_per_ctx: 2 * nLayer * nHead * headDim,
        kv_bytes_per_token: 2 * nLayer * nKv * headDim * 2};  // K and V in f16, larder's default
}

// The read wall on `threads` threads now (GB/s, the faster of bench_walls'
// plain and prefetching reads of a huge-page buffer), or null without --walls.
// A probe that fails (no memory for its 1 GiB buffer, say) is reported once
// on stderr and gives null: the runs beside it get no share.
let probeFailed = false;
function probeReadWall(args, threads) {
    if (!args.walls || probeFailed) return null;
    try {
        const out = execFileSync(args.walls, ["--threads", String(threads), "--read-only", "--reps", "2", "--json-only"],
            {encoding: "utf8", stdio: ["ignore", "pipe", "pipe"]});
        const gbps = Math.max(...out.trim().split("\n").map((l) => JSON.parse(l).gb_per_s));
        if (!Number.isFinite(gbps) || gbps <= 0) throw new Error(`no read figure in: ${out.trim()}`);
        return gbps;
    } catch (e) {
        probeFailed = true;
        console.error(`cpu.mjs: the read-wall probe failed, decode runs get no wall beside them: ${e.message}`);
        return null;
    }
}

// Times `runs` decode runs (run() -> {tokens, ms}), with the read wall probed
// before the first and after each when --walls is given. Returns the fields
// of a decode line.
async function decodeRuns(args, threads, shape, run) {
    const dec = [], walls = [];
    let minTokens = Infinity;
    const probe = shape.streams_from_memory ? () => probeReadWall(args, threads) : () => null;
    let before = probe();
    for (let r = 0; r < args.runs; r++) {
        const {tokens, ms} = await run();
        minTokens = Math.min(minTokens, tokens);
        dec.push((tokens - 1) / (ms / 1000));
        const after = probe();
        walls.push(before != null && after != null ? (before + after) / 2 : null);
        before = after;
    }
    const fields = {tokens: minTokens, tok_per_s: median(dec), runs: dec};
    if (walls.length && walls.every((w) => w != null)) {
        const shares = dec.map((tps, i) => shape.weight_bytes * tps / 1e9 / walls[i]);
        Object.assign(fields, {wall_gb_per_s_runs: walls, wall_share_runs: shares, wall_share: median(shares)});
    }
    return fields;
}

// ---- larder through HTTP ----------------------------------------------------
// A completion's JSON, by node:http with no client-side timeout: fetch gives
// up after 300 s without response headers, and a 32k-token prefix takes
// longer than that on 2 cores.
function post(base, body) {
    return new Promise((resolve, reject) => {
        const u = new URL(`${base.url}/completions`);
        const data = JSON.stringify({model: base.model, ...body});
        const req = http.request({hostname: u.hostname, port: u.port, path: u.pathname, method: "POST",
            headers: {"content-type": "application/json", "content-length": Buffer.byteLength(data)}}, (res) => {
            let text = "";
            res.setEncoding("utf8");
            res.on("data", (c) => { text += c; });
            res.on("end", () => (res.statusCode === 200 ? resolve(JSON.parse(text))
                : reject(new Error(`larder ${res.statusCode}: ${text}`))));
        });
        req.on("error", reject);
        req.end(data);
    });
}

async function larderPrefill(base, prompt) {
    const t0 = performance.now();
    await post(base, {prompt, max_tokens: 1, temperature: 0});
    return performance.now() - t0;
}

// Streams n greedy tokens (EOS ignored): streamCompletion's timings.
function larderDecode(base, prompt, n) {
    return streamCompletion(base.url, {model: base.model, prompt, max_tokens: n, temperature: 0, ignore_eos: true});
}

async function benchLarder(args, file, shape, ids) {
    for (const threads of args.threads) {
        const maxCtx = Math.max(args.promptTokens + 8, ...args.contexts.map((c) => c + args.decodeTokens + 8));
        const ctx = Math.max(4096, maxCtx);
        const extraArgs = ["--ctx", String(ctx), "--log-level", "warn"];
        // A device tier (the CPU's page pool) that holds a whole long context
        // with room to spare: the default 1 GiB does not at 32k on a 1B model.
        const kvBytes = Math.ceil(ctx * shape.kv_bytes_per_token * 1.25);
        let config = null;
        if (kvBytes > 1 << 30) {
            config = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "larder-bench-")), "larder.toml");
            fs.writeFileSync(config, `[cache.device]\nbudget = ${kvBytes}\n`);
            extraArgs.push("--config", config);
        }
        const t0 = performance.now();
        const d = await Daemon.start({bin: args.larder, model: file, threads, startTimeoutMs: 120000, extraArgs});
        line({impl: "larder", bench: "load", model: path.basename(file), threads,
            seconds: (performance.now() - t0) / 1000});
        try {
            const base = {url: d.baseURL, model: path.basename(file, ".gguf")};
            await larderPrefill(base, ids(args.promptTokens));  // warm-up: pages in the weights
            const pre = [];
            for (let r = 0; r < args.runs; r++) {
                pre.push(args.promptTokens / (await larderPrefill(base, ids(args.promptTokens)) / 1000));
            }
            const dec = await decodeRuns(args, threads, shape, () => larderDecode(base, ids(16), args.decodeTokens));
            const name = path.basename(file);
            line({impl: "larder", bench: "prefill", model: name, threads, tokens: args.promptTokens,
                tok_per_s: median(pre), runs: pre, ...shape});
            line({impl: "larder", bench: "decode", model: name, threads, ...dec, ...shape});
            for (const c of args.contexts) {
                // The first request caches the prefix (c - promptTokens
                // tokens); the timed one prefills the last promptTokens at
                // that depth (time to its first chunk) and decodes on.
                const prefix = ids(c - args.promptTokens);
                await larderPrefill(base, prefix);
                const t = await larderDecode(base, [...prefix, ...ids(args.promptTokens)], args.decodeTokens);
                line({impl: "larder", bench: "context", model: name, threads, context: c,
                    prefill_tok_per_s: args.promptTokens / (t.firstMs / 1000),
                    decode_tok_per_s: (t.tokens - 1) / (t.ms / 1000), ...shape});
            }
        } finally {
            await d.stop();
            if (config) fs.rmSync(path.dirname(config), {recursive: true, force: true});
        }
    }
}

// ---- llama.cpp through node-llama-cpp ----------------------------------------
async function benchLlamaCpp(args, llama, file, shape, ids) {
    const t0 = performance.now();
    const model = await llama.loadModel({modelPath: file});
    const loadSeconds = (performance.now() - t0) / 1000;
    const evalOptions = {temperature: 0, repeatPenalty: false};
    const first = async (seq, tokens) => {
        const t0 = performance.now();
        const it = seq.evaluate(tokens, evalOptions);
        await it.next();
        const ms = performance.now() - t0;
        await it.return();
        return ms;
    };
    const decode = async (seq, tokens, n) => {
        let k = 0, t1 = 0;
        const t0 = performance.now();
        for await (const _ of seq.evaluate(tokens, evalOptions)) {
            if (++k === 1) t1 = performance.now();
            if (k >= n) break;
        }
        return {tokens: k, ms: performance.now() - t1, firstMs: t1 - t0};
    };
    for (const threads of args.threads) {
        const maxCtx = Math.max(args.promptTokens + 8, ...args.contexts.map((c) => c + args.decodeTokens + 8));
        const t1 = performance.now();
        const context = await model.createContext({contextSize: maxCtx, batchSize: 512, sequences: 1,
            threads: {ideal: threads, min: threads}});
        line({impl: "llama.cpp", bench: "load", model: path.basename(file), threads,
            seconds: loadSeconds + (performance.now() - t1) / 1000});
        const seq = context.getSequence();
        await first(seq, ids(args.promptTokens));  // warm-up
        const pre = [];
        for (let r = 0; r < args.runs; r++) {
            await seq.clearHistory();
            pre.push(args.promptTokens / (await first(seq, ids(args.promptTokens)) / 1000));
        }
        const dec = await decodeRuns(args, threads, shape, async () => {
            await seq.clearHistory();
            return decode(seq, ids(16), args.decodeTokens);
        });
        const name = path.basename(file);
        line({impl: "llama.cpp", bench: "prefill", model: name, threads, tokens: args.promptTokens,
            tok_per_s: median(pre), runs: pre, ...shape});
        line({impl: "llama.cpp", bench: "decode", model: name, threads, ...dec, ...shape});
        for (const c of args.contexts) {
            await seq.clearHistory();
            await first(seq, ids(c - args.promptTokens));
            // The sequence keeps the prefix's KV: the tail is prefilled at depth.
            const t = await decode(seq, ids(args.promptTokens), args.decodeTokens);
            line({impl: "llama.cpp", bench: "context", model: name, threads, context: c,
                prefill_tok_per_s: args.promptTokens / (t.firstMs / 1000),
                decode_tok_per_s: (t.tokens - 1) / (t.ms / 1000), ...shape});
        }
        await context.dispose();
    }
    await model.dispose();
}

const args = parseArgs(process.argv.slice(2));
const llama = args.skipLlamaCpp ? null : await getLlama({build: "never", gpu: false, logLevel: LlamaLogLevel.error});
for (const file of args.models) {
    const shape = await modelShape(file);
    const vocab = (await readGgufFileInfo(file)).metadata.tokenizer?.ggml?.tokens?.length ?? 32000;
    const hi = Math.min(vocab, 100000), lo = Math.min(1000, Math.floor(hi / 4));
    if (!args.skipLarder) await benchLarder(args, file, shape, idStream(1, lo, hi));
    if (llama) await benchLlamaCpp(args, llama, file, shape, idStream(1, lo, hi));
}
if (llama) await llama.dispose();
