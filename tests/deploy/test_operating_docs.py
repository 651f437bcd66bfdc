"""docs/deployment.md, "Operating it": the alerts it recommends use metrics the services
really export, under the names a scrape shows (issue 31's done-when). An alert on a
renamed or invented series would never fire."""
from __future__ import annotations

import re
import types
from pathlib import Path

from falcon import testing

ROOT = Path(__file__).resolve().parents[2]
SERIES_SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "counter": ("",), "gauge": ("",)}


def section(title: str) -> str:
    text = (ROOT / "docs" / "deployment.md").read_text()
    start = text.index(f"### {title}\n")
    end = text.find("\n## ", start)
    return text[start:end if end != -1 else len(text)]


def exported_series() -> set[str]:
    """Every series name of both services' /metrics, from their own renderings."""
    from controlplane.app import create_app
    from decision.metrics import DecisionMetrics
    from shared.config import Config

    control_plane = testing.TestClient(create_app(Config.from_env({}), start_background=False))
    texts = [control_plane.simulate_get("/metrics").text]

    class Cache:
        applied = lag = 0

        def __len__(self):
            return 0

    decision = DecisionMetrics()
    decision.watch(Cache(), types.SimpleNamespace(connected=True))
    texts.append(decision.render()[0].decode())
    series = set()
    for text in texts:
        for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M):
            series.update(name + suffix for suffix in SERIES_SUFFIXES[kind])
    return series


def test_every_alert_uses_a_metric_the_services_export():
    alerts = section("Alerts worth having")
    used = set(re.findall(r"\b(iamgate_[a-z_]+)", alerts))
    assert len(used) >= 8  # the section names the metrics it alerts on
    assert used - exported_series() == set()


def test_the_operating_section_covers_what_an_operator_asks():
    for title in ("Start order", "Shutdown", "Probes: what each one means", "Tracing", "Alerts worth having"):
        assert section(title)
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in section("Tracing")
