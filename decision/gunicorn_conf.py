"""gunicorn config module of the decision service (see shared/serving.py):

    gunicorn -c python:decision.gunicorn_conf 'decision.wsgi:create()'

Validates the IAMGATE_ settings in gunicorn's master (exit 2 and one line when one is
bad, including a missing credential), binds IAMGATE_DECISION_HOST:IAMGATE_DECISION_PORT,
runs IAMGATE_DECISION_WORKERS httptools/gevent workers and makes gunicorn's own log
JSON lines.
"""
from shared.serving import DECISION, settings

globals().update(settings(DECISION))
