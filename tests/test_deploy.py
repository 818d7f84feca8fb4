"""The deployment files in deploy/, checked by parsing them (no Docker engine needed)."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bot.app.cli import parser
from bot.app.settings import Settings
from tests.test_cli import a_private_key

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
COMPOSE_TEXT = (DEPLOY / "compose.yml").read_text()
COMPOSE: dict[str, Any] = yaml.safe_load(COMPOSE_TEXT)
# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?message}, ${NAME?message}
REFERENCE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")
SECRETISH = re.compile(r"SECRET|PASSWORD|PRIVATE_KEY$|TOKEN")


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's instructions as (KEYWORD, arguments), one list per stage (each begins with FROM)."""
    logical, current = [], ""
    for raw in (DEPLOY / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue  # comments (the syntax directive too), also inside continued instructions
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    assert not current, "the Dockerfile ends inside a continued instruction"
    stages: list[list[tuple[str, str]]] = []
    for line in logical:
        keyword, _, args = line.partition(" ")
        if keyword.upper() == "FROM":
            stages.append([])
        assert stages, f"instruction before the first FROM: {line}"
        stages[-1].append((keyword.upper(), args.strip()))
    return stages


STAGES = dockerfile_stages()
FINAL = STAGES[-1]


def instructions(keyword: str, stage: list[tuple[str, str]] = FINAL) -> list[str]:
    return [args for kw, args in stage if kw == keyword]


def exec_form(args: str) -> list[str]:
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), args
    return value


def dockerfile_env() -> dict[str, str]:
    env = {}
    for args in instructions("ENV"):
        for item in shlex.split(args):
            name, sep, value = item.partition("=")
            assert sep, f"use ENV NAME=value: {args}"
            env[name] = value
    return env


def exposed_port() -> int:
    (expose,) = instructions("EXPOSE")
    return int(expose.split("/")[0])


def service(name: str) -> dict[str, Any]:
    return COMPOSE["services"][name]


def environment(name: str) -> dict[str, str]:
    env = service(name).get("environment", {})
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def compose_variables() -> set[str]:
    """Every variable compose.yml reads from the environment (or the --env-file)."""
    return {m["name"] for m in REFERENCE.finditer(COMPOSE_TEXT)}


def env_example() -> dict[str, str]:
    values = {}
    for line in (DEPLOY / "env.example").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, sep, value = line.partition("=")
            assert sep and re.fullmatch(r"[A-Z_][A-Z0-9_]*", name), f"not NAME=value: {line!r}"
            values[name] = value
    return values


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's interpolation, for the forms compose.yml uses."""

    def one(m: re.Match[str]) -> str:
        name, op, arg = m["name"], m["op"], m["arg"]
        found = env.get(name)
        if op in (":?", "?") and (found is None or (op == ":?" and not found)):
            raise AssertionError(f"compose would stop: {name} unset ({arg})")
        if (op == ":-" and not found) or (op == "-" and found is None):
            return arg
        return found or ""

    return REFERENCE.sub(one, value)


def test_compose_has_postgres_and_sluice() -> None:
    assert set(COMPOSE["services"]) == {"postgres", "sluice"}
    postgres = service("postgres")
    assert postgres["image"].startswith("postgres:16")
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    volumes = {v.split(":")[0]: v.split(":")[1] for v in postgres["volumes"]}
    assert volumes.get("postgres-data") == "/var/lib/postgresql/data"
    assert "postgres-data" in COMPOSE["volumes"]


def test_sluice_is_built_from_the_repository_and_waits_for_a_healthy_postgres() -> None:
    sluice = service("sluice")
    assert sluice["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert (DEPLOY / sluice["build"]["context"] / sluice["build"]["dockerfile"]).resolve() == (
        DEPLOY / "Dockerfile"
    )
    assert sluice["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert sluice["restart"] == "unless-stopped"
    assert "replicas" not in sluice.get("deploy", {})


def test_every_sluice_variable_is_a_setting() -> None:
    env = environment("sluice")
    names = [k for k in env if k.startswith("SLUICE_")]
    assert names
    unknown = [k for k in names if k.removeprefix("SLUICE_").lower() not in Settings.model_fields]
    assert unknown == [], f"not fields of bot.app.settings.Settings: {unknown}"
    for needed in (
        "SLUICE_APP_ID",
        "SLUICE_WEBHOOK_SECRET",
        "SLUICE_DATABASE_URL",
        "SLUICE_PRIVATE_KEY_FILE",
    ):
        assert needed in env


def test_the_compose_environment_makes_valid_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With env.example's values, the service's environment parses and leaves nothing missing."""
    example = env_example()
    for name in list(Settings.model_fields):
        monkeypatch.delenv(f"SLUICE_{name.upper()}", raising=False)
    for name, value in environment("sluice").items():
        monkeypatch.setenv(name, interpolate(value, example))
    key = tmp_path / "key.pem"
    key.write_text(a_private_key())
    monkeypatch.setenv("SLUICE_PRIVATE_KEY_FILE", str(key))  # /run/secrets/... exists in the container only
    monkeypatch.setenv("SLUICE_DATA_DIR", str(tmp_path / "mirrors"))  # the image's volume, writable there
    settings = Settings()
    assert settings.problems() == []
    assert (
        settings.database_url
        == f"postgresql+psycopg://sluice:{example['POSTGRES_PASSWORD']}@postgres:5432/sluice"
    )
    assert settings.web_url() == "https://github.com"


def test_no_secret_is_written_in_the_compose_file() -> None:
    assert "BEGIN" not in COMPOSE_TEXT
    for name in ("postgres", "sluice"):
        for key, value in environment(name).items():
            if SECRETISH.search(key):
                m = REFERENCE.fullmatch(value)
                assert m, f"{name}: {key} must be a ${{...}} reference, not a literal"
                assert m["op"] in (None, ":?", "?"), f"{name}: {key} must not have a default"
    url = environment("sluice")["SLUICE_DATABASE_URL"]
    password = re.fullmatch(r"postgresql\+psycopg://sluice:(.+)@postgres:5432/sluice", url)
    reference = REFERENCE.fullmatch(password[1]) if password else None
    assert reference and reference["name"] == "POSTGRES_PASSWORD", url
    assert environment("postgres")["POSTGRES_USER"] == "sluice"
    assert environment("postgres")["POSTGRES_DB"] == "sluice"


def test_the_private_key_is_a_compose_secret_file() -> None:
    path = environment("sluice")["SLUICE_PRIVATE_KEY_FILE"]
    name = path.removeprefix("/run/secrets/")
    assert path != name
    assert name in service("sluice")["secrets"]
    assert REFERENCE.search(COMPOSE["secrets"][name]["file"])  # the host path comes from the env file
    assert "SLUICE_PRIVATE_KEY" not in environment("sluice")


def test_the_data_volume_is_the_images_data_dir() -> None:
    data_dir = dockerfile_env()["SLUICE_DATA_DIR"]
    assert data_dir == "/var/lib/sluice"
    assert data_dir in exec_form(instructions("VOLUME")[0])
    mounts = dict(v.split(":")[:2][::-1] for v in service("sluice")["volumes"])
    assert mounts.get(data_dir) in COMPOSE["volumes"]  # a named volume
    assert environment("sluice").get("SLUICE_DATA_DIR", data_dir) == data_dir


def test_the_image_is_multi_stage_on_python_slim() -> None:
    assert len(STAGES) >= 2
    for stage in STAGES:
        assert stage[0][1].split()[0] == "python:3.11-slim"
    builder = " ".join(instructions("RUN", STAGES[0]))
    assert re.search(r"pip wheel\b.* \.$", builder), "the builder builds a wheel of the project"
    everything = (DEPLOY / "Dockerfile").read_text()
    assert "[test" not in everything and "runners]" not in everything  # no Triton/torch extras


def test_the_builder_copies_what_the_wheel_needs() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    needed = {"pyproject.toml", project["project"]["readme"]}
    needed |= {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    copied = set()
    for args in instructions("COPY", STAGES[0]):
        sources = [a for a in shlex.split(args) if not a.startswith("--")][:-1]
        copied |= {s.rstrip("/") for s in sources}
    assert needed <= copied
    for source in copied:
        assert (ROOT / source).exists(), source
    ignored = {
        line.strip().rstrip("/") for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    }
    assert {".git", ".venv"} <= ignored
    assert not copied & ignored


def test_the_image_is_built_with_pinned_dependencies_that_meet_the_projects_requirements() -> None:
    """A rebuild (the documented upgrade) gets the versions deploy/constraints.txt pins, not the newest on the
    index; and every pin meets pyproject's own requirement, extras included."""
    lines = [
        line for line in (DEPLOY / "constraints.txt").read_text().splitlines() if not line.startswith("#")
    ]
    pins = {canonicalize_name(name): version for name, version in (line.split("==") for line in lines)}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for text in project["dependencies"]:
        requirement = Requirement(text.split("#")[0])
        name = canonicalize_name(requirement.name)
        assert name in pins and requirement.specifier.contains(pins[name]), (name, pins.get(name))
    assert "psycopg-binary" in pins  # psycopg[binary]'s extra
    builder = " ".join(instructions("RUN", STAGES[0]))
    assert re.search(r"pip wheel .*-c deploy/constraints\.txt \.$", builder)
    copied = " ".join(instructions("COPY", STAGES[0]))
    assert "deploy/constraints.txt" in copied


def test_the_final_stage_runs_as_a_non_root_user_with_git() -> None:
    (user,) = instructions("USER")
    assert user.split(":")[0] not in ("root", "0")
    runs = " ".join(instructions("RUN"))
    assert re.search(r"apt-get install\b[^&]*\bgit\b", runs)
    assert "useradd" in runs and user.split(":")[0] in runs
    data_dir = dockerfile_env()["SLUICE_DATA_DIR"]
    assert re.search(rf"chown \S+ {re.escape(data_dir)}", runs), "the data dir belongs to the user"
    keywords = [kw for kw, _ in FINAL]
    assert keywords.index("USER") > max(i for i, kw in enumerate(keywords) if kw == "RUN")


def test_entrypoint_serves_on_the_exposed_port_and_the_healthcheck_asks_healthz() -> None:
    port = exposed_port()
    assert exec_form(instructions("ENTRYPOINT")[0]) == ["sluice"]
    cmd = exec_form(instructions("CMD")[0])
    assert cmd[0] == "serve"
    assert cmd[cmd.index("--host") + 1] == "0.0.0.0"
    assert int(cmd[cmd.index("--port") + 1]) == port
    (healthcheck,) = instructions("HEALTHCHECK")
    command = healthcheck.split(" CMD ", 1)[1]
    check = exec_form(command)
    assert check[0] == "python" and "curl" not in command
    assert f"http://127.0.0.1:{port}/healthz" in check[-1]


def test_serve_default_port_is_the_exposed_one() -> None:
    args = parser().parse_args(["serve"])
    assert args.port == exposed_port()
    (mapping,) = service("sluice")["ports"]
    assert int(mapping.rsplit(":", 1)[1]) == exposed_port()
    published = re.fullmatch(r"(\$\{[^}]*\}):(\$\{[^}]*\}):\d+", mapping)
    assert published is not None and published.groups() == (
        "${SLUICE_BIND:-127.0.0.1}",
        "${SLUICE_PORT:-8080}",
    ), (
        "published on loopback unless SLUICE_BIND says otherwise: the status page and /metrics have no "
        "authentication; the host port comes from SLUICE_PORT"
    )


def test_env_example_lists_every_variable_compose_reads() -> None:
    example = env_example()
    assert compose_variables() <= set(example), compose_variables() - set(example)
    assert set(example) <= compose_variables(), f"unused: {set(example) - compose_variables()}"
    for name, value in example.items():
        if SECRETISH.search(name):
            assert value == "change-me", f"{name}: a placeholder only"
    assert ".env" in (DEPLOY / ".gitignore").read_text().split()
