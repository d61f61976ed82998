#!/usr/bin/env python3
"""Renders the chat-template fixtures with Python's Jinja2 the way Hugging Face
transformers' apply_chat_template does, and writes the expected outputs the
C++ tests (tests/template/) compare against byte for byte.

Environment as transformers builds it: ImmutableSandboxedEnvironment with
trim_blocks=True, lstrip_blocks=True and the loopcontrols extension; tojson
replaced by json.dumps(x, ensure_ascii=False, indent=indent,
separators=separators, sort_keys=sort_keys); globals raise_exception and
strftime_now (here a fixed clock, 26 Jul 2024, so outputs are stable).
render() gets messages, tools (None when absent), documents=None,
add_generation_prompt and the special tokens bos_token / eos_token.

Usage: python3 scripts/template/render_reference.py  (from the repo root)
Needs Debian's python3-jinja2 (or pip jinja2 3.x).
"""
import datetime
import json
import os
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests", "template", "fixtures")
FIXED_NOW = datetime.datetime(2024, 7, 26, 9, 30, 0)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: FIXED_NOW.strftime(fmt)
    return env


def render(tmpl, spec, messages, tools, add_generation_prompt):
    try:
        out = tmpl.render(messages=messages, tools=tools, documents=None,
                          add_generation_prompt=add_generation_prompt,
                          bos_token=spec["bos_token"], eos_token=spec["eos_token"])
        return {"output": out}
    except Exception as e:  # noqa: BLE001 - any template failure is a fixture value
        return {"error": "%s: %s" % (type(e).__name__, e)}


def first_difference(a, b):
    """Byte offset of the first difference of a and b (UTF-8), -1 if a is a prefix of b."""
    x, y = a.encode("utf-8"), b.encode("utf-8")
    n = min(len(x), len(y))
    for i in range(n):
        if x[i] != y[i]:
            return i
    return -1 if len(x) <= len(y) else n


def main():
    env = make_env()
    specs = json.load(open(os.path.join(FIX, "templates.json"), encoding="utf-8"))
    convs = json.load(open(os.path.join(FIX, "conversations.json"), encoding="utf-8"))
    cases, prefixes = [], []
    for spec in specs:
        with open(os.path.join(FIX, "templates", spec["name"] + ".jinja"), encoding="utf-8") as f:
            tmpl = env.from_string(f.read())
        for conv in convs:
            for agp in (True, False):
                r = render(tmpl, spec, conv["messages"], conv.get("tools"), agp)
                cases.append(dict(template=spec["name"], conversation=conv["name"], add_generation_prompt=agp, **r))
            # Prefix stability as the engine uses templates: the prompt for
            # user turn k (with the generation prompt) against the prompt for
            # user turn k+1, which contains the assistant's answer to turn k.
            msgs = conv["messages"]
            cuts = [i + 1 for i, m in enumerate(msgs) if m["role"] == "user"]
            for k in range(len(cuts) - 1):
                a = render(tmpl, spec, msgs[:cuts[k]], conv.get("tools"), True)
                b = render(tmpl, spec, msgs[:cuts[k + 1]], conv.get("tools"), True)
                if "output" not in a or "output" not in b:
                    continue
                # What the KV cache holds after turn k: the prompt plus the
                # answer as generated (the assistant message's text).
                answer = msgs[cuts[k]]
                answer_text = answer["content"] if answer["role"] == "assistant" and isinstance(answer.get("content"), str) else ""
                prefixes.append(dict(template=spec["name"], conversation=conv["name"], n_messages_a=cuts[k],
                                     n_messages_b=cuts[k + 1], first_difference=first_difference(a["output"], b["output"]),
                                     answer=answer_text,
                                     first_difference_with_answer=first_difference(a["output"] + answer_text, b["output"])))
    out = {"generator": "scripts/template/render_reference.py", "jinja2_version": jinja2.__version__,
           "cases": cases, "prefix": prefixes}
    with open(os.path.join(FIX, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n_err = sum(1 for c in cases if "error" in c)
    n_bad = sum(1 for p in prefixes if p["first_difference"] >= 0)
    n_bad2 = sum(1 for p in prefixes if p["first_difference_with_answer"] >= 0)
    print("%d cases (%d template errors), %d prefix pairs (%d not prefix-stable; %d with the answer appended)"
          % (len(cases), n_err, len(prefixes), n_bad, n_bad2))


if __name__ == "__main__":
    sys.exit(main())
