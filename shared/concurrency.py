"""Run blocking CPU work (bcrypt) off the gevent event loop.

Under gunicorn's gevent worker the hub's native thread pool runs the call while other
greenlets keep serving; bcrypt releases the GIL, so a burst of logins does not stall
/healthz.  Outside gevent (tests, scripts) the call simply runs inline.
"""
from __future__ import annotations


def run_blocking(fn, *args):
    try:
        from gevent import monkey
    except ImportError:  # pragma: no cover - gevent is a hard dependency
        return fn(*args)
    if not monkey.is_module_patched("socket"):
        return fn(*args)
    import gevent

    return gevent.get_hub().threadpool.apply(fn, args)
