// The CPU bench's report (bench/cpu.sh): the walls of bench_walls and the
// speeds of cpu.mjs, from their JSON lines, as markdown tables with
//   larder / llama.cpp      the ratio of tok/s, same file, same threads;
//   decode share of wall    weight_bytes x tok/s / read bandwidth measured with
//                           the same thread count (decode reads every weight
//                           byte once per token, so 1.0 is the wall);
//   ... beside its runs     where cpu.mjs had --walls: the median over runs of
//                           weight_bytes x tok/s / the read wall probed just
//                           before and after that run (the fairer figure on a
//                           machine whose bandwidth moves);
//   prefill share of peak   2 x macs_per_token x tok/s / int8 peak of the same
//                           thread count (the int8 multiply-add peak, vpdpbusd
//                           or on AVX2 vpmaddubsw: the wall for
//                           the int8 kernels of Q8_0 and the K-quants; F16 rows
//                           are shown against it too, as a share of that peak).
// usage: node cpu_report.mjs FILE.jsonl...
import fs from "node:fs";

const rows = [];
for (const file of process.argv.slice(2)) {
    for (const l of fs.readFileSync(file, "utf8").split("\n")) {
        if (!l.startsWith("{")) continue;
        try { rows.push(JSON.parse(l)); } catch { /* not one of ours */ }
    }
}
const fmt = (x, d = 0) => (x == null || !Number.isFinite(x) ? "–" : x.toFixed(d));
const best = (bench, threads, key) => Math.max(...rows.filter((r) => r.bench === bench && r.threads === threads)
    .map((r) => r[key]));
const readWall = (t) => best("wall_read", t, "gb_per_s");
const int8Wall = (t) => best("wall_int8", t, "top_per_s");

const walls = rows.filter((r) => r.bench === "wall_read" || r.bench === "wall_int8");
if (walls.length) {
    console.log("### The machine's walls, same run (bench_walls)\n");
    console.log("| probe | threads | value |\n| --- | ---: | ---: |");
    for (const w of walls) {
        console.log(w.bench === "wall_read"
            ? `| read ${fmt(w.bytes / 2 ** 20)} MiB, ${w.load_bits ?? 512}-bit loads${w.method ? ", " + w.method : ""} | ${w.threads} | ${fmt(w.gb_per_s, 1)} GB/s |`
            : `| int8, ${w.instruction ?? "vpdpbusd zmm"} | ${w.threads} | ${fmt(w.top_per_s, 2)} TOP/s |`);
    }
    console.log();
}

for (const bench of ["prefill", "decode"]) {
    const larder = rows.filter((r) => r.bench === bench && r.impl === "larder");
    const others = rows.filter((r) => r.bench === bench && r.impl === "llama.cpp");
    const keys = [...new Set([...larder, ...others].map((r) => `${r.model}\t${r.threads}`))];
    if (!keys.length) continue;
    const share = bench === "decode" ? "share of read wall" : "share of int8 peak";
    const beside = bench === "decode" && [...larder, ...others].some((r) => r.wall_share != null);
    console.log(`### ${bench} (${bench === "decode" ? "greedy, after a 16-token prompt" : `${(larder[0] ?? others[0]).tokens}-token prompt`})\n`);
    console.log(`| model file | threads | larder tok/s | llama.cpp tok/s | larder / llama.cpp | larder ${share} | llama.cpp ${share} |` +
        (beside ? " larder share, wall beside its runs | llama.cpp share, wall beside its runs |" : ""));
    console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |" + (beside ? " ---: | ---: |" : ""));
    for (const k of keys) {
        const [model, t] = k.split("\t");
        const threads = Number(t);
        const l = larder.find((r) => r.model === model && r.threads === threads);
        const c = others.find((r) => r.model === model && r.threads === threads);
        const of = (r) => {
            if (!r) return null;
            if (bench === "decode" && r.streams_from_memory === false) return null;  // in the L3 (cpu.mjs)
            return bench === "decode" ? r.weight_bytes * r.tok_per_s / 1e9 / readWall(threads)
                : 2 * r.macs_per_token * r.tok_per_s / 1e12 / int8Wall(threads);
        };
        const ratio = l && c ? l.tok_per_s / c.tok_per_s : null;
        console.log(`| ${model} | ${threads} | ${fmt(l?.tok_per_s, 1)} | ${fmt(c?.tok_per_s, 1)} | ` +
            `${ratio == null ? "–" : fmt(ratio, 2) + "x"} | ${fmt(of(l), 2)} | ${fmt(of(c), 2)} |` +
            (beside ? ` ${fmt(l?.wall_share, 2)} | ${fmt(c?.wall_share, 2)} |` : ""));
    }
    console.log(`\n(median of the runs; ${share}: ${bench === "decode"
        ? "weight bytes x tok/s / the read wall of that many threads" +
            (beside ? "; beside its runs: the median of each run's share of the wall probed just before and after it" : "")
        : "2 x multiply-adds per token in the layers x tok/s / the int8 peak of that many threads"})\n`);
}

const loads = rows.filter((r) => r.bench === "load");
if (loads.length) {
    console.log("### load (seconds from starting the engine on the file to ready for a request)\n");
    console.log("| model file | threads | larder s | llama.cpp s | llama.cpp / larder |");
    console.log("| --- | ---: | ---: | ---: | ---: |");
    const keys = [...new Set(loads.map((r) => `${r.model}\t${r.threads}`))];
    for (const k of keys) {
        const [model, t] = k.split("\t");
        const get = (impl) => loads.find((r) => r.impl === impl && r.model === model && r.threads === Number(t));
        const l = get("larder"), o = get("llama.cpp");
        const ratio = l && o ? `${fmt(o.seconds / l.seconds, 2)}x` : "–";
        console.log(`| ${model} | ${t} | ${fmt(l?.seconds, 2)} | ${fmt(o?.seconds, 2)} | ${ratio} |`);
    }
    console.log("\n(larder: spawn of larderd until /health answers, polled every 100 ms; llama.cpp: " +
        "loadModel and createContext in this process; the file in the page cache for both)\n");
}

const ctx = rows.filter((r) => r.bench === "context");
if (ctx.length) {
    console.log("### Long contexts (prefill of the last prompt tokens and decode after them, at that depth)\n");
    console.log("| model file | threads | context | larder prefill | llama.cpp prefill | larder decode | llama.cpp decode |");
    console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    const keys = [...new Set(ctx.map((r) => `${r.model}\t${r.threads}\t${r.context}`))];
    for (const k of keys) {
        const [model, t, c] = k.split("\t");
        const get = (impl) => ctx.find((r) => r.impl === impl && r.model === model && r.threads === Number(t) &&
            r.context === Number(c));
        const l = get("larder"), o = get("llama.cpp");
        console.log(`| ${model} | ${t} | ${c} | ${fmt(l?.prefill_tok_per_s, 1)} | ${fmt(o?.prefill_tok_per_s, 1)} | ` +
            `${fmt(l?.decode_tok_per_s, 1)} | ${fmt(o?.decode_tok_per_s, 1)} |`);
    }
    console.log("\n(tok/s)\n");
}
