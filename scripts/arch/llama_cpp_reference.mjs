// Records llama.cpp's outputs for the synthetic family models of tests/arch.
//
// Usage (from a scratch directory where node-llama-cpp is installed, outside
// the repository: npm i -E node-llama-cpp@3.21.1 --no-package-lock, or a
// node_modules symlink to bench/node_modules):
//   LARDER_ARCH_OUT=$DIR build/tests/test_arch "[.arch-write]"   # GGUFs + manifest.json
//   node $REPO/scripts/arch/llama_cpp_reference.mjs $DIR $REPO/tests/arch/fixtures
//
// For each model in $DIR/manifest.json: a CPU context with an F32 KV cache
// (keys and values) and flash attention off, the manifest's prompt token ids
// evaluated as given (BOS included, no tokenizer), then greedy decoding
// (temperature 0) for manifest.steps steps, end-of-generation tokens
// included. node-llama-cpp returns the softmax of the raw logits for each step
// (the greedy sampler leaves them as they are); the fixture stores their logs:
//   prompt_logprobs: log p of every vocabulary id after the prompt
//   steps[k]: token (the greedy choice), gap (log p of the best minus the
//             second best), top (the 5 best as [id, log p])
import {createRequire} from "node:module";
import {readFileSync, writeFileSync, mkdirSync} from "node:fs";
import {join} from "node:path";
import {pathToFileURL} from "node:url";

const [inDir, outDir] = process.argv.slice(2);
if (!inDir || !outDir) {
    console.error("usage: node llama_cpp_reference.mjs <dir with manifest.json> <fixture dir>");
    process.exit(2);
}
// node-llama-cpp is resolved from the current directory (the scratch install).
const require = createRequire(join(process.cwd(), "noop.js"));
const {getLlama} = await import(pathToFileURL(require.resolve("node-llama-cpp")).href);
const pkg = JSON.parse(readFileSync(join(process.cwd(), "node_modules/node-llama-cpp/package.json"), "utf8"));

const manifest = JSON.parse(readFileSync(join(inDir, "manifest.json"), "utf8"));
const llama = await getLlama({build: "never", gpu: false});
mkdirSync(outDir, {recursive: true});

for (const m of manifest.models) {
    const model = await llama.loadModel({modelPath: join(inDir, m.file), gpuLayers: 0});
    const context = await model.createContext({
        contextSize: 256,
        batchSize: 256,
        threads: 2,
        flashAttention: false,
        experimentalKvCacheKeyType: "F32",
        experimentalKvCacheValueType: "F32",
    });
    if (context.kvCacheKeyType !== 0 || context.kvCacheValueType !== 0 || context.flashAttention !== false)
        throw new Error(`${m.name}: context is not F32 KV without flash attention`);
    const sequence = context.getSequence();
    const nVocab = model.tokens.trimmedVocabularySize ?? model.fileInsights.tokens?.vocabularySize;
    const steps = [];
    let promptLogprobs = null;
    // yieldEogToken: an end-of-generation token (</s>, which a random model may
    // pick) is recorded and evaluated like any other instead of ending the run.
    const it = sequence.evaluateWithMetadata(manifest.prompt, {probabilities: true},
        {temperature: 0, yieldEogToken: true});
    for await (const out of it) {
        const entries = [...out.probabilities.entries()];  // sorted by probability, descending
        if (promptLogprobs === null) {
            promptLogprobs = new Array(entries.length);
            for (const [id, p] of entries) promptLogprobs[id] = Math.log(p);
        }
        if (entries[0][0] !== out.token) throw new Error(`${m.name}: greedy token is not the argmax`);
        steps.push({
            token: out.token,
            gap: Math.log(entries[0][1]) - Math.log(entries[1][1]),
            top: entries.slice(0, 5).map(([id, p]) => [id, Math.log(p)]),
        });
        if (steps.length >= manifest.steps) break;
    }
    const fixture = {
        name: m.name,
        architecture: m.architecture,
        type: m.type,
        shaped_as: m.shaped_as,
        reference: `llama.cpp via node-llama-cpp ${pkg.version} (${llama.llamaCppRelease?.release ?? "?"}), CPU, ` +
            "F32 KV cache, flash attention off, temperature 0",
        n_vocab: promptLogprobs.length,
        prompt: manifest.prompt,
        prompt_logprobs: promptLogprobs,
        steps,
    };
    writeFileSync(join(outDir, `${m.name}.json`), JSON.stringify(fixture) + "\n");
    console.log(`${m.name}: tokens ${steps.map((s) => s.token).join(" ")}; ` +
        `min gap ${Math.min(...steps.map((s) => s.gap)).toFixed(4)}`);
    await context.dispose();
    await model.dispose();
}
