"""The Helm chart (charts/iamgate), rendered by the Helm SDK and validated offline.

``make chart-test`` runs this module; ``make test`` runs it too when the chart extra
(helm-python-sdk, kubernetes-validate) is installed, and skips it otherwise.
Every rendering -- default values, examples/production-values.yaml, the tenant example
with a throwaway tenant chart -- is checked for: Kubernetes schemas (strict, oldest and
newest version kubernetes-validate knows), Pod Security "restricted" fields, probes on
addresses the containers serve, Secret references that resolve, and an Ingress that
routes every public path of the control plane's route table.
"""
from __future__ import annotations

import os
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
    "default": lambda tmp: (render({"mongodb": MONGO}), set()),
    "production": lambda tmp: (render(production_values()), {"iamgate-mongodb", "iamgate-secrets", "iamgate-smtp"}),
    "tenant": lambda tmp: (render(chart_dir=tenant_chart(tmp)), {"orders-iamgate-key"}),
    "uri-with-existing-secrets": lambda tmp: (
        render({"mongodb": MONGO, "secrets": {"existingSecret": "vault-iamgate"}}), {"vault-iamgate"}),
    "everything-on": lambda tmp: (render({
        "mongodb": MONGO, "ingress": {"enabled": True}, "networkPolicy": {"enabled": True},
        "extraVolumes": [{"name": "mongodb-ca", "secret": {"secretName": "mongodb-ca"}}],
        "extraVolumeMounts": [{"name": "mongodb-ca", "mountPath": "/etc/mongodb-ca", "readOnly": True}],
        "worker": {"enabled": True}, "controlPlane": {"autoscaling": {"enabled": True}},
        "metrics": {"serviceMonitor": {"enabled": True}}}), set()),
}


@pytest.fixture(params=sorted(CASES), scope="module")
def rendered(request, tmp_path_factory):
    docs, external_secrets = CASES[request.param](tmp_path_factory.mktemp(request.param))
    return request.param, docs, external_secrets


def pod_specs(docs):
    for doc in docs:
        if doc["kind"] == "Deployment":
            yield doc["metadata"]["name"], doc["spec"]["template"]["spec"]


def test_lint_is_clean():
    report = helm.lint(str(CHART), {"mongodb": MONGO, "secrets": GIVEN_SECRETS}, strict=True)
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


def _env(container) -> dict:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


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
    docs = render({"mongodb": MONGO, "ingress": {"enabled": True}})
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


def test_generated_secrets_are_kept_and_never_regenerated():
    first = [d for d in render({"mongodb": MONGO}) if d["kind"] == "Secret" and "secret-key" in d["data"]]
    assert first[0]["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    # An upgrade (or any render but a first install) that cannot read the Secret back
    # fails instead of rotating IAMGATE_SECRET_KEY.
    with pytest.raises(helm.HelmError, match="secrets.existingSecret"):
        render({"mongodb": MONGO}, is_install=False, is_upgrade=True)
    with pytest.raises(helm.HelmError, match="secrets.existingSecret"):
        render({"mongodb": MONGO, "secrets": {"generate": False}})
    # Given values render the same every time (helm template, GitOps).
    a, b = (render({"mongodb": MONGO, "secrets": GIVEN_SECRETS}, is_install=False, is_upgrade=True)
            for _ in range(2))
    assert [d for d in a if d["kind"] == "Secret"] == [d for d in b if d["kind"] == "Secret"]


def test_mongodb_uri_with_an_existing_secret_gets_its_own_secret():
    docs = render({"mongodb": MONGO, "secrets": {"existingSecret": "vault-iamgate"}})
    names = {d["metadata"]["name"] for d in docs if d["kind"] == "Secret"}
    assert names == {"iamgate-mongodb"}


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


def test_the_webhook_worker_is_off_until_enabled():
    assert not [d for d in render({"mongodb": MONGO}) if d["metadata"]["name"].endswith("-worker")]
    (worker,) = [d for d in render({"mongodb": MONGO, "worker": {"enabled": True}})
                 if d["metadata"]["name"].endswith("-worker")]
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


def test_the_sidecar_template(tmp_path):
    chart = tenant_chart(tmp_path)
    (deployment,) = [d for d in render(chart_dir=chart) if d["kind"] == "Deployment"]
    sidecar = deployment["spec"]["template"]["spec"]["containers"][1]
    assert sidecar["name"] == "iamgate-decision"
    # One process at the default workers: 1 (issue 18); gunicorn's heartbeat files, when
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


def test_the_sidecar_image_follows_the_chart_version():
    with helm.Chart.load(str(CHART)) as chart:
        assert chart.values["decisionSidecar"]["image"]["tag"] == chart.metadata["appVersion"]


def test_notes_say_how_to_start_and_warn_about_the_example_url():
    text = notes({"mongodb": MONGO})
    assert "/api/dashboard/register" in text
    assert "publicUrl is still the example" in text
    assert "publicUrl is still the example" not in notes({**production_values()})


def test_gunicorn_workers_share_their_metrics_through_an_emptydir(rendered):
    """Every container that may run several gunicorn workers (control plane, decision
    service, tenant sidecar) names IAMGATE_METRICS_DIR, and that path is an emptyDir of
    its pod: writable under the read-only root filesystem, one per pod, so /metrics sums
    the workers of its own pod only (issue 16, item 6)."""
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
