// Shared by the scripts that record llama.cpp's outputs as test fixtures
// (scripts/arch/llama_cpp_reference.mjs, scripts/chat/llama_cpp_chat_reference.mjs):
// loading node-llama-cpp, the context every fixture is recorded with, and one
// greedy step's record.
import {createRequire} from "node:module";
import {readFileSync} from "node:fs";
import {join, dirname} from "node:path";
import {pathToFileURL} from "node:url";

// node-llama-cpp resolved from the current directory, else from bench/ below
// it (the repository's bench/node_modules). Returns {getLlama, version}.
export async function loadNodeLlamaCpp() {
    let entry;
    try {
        entry = createRequire(join(process.cwd(), "noop.js")).resolve("node-llama-cpp");
    } catch {
        entry = createRequire(join(process.cwd(), "bench", "noop.js")).resolve("node-llama-cpp");
    }
    const {getLlama} = await import(pathToFileURL(entry).href);
    const pkg = JSON.parse(readFileSync(join(dirname(entry), "..", "package.json"), "utf8"));
    return {getLlama, version: pkg.version};
}

// A CPU context with an F32 KV cache (keys and values) and flash attention
// off, `size` tokens long; throws if llama.cpp did not give exactly that.
export async function createF32Context(model, name, size) {
    const context = await model.createContext({
        contextSize: size,
        batchSize: size,
        threads: 2,
        flashAttention: false,
        experimentalKvCacheKeyType: "F32",
        experimentalKvCacheValueType: "F32",
    });
    if (context.kvCacheKeyType !== 0 || context.kvCacheValueType !== 0 || context.flashAttention !== false)
        throw new Error(`${name}: context is not F32 KV without flash attention`);
    return context;
}

// One greedy step of evaluateWithMetadata(..., {probabilities: true}):
// entries are [id, p] sorted by probability, descending. The record: the
// token, gap (log p of the best minus the second best) and the 5 best as
// [id, log p]. Throws if the token is not the argmax.
export function greedyStep(entries, token, name) {
    if (entries[0][0] !== token) throw new Error(`${name}: greedy token is not the argmax`);
    return {
        token,
        gap: Math.log(entries[0][1]) - Math.log(entries[1][1]),
        top: entries.slice(0, 5).map(([id, p]) => [id, Math.log(p)]),
    };
}
