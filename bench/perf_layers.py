#!/usr/bin/env python3
"""perf_layers.py NAME CPU_US_PER_REQUEST < `perf script -F ip,sym,dso` output

Where one program's CPU goes, by layer, from the call-graph samples of one
`perf record --call-graph dwarf` (bench/bench_profile.sh). Each sample is
charged to the layer that owns it: the first frame, walking from the leaf
to the root, that is not the kernel, libc, the vDSO or the dynamic loader
(those serve whoever called them). A sample whose leaf is in the kernel is
"kernel via OWNER" (the system calls OWNER made: the sockets' send and
receive, epoll, the database's writes); one whose leaf is in libc is "libc
via OWNER" (malloc, string and number formatting), and the rest is OWNER's
own code. Prints one line the analysis reads:

  profile NAME cpu_us=X samples=N LAYER=US ...

each LAYER's share of the samples times CPU_US_PER_REQUEST (measured by the
script over the same run), so the layers add up to the CPU a request cost.
Asserts nothing.
"""
import collections
import os
import sys

SERVES = ("kernel", "libc")


def layer_of(dso):
    base = os.path.basename(dso)
    if dso.startswith("[kernel") or base.startswith("[kernel"):
        return "kernel"
    if base.startswith(("libc.so", "libc-", "ld-linux", "libpthread", "libm.so")) or base == "[vdso]":
        return "libc"
    for prefix, name in (("libcurl", "libcurl"), ("libmicrohttpd", "libmicrohttpd"),
                         ("libsqlite3", "sqlite"), ("libssl", "openssl"),
                         ("libcrypto", "openssl"), ("libhiredis", "hiredis"),
                         ("libjansson", "jansson")):
        if base.startswith(prefix):
            return name
    return base or "?"


def samples(stream):
    frames = []
    for line in stream:
        line = line.rstrip("\n")
        if not line.strip():
            if frames:
                yield frames
            frames = []
            continue
        if not line[:1].isspace():
            continue  # a sample's own line (with -F ip,sym,dso: none)
        text = line.strip()
        if "(" not in text:
            continue
        dso = text[text.rfind("(") + 1:].rstrip(")")
        if dso == "inlined":
            continue  # an inlined frame: its caller's line follows
        frames.append(layer_of(dso))
    if frames:
        yield frames


def main():
    name, cpu_us = sys.argv[1], float(sys.argv[2])
    count = collections.Counter()
    total = 0
    for frames in samples(sys.stdin):
        total += 1
        leaf = frames[0]
        owner = next((f for f in frames if f not in SERVES), "unknown")
        if leaf in SERVES:
            count["%s_via_%s" % (leaf, owner)] += 1
        else:
            count[owner] += 1
    if not total:
        print("profile %s cpu_us=%.1f samples=0" % (name, cpu_us))
        return
    words = ["%s=%.2f" % (k.replace(" ", "_"), cpu_us * n / total) for k, n in count.most_common()]
    print("profile %s cpu_us=%.1f samples=%d %s" % (name, cpu_us, total, " ".join(words)))


if __name__ == "__main__":
    main()
