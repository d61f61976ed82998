// Shared by the reference tokenizer timers: the command line
// (two positional arguments, --runs N, --ids-out FILE), the timed loop and
// the JSON result line (the fields bench_tokenizer prints).
import fs from "node:fs";

export function parseArgs(usage) {
  const args = process.argv.slice(2);
  const pos = [];
  let runs = 5, idsOut = null;
  for (let i = 0; i < args.length; ++i) {
    if (args[i] === "--runs") runs = Number(args[++i]);
    else if (args[i] === "--ids-out") idsOut = args[++i];
    else pos.push(args[i]);
  }
  if (pos.length !== 2 || !(runs >= 1)) {
    console.error("usage: " + usage);
    process.exit(2);
  }
  return {pos, runs, idsOut};
}

// Encodes `text` `runs` times with `encode` (text -> ids); prints the JSON
// line and writes the ids to idsOut when given.
export function timeEncode({tool, vocab, text, encode, runs, loadS, idsOut}) {
  let ids = [];
  const seconds = [];
  for (let r = 0; r < runs; ++r) {
    const t = performance.now();
    ids = encode(text);
    seconds.push((performance.now() - t) / 1000);
  }
  const sorted = [...seconds].sort((a, b) => a - b);
  const bytes = Buffer.byteLength(text, "utf8");
  console.log(JSON.stringify({
    tool,
    vocab,
    bytes,
    tokens: ids.length,
    load_s: loadS,
    best_s: sorted[0],
    median_s: sorted[Math.floor(sorted.length / 2)],
    mb_per_s: bytes / sorted[0] / 1e6,
  }));
  if (idsOut) fs.writeFileSync(idsOut, JSON.stringify(Array.from(ids)) + "\n");
}
