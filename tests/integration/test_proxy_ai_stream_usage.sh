#!/usr/bin/env bash
# stagger proxy: a streamed Anthropic answer longer than the tail the proxy
# keeps (8 KiB) settles its reservation at the whole usage it reports:
# message_start's input_tokens (the stream's first event) with
# message_delta's output_tokens (its last). Against ai_tpm_upstream.py
# --dialect anthropic: an input-tokens bucket of 1100 that refills slowly
# (1100 per 300 s: 150 tokens take 41 s), the input counted as the
# prompt's characters / 8 (250 for 2000 characters, where the proxy
# estimates 500) and told in the usage, every answer a stream of ~16 KB,
# and no rate-limit field after the first answer (the usage settles the
# rest). Three calls one after another, each with Stagger-Deadline: 10s:
#  - the first answer tells 850 left; the second reserves 500 (350 left)
#    and its usage says 250: 600 left, so the third (500) is sent at once;
#  - with its input lost (read from the stream's last 8 KiB only), the
#    second stays at its estimate (350 left) and the third would wait for
#    150 tokens of refill, 41 s, far past its deadline (a 504).
# On 127.0.0.1 only.
. "$(dirname "$0")/lib.sh"
scratch pxsu
. "$(dirname "$0")/proxy_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

$PY -c 'import json,sys; print(json.dumps({"model": "m", "max_tokens": 10, "stream": True,
  "messages": [{"role": "user", "content": "u" * 2000}]}))' > "$T/body.json"

py_upstream ai_tpm_upstream.py --dialect anthropic --limit 1100 --out-limit 100000 \
  --window 300 --chars-per-token 8 --quiet-after 1 --log "$T/up.log"
proxy_start a --upstream "$UP" --log "$T/a.log"

call() {
  curl -s -N -o "$T/out$1" -w '%{http_code}' -H 'Content-Type: application/json' \
    -H 'anthropic-version: 2023-06-01' -H 'Stagger-Deadline: 10s' \
    -H 'Stagger-Retries: 100' --data-binary "@$T/body.json" "$PX/v1/messages"
}
c1=$(call 1)
c2=$(call 2)
c3=$(call 3)
check "the first two calls pass ($c1 $c2)" [ "$c1$c2" = 200200 ]
check "the third is sent at once: the second's input usage gave its estimate back (got $c3)" \
  [ "$c3" = 200 ]
size=$(wc -c < "$T/out2")
check "the streams are longer than the 8 KiB tail ($size bytes)" [ "$size" -gt 8192 ]
check "  and arrive whole" grep -q 'message_stop' "$T/out2"
check "the upstream refused none" sh -c "! grep -q refused '$T/up.log'"
check "no Stagger-* field reached it" sh -c "! grep -q stagger-header '$T/up.log'"
proxy_stop
finish
