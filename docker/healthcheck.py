"""The image's HEALTHCHECK: exit 0 when the service of this container answers /healthz.

One image runs either service, so the check asks the control plane's port
(IAMGATE_PORT, default 8000) and then the decision service's (IAMGATE_DECISION_PORT,
default 8181) on loopback: the first that answers decides. /healthz is liveness only
(the process serves); readiness (/readyz: the store, the change stream) is for the
orchestrator to route by, not a reason to restart a container. Kubernetes ignores
HEALTHCHECK and uses the chart's probes. Standard library only: it runs every interval.
"""
from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

TIMEOUT_SECONDS = 3
# Loopback directly, whatever HTTP_PROXY the container was given.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def healthy(port: str) -> bool | None:
    """True if /healthz answers 200, False if it answers otherwise, None if nothing listens."""
    try:
        with _OPENER.open(f"http://127.0.0.1:{port}/healthz", timeout=TIMEOUT_SECONDS) as response:
            return response.status == 200
    except urllib.error.HTTPError:
        return False
    except (urllib.error.URLError, OSError):
        return None


def main() -> int:
    for variable, default in (("IAMGATE_PORT", "8000"), ("IAMGATE_DECISION_PORT", "8181")):
        answer = healthy(os.environ.get(variable) or default)
        if answer is not None:
            return 0 if answer else 1
    print("healthcheck: nothing answers on IAMGATE_PORT or IAMGATE_DECISION_PORT", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
