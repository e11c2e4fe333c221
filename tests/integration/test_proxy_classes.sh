#!/usr/bin/env bash
# The proxy's class and tenant headers (issue #32, docs/priorities.md):
# Stagger-Priority (interactive, normal, batch; high and low as before)
# and Stagger-Tenant (NAME[;w=N]) are taken, stripped before the
# upstream, and a bad value is a 400 naming the header; the health
# endpoint's classes and the metrics' stagger_class_* series count them
# per class and tenant; the log's events carry them. No timing asserted.
. "$(dirname "$0")/lib.sh"
scratch pxclass
. "$(dirname "$0")/proxy_lib.sh"

serve_start up
proxy_start cls --upstream "$URL" --log "$T/cls.log"

body=$(curl -s -H 'Stagger-Priority: interactive' -H 'Stagger-Tenant: acme;w=2' "$PX/echo?x=1")
jcheck "the upstream got neither header" "$body" \
  'not any(k.lower().startswith("stagger-") for k in j["headers"])'
for v in low high Batch normal; do
  code=$(curl -s -o /dev/null -w '%{http_code}' -H "Stagger-Priority: $v" "$PX/p")
  check "Stagger-Priority: $v taken (got $code)" [ "$code" = 200 ]
done
for v in 'acme' 'a.b:c_d-1' 'acme ; w = 0.5' 'acme;W=3'; do
  code=$(curl -s -o /dev/null -w '%{http_code}' -H "Stagger-Tenant: $v" "$PX/t")
  check "Stagger-Tenant: $v taken (got $code)" [ "$code" = 200 ]
done
for v in urgent 'low,high'; do
  out=$(curl -s -w ' %{http_code}' -H "Stagger-Priority: $v" "$PX/p")
  check "Stagger-Priority: $v is a 400 naming the header ($out)" \
    sh -c "echo '$out' | grep -q 'Stagger-Priority' && echo '$out' | grep -q ' 400$'"
done
for v in 'a b' 'acme;w=0' 'acme;w=-1' 'acme;x=2' 'acme;w=2x' "$(printf 'x%.0s' $(seq 65))" 'acme;w=nan'; do
  out=$(curl -s -w ' %{http_code}' -H "Stagger-Tenant: $v" "$PX/t")
  check "Stagger-Tenant: '$v' is a 400 naming the header ($out)" \
    sh -c "echo \"\$1\" | grep -q 'Stagger-Tenant' && echo \"\$1\" | grep -q ' 400$'" _ "$out"
done

health=$(curl -s "$PX/__stagger/health")
jcheck "health: interactive/acme admitted 1, nothing waiting" "$health" \
  'any(c["class"] == "interactive" and c.get("tenant") == "acme" and c["admitted"] == 1 and c["waiting"] == 0 for c in j["classes"])'
jcheck "health: batch (low, Batch) admitted 2" "$health" \
  'any(c["class"] == "batch" and "tenant" not in c and c["admitted"] == 2 for c in j["classes"])'
metrics=$(curl -s "$PX/__stagger/metrics")
check "metrics: admitted per class and tenant" \
  sh -c "echo \"\$1\" | grep -q '^stagger_class_admitted_total{class=\"interactive\",tenant=\"acme\"} 1$'" _ "$metrics"
check "metrics: waiting and the wait histogram" \
  sh -c "echo \"\$1\" | grep -q '^stagger_class_waiting{class=\"batch\",tenant=\"\"} 0$' && echo \"\$1\" | grep -q '^stagger_class_wait_seconds_count{class=\"normal\",tenant=\"a.b:c_d-1\"} 1$'" _ "$metrics"
proxy_stop
check "log: attempt_start with class, tenant and admission_wait_ms" \
  sh -c "grep '\"attempt_start\"' '$T/cls.log' | grep '\"class\":\"interactive\"' | grep '\"tenant\":\"acme\"' | grep -q admission_wait_ms"
check "log: the proxy's line of a request with its class and tenant" \
  sh -c "grep '\"event\":\"proxy\"' '$T/cls.log' | grep '\"class\":\"interactive\"' | grep -q '\"tenant\":\"acme\"'"
finish
