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
import {readFileSync, writeFileSync, mkdirSync} from "node:fs";
import {join} from "node:path";
import {createF32Context, greedyStep, loadNodeLlamaCpp} from "../lib/llama_cpp_reference.mjs";

const [inDir, outDir] = process.argv.slice(2);
if (!inDir || !outDir) {
    console.error("usage: node llama_cpp_reference.mjs <dir with manifest.json> <fixture dir>");
    process.exit(2);
}
// node-llama-cpp is resolved from the current directory (the scratch install,
// or the repository root with bench/node_modules).
const {getLlama, version} = await loadNodeLlamaCpp();

const manifest = JSON.parse(readFileSync(join(inDir, "manifest.json"), "utf8"));
const llama = await getLlama({build: "never", gpu: false});
mkdirSync(outDir, {recursive: true});

for (const m of manifest.models) {
    const model = await llama.loadModel({modelPath: join(inDir, m.file), gpuLayers: 0});
    const context = await createF32Context(model, m.name, 256);
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
        steps.push(greedyStep(entries, out.token, m.name));
        if (steps.length >= manifest.steps) break;
    }
    const fixture = {
        name: m.name,
        architecture: m.architecture,
        type: m.type,
        shaped_as: m.shaped_as,
        reference: `llama.cpp via node-llama-cpp ${version} (${llama.llamaCppRelease?.release ?? "?"}), CPU, ` +
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
