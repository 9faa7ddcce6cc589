#!/bin/bash
# The runtime check: simulate's prediction of ps splits against Paddle 2.6.2's own brpc runtime.
#   tools/engine/check.sh [CASE[:paddle][:twice] ...]      from the project's root
# A CASE is a corpus case folder under tests/corpus (style ps); ":paddle" runs Paddle's own split
# (expected/) instead of ours, ":twice" runs the runtime twice (the Adam tables' run-to-run spread).
# Without arguments the cases of README's table. Needs the project's venv (.venv) and Paddle's
# ($PADDLE_PY, default .paddle-venv/bin/python; tools/engine/install.sh makes it). One result line
# per case (compare.py --json) in $OUT (default /tmp/pst-engine/results.jsonl).
set -u
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
PADDLE_PY=${PADDLE_PY:-.paddle-venv/bin/python}
export PROTOBUF425=${PROTOBUF425:-$(dirname "$PADDLE_PY")/../pb425}
WORK=${WORK:-/tmp/pst-engine}; OUT=${OUT:-$WORK/results.jsonl}; STEPS=${STEPS:-5}
mkdir -p "$WORK"; : > "$OUT"
CASES=("$@")
[ ${#CASES[@]} -eq 0 ] && CASES=(ps/two_tables_sgd_sync ps/two_tables_sgd_sync:paddle
  ps/mlp_sgd_sync ps/dist_table_sgd_sync ps/lr_exp_sgd_sync ps/ctr_adam_sync:twice
  ps/mlp_adam_sync:twice ps/two_tables_sgd_async ps/mlp_sgd_async
  ps-tables/std_adagrad_sync:twice ps-tables/sparse_naive_sync:twice paddlerec-ps/fm_sync:twice)
for spec in "${CASES[@]}"; do
  IFS=: read -r c opt1 opt2 <<< "$spec"; opts=" $opt1 ${opt2:-} "
  name=$(echo "$c$opts" | tr '/ ' '__'); d=$WORK/$name
  flag=""; [[ $opts == *" paddle "* ]] && flag=--paddle
  $PY tools/engine/predict.py tests/corpus/$c $d --steps "$STEPS" $flag > "$d.predict.log" 2>&1 \
    || { echo "{\"case\": \"$c\", \"verdict\": \"predict failed\"}" >> "$OUT"; continue; }
  runs=("$d.run1")
  "$PADDLE_PY" tools/engine/run.py "$d" "$d.run1" > "$d.run1.log" 2>&1
  if [[ $opts == *" twice "* ]]; then
    "$PADDLE_PY" tools/engine/run.py "$d" "$d.run2" > "$d.run2.log" 2>&1; runs+=("$d.run2")
  fi
  $PY tools/engine/compare.py "$d" "${runs[@]}" --json | sed "s/^{/{\"split\": \"${flag:-ours}\", /" >> "$OUT"
  tail -n 1 "$OUT"
done
