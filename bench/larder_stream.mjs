// A streamed /v1/completions request to larderd, timed on the client side as
// a user sees it (bench/cpu.mjs, bench/speculative.mjs).
//
// streamCompletion(baseURL, body) sends body with stream: true and usage,
// and resolves to {text, tokens (usage.completion_tokens), ms (first .. last
// chunk carrying a choice, on this client's clock, but never less than the
// server's timings.predicted_ms over the same span: a fast small model's
// chunks can reach the client in one burst, which would read as a decode
// many times faster than the server ran), firstMs (request sent .. first
// such chunk)}.
// A non-2xx answer rejects with its status and body.
export async function streamCompletion(baseURL, body) {
    const t0 = performance.now();
    const r = await fetch(`${baseURL}/completions`, {method: "POST", headers: {"content-type": "application/json"},
        body: JSON.stringify({...body, stream: true, stream_options: {include_usage: true}})});
    if (!r.ok) throw new Error(`larder ${r.status}: ${await r.text()}`);
    const dec = new TextDecoder();
    let buf = "", text = "", tokens = 0, tFirst = 0, tLast = 0, serverMs = 0;
    for await (const part of r.body) {
        buf += dec.decode(part, {stream: true});
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
            const ev = buf.slice(0, i);
            buf = buf.slice(i + 2);
            if (!ev.startsWith("data: ") || ev === "data: [DONE]") continue;
            const j = JSON.parse(ev.slice(6));
            if (j.usage) tokens = j.usage.completion_tokens;
            if (typeof j.timings?.predicted_ms === "number") serverMs = j.timings.predicted_ms;
            if (j.choices?.length) {
                const now = performance.now();
                if (!tFirst) tFirst = now;
                tLast = now;
                text += j.choices[0].text ?? "";
            }
        }
    }
    return {text, tokens, ms: Math.max(tLast - tFirst, serverMs), firstMs: tFirst - t0};
}
