#!/bin/sh
# The server makes this the sandbox's entrypoint: start the daemon, then run the requested entrypoint.
/opt/opensandbox/execd >/tmp/execd.log 2>&1 &
if [ "$#" -eq 0 ]; then exec tail -f /dev/null; fi
exec "$@"
