"""The Helm chart (charts/iamgate), rendered by the Helm SDK and validated offline.

``make chart-test`` runs this module; ``make test`` runs it too when the chart extra
(helm-python-sdk, kubernetes-validate) is installed, and skips it otherwise.
Every rendering -- the default values with what every install must give (MINIMAL),
examples/production-values.yaml, the tenant example with a throwaway tenant chart -- is
checked for: Kubernetes schemas (strict, oldest and newest version kubernetes-validate
knows), Pod Security "restricted" fields, probes on addresses the containers serve,
Secret references that resolve, environments the services accept at start, a shutdown
that drains within the grace period, and an Ingress that routes every public path of
the control plane's route table.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

try:
    import helm_python as helm
    import kubernetes_validate.utils as kv
except ImportError:
    if os.environ.get("CI"):  # .ci/run installs the chart extra: never skip there
        raise
    pytest.skip("the chart extra is not installed (make chart-tools)", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "iamgate"
EXAMPLES = CHART / "examples"
MONGO = {"uri": "mongodb://iamgate:pw@mongo-0.mongo,mongo-1.mongo/iamgate?replicaSet=rs0"}
GIVEN_SECRETS = {"secretKey": "k" * 32, "internalToken": "t" * 40}
MINIMAL = {"mongodb": MONGO, "secrets": GIVEN_SECRETS}  # what every install must give
KUBERNETES_VERSIONS = (kv.all_versions()[0], kv.all_versions()[-1])
NOT_ROUTED = ("/internal/", "/healthz", "/readyz", "/metrics")


def render(values=None, *, chart_dir=CHART, is_install=True, is_upgrade=None) -> list[dict]:
    with helm.Chart.load(str(chart_dir)) as chart:
        out = chart.render(values or {}, name="iamgate", namespace="iamgate", is_install=is_install,
                           is_upgrade=is_upgrade)
    docs = []
    for path, text in out.items():
        if path.endswith("NOTES.txt"):
            continue
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def notes(values) -> str:
    with helm.Chart.load(str(CHART)) as chart:
        out = chart.render(values, name="iamgate", namespace="iamgate", is_install=True)
    return next(text for path, text in out.items() if path.endswith("NOTES.txt"))


def tenant_chart(tmp_path: Path) -> Path:
    """A tenant's chart: iamgate as a dependency, the example Deployment as its template."""
    tenant = tmp_path / "orders"
    (tenant / "templates").mkdir(parents=True)
    shutil.copytree(CHART, tenant / "charts" / "iamgate", ignore=shutil.ignore_patterns("examples"))
    shutil.copy(EXAMPLES / "tenant-with-sidecar.yaml", tenant / "templates" / "deployment.yaml")
    (tenant / "Chart.yaml").write_text(yaml.safe_dump({
        "apiVersion": "v2", "name": "orders", "version": "1.0.0",
        "dependencies": [{"name": "iamgate", "version": "0.1.0", "repository": "file://../iamgate"}]}))
    (tenant / "values.yaml").write_text(yaml.safe_dump({"iamgate": {
        "controlPlane": {"enabled": False}, "decision": {"enabled": False},
        "serviceAccount": {"create": False},
        "decisionSidecar": {"controlPlaneUrl": "http://iamgate-controlplane.iamgate.svc",
                            "publicUrl": "https://login.example.org",
                            "apiKeySecret": {"name": "orders-iamgate-key", "key": "key"}}}}))
    return tenant


def production_values() -> dict:
    return yaml.safe_load((EXAMPLES / "production-values.yaml").read_text())


CASES = {
    "default": lambda tmp: (render(MINIMAL), set()),
    "production": lambda tmp: (render(production_values()), {"iamgate-mongodb", "iamgate-secrets", "iamgate-smtp",
                                                                        "iamgate-metrics"}),
    "tenant": lambda tmp: (render(chart_dir=tenant_chart(tmp)), {"orders-iamgate-key"}),
    "uri-with-existing-secrets": lambda tmp: (
        render({"mongodb": MONGO, "secrets": {"existingSecret": "vault-iamgate"}}), {"vault-iamgate"}),
    "everything-on": lambda tmp: (render({
        **MINIMAL, "ingress": {"enabled": True}, "networkPolicy": {"enabled": True},
        # Numbers of a million and up, and a heartbeat slower than the default staleness bound.
        "env": {"IAMGATE_DECISION_CACHE_SIZE": 1000000, "IAMGATE_STREAM_HEARTBEAT": 6},
        "decision": {"maxStaleness": 10, "cacheTtl": 86400000},
        "extraVolumes": [{"name": "mongodb-ca", "secret": {"secretName": "mongodb-ca"}}],
        "extraVolumeMounts": [{"name": "mongodb-ca", "mountPath": "/etc/mongodb-ca", "readOnly": True}],
        "worker": {"enabled": True}, "controlPlane": {"autoscaling": {"enabled": True}},
        "metrics": {"serviceMonitor": {"enabled": True}}, "otel": {"endpoint": "http://otel-collector:4318"}}), set()),
}


@pytest.fixture(params=sorted(CASES), scope="module")
def rendered(request, tmp_path_factory):
    docs, external_secrets = CASES[request.param](tmp_path_factory.mktemp(request.param))
    return request.param, docs, external_secrets


def pod_specs(docs):
    for doc in docs:
        if doc["kind"] == "Deployment":
            yield doc["metadata"]["name"], doc["spec"]["template"]["spec"]


def templates(docs) -> dict:
    return {d["metadata"]["name"]: d["spec"]["template"] for d in docs if d["kind"] == "Deployment"}


def schema_error(values) -> str:
    """The schema's refusal of ``values``, or ``""``."""
    with helm.Chart.load(str(CHART)) as chart:
        try:
            chart.validate_schema(values)
        except helm.HelmError as exc:
            return str(exc)
    return ""


# What the pod reads from the Secrets its env names, so that a rendered container's
# environment can be given to shared.config.Config as the pod would see it.
SECRET_STANDINS = {
    "IAMGATE_SECRET_KEY": "k" * 32,
    "IAMGATE_INTERNAL_TOKEN": "t" * 40,
    "IAMGATE_METRICS_TOKEN": "m" * 40,
    "IAMGATE_MONGODB_URI": "mongodb://u:p@mongo-0.mongo/iamgate?replicaSet=rs0",
    "IAMGATE_DECISION_API_KEY": "sk_live_" + "a" * 32,
    "IAMGATE_SMTP_URL": "smtp://u:p@mail:25",
}


def container_env(container) -> dict:
    env = {}
    for item in container.get("env", []):  # a later duplicate wins, as in the kubelet
        env[item["name"]] = item["value"] if "value" in item else SECRET_STANDINS.get(item["name"], "x")
    return env


def config_errors(docs) -> list:
    """(deployment, container, error) for every iamgate container whose rendered
    environment the code refuses at start (exit 2, CrashLoopBackOff)."""
    from shared.config import Config, ConfigError

    errors = []
    for deployment, spec in pod_specs(docs):
        for container in spec["containers"]:
            if container["name"] == "orders":  # the tenant's own
                continue
            try:
                Config.from_env(container_env(container))
            except ConfigError as exc:
                errors.append((deployment, container["name"], str(exc)))
    return errors


def test_lint_is_clean():
    report = helm.lint(str(CHART), MINIMAL, strict=True)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_manifest_is_valid_kubernetes(rendered, version):
    name, docs, _ = rendered
    assert docs
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD's kind: no schema in kubernetes-validate
        kv.validate(doc, version, strict=True)


def test_pods_meet_pod_security_restricted(rendered):
    name, docs, _ = rendered
    for deployment, spec in pod_specs(docs):
        pod = spec.get("securityContext", {})
        assert spec.get("automountServiceAccountToken") is False, deployment
        assert not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC")
        assert all("hostPath" not in v for v in spec.get("volumes", []))
        for container in spec["containers"]:
            ctx = container.get("securityContext", {})
            where = f"{deployment}/{container['name']}"
            assert ctx.get("allowPrivilegeEscalation") is False, where
            assert "ALL" in ctx.get("capabilities", {}).get("drop", []), where
            assert not ctx.get("capabilities", {}).get("add"), where
            assert ctx.get("runAsNonRoot", pod.get("runAsNonRoot")) is True, where
            assert ctx.get("runAsUser", pod.get("runAsUser", 1)) != 0, where
            seccomp = ctx.get("seccompProfile", pod.get("seccompProfile", {}))
            assert seccomp.get("type") in ("RuntimeDefault", "Localhost"), where
            if container["name"] != "orders":  # the tenant's own container is theirs
                assert ctx.get("readOnlyRootFilesystem") is True, where


def test_the_zone_spread_never_strands_pods_on_nodes_without_zone_labels():
    """DoNotSchedule on topology.kubernetes.io/zone rejects every node lacking the label:
    the zone constraint has its own rule, ScheduleAnyway unless set."""
    def rules(values):
        return {(deployment, c["topologyKey"]): c["whenUnsatisfiable"]
                for deployment, spec in pod_specs(render(values)) for c in spec["topologySpreadConstraints"]}

    production = rules(production_values())  # whenUnsatisfiable: DoNotSchedule
    assert set(production.values()) == {"DoNotSchedule", "ScheduleAnyway"}
    for (deployment, key), rule in production.items():
        assert rule == ("ScheduleAnyway" if key == "topology.kubernetes.io/zone" else "DoNotSchedule"), deployment
    zoned = rules({**MINIMAL, "topologySpread": {"zoneWhenUnsatisfiable": "DoNotSchedule"}})
    assert {rule for (_, key), rule in zoned.items() if key == "topology.kubernetes.io/zone"} == {"DoNotSchedule"}
    assert "zoneWhenUnsatisfiable" in schema_error({"topologySpread": {"zoneWhenUnsatisfiable": "Never"}})


def test_rollouts_replace_one_pod_at_a_time():
    """A new pod is Ready before an old one stops (the PDBs do not govern rollouts)."""
    for doc in render(MINIMAL):
        if doc["kind"] == "Deployment":
            assert doc["spec"]["strategy"] == {"type": "RollingUpdate",
                                               "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}


def _env(container) -> dict:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def test_every_container_accepts_its_environment(rendered):
    name, docs, _ = rendered
    assert config_errors(docs) == [], name


def test_whole_numbers_reach_the_pods_as_integers(tmp_path):
    """Helm reads a values file's numbers as float64, which `quote` prints as 1e+06: the
    integer settings refuse that. A share stays the number it is."""
    values = {**MINIMAL, "env": {"IAMGATE_REFRESH_TOKEN_REMEMBER_ME_TTL": 5184000,
                                 "IAMGATE_DECISION_CACHE_SIZE": 1000000},
              "decision": {"cacheTtl": 86400000, "decisionLogs": {"sample": 0.05}}}
    docs = render(values)
    assert config_errors(docs) == []
    env = {deployment: container_env(spec["containers"][0]) for deployment, spec in pod_specs(docs)}
    assert env["iamgate-controlplane"]["IAMGATE_REFRESH_TOKEN_REMEMBER_ME_TTL"] == "5184000"
    assert env["iamgate-decision"]["IAMGATE_DECISION_CACHE_TTL"] == "86400000"
    assert env["iamgate-decision"]["IAMGATE_DECISION_CACHE_SIZE"] == "1000000"
    assert env["iamgate-decision"]["IAMGATE_DECISION_LOG_SAMPLE"] == "0.05"
    chart = tenant_chart(tmp_path)
    tenant = yaml.safe_load((chart / "values.yaml").read_text())
    tenant["iamgate"]["decisionSidecar"].update(cacheTtl=86400000, env={"IAMGATE_DECISION_CACHE_SIZE": 2000000},
                                                decisionLogs={"sample": 0.25, "denials": True})
    (chart / "values.yaml").write_text(yaml.safe_dump(tenant))
    docs = render(chart_dir=chart)
    assert config_errors(docs) == []
    sidecar = container_env(_sidecar(chart))
    assert (sidecar["IAMGATE_DECISION_CACHE_TTL"], sidecar["IAMGATE_DECISION_CACHE_SIZE"],
            sidecar["IAMGATE_DECISION_LOG_SAMPLE"]) == ("86400000", "2000000", "0.25")


@pytest.mark.parametrize("block", ["decision", "decisionSidecar"])
def test_the_schema_takes_only_staleness_bounds_the_services_accept(block):
    """IAMGATE_STREAM_HEARTBEAT (2 by default) must be below the bound: 2 never starts."""
    assert "maxStaleness" in schema_error({block: {"maxStaleness": 2}})
    assert schema_error({block: {"maxStaleness": 3}}) == ""
    assert config_errors(render({**MINIMAL, "decision": {"maxStaleness": 3}})) == []


def test_every_process_checks_the_heartbeat_against_the_decision_services_staleness_bound():
    """The control plane and the worker refuse a heartbeat not below
    IAMGATE_DECISION_MAX_STALENESS: they get decision.maxStaleness, not their default 5."""
    docs = render({**MINIMAL, "decision": {"maxStaleness": 10}, "env": {"IAMGATE_STREAM_HEARTBEAT": "6"},
                   "worker": {"enabled": True}})
    assert config_errors(docs) == []
    for deployment, spec in pod_specs(docs):
        env = container_env(spec["containers"][0])
        assert (env["IAMGATE_DECISION_MAX_STALENESS"], env["IAMGATE_STREAM_HEARTBEAT"]) == ("10", "6"), deployment
    assert len(list(pod_specs(docs))) == 3


# The plain settings the decision service reads besides its own IAMGATE_DECISION_*
# (decision/app.py, decision/__main__.py, shared/serving.py, shared/logs.py).
DECISION_READS = {"IAMGATE_PUBLIC_URL", "IAMGATE_CONTROL_PLANE_URL", "IAMGATE_STREAM_HEARTBEAT",
                  "IAMGATE_TRUSTED_PROXIES", "IAMGATE_MAX_CONNECTIONS", "IAMGATE_HEADER_TIMEOUT",
                  "IAMGATE_LOG_LEVEL", "IAMGATE_LOG_FLUSH_INTERVAL", "IAMGATE_METRICS_DIR"}


def test_the_decision_service_gets_only_the_settings_it_reads():
    """It holds no database credentials and sends no mail: the control plane's settings
    and Secrets (extraEnv: IAMGATE_SMTP_URL with its password) stay off its pods."""
    from shared.config import variable_names

    docs = render(production_values())
    env = {deployment: container_env(spec["containers"][0]) for deployment, spec in pod_specs(docs)}
    assert "IAMGATE_SMTP_URL" in env["iamgate-controlplane"] and "IAMGATE_SMTP_URL" in env["iamgate-worker"]
    assert "IAMGATE_SMTP_URL" not in env["iamgate-decision"]

    # Every plain setting at its default: the decision pods get their own and the shared ones.
    settings = {name: default for name, default in variable_names().items()
                if not schema_error({"env": {name: default}})}
    assert "IAMGATE_EMAIL_FROM" in settings and "IAMGATE_SECRET_KEY" not in settings
    given = {**MINIMAL, "env": settings, "extraEnv": [{"name": "OTEL_EXPORTER_OTLP_HEADERS", "value": "cp"}],
             "decision": {"extraEnv": [{"name": "OTEL_EXPORTER_OTLP_HEADERS", "value": "decision"}]}}
    docs = render(given)
    (decision,) = [spec["containers"][0] for deployment, spec in pod_specs(docs) if deployment == "iamgate-decision"]
    from_env = {e["name"] for e in decision["env"] if e["name"] in settings and e.get("value") == settings[e["name"]]}
    # Those the chart sets itself (IAMGATE_PUBLIC_URL, IAMGATE_METRICS_DIR...) never come from env.
    shared = DECISION_READS & set(settings)
    assert from_env == {name for name in settings if name.startswith("IAMGATE_DECISION_")} | shared
    assert container_env(decision)["OTEL_EXPORTER_OTLP_HEADERS"] == "decision"
    for deployment, spec in pod_specs(docs):
        if deployment != "iamgate-decision":
            assert container_env(spec["containers"][0])["OTEL_EXPORTER_OTLP_HEADERS"] == "cp", deployment
    assert config_errors(docs) == []


def test_the_schema_refuses_secrets_as_plain_env_values():
    """`env` values stand in clear in the Deployment and in Helm's release record: each
    secret is refused with the path and where it goes instead."""
    for name, instead in [("IAMGATE_SECRET_KEY", "secrets.existingSecret"),
                          ("IAMGATE_INTERNAL_TOKEN", "secrets.existingSecret"),
                          ("IAMGATE_MONGODB_URI", "mongodb.existingSecret"), ("IAMGATE_SMTP_URL", "extraEnv"),
                          ("IAMGATE_METRICS_TOKEN", "metrics.tokenSecret"),
                          ("IAMGATE_DECISION_API_KEY", "decisionSidecar.apiKeySecret")]:
        message = schema_error({"env": {name: "x" * 40}})
        assert f"/env/{name}" in message and instead in message, message
    for name in ("IAMGATE_DECISION_API_KEY", "IAMGATE_METRICS_TOKEN", "IAMGATE_INTERNAL_TOKEN"):
        message = schema_error({"decisionSidecar": {"env": {name: "sk_live_" + "a" * 32}}})
        assert f"/decisionSidecar/env/{name}" in message, message
    assert schema_error({"env": {"IAMGATE_LOG_LEVEL": "INFO", "IAMGATE_DECISION_CACHE_SIZE": 50000},
                         "decisionSidecar": {"env": {"IAMGATE_LOG_LEVEL": "INFO"}}}) == ""


# Each secret the schema refuses as a plain value, and the value its message names instead.
SECRETS_INSTEAD = {"IAMGATE_SECRET_KEY": "secrets.existingSecret", "IAMGATE_INTERNAL_TOKEN": "secrets.existingSecret",
                   "IAMGATE_MONGODB_URI": "mongodb.existingSecret", "IAMGATE_SMTP_URL": "valueFrom.secretKeyRef",
                   "IAMGATE_METRICS_TOKEN": "metrics.tokenSecret",
                   "IAMGATE_DECISION_API_KEY": "decisionSidecar.apiKeySecret"}


@pytest.mark.parametrize("block", ["extraEnv", "decision.extraEnv"])
@pytest.mark.parametrize("name", sorted(SECRETS_INSTEAD))
def test_the_schema_refuses_secrets_as_plain_values_in_extra_env_too(block, name):
    """A secret as a plain `value` in extraEnv or decision.extraEnv would stand in clear in
    the Deployment and in Helm's release record, as in `env` (and, extraEnv coming last,
    it would even replace the chart's secretKeyRef for IAMGATE_SECRET_KEY): the schema
    refuses it with the message `env` gives, and takes the same name from a Secret
    (valueFrom), the documented home of IAMGATE_SMTP_URL."""
    def values(entry) -> dict:
        return {"extraEnv": [entry]} if block == "extraEnv" else {"decision": {"extraEnv": [entry]}}

    path = "/" + block.replace(".", "/") + "/0"
    message = schema_error(values({"name": name, "value": "mongodb://iamgate:hunter2@mongo-0.mongo/iamgate"}))
    assert f"{path}/value" in message and SECRETS_INSTEAD[name] in message, message
    assert "valueFrom" in schema_error(values({"name": name}))
    assert schema_error(values({"name": name, "valueFrom": {"secretKeyRef": {"name": "vault", "key": "k"}}})) == ""
    assert schema_error(values({"name": "OTEL_EXPORTER_OTLP_HEADERS", "value": "x"})) == ""


@pytest.mark.parametrize("name, value, instead", [
    ("IAMGATE_PORT", 9000, "controlPlane.port"), ("IAMGATE_DECISION_PORT", 9181, "decision.port"),
    ("IAMGATE_HOST", "127.0.0.1", "0.0.0.0"), ("IAMGATE_WORKER_PORT", 9002, "worker.port"),
    ("IAMGATE_DECISION_HOST", "127.0.0.1", "0.0.0.0"), ("IAMGATE_WORKERS", 8, "controlPlane.workers"),
    ("IAMGATE_DECISION_WORKERS", 8, "decision.workers"), ("IAMGATE_METRICS_DIR", "/tmp/m", "emptyDir"),
    ("IAMGATE_PUBLIC_URL", "https://other.example", "publicUrl"),
    ("IAMGATE_DECISION_MAX_STALENESS", 30, "decision.maxStaleness"),
])
def test_env_cannot_move_a_process_off_the_port_its_probes_and_service_use(name, value, instead):
    """`env` took any IAMGATE_* setting, including those the chart derives from its own
    values (controlPlane.port, decision.port, worker.port, the 0.0.0.0 bind...). Rendered
    after the chart's, they made a second entry of the same name that wins in the kubelet:
    the process listened where no probe, Service or NetworkPolicy port points (liveness
    fails: CrashLoopBackOff), and server-side apply refuses the duplicate names. The
    schema refuses each, naming the chart value that sets it."""
    message = schema_error({**MINIMAL, "env": {name: value}})
    assert f"/env/{name}" in message and instead in message, message


def test_the_schema_refuses_in_env_every_setting_the_templates_set(tmp_path):
    """Whatever plain IAMGATE_* variable a template sets (every Deployment with every
    block on, and the tenant sidecar), `env` (or the sidecar's `env`) cannot set it a
    second time: the list in the schema follows the templates."""
    docs = render({**MINIMAL, "ingress": {"enabled": True}, "metrics": {"tokenSecret": {"name": "metrics"}},
                   "otel": {"endpoint": "http://otel-collector:4318"}, "trustedProxies": ["10.0.0.0/8"]})
    chart_sets = {e["name"] for _, spec in pod_specs(docs) for c in spec["containers"] for e in c["env"]
                  if e["name"].startswith("IAMGATE_") and "valueFrom" not in e}
    assert {"IAMGATE_PORT", "IAMGATE_WORKER_PORT", "IAMGATE_DECISION_PORT", "IAMGATE_METRICS_DIR"} <= chart_sets
    assert [name for name in sorted(chart_sets) if f"/env/{name}" not in schema_error({"env": {name: "x"}})] == []
    sidecar_sets = {e["name"] for e in _sidecar(tenant_chart(tmp_path))["env"]
                    if e["name"].startswith("IAMGATE_") and "valueFrom" not in e}
    assert {"IAMGATE_DECISION_PORT", "IAMGATE_DECISION_HOST", "IAMGATE_CONTROL_PLANE_URL"} <= sidecar_sets
    refused = {name: schema_error({"decisionSidecar": {"env": {name: "x"}}}) for name in sorted(sidecar_sets)}
    assert [name for name, message in refused.items() if f"/decisionSidecar/env/{name}" not in message] == []
    assert "decisionSidecar.port" in refused["IAMGATE_DECISION_PORT"]


def test_no_container_names_a_variable_twice(rendered):
    """A second entry of one name overrides the first in the kubelet, and server-side
    apply refuses the manifest ("duplicate entries for key")."""
    name, docs, _ = rendered
    for deployment, spec in pod_specs(docs):
        for container in spec["containers"]:
            names = [e["name"] for e in container.get("env", [])]
            assert sorted({n for n in names if names.count(n) > 1}) == [], (name, deployment, container["name"])


def test_probes_reach_what_the_containers_serve(rendered):
    name, docs, _ = rendered
    for deployment, spec in pod_specs(docs):
        for container in spec["containers"]:
            if container["name"] == "orders":
                continue
            env = _env(container)
            ports = {p.get("name") for p in container.get("ports", [])} | {p["containerPort"] for p in
                                                                            container.get("ports", [])}
            # The kubelet probes the pod IP: the service must bind all interfaces.
            bind = (env.get("IAMGATE_HOST") if container["name"] in ("controlplane", "worker")
                    else env.get("IAMGATE_DECISION_HOST"))
            assert bind == "0.0.0.0", (deployment, container["name"])
            served = int(env.get("IAMGATE_PORT") or env.get("IAMGATE_WORKER_PORT") or env.get("IAMGATE_DECISION_PORT"))
            assert served in {p["containerPort"] for p in container["ports"]}
            assert {"startupProbe", "livenessProbe"} <= set(container), container["name"]
            for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
                probe = container.get(kind)
                if probe is None:
                    continue
                get = probe["httpGet"]
                assert "host" not in get  # the pod IP, where the service listens
                assert get["port"] in ports
                named = next((p["containerPort"] for p in container["ports"] if p.get("name") == get["port"]),
                             get["port"])
                assert named == served
                assert get["path"] == ("/readyz" if kind == "readinessProbe" else "/healthz")
                assert probe.get("timeoutSeconds", 1) > 1, (container["name"], kind)


def test_secret_references_resolve(rendered):
    name, docs, external = rendered
    secrets = {d["metadata"]["name"]: set(d.get("data", {})) | set(d.get("stringData", {}))
               for d in docs if d["kind"] == "Secret"}
    for deployment, spec in pod_specs(docs):
        for container in spec["containers"]:
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref is None:
                    continue
                if ref["name"] in external:
                    continue
                assert ref["name"] in secrets, (name, deployment, env["name"], ref)
                assert ref["key"] in secrets[ref["name"]], (name, deployment, env["name"], ref)


def public_routes() -> list[str]:
    from controlplane.app import create_app
    from shared.config import Config

    app = create_app(Config.from_env({}), start_background=False)
    return sorted({path for path, _, _ in app.routes.entries if not path.startswith(NOT_ROUTED)})


def _routed(path: str, ingress_paths) -> bool:
    for rule in ingress_paths:
        prefix = rule["path"]
        if rule["pathType"] == "Exact" and path == prefix:
            return True
        if rule["pathType"] == "Prefix" and (path == prefix or path.startswith(prefix.rstrip("/") + "/")):
            return True
    return False


def test_the_ingress_routes_every_public_path_and_nothing_internal():
    docs = render({**MINIMAL, "ingress": {"enabled": True}})
    (ingress,) = [d for d in docs if d["kind"] == "Ingress"]
    paths = ingress["spec"]["rules"][0]["http"]["paths"]
    routes = public_routes()
    assert any(r.startswith("/pages/") for r in routes)  # the email links
    missing = [r for r in routes if not _routed(r, paths)]
    assert missing == [], f"public routes the Ingress does not send to the control plane: {missing}"
    for inside in ("/internal/v1/changes", "/metrics", "/healthz", "/readyz"):
        assert not _routed(inside, paths), inside
    for prefix in ("/oidc/authorize", "/.well-known/openid-configuration"):  # the OIDC surface
        assert _routed(prefix, paths)


def test_the_secrets_are_required_and_the_error_says_how():
    """The default values never generate IAMGATE_SECRET_KEY: a render that cannot see the
    cluster (helm template, a GitOps sync) would generate a new one every time (issue 31,
    item 4)."""
    for values in ({"mongodb": MONGO}, {"mongodb": MONGO, "secrets": {"secretKey": "k" * 32}}):
        with pytest.raises(helm.HelmError) as failure:
            render(values)
        message = str(failure.value)
        for hint in ("secrets.existingSecret", "secrets.secretKey", "secrets.internalToken", "GitOps",
                     "secrets.generate=true", "docs/deployment.md"):
            assert hint in message, hint
    # The decision service alone needs them too (its internal token).
    with pytest.raises(helm.HelmError, match="secrets.existingSecret"):
        render({"controlPlane": {"enabled": False}})


def test_given_secrets_render_the_same_every_time():
    a, b = (render(MINIMAL, is_install=False, is_upgrade=True) for _ in range(2))
    secrets = [d for d in a if d["kind"] == "Secret" and "secret-key" in d["data"]]
    assert secrets and secrets == [d for d in b if d["kind"] == "Secret" and "secret-key" in d["data"]]
    assert secrets[0]["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_generated_secrets_are_an_opt_in_for_a_first_install_only():
    generate = {"mongodb": MONGO, "secrets": {"generate": True}}
    (secret,) = [d for d in render(generate) if d["kind"] == "Secret" and "secret-key" in d["data"]]
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    # An upgrade that cannot read the Secret back fails instead of rotating IAMGATE_SECRET_KEY.
    with pytest.raises(helm.HelmError, match="secrets.existingSecret"):
        render(generate, is_install=False, is_upgrade=True)


def test_a_gitops_render_is_the_same_every_time():
    """What Argo CD does at every sync (helm template: install, no cluster): with the
    secrets outside the chart, each render gives the same manifests, as an upgrade does."""
    values = production_values()
    first = render(values)
    assert render(values) == first
    assert render(values, is_install=False, is_upgrade=True) == first


def test_mongodb_uri_with_an_existing_secret_gets_its_own_secret():
    docs = render({"mongodb": MONGO, "secrets": {"existingSecret": "vault-iamgate"}})
    names = {d["metadata"]["name"] for d in docs if d["kind"] == "Secret"}
    assert names == {"iamgate-mongodb"}


# charts/README.md's quick start: the two secrets in an existing Secret, the MongoDB URI
# (with its password) as a value, an Ingress.
QUICKSTART_URI = "mongodb://iamgate:{password}@mongo-0.mongo,mongo-1.mongo,mongo-2.mongo/iamgate?replicaSet=rs0"


def _quickstart(password: str) -> dict:
    return {"secrets": {"existingSecret": "iamgate-secrets"},
            "mongodb": {"uri": QUICKSTART_URI.format(password=password)},
            "publicUrl": "https://id.corp.example", "ingress": {"enabled": True, "host": "id.corp.example"}}


def test_pod_annotations_do_not_let_a_pod_reader_recover_the_mongodb_password():
    """Whoever may read pods, ReplicaSets or Deployments (the `view` role, which may not
    read Secrets) cannot test guesses of the MongoDB password against the pod templates'
    annotations. The chart's checksum/secrets was an unsalted SHA-256 of the JSON of the
    chart-made secret values: with secrets.existingSecret (the README's quick start) it
    hashed the MongoDB URI alone, and a dictionary found the password at GPU speed."""
    docs = render(_quickstart("Summer2024!"))
    annotations = {(name, key): value for name, template in templates(docs).items()
                   for key, value in template["metadata"].get("annotations", {}).items()}
    assert {name for name, _ in annotations} == {"iamgate-controlplane", "iamgate-decision", "iamgate-worker"}
    wordlist = ["password", "iamgate", "changeme", "Summer2024!", "letmein"]  # any cracking dictionary
    recovered = {}
    for guess in wordlist:
        uri = QUICKSTART_URI.format(password=guess)
        for candidate in (json.dumps({"mongodb-uri": uri}, separators=(",", ":")), uri):
            digest = hashlib.sha256(candidate.encode()).hexdigest()
            recovered.update({where: guess for where, value in annotations.items() if digest in str(value)})
    assert recovered == {}, f"the MongoDB password, recovered from pod-template annotations: {recovered}"


def test_nothing_in_the_pod_templates_depends_on_a_secret_value():
    """Whatever the construction (a checksum, salted or not, of any field), a pod
    template that changes with a secret's value is an oracle for guesses of it: the pod
    templates are the same, byte for byte, whatever the MongoDB URI's password, the
    secret key or the internal token given to the chart."""
    def pod_templates(values) -> dict:
        return templates(render(values))

    assert pod_templates(_quickstart("one")) == pod_templates(_quickstart("two"))
    other = {"secretKey": "o" * 32, "internalToken": "p" * 40}
    assert pod_templates(MINIMAL) == pod_templates({**MINIMAL, "secrets": other})
    new_password = {"uri": MONGO["uri"].replace(":pw@", ":new@")}
    assert pod_templates(MINIMAL) == pod_templates({**MINIMAL, "mongodb": new_password})


def test_bumping_secrets_revision_rolls_every_pod():
    """Env from a Secret is read when the container starts, and no checksum of secret
    values is on the pods: secrets.revision, which the operator bumps after changing a
    secret (chart-made or not), changes every Deployment's pod template, and nothing else
    of it."""
    before = templates(render(MINIMAL))
    after = templates(render({**MINIMAL, "secrets": {**GIVEN_SECRETS, "revision": 2}}))
    assert set(before) == set(after) == {"iamgate-controlplane", "iamgate-decision", "iamgate-worker"}
    for deployment, template in before.items():
        annotations = template["metadata"]["annotations"]
        assert annotations["iamgate/secrets-revision"] == "0", deployment
        rolled = after[deployment]
        assert rolled["metadata"]["annotations"]["iamgate/secrets-revision"] == "2", deployment
        rolled["metadata"]["annotations"]["iamgate/secrets-revision"] = "0"
        assert rolled == template, deployment
    dated = templates(render({**MINIMAL, "secrets": {**GIVEN_SECRETS, "revision": "2026-11-28"}}))
    assert dated["iamgate-decision"]["metadata"]["annotations"]["iamgate/secrets-revision"] == "2026-11-28"
    assert "revision" in schema_error({"secrets": {"revision": 1.5}})


@pytest.mark.parametrize("values, message", [
    ({"controlPlane": {"workers": 0}}, "workers"),
    ({"secrets": {"internalToken": "short"}}, "internalToken"),
    ({"decisionSidecar": {"probeMode": "sometimes"}}, "probeMode"),
    ({"mongodb": {"uri": "postgres://db"}}, "uri"),
    ({"replicas": 3}, "replicas"),
])
def test_bad_values_fail_at_install(values, message):
    with helm.Chart.load(str(CHART)) as chart, pytest.raises(helm.HelmError, match=message):
        chart.validate_schema(values)


def test_the_webhook_worker_runs_unless_switched_off_and_the_notes_say_so():
    """On MongoDB the worker alone delivers webhooks: an install without it accepts
    webhooks that never fire, so it runs by default, and without it NOTES warns."""
    (worker,) = [d for d in render(MINIMAL) if d["metadata"]["name"].endswith("-worker")]
    assert "Webhook worker:   deploy/iamgate-worker" in notes(MINIMAL)
    assert "worker.enabled is false" not in notes(MINIMAL)
    off = {**MINIMAL, "worker": {"enabled": False}}
    assert not [d for d in render(off) if d["metadata"]["name"].endswith("-worker")]
    assert "WARNING: worker.enabled is false: NO WEBHOOKS ARE DELIVERED" in notes(off)
    container = worker["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "controlplane", "worker"]
    # Probed and scraped on its own port (issue 31, item 1: nothing noticed a worker that never delivered).
    assert container["ports"] == [{"name": "http", "containerPort": 8002}]
    assert {"name": "IAMGATE_WORKER_PORT", "value": "8002"} in container["env"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert worker["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == "8002"


def test_the_production_example(tmp_path):
    docs = render(production_values())
    (deployment,) = [d for d in docs if d["metadata"]["name"] == "iamgate-controlplane" and d["kind"] == "Deployment"]
    assert deployment["spec"]["replicas"] == 3
    (ingress,) = [d for d in docs if d["kind"] == "Ingress"]
    assert ingress["spec"]["tls"]
    assert not [d for d in docs if d["kind"] == "Secret"]  # all from existing Secrets
    assert {d["kind"] for d in docs} >= {"PodDisruptionBudget", "NetworkPolicy", "ServiceAccount"}


def test_the_production_example_is_scraped_with_the_metrics_token_from_monitoring():
    """Item 10 of issue 31: the ServiceMonitors send the token the pods require, from the
    same Secret, and each NetworkPolicy admits the namespace Prometheus scrapes from."""
    values = production_values()
    docs = render(values)
    token = values["metrics"]["tokenSecret"]
    monitors = [d for d in docs if d["kind"] in ("ServiceMonitor", "PodMonitor")]
    assert {(m["kind"], m["metadata"]["name"]) for m in monitors} == {
        ("ServiceMonitor", "iamgate-controlplane"), ("ServiceMonitor", "iamgate-decision"),
        ("PodMonitor", "iamgate-worker")}  # the worker has no Service
    for monitor in monitors:
        (endpoint,) = monitor["spec"].get("endpoints") or monitor["spec"]["podMetricsEndpoints"]
        assert endpoint["authorization"] == {"type": "Bearer", "credentials": token}
        assert endpoint["port"] == "http" and endpoint["path"] == "/metrics"
    (worker_monitor,) = [m for m in monitors if m["kind"] == "PodMonitor"]
    (worker,) = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "iamgate-worker"]
    assert worker_monitor["spec"]["selector"]["matchLabels"].items() <= \
        worker["spec"]["template"]["metadata"]["labels"].items()
    for deployment, spec in pod_specs(docs):
        for container in spec["containers"]:
            ref = next(e for e in container["env"] if e["name"] == "IAMGATE_METRICS_TOKEN")
            assert ref["valueFrom"]["secretKeyRef"] == token, deployment
    monitoring = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    assert len(policies) == 3
    for policy in policies:
        (rule,) = policy["spec"]["ingress"]
        assert monitoring in rule["from"], policy["metadata"]["name"]
    (worker_policy,) = [p for p in policies if p["metadata"]["name"] == "iamgate-worker"]
    assert worker_policy["spec"]["ingress"] == [{"ports": [{"port": "http", "protocol": "TCP"}],
                                                 "from": [monitoring]}]  # the scrapers, nobody else


def test_a_network_policy_selects_every_pod_of_the_release():
    docs = render({**MINIMAL, "networkPolicy": {"enabled": True}, "worker": {"enabled": True}})
    selectors = [d["spec"]["podSelector"]["matchLabels"] for d in docs if d["kind"] == "NetworkPolicy"]
    for deployment, template in templates(docs).items():
        assert any(s.items() <= template["metadata"]["labels"].items() for s in selectors), deployment


def test_without_a_token_nothing_sends_or_requires_one():
    docs = render({**MINIMAL, "metrics": {"serviceMonitor": {"enabled": True}}, "networkPolicy": {"enabled": True}})
    assert all("authorization" not in m["spec"]["endpoints"][0] for m in docs if m["kind"] == "ServiceMonitor")
    assert not [e for _, spec in pod_specs(docs) for c in spec["containers"] for e in c["env"]
                if e["name"] == "IAMGATE_METRICS_TOKEN"]
    # Without metricsFrom: the control plane open to the cluster, the decision service to
    # its own namespace, the worker (no traffic, nobody scraping) to nobody.
    assert {p["metadata"]["name"]: p["spec"]["ingress"] for p in docs if p["kind"] == "NetworkPolicy"} == {
        "iamgate-controlplane": [{"ports": [{"port": "http", "protocol": "TCP"}], "from": [{"namespaceSelector": {}}]}],
        "iamgate-decision": [{"ports": [{"port": "http", "protocol": "TCP"}], "from": [{"podSelector": {}}]}],
        "iamgate-worker": []}


def test_tracing_is_off_until_an_endpoint_is_given():
    """The standard OTEL_* variables, the control plane, the decision service and the
    webhook worker (it sends every delivery) each under its own service name."""
    def otel(values):
        return {deployment: {e["name"]: e["value"] for e in spec["containers"][0]["env"]
                             if e["name"].startswith("OTEL_")}
                for deployment, spec in pod_specs(render(values))}

    assert otel(MINIMAL) == {"iamgate-controlplane": {}, "iamgate-decision": {}, "iamgate-worker": {}}
    traced = otel({**MINIMAL, "otel": {"endpoint": "http://otel-collector:4318",
                                       "resourceAttributes": {"deployment.environment": "production"}}})
    assert set(traced) == {"iamgate-controlplane", "iamgate-decision", "iamgate-worker"}
    for deployment, env in traced.items():
        assert env["OTEL_SERVICE_NAME"] == deployment
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector:4318"
        assert env["OTEL_TRACES_SAMPLER"] == "parentbased_traceidratio" and float(env["OTEL_TRACES_SAMPLER_ARG"]) <= 1
        assert env["OTEL_RESOURCE_ATTRIBUTES"] == (
            "service.version=0.1.0,service.namespace=iamgate,deployment.environment=production")
    with helm.Chart.load(str(CHART)) as chart, pytest.raises(helm.HelmError, match="samplerArg"):
        chart.validate_schema({"otel": {"samplerArg": "10%"}})


def _chart_values_in_docs():
    """(doc, block) of each YAML example in docs/ made of chart values only."""
    keys = set(yaml.safe_load((CHART / "values.yaml").read_text()))
    for doc in sorted((ROOT / "docs").glob("*.md")):
        for block in re.findall(r"```yaml\n(.*?)```", doc.read_text(), re.S):
            try:
                values = yaml.safe_load(block)
            except yaml.YAMLError:
                continue  # a template, or several documents
            if isinstance(values, dict) and values and set(values) <= keys:
                yield doc.name, values


def test_the_values_the_docs_show_pass_the_schema():
    blocks = list(_chart_values_in_docs())
    assert {"deployment.md", "configuration.md"} <= {doc for doc, _ in blocks}
    for doc, values in blocks:
        assert schema_error(values) == "", (doc, values)


def test_the_sidecar_template(tmp_path):
    chart = tenant_chart(tmp_path)
    (deployment,) = [d for d in render(chart_dir=chart) if d["kind"] == "Deployment"]
    sidecar = deployment["spec"]["template"]["spec"]["containers"][1]
    assert sidecar["name"] == "iamgate-decision"
    # One process at the default workers: 1; gunicorn's heartbeat files, when
    # workers > 1, go to /dev/shm through shared/serving.py.
    assert sidecar["command"] == ["python", "-m", "decision"]
    assert {"name": "IAMGATE_DECISION_WORKERS", "value": "1"} in sidecar["env"]
    assert "readinessProbe" not in sidecar  # liveness-only: tenant pods do not follow the control plane
    key = next(e for e in sidecar["env"] if e["name"] == "IAMGATE_DECISION_API_KEY")
    assert key["valueFrom"]["secretKeyRef"] == {"name": "orders-iamgate-key", "key": "key"}
    values = yaml.safe_load((chart / "values.yaml").read_text())
    values["iamgate"]["decisionSidecar"]["probeMode"] = "readiness"
    (chart / "values.yaml").write_text(yaml.safe_dump(values))
    (deployment,) = [d for d in render(chart_dir=chart) if d["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][1]["readinessProbe"]["httpGet"]["path"] == "/readyz"
    # Only the named template: the dependency deploys nothing of its own.
    assert {d["kind"] for d in render(chart_dir=chart)} == {"Deployment"}


def _sidecar(chart: Path) -> dict:
    (deployment,) = [d for d in render(chart_dir=chart) if d["kind"] == "Deployment"]
    return next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "iamgate-decision")


def test_the_sidecar_image_follows_the_chart_version(tmp_path):
    """decisionSidecar.image.tag defaults to the iamgate chart's appVersion, so a tenant
    that upgrades the dependency upgrades its sidecars (issue 31, item 12)."""
    chart = tenant_chart(tmp_path)
    dependency = chart / "charts" / "iamgate" / "Chart.yaml"
    metadata = yaml.safe_load(dependency.read_text())
    assert _sidecar(chart)["image"] == f"ghcr.io/iamgate/iamgate:{metadata['appVersion']}"
    dependency.write_text(yaml.safe_dump({**metadata, "appVersion": "9.8.7"}))
    assert _sidecar(chart)["image"] == "ghcr.io/iamgate/iamgate:9.8.7"
    values = yaml.safe_load((chart / "values.yaml").read_text())
    values["iamgate"]["decisionSidecar"]["image"] = {"repository": "registry.example.com/iamgate", "tag": "pinned"}
    (chart / "values.yaml").write_text(yaml.safe_dump(values))
    assert _sidecar(chart)["image"] == "registry.example.com/iamgate:pinned"


def test_the_images_can_be_pinned_by_digest(tmp_path):
    digest = "sha256:" + "a" * 64
    values = {**MINIMAL, "image": {"repository": "registry.example.com/iamgate", "tag": "0.1.0", "digest": digest}}
    assert schema_error(values) == ""
    for deployment, spec in pod_specs(render(values)):
        assert spec["containers"][0]["image"] == "registry.example.com/iamgate@" + digest, deployment
    chart = tenant_chart(tmp_path)
    tenant = yaml.safe_load((chart / "values.yaml").read_text())
    tenant["iamgate"]["decisionSidecar"]["image"] = {"repository": "registry.example.com/iamgate", "digest": digest}
    (chart / "values.yaml").write_text(yaml.safe_dump(tenant))
    assert _sidecar(chart)["image"] == "registry.example.com/iamgate@" + digest
    assert "/image/digest" in schema_error({"image": {"digest": "latest"}})
    assert "/decisionSidecar/image/digest" in schema_error({"decisionSidecar": {"image": {"digest": "sha256:x"}}})


def test_the_sidecar_gets_the_metrics_token_from_a_secret(tmp_path):
    """The sidecar binds 0.0.0.0, so its /metrics is reachable from the pod network:
    metrics.tokenSecret reaches it as it reaches every pod."""
    chart = tenant_chart(tmp_path)
    assert "IAMGATE_METRICS_TOKEN" not in container_env(_sidecar(chart))
    tenant = yaml.safe_load((chart / "values.yaml").read_text())
    tenant["iamgate"]["metrics"] = {"tokenSecret": {"name": "orders-metrics", "key": "metrics-token"}}
    (chart / "values.yaml").write_text(yaml.safe_dump(tenant))
    token = next(e for e in _sidecar(chart)["env"] if e["name"] == "IAMGATE_METRICS_TOKEN")
    assert token["valueFrom"]["secretKeyRef"] == {"name": "orders-metrics", "key": "metrics-token"}


def test_the_sidecar_template_says_what_it_takes(tmp_path):
    """The values block, the argument before the tag followed appVersion, fails with the new form."""
    chart = tenant_chart(tmp_path)
    template = chart / "templates" / "deployment.yaml"
    template.write_text(template.read_text().replace(".Subcharts.iamgate", ".Values.iamgate.decisionSidecar"))
    with pytest.raises(helm.HelmError, match=r'include \\?"iamgate.decisionSidecar\\?" .Subcharts.iamgate'):
        render(chart_dir=chart)


def _graceful_timeouts() -> dict:
    """How long each container's server drains after SIGTERM, from the code itself."""
    from decision.__main__ import GRACEFUL_SECONDS
    from shared.serving import CONTROL_PLANE, settings

    gunicorn = settings(CONTROL_PLANE)["graceful_timeout"]  # both services' gunicorn config
    # The sidecar is one process at workers: 1 and gunicorn above: the longer of the two.
    return {"controlplane": gunicorn, "decision": gunicorn, "iamgate-decision": max(gunicorn, GRACEFUL_SECONDS)}


def test_shutdown_drains_within_the_grace_period(rendered):
    """Every server container sleeps in preStop (its pod leaves the endpoints meanwhile),
    then drains for its graceful timeout; the pod's grace period covers both, so SIGKILL
    never cuts a request short (issue 31, item 6)."""
    name, docs, _ = rendered
    graceful = _graceful_timeouts()
    served = 0
    for deployment, spec in pod_specs(docs):
        for container in spec["containers"]:
            if container["name"] not in graceful:
                continue
            served += 1
            command = container["lifecycle"]["preStop"]["exec"]["command"]
            assert command[0] == "sleep" and int(command[1]) >= 1, (deployment, command)
            grace = spec.get("terminationGracePeriodSeconds", 30)  # Kubernetes' default
            assert grace > int(command[1]) + graceful[container["name"]], (name, deployment, grace)
    assert served, name


@pytest.mark.parametrize("component", ["controlPlane", "decision"])
def test_a_grace_period_too_short_to_drain_fails_at_render(component):
    """The chart's copy of gunicorn's graceful timeout is the code's."""
    needed = 5 + _graceful_timeouts()["controlplane"]
    with pytest.raises(helm.HelmError, match=f"{component}.terminationGracePeriodSeconds"):
        render({**MINIMAL, component: {"preStopSleepSeconds": 5, "terminationGracePeriodSeconds": needed}})
    docs = render({**MINIMAL, component: {"preStopSleepSeconds": 5, "terminationGracePeriodSeconds": needed + 1}})
    assert any(d["kind"] == "Deployment"
               and d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == needed + 1 for d in docs)


def test_notes_say_how_to_start_and_warn_about_the_example_url():
    text = notes(MINIMAL)
    assert "/api/dashboard/register" in text
    assert "publicUrl is still the example" in text
    assert "publicUrl is still the example" not in notes({**production_values()})


def test_an_ingress_without_trusted_proxies_is_flagged():
    """Behind the Ingress every request's TCP peer is the ingress controller. Without
    IAMGATE_TRUSTED_PROXIES every client of the internet shares that one address's
    budgets -- IAMGATE_RATE_LIMIT_IP, the whole service's bcrypt work per address -- so
    one client can spend the budget of every user's sign-in. docs/security.md lists it as
    required for a public deployment: an Ingress without trustedProxies gets a NOTES
    warning naming both, and one with them, or no Ingress, gets none."""
    from shared.http import client_address

    values = _quickstart("x")
    docs = render(values)
    assert any(d["kind"] == "Ingress" for d in docs)
    (controlplane,) = [spec["containers"][0] for deployment, spec in pod_specs(docs)
                       if deployment == "iamgate-controlplane"]
    assert "IAMGATE_TRUSTED_PROXIES" not in container_env(controlplane)
    # Two internet clients through one ingress-controller pod: one address to the limits.
    assert client_address("10.0.3.7", "203.0.113.5") == client_address("10.0.3.7", "198.51.100.9")
    warning = "WARNING: ingress.enabled without trustedProxies (IAMGATE_TRUSTED_PROXIES)"
    assert warning in notes(values)
    assert warning not in notes({**values, "trustedProxies": ["10.0.0.0/8"]})
    assert warning not in notes({**values, "ingress": {"enabled": False}})
    assert warning not in notes(production_values())


def test_trusted_proxies_reach_the_control_plane_and_the_decision_service():
    """trustedProxies becomes IAMGATE_TRUSTED_PROXIES of every process the chart runs, in
    the form the services accept, so the rate limits key on the client behind the
    ingress controller; the schema refuses what is no address, and the same setting in
    `env` (one name, one entry), naming trustedProxies."""
    from shared.config import Config
    from shared.http import client_address

    docs = render({**_quickstart("x"), "trustedProxies": ["10.0.0.0/8", "fd00::/8", "192.168.1.1"]})
    assert config_errors(docs) == []
    env = {deployment: container_env(spec["containers"][0]) for deployment, spec in pod_specs(docs)}
    assert set(env) == {"iamgate-controlplane", "iamgate-decision", "iamgate-worker"}
    for deployment, variables in env.items():
        assert variables["IAMGATE_TRUSTED_PROXIES"] == "10.0.0.0/8,fd00::/8,192.168.1.1", deployment
    proxies = Config.from_env(env["iamgate-controlplane"]).trusted_proxies
    assert client_address("10.0.3.7", "203.0.113.5", proxies) != client_address("10.0.3.7", "198.51.100.9", proxies)
    assert "/trustedProxies/0" in schema_error({"trustedProxies": ["ingress-nginx"]})
    message = schema_error({"env": {"IAMGATE_TRUSTED_PROXIES": "10.0.0.0/8"}})
    assert "/env/IAMGATE_TRUSTED_PROXIES" in message and "trustedProxies" in message, message


def test_gunicorn_workers_share_their_metrics_through_an_emptydir(rendered):
    """Every container that may run several gunicorn workers (control plane, decision
    service, tenant sidecar) names IAMGATE_METRICS_DIR, and that path is an emptyDir of
    its pod: writable under the read-only root filesystem, one per pod, so /metrics sums
    the workers of its own pod only."""
    name, docs, _ = rendered
    served = 0
    for deployment, spec in pod_specs(docs):
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for container in spec["containers"]:
            if container["name"] not in ("controlplane", "decision", "iamgate-decision"):
                continue
            served += 1
            directory = _env(container).get("IAMGATE_METRICS_DIR")
            assert directory, (name, deployment, container["name"])
            (mount,) = [m for m in container.get("volumeMounts", []) if m["mountPath"] == directory]
            assert not mount.get("readOnly")
            assert "emptyDir" in volumes[mount["name"]], (name, deployment, volumes)
    assert served, name
