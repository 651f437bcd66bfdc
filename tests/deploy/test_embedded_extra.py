"""memory:// without mongomock (the image, a plain ``pip install iamgate``): one line that
says what to install or set, from every way the control plane starts (issue 31, item 11)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import controlplane
from shared.config import Config, ConfigError

ROOT = Path(__file__).resolve().parents[2]
MESSAGE = "IAMGATE_MONGODB_URI: memory:// needs the embedded store, which is not installed"


@pytest.fixture
def without_mongomock(monkeypatch):
    """An installation without the embedded extra: importing mongomock fails."""
    for name in [n for n in sys.modules if n == "mongomock" or n.startswith("mongomock.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mongomock", None)
    # The embedded store's module imports mongomock: an earlier test may have loaded it.
    monkeypatch.delitem(sys.modules, "controlplane.embedded", raising=False)
    monkeypatch.delattr(controlplane, "embedded", raising=False)


def test_the_configuration_check_names_the_variable_and_the_extra(without_mongomock):
    with pytest.raises(ConfigError, match=MESSAGE) as failure:
        Config.from_env({}).check_embedded_store()
    assert "pip install 'iamgate[embedded]'" in str(failure.value)
    mongodb = {"IAMGATE_MONGODB_URI": "mongodb://mongo/iamgate", "IAMGATE_SECRET_KEY": "k" * 32}
    Config.from_env(mongodb).check_embedded_store()  # needs none


def test_the_store_says_the_same(without_mongomock):
    from controlplane.store import Store

    with pytest.raises(ConfigError, match=MESSAGE):
        Store("memory://")


def test_the_embedded_store_works_where_it_is_installed():
    Config.from_env({}).check_embedded_store()
    from controlplane.store import Store

    store = Store("memory://")
    store["things"].insert_one({"_id": "a"})
    assert store.next_seq("x") == 1 and store["things"].find_one({"_id": "a"}) == {"_id": "a"}


def test_gunicorns_master_stops_with_one_line():
    """What the image's default command does on memory://: exit 2 before any worker."""
    hide = "import sys, runpy; sys.modules['mongomock'] = None; sys.argv[0] = 'gunicorn'; " \
           "runpy.run_module('gunicorn', run_name='__main__')"
    env = {k: v for k, v in os.environ.items() if not k.startswith("IAMGATE_")}
    done = subprocess.run([sys.executable, "-c", hide, "-c", "python:controlplane.gunicorn_conf",
                           "controlplane.wsgi:create()"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"iamgate: configuration error: {MESSAGE}")
