"""gunicorn config module of the control plane (see shared/serving.py):

    gunicorn -c python:controlplane.gunicorn_conf 'controlplane.wsgi:create()'

Validates the IAMGATE_ settings in gunicorn's master (exit 2 and one line when one is
bad), binds IAMGATE_HOST:IAMGATE_PORT, runs IAMGATE_WORKERS gevent workers (one on
memory://) and makes gunicorn's own log JSON lines.
"""
from shared.serving import CONTROL_PLANE, settings

globals().update(settings(CONTROL_PLANE))
