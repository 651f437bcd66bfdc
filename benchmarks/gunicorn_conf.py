"""gunicorn config module of the benchmarks' bare-Falcon yardsticks
(``gunicorn -c python:benchmarks.gunicorn_conf 'benchmarks.controlplane_bench:baseline()'``,
which ``controlplane.launcher._gunicorn`` builds for any ``benchmarks.*`` app).

The control plane's settings (keep-alive, worker connections, JSON logging), so the
yardstick differs from the service only in the app; without the memory:// rule that
forces one worker, so ``--workers`` is what the benchmark asks for.
"""
from shared.serving import CONTROL_PLANE, settings

globals().update({name: value for name, value in settings(CONTROL_PLANE).items() if name != "on_starting"})
