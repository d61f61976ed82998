#!/usr/bin/env python3
"""Renders one conversation with a chat template through Python's Jinja2 the
way transformers' apply_chat_template does (the environment of
scripts/template/render_reference.py: sandboxed, trim_blocks, lstrip_blocks,
loopcontrols, tojson, raise_exception, strftime_now fixed at 26 Jul 2024
09:30), with add_generation_prompt=True and no tools.

stdin: {"template": PATH, "bos_token": S, "eos_token": S, "messages": [...]}
stdout: {"text": RENDERED} or {"error": MESSAGE}
Used by scripts/chat/llama_cpp_chat_reference.mjs. Needs python3-jinja2.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "template"))
from render_reference import make_env, render  # noqa: E402


def main():
    req = json.load(sys.stdin)
    with open(req["template"], encoding="utf-8") as f:
        tmpl = make_env().from_string(f.read())
    spec = {"bos_token": req["bos_token"], "eos_token": req["eos_token"]}
    out = render(tmpl, spec, req["messages"], None, True)
    if "output" in out:
        json.dump({"text": out["output"]}, sys.stdout, ensure_ascii=False)
    else:
        json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    sys.exit(main())
