// Speculative decoding end to end: larderd with drafts ([engine]
// draft_tokens = 8) against larderd without (0, the default), on the
// same file, through the HTTP API, for
//   copying     a greedy answer to a prompt it repeats from (a passage of the
//               prompt given twice; stories260K and random-weight models also
//               fall into loops of their own, which prompt lookup drafts from);
//   not copying a sampled answer (temperature 1, seeded), which rarely repeats.
// Per case: decode tok/s with and without drafts (completion tokens / time
// from the first streamed chunk to the last), the speed-up, and the share of
// draft tokens the model agreed with (/metrics). Both daemons give the same
// text (checked). With --draft-model FILE the daemon with drafts also drafts
// with that model where prompt lookup finds nothing ([engine] draft_model),
// and the draft model's own drafts are counted apart.
//
// usage: node speculative.mjs --larder BIN [--threads 2] [--tokens 192] [--runs 3]
//                             [--draft-model FILE] MODEL.gguf...
// Prints one JSON line per (model, case).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {Daemon} from "../tests/e2e/daemon.mjs";
import {streamCompletion} from "./larder_stream.mjs";

function parseArgs(argv) {
    const a = {larder: "", threads: 2, tokens: 192, runs: 3, draftModel: "", models: []};
    for (let i = 0; i < argv.length; i++) {
        const s = argv[i];
        const next = () => argv[++i];
        if (s === "--larder") a.larder = next();
        else if (s === "--threads") a.threads = Number(next());
        else if (s === "--tokens") a.tokens = Number(next());
        else if (s === "--runs") a.runs = Number(next());
        else if (s === "--draft-model") a.draftModel = next();
        else if (s.startsWith("-")) usage();
        else a.models.push(s);
    }
    if (!a.models.length || !fs.existsSync(a.larder) || (a.draftModel && !fs.existsSync(a.draftModel))) usage();
    return a;
}
function usage() {
    console.error("usage: node speculative.mjs --larder BIN [--threads N] [--tokens N] [--runs N] [--draft-model FILE] MODEL.gguf...");
    process.exit(2);
}
const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];

async function metric(d, name) {
    const text = await (await fetch(`http://127.0.0.1:${d.port}/metrics`)).text();
    const l = text.split("\n").find((x) => x.startsWith(name + " "));
    return l === undefined ? 0 : Number(l.split(" ")[1]);
}

const args = parseArgs(process.argv.slice(2));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "larder-spec-"));
const onConfig = path.join(dir, "on.toml");
fs.writeFileSync(onConfig, "[engine]\ndraft_tokens = 8\n");
const passage = "Lily and Ben were playing in the garden. They saw a big red ball under the tree. " +
    "Ben ran to get it, but a little dog took it first. ";
try {
    for (const file of args.models) {
        const name = path.basename(file, ".gguf");
        const daemons = {
            on: await Daemon.start({bin: args.larder, model: file, threads: args.threads, startTimeoutMs: 120000,
                extraArgs: ["--config", onConfig, ...(args.draftModel ? ["--draft-model", args.draftModel] : [])]}),
            off: await Daemon.start({bin: args.larder, model: file, threads: args.threads, startTimeoutMs: 120000}),
        };
        try {
            const cases = {
                copying: (r) => ({prompt: passage + passage + "Lily and Ben", temperature: 0, seed: r}),
                not_copying: (r) => ({prompt: passage, temperature: 1, top_p: 1, top_k: 0, min_p: 0, seed: 7 + r}),
            };
            for (const [label, make] of Object.entries(cases)) {
                const speed = {on: [], off: []};
                let drafted = 0, accepted = 0, modelDrafted = 0, modelAccepted = 0;
                for (let r = 0; r < args.runs; r++) {
                    const body = {model: name, max_tokens: args.tokens, ignore_eos: true, ...make(r)};
                    const d0 = await metric(daemons.on, "larder_draft_tokens_total");
                    const a0 = await metric(daemons.on, "larder_draft_tokens_accepted_total");
                    const md0 = await metric(daemons.on, "larder_draft_model_tokens_total");
                    const ma0 = await metric(daemons.on, "larder_draft_model_tokens_accepted_total");
                    const on = await streamCompletion(daemons.on.baseURL, body);
                    drafted += await metric(daemons.on, "larder_draft_tokens_total") - d0;
                    accepted += await metric(daemons.on, "larder_draft_tokens_accepted_total") - a0;
                    modelDrafted += await metric(daemons.on, "larder_draft_model_tokens_total") - md0;
                    modelAccepted += await metric(daemons.on, "larder_draft_model_tokens_accepted_total") - ma0;
                    const off = await streamCompletion(daemons.off.baseURL, body);
                    if (on.text !== off.text) throw new Error(`${name} ${label}: the texts differ with drafts on and off`);
                    speed.on.push((on.tokens - 1) / (on.ms / 1000));
                    speed.off.push((off.tokens - 1) / (off.ms / 1000));
                }
                const on = median(speed.on), off = median(speed.off);
                process.stdout.write(JSON.stringify({bench: "speculative", model: path.basename(file), case: label,
                    threads: args.threads, tokens: args.tokens, tok_per_s_on: on, tok_per_s_off: off,
                    speedup: on / off, drafted, accepted, acceptance: drafted ? accepted / drafted : 0,
                    ...(args.draftModel ? {draft_model: path.basename(args.draftModel), draft_model_drafted: modelDrafted,
                        draft_model_accepted: modelAccepted} : {})}) + "\n");
            }
        } finally {
            await daemons.on.stop();
            await daemons.off.stop();
        }
    }
} finally {
    fs.rmSync(dir, {recursive: true, force: true});
}
