// Records, for the random-weight chat models of tests/support/chat_models.h
// (real Llama 3.2 / Qwen 2.5 BPE vocabulary ids, control tokens and Jinja
// chat templates), what Python's Jinja2 and llama.cpp make of a fixed
// two-turn conversation. tests/engine/test_chat_models.cpp compares larder
// with it.
//
// Usage (from the repository root, node-llama-cpp 3.21.1 resolvable from the
// current directory, e.g. bench/node_modules):
//   LARDER_CHAT_MODEL_OUT=$DIR build/tests/test_engine "[.chat-model-write]"  # GGUFs + manifest.json
//   NODE_PATH=bench/node_modules node scripts/chat/llama_cpp_chat_reference.mjs $DIR tests/engine/fixtures
// scripts/chat/make_chat_reference.sh runs both.
//
// For each model in $DIR/manifest.json:
//   turn1.rendered   the first turn's prompt (system + user with CJK and an
//                    emoji, add_generation_prompt) rendered by Jinja2 as
//                    transformers' apply_chat_template does
//                    (scripts/chat/render_chat.py; strftime_now fixed at
//                    26 Jul 2024)
//   turn1.prompt_ids llama.cpp's ids for that text: llama_tokenize with
//                    parse_special (the template writes BOS itself), i.e.
//                    node-llama-cpp model.tokenize(text, true)
//   steps            llama.cpp's greedy answer to those ids (CPU, F32 KV
//                    cache, flash attention off, temperature 0), until an
//                    end-of-generation token (included) or max_steps; each
//                    step's token, gap (log p of the best minus the second
//                    best) and top 5 [id, log p]
//   answer.text      llama.cpp's detokenization of the answer ids without
//                    the end-of-generation token (special tokens not rendered)
//   turn2.*          the same for the conversation with that answer and one
//                    more user turn
//   eog_ids          every id llama.cpp treats as end of generation
//                    (llama_vocab_is_eog)
import {execFileSync} from "node:child_process";
import {readFileSync, writeFileSync, mkdirSync} from "node:fs";
import {join, dirname} from "node:path";
import {fileURLToPath} from "node:url";
import {createF32Context, greedyStep, loadNodeLlamaCpp} from "../lib/llama_cpp_reference.mjs";

const [inDir, outDir] = process.argv.slice(2);
if (!inDir || !outDir) {
    console.error("usage: node llama_cpp_chat_reference.mjs <dir with manifest.json> <fixture dir>");
    process.exit(2);
}
const here = dirname(fileURLToPath(import.meta.url));
const {getLlama, version} = await loadNodeLlamaCpp();

const maxSteps = 24;
const turn1 = [
    {role: "system", content: "You are a helpful assistant. Answer in one short sentence."},
    {role: "user", content: "Hello! What do llamas eat? 日本語でも大丈夫です 🦙"},
];
const nextUser = "Thanks! And alpacas, are they different? ¿Y las vicuñas? 😀";

function render(m, messages) {
    const out = execFileSync("python3", [join(here, "render_chat.py")], {
        input: JSON.stringify({template: m.template, bos_token: m.bos_token, eos_token: m.eos_token, messages}),
    });
    const r = JSON.parse(out.toString("utf8"));
    if (r.error) throw new Error(`${m.name}: Jinja2: ${r.error}`);
    return r.text;
}

const manifest = JSON.parse(readFileSync(join(inDir, "manifest.json"), "utf8"));
const llama = await getLlama({build: "never", gpu: false});
mkdirSync(outDir, {recursive: true});

for (const m of manifest.models) {
    const model = await llama.loadModel({modelPath: join(inDir, m.file), gpuLayers: 0});
    const context = await createF32Context(model, m.name, 512);
    const sequence = context.getSequence();

    const text1 = render(m, turn1);
    const ids1 = model.tokenize(text1, true);
    const steps = [];
    const it = sequence.evaluateWithMetadata(ids1, {probabilities: true}, {temperature: 0, yieldEogToken: true});
    for await (const out of it) {
        const entries = [...out.probabilities.entries()];  // sorted by probability, descending
        steps.push(greedyStep(entries, out.token, m.name));
        if (model.isEogToken(out.token) || steps.length >= maxSteps) break;
    }
    const answerIds = steps.map((s) => s.token);
    const endsWithEog = model.isEogToken(answerIds.at(-1));
    const contentIds = endsWithEog ? answerIds.slice(0, -1) : answerIds;
    const answerText = model.detokenize(contentIds, false);

    const turn2 = [...turn1, {role: "assistant", content: answerText}, {role: "user", content: nextUser}];
    const text2 = render(m, turn2);
    const ids2 = model.tokenize(text2, true);

    const nVocab = model.fileInsights.tokens?.vocabularySize ?? m.n_vocab;
    const eogIds = [];
    for (let id = 0; id < m.n_vocab; ++id) if (model.isEogToken(id)) eogIds.push(id);

    const fixture = {
        name: m.name,
        shaped_as: m.shaped_as,
        seed: m.seed,
        n_vocab: m.n_vocab,
        reference: `Jinja2 (scripts/chat/render_chat.py); llama.cpp via node-llama-cpp ${version} ` +
            `(${llama.llamaCppRelease?.release ?? "?"}), CPU, F32 KV cache, flash attention off, temperature 0`,
        turn1: {messages: turn1, rendered: text1, prompt_ids: ids1},
        max_steps: maxSteps,
        steps,
        answer: {ids: answerIds, ends_with_eog: endsWithEog, text: answerText},
        turn2: {messages: turn2, rendered: text2, prompt_ids: ids2},
        eog_ids: eogIds,
        llama_cpp_n_vocab: nVocab,
    };
    writeFileSync(join(outDir, `chat_${m.name}.json`), JSON.stringify(fixture, null, 1) + "\n");
    console.log(`${m.name} seed ${m.seed}: prompt ${ids1.length} ids; answer ${answerIds.join(" ")} ` +
        `(eog ${endsWithEog}); text ${JSON.stringify(answerText)}; ` +
        `min gap ${Math.min(...steps.map((s) => s.gap)).toFixed(4)}; eog ids ${eogIds.join(" ")}`);
    await context.dispose();
    await model.dispose();
}
