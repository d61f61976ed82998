// Combines the JSON lines of bench_walls, bench_decode, llama_cpp.mjs and
// bench_restore (files given on the command line; other lines are ignored)
// into markdown tables: the machine's walls (read bandwidth, int8 peak)
// measured in the same run, larder vs llama.cpp decode and prefill tok/s with
// their ratio, then larder's TTFT cold vs restored.
//
// usage: node report.mjs FILE.jsonl...
import fs from "node:fs";

const rows = [];
for (const file of process.argv.slice(2)) {
    for (const line of fs.readFileSync(file, "utf8").split("\n")) {
        if (!line.startsWith("{")) continue;
        try {
            rows.push(JSON.parse(line));
        } catch {
            // not one of ours
        }
    }
}

const fmt = (x, digits = 0) => (x == null || !Number.isFinite(x) ? "–" : x.toFixed(digits));
const spread = (r) => {
    if (!r || !r.runs || r.runs.length < 2) return "";
    return ` (${fmt(Math.min(...r.runs))}–${fmt(Math.max(...r.runs))})`;
};

function speedTable(bench, title) {
    const larder = rows.filter((r) => r.bench === bench && r.impl === "larder");
    if (larder.length === 0) return;
    const tokens = larder[0].tokens;
    console.log(`### ${title}\n`);
    console.log("| model file | threads | larder tok/s | llama.cpp tok/s | larder / llama.cpp |");
    console.log("| --- | ---: | ---: | ---: | ---: |");
    for (const l of larder) {
        const c = rows.find((r) => r.bench === bench && r.impl === "llama.cpp" && r.model === l.model &&
            r.threads === l.threads);
        const ratio = c ? l.tok_per_s / c.tok_per_s : null;
        const cTokens = c && c.tokens !== l.tokens ? ` [${c.tokens} tok]` : "";
        console.log(`| ${l.model} | ${l.threads} | ${fmt(l.tok_per_s)}${spread(l)} | ` +
            `${c ? fmt(c.tok_per_s) + spread(c) + cTokens : "–"} | ${ratio == null ? "–" : fmt(ratio, 1) + "x" + (cTokens ? " *" : "")} |`);
    }
    console.log(`\n(${bench}: ${tokens} tokens per run; median of the runs, (min–max) in parentheses` +
        (bench === "decode" ? "; [n tok]: llama.cpp's runs hit the time cap, so only n tokens were timed and the ratio (*) mostly measures thread contention" : "") + ")\n");
}

const walls = rows.filter((r) => r.bench === "wall_read" || r.bench === "wall_int8");
if (walls.length > 0) {
    console.log("### The machine's walls, same run (bench_walls)\n");
    console.log("| probe | threads | value |");
    console.log("| --- | ---: | ---: |");
    for (const w of walls) {
        if (w.bench === "wall_read") {
            console.log(`| read ${fmt(w.bytes / 2 ** 20)} MiB, 512-bit loads${w.method ? ", " + w.method : ""} | ${w.threads} | ${fmt(w.gb_per_s, 1)} GB/s |`);
        } else {
            console.log(`| vpdpbusd int8 | ${w.threads} | ${fmt(w.top_per_s, 2)} TOP/s |`);
        }
    }
    console.log("\n(decode reads every weight byte once per token: tok/s <= GB/s / weight GB; best of the runs)\n");
}

speedTable("decode", "Decode, greedy, 256 tokens from BOS");
speedTable("prefill", "Prefill, the reference.json \"long\" prompt");

const ttft = rows.filter((r) => r.bench === "ttft");
if (ttft.length > 0) {
    const t = ttft[0];
    console.log(`### Time to first token, ${t.prompt_tokens}-token prompt, larder, ${t.threads} threads\n`);
    console.log("| model | N | cold ms | restored from memory ms (cached) | restored from disk after restart ms (cached) | cold / memory | cold / disk |");
    console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (const r of ttft) {
        const c = r.cold.ttft_ms, m = r.memory.ttft_ms, d = r.disk.ttft_ms;
        console.log(`| ${r.model} | ${r.runs} | ${fmt(c, 1)} | ${fmt(m, 1)} (${r.memory.cached_tokens}) | ` +
            `${fmt(d, 1)} (${r.disk.cached_tokens}) | ${fmt(c / m, 1)}x | ${fmt(c / d, 1)}x |`);
    }
    console.log("\n(median of N runs, each on a fresh cache directory; cold cached_tokens = " +
        ttft.map((r) => r.cold.cached_tokens).join("/") + ")");
    const bad = ttft.filter((r) => r.first_token_mismatches > 0);
    for (const r of bad) {
        console.log(`\nWARNING: ${r.model}: a restored first token differed from the cold one in ${r.first_token_mismatches} run(s)`);
    }
}
