"""The decision service's server with ``shared.httpserver.Turns`` switched off: the "before"
of ``benchmarks.fairness``, measured in the same run as the service as shipped.

    python -m benchmarks.fairness_worker          # one process, as ``python -m decision``
    gunicorn ... --worker-class benchmarks.fairness_worker.WorkerWithoutTurns 'decision.wsgi:create()'

Kept apart from benchmarks/fairness.py because gunicorn's master imports the worker class
before its workers patch the standard library: this module imports nothing heavy.
"""
from __future__ import annotations

import sys


def _no_turns():
    return None


def __getattr__(name: str):
    """``WorkerWithoutTurns`` (gunicorn's worker class), built on demand: the one-process
    ``main`` must not import gunicorn's worker (and ``ssl``) before patching."""
    if name != "WorkerWithoutTurns":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from shared.httpworker import DecisionWorker

    class WorkerWithoutTurns(DecisionWorker):
        """``DecisionWorker`` whose connections never wait for their turn."""

        def init_process(self):
            import shared.httpserver

            shared.httpserver.Turns.gevent = staticmethod(_no_turns)
            super().init_process()

    globals()["WorkerWithoutTurns"] = WorkerWithoutTurns
    return WorkerWithoutTurns


def main() -> int:
    from gevent import monkey

    monkey.patch_all()  # before the service's imports, as ``python -m decision`` does
    import shared.httpserver

    shared.httpserver.Turns.gevent = staticmethod(_no_turns)
    from decision.__main__ import main as serve

    return serve([])


if __name__ == "__main__":
    sys.exit(main())
