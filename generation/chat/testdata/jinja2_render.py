#!/usr/bin/env python3
"""Renders testdata/cases.json with Python's Jinja2 the way Hugging Face
transformers does (apply_chat_template's environment), for the chat
templates in testdata/templates/, into testdata/jinja2/<template>/<case>.txt.

Needs python3-jinja2 (Debian: apt-get install python3-jinja2). Run from
generation/chat:  python3 testdata/jinja2_render.py
"""
import json, os
from datetime import datetime
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.ext import loopcontrols

def raise_exception(message):
    raise Exception(message)

def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

def strftime_now(fmt):
    return datetime(2025, 1, 2, 3, 4, 5).strftime(fmt)

env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now

here = os.path.dirname(os.path.abspath(__file__))
cases = json.load(open(os.path.join(here, "cases.json")))
tokens = {"qwen3": ("", "<|im_end|>"), "llama3": ("<|begin_of_text|>", "<|eot_id|>")}
for tname in sorted(os.listdir(os.path.join(here, "templates"))):
    name = tname.rsplit(".", 1)[0]
    tpl = env.from_string(open(os.path.join(here, "templates", tname)).read())
    out = os.path.join(here, "jinja2", name)
    os.makedirs(out, exist_ok=True)
    bos, eos = tokens[name]
    for c in cases:
        kw = dict(messages=c["messages"], add_generation_prompt=c.get("add_generation_prompt", False), bos_token=bos, eos_token=eos)
        if c.get("enable_thinking") is not None:
            kw["enable_thinking"] = c["enable_thinking"]
        if c.get("tools"):
            kw["tools"] = c["tools"]
        with open(os.path.join(out, c["name"] + ".txt"), "w") as f:
            f.write(tpl.render(**kw))
