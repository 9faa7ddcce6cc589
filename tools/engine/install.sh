#!/bin/bash
# Paddle 2.6.2 (CPU wheel) in a venv of its own for the runtime check, and protobuf 4.25.5 in a
# folder of its own that goes first on the roles' PYTHONPATH (pip puts a newer protobuf in the
# venv, which Paddle 2.6.2's fleet code cannot use).
#   tools/engine/install.sh [VENV]        default .paddle-venv (ignored by git)
set -eu
cd "$(dirname "$0")/../.."
V=${1:-.paddle-venv}
python3 -m venv "$V"
"$V/bin/pip" install -q paddlepaddle==2.6.2
"$V/bin/pip" install -q --target "$V/pb425" protobuf==4.25.5
PYTHONPATH="$V/pb425" "$V/bin/python" -c "import paddle; print('paddle', paddle.__version__)"
echo "PADDLE_PY=$V/bin/python PROTOBUF425=$V/pb425 tools/engine/check.sh"
