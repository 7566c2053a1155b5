#!/usr/bin/env python3
"""Writes docs/openapi.json (Sources/Faultline/Resources/openapi.json) in its one layout: an object or array on one line
when it fits in 180 columns, else one member per line, indented by two. Usage: scripts/format-openapi.py [IN [OUT]]"""
import json, sys
W = 180
def inline(v):
    if isinstance(v, dict):
        if not v: return "{}"
        return "{ " + ", ".join(json.dumps(k, ensure_ascii=False) + ": " + inline(x) for k, x in v.items()) + " }"
    if isinstance(v, list):
        return "[" + ", ".join(inline(x) for x in v) + "]"
    return json.dumps(v, ensure_ascii=False)
def fmt(v, ind, prefix_len):
    s = inline(v)
    if len(s) + ind + prefix_len <= W or not isinstance(v, (dict, list)) or not v:
        return s
    pad = " " * (ind + 2)
    if isinstance(v, dict):
        items = [pad + json.dumps(k, ensure_ascii=False) + ": " + fmt(x, ind + 2, len(json.dumps(k, ensure_ascii=False)) + 2) for k, x in v.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * ind + "}"
    items = [pad + fmt(x, ind + 2, 0) for x in v]
    return "[\n" + ",\n".join(items) + "\n" + " " * ind + "]"
src = sys.argv[1] if len(sys.argv) > 1 else "Sources/Faultline/Resources/openapi.json"
d = json.load(open(src))
open(sys.argv[2] if len(sys.argv) > 2 else src, 'w').write(fmt(d, 0, 0) + "\n")
