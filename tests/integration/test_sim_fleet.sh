# stagger sim fleet at a small N, end to end through the CLI: one JSON row
# per point and policy with the bound held (no send over burst + rate * t),
# every class and tenant reported, priority admitting the interactive
# class sooner than FCFS; the same --seed gives the same bytes; the table,
# --csv and --svg files; bad fleet options are usage errors (exit 2).
# Virtual time: nothing here depends on the machine's speed.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
T=$(mktemp -d /tmp/stg_fleet.XXXXXX)
trap 'rm -rf "$T"' EXIT

if ! "$S" sim --help > /dev/null 2>&1; then
  skip "stagger built without the simulator: skipped"
fi

run() { "$S" sim fleet --clients 50,100 --duration 4s --seed 3 "$@"; }

check "fleet runs" sh -c "'$S' sim fleet --clients 50,100 --duration 4s --seed 3 --json > '$T/a.json'"
check "four rows" [ "$(wc -l < "$T/a.json")" = 4 ]
row() { sed -n "${1}p" "$T/a.json"; }
for i in 1 2 3 4; do
  jcheck "row $i: the bound holds" "$(row $i)" 'j["bound_excess"] == 0'
  jcheck "row $i: admitted within the limit" "$(row $i)" 'j["admitted_rps"] <= 100 + 10 / 4.0'
  jcheck "row $i: classes and tenants" "$(row $i)" \
    'sorted(j["classes"]) == ["batch", "interactive", "normal"] and all(sorted(c["tenants"]) == ["a", "b", "c"] for c in j["classes"].values())'
  jcheck "row $i: Jain's index in (0, 1]" "$(row $i)" \
    'all(0 < j[k] <= 1 for k in ("jain_interactive", "jain_normal", "jain_batch"))'
done
jcheck "rows: point, then policy" "$(row 1)" 'j["clients"] == 50 and j["policy"] == "fcfs"'
jcheck "rows: point, then policy" "$(row 4)" 'j["clients"] == 100 and j["policy"] == "priority"'
# priority admits the interactive class sooner, normal before batch, and
# shares normal nearer to the weights than FCFS (which splits by processes)
fcfs=$(row 3) prio=$(row 4)
jcheck "priority: interactive sooner" "$prio" "j['interactive_p99_ms'] < json.loads('''$fcfs''')['interactive_p50_ms']"
jcheck "priority: normal first" "$prio" 'j["normal_rps"] > 3 * j["batch_rps"]'
jcheck "fcfs: batch by processes" "$fcfs" 'j["batch_rps"] > j["normal_rps"]'
jcheck "priority: normal tenants nearer the weights" "$prio" "j['jain_normal'] > json.loads('''$fcfs''')['jain_normal']"
jcheck "fcfs: normal tenants by processes" "$fcfs" 'j["jain_normal"] < 0.8'
check "sfq runs" sh -c "'$S' sim fleet --clients 50 --duration 2s --policies sfq --json | grep -q '\"policy\":\"sfq\"'"

check "same seed, same bytes" sh -c "'$S' sim fleet --clients 50,100 --duration 4s --seed 3 --json | cmp -s - '$T/a.json'"

run --csv "$T/f.csv" --svg "$T/f.svg" > "$T/table"
check "table: the rows" grep -q '^100  *priority' "$T/table"
check "table: per tenant" grep -q 'a w1' "$T/table"
check "csv: header and rows" [ "$(wc -l < "$T/f.csv")" = 5 ]
check "csv: policy column" grep -q '^fleet,priority,' "$T/f.csv"
check "svg: a chart" grep -q '</svg>' "$T/f.svg"
check "svg: one line per policy and panel" [ "$(grep -c '<polyline' "$T/f.svg")" = 8 ]

# options of the fleet: parsed, checked
"$S" sim fleet --clients 20 --duration 1s --policies priority --tenants x:3,y \
  --mix 0:1:1 --offered 0:0.5:max --json > "$T/o.json"
check "one policy, one row" [ "$(wc -l < "$T/o.json")" = 1 ]
jcheck "tenants from --tenants" "$(cat "$T/o.json")" \
  'j["policy"] == "priority" and j["classes"]["normal"]["tenants"]["x"]["weight"] == 3 and j["interactive_rps"] == 0'
expect_exit "unknown policy" 2 "$S" sim fleet --policies lottery
expect_exit "bad tenants" 2 "$S" sim fleet --tenants 'a b:1'
expect_exit "nine tenants" 2 "$S" sim fleet --tenants a,b,c,d,e,f,g,h,i
expect_exit "bad mix" 2 "$S" sim fleet --mix 1:1
expect_exit "bad offered" 2 "$S" sim fleet --offered 0.2:max:lots
expect_exit "too many processes" 2 "$S" sim fleet --clients 100001
expect_exit "burst 1" 2 "$S" sim fleet --burst 1
expect_exit "floor too high" 2 "$S" sim fleet --floor 0.9
expect_exit "no breaker here" 2 "$S" sim fleet --breaker on
finish
