"""One pserver of Paddle 2.6.2 (DistFleetWrapper) serving a scenario's tables on 127.0.0.1."""
import json
import sys

import paddle
from paddle.base import core

from desc import server_text

paddle.enable_static()
scenario, port = json.load(open(sys.argv[1])), int(sys.argv[2])
s = core.DistFleetWrapper()
s.init_server(server_text(scenario), [core.PSHost('127.0.0.1', port, 0).serialize_to_string()],
              0, 1, [])
print('server up', flush=True)
s.run_server('127.0.0.1', port)
