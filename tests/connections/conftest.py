from tests.connections.upstream import upstreams  # noqa: F401  (fixture: the real upstream providers)
