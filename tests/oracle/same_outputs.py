"""Compares two trees of organ outputs (scripts/behaviour-unchanged.sh): every file must be
byte-identical, except where only hash fields may differ (issue 15, decision 6):
  - manifest.json: keys whose name holds "sha256" or "blake3", at any depth, and metadata
    entries organ.graft.*sha256*/*blake3* (a graft written as an organ directory);
  - a GGUF whose metadata keys organ.graft.*sha256*/*blake3* (or organ.split.id, random
    for every split written) differ: then every other key,
    and every tensor's name, type, shape and bytes, must be equal (read with gguf-py).
Prints one line per file that is not byte-identical and exits 1 on any other difference."""
import json
import os
import sys

import gguf

HASHY = ("sha256", "blake3")


def hashy_graft_entry(v):
    k = v.get("key") if isinstance(v, dict) else None
    return isinstance(k, str) and k.startswith("organ.graft.") and any(h in k for h in HASHY)


def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if not any(h in k for h in HASHY)}
    if isinstance(v, list):
        return [strip(x) for x in v if not hashy_graft_entry(x)]
    return v


def gguf_same(a, b):
    ra, rb = gguf.GGUFReader(a), gguf.GGUFReader(b)

    def kv(r):
        out = {}
        for f in r.fields.values():
            if f.name.startswith("organ.graft.") and any(h in f.name for h in HASHY):
                continue
            if f.name == "organ.split.id":  # random for every split written, by design
                continue
            out[f.name] = [bytes(p) for p in f.parts]
        return out

    ka, kb = kv(ra), kv(rb)
    # GGUF.kv_count and the offsets depend on key lengths; compare what they describe.
    ka.pop("GGUF.kv_count", None), kb.pop("GGUF.kv_count", None)
    if ka != kb:
        return "metadata differs: " + ", ".join(sorted(k for k in ka.keys() | kb.keys() if ka.get(k) != kb.get(k)))
    ta = [(t.name, int(t.tensor_type), list(t.shape), bytes(t.data)) for t in ra.tensors]
    tb = [(t.name, int(t.tensor_type), list(t.shape), bytes(t.data)) for t in rb.tensors]
    if ta != tb:
        return "tensors differ: " + ", ".join(x[0] for x, y in zip(ta, tb) if x != y)[:400]
    return None


def main(base, head):
    bad = same = 0
    files = []
    for root in (base, head):
        for d, _, fs in os.walk(root):
            files += [os.path.relpath(os.path.join(d, f), root) for f in fs]
    for rel in sorted(set(files)):
        a, b = os.path.join(base, rel), os.path.join(head, rel)
        if not (os.path.exists(a) and os.path.exists(b)):
            print(f"DIFFERS    {rel}: only in {'base' if os.path.exists(a) else 'head'}")
            bad += 1
            continue
        ba, bb = open(a, "rb").read(), open(b, "rb").read()
        if ba == bb:
            same += 1
            continue
        why = "bytes differ"
        if os.path.basename(rel) == "manifest.json":
            if strip(json.loads(ba)) == strip(json.loads(bb)):
                print(f"hashes     {rel}: equal but for sha256/blake3 fields")
                continue
        elif rel.endswith(".gguf"):
            why = gguf_same(a, b)
            if why is None:
                print(f"same data  {rel}: equal but for organ.graft hash keys or organ.split.id")
                continue
        print(f"DIFFERS    {rel}: {why}")
        bad += 1
    print(f"behaviour: {len(set(files))} files compared: {same} byte-identical, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
