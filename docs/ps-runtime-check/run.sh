#!/bin/bash
# Runs a scenario on Paddle 2.6.2's own parameter server: one pserver and one trainer process on
# 127.0.0.1 (the trainer's brpc client service also binds 127.0.0.1:8500 and up).
#   run.sh SCENARIO.json OUT.json [PORT]
# Needs Paddle 2.6.2's venv ($PADDLE_PY, default /work/paddle/venv/bin/python) and protobuf 4.25
# first on the path ($PROTOBUF425, default /work/paddle/pb425). About 15 s.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
SC=$(realpath "$1"); OUT=$(realpath -m "$2"); PORT=${3:-23611}
PY=${PADDLE_PY:-/work/paddle/venv/bin/python}
export PYTHONPATH=${PROTOBUF425:-/work/paddle/pb425}:$HERE
LOG=$(mktemp -d)
timeout 120 "$PY" "$HERE/server.py" "$SC" "$PORT" > "$LOG/server.log" 2>&1 &
SERVER=$!
sleep 6
timeout 100 "$PY" "$HERE/worker.py" "$SC" "$PORT" "$OUT" > "$LOG/worker.log" 2>&1
RC=$?
sleep 2
kill "$SERVER" 2>/dev/null
wait "$SERVER" 2>/dev/null
echo "trainer exit $RC; logs in $LOG"
exit $RC
