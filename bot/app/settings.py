"""Service settings from the environment (`SLUICE_*`), checked once at start-up."""

from __future__ import annotations

import difflib
import os
import re
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.core.errors import redact

MAX_WEBHOOK_BYTES = 25 * 1024 * 1024  # GitHub caps payloads at 25 MB
DAY_S, WEEK_S = 86_400, 7 * 86_400
# A host name or an IP address (IPv6 in brackets or bare), as SLUICE_ALLOWED_UPSTREAM_HOSTS lists them.
HOST_NAME = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?|[0-9a-f:.]+")
# SLUICE_* variables that are read elsewhere, not settings of the service: the runners' pass-through list,
# compose's port and key path, the tier workflows' pip spec, the tests' PostgreSQL.
OTHER_VARIABLES = frozenset(
    {
        "SLUICE_TIER_PASS_ENV",
        "SLUICE_PORT",
        "SLUICE_BIND",
        "SLUICE_PRIVATE_KEY_PATH",
        "SLUICE_PIP_SPEC",
        "SLUICE_TEST_POSTGRES_URL",
    }
)


class Settings(BaseSettings):
    """`SLUICE_APP_ID`, `SLUICE_PRIVATE_KEY` or `SLUICE_PRIVATE_KEY_FILE`, `SLUICE_WEBHOOK_SECRET`,
    `SLUICE_DATABASE_URL`, `SLUICE_GITHUB_URL`, and the worker's `SLUICE_DATA_DIR`, `SLUICE_WORKERS`,
    `SLUICE_POLL_INTERVAL`, `SLUICE_GIT_URL`, `SLUICE_REDELIVERY_INTERVAL`, `SLUICE_RESYNC_INTERVAL`,
    `SLUICE_TIER_BACKEND` (github | local); the
    upstreams forks may name: `SLUICE_ALLOWED_UPSTREAM_HOSTS`, `SLUICE_ALLOW_PRIVATE_UPSTREAMS`.

    The intake's deadline: `SLUICE_WEBHOOK_BODY_TIMEOUT` (seconds to receive a body, default 10; then 408),
    `SLUICE_INTAKE_DEADLINE` (seconds a delivery may wait for the database, default 4; then 503 with
    `Retry-After`) and `SLUICE_INTAKE_CAPACITY` (deliveries waiting for the database at once, default 200;
    more get 503 at once)."""

    model_config = SettingsConfigDict(env_prefix="SLUICE_", extra="ignore", frozen=True)

    app_id: int | None = Field(default=None, gt=0)
    private_key: SecretStr | None = None
    private_key_file: Path | None = None
    webhook_secret: SecretStr | None = None
    database_url: str | None = None
    github_url: str = "https://api.github.com"
    git_url: str | None = None  # where repositories are cloned from; derived from github_url when unset
    data_dir: Path = Path(".sluice")  # the workers' git mirrors (a cache: safe to delete)
    workers: int = Field(default=1, ge=0, le=64)  # job workers in this process; 0: intake only
    # The seconds below are finite and at most a day (a lease) or a week (an interval): a clock plus more
    # overflows, and a job or a round would never run, with nothing said.
    poll_interval: float = Field(default=300.0, ge=0, le=WEEK_S, allow_inf_nan=False)  # 0: no polling
    # a job whose worker stops heartbeating is retried
    lease_seconds: float = Field(default=300.0, ge=5, le=DAY_S, allow_inf_nan=False)
    # seconds between redelivery sweeps (webhooks GitHub failed to deliver are asked for again); 0: none
    redelivery_interval: float = Field(default=300.0, ge=0, le=WEEK_S, allow_inf_nan=False)
    # seconds between re-plans of every fork; 0: none
    resync_interval: float = Field(default=3600.0, ge=0, le=WEEK_S, allow_inf_nan=False)
    # seconds between sweeps for tier runs past their tier's timeout (of every PR, open or not); 0: none
    tier_sweep_interval: float = Field(default=300.0, ge=0, le=WEEK_S, allow_inf_nan=False)
    # seconds between looks whether a fork's trunk is due its trunk runs (its `trunk_watch`); 0: none
    trunk_watch_interval: float = Field(default=900.0, ge=0, le=WEEK_S, allow_inf_nan=False)
    # Upstream hosts besides the GitHub host (comma-separated); an IP literal listed here may be private.
    allowed_upstream_hosts: str = ""
    # Whether an upstream host may resolve to a loopback, link-local or private address (a GHES on the LAN).
    allow_private_upstreams: bool = False
    # GitHub waits 10 s for an answer: a body still arriving after this is cut off (408)
    webhook_body_timeout: float = Field(default=10.0, gt=0, le=600, allow_inf_nan=False)
    # a delivery the database has not recorded after this many seconds gets 503 (GitHub may redeliver it)
    intake_deadline: float = Field(default=4.0, gt=0, le=9, allow_inf_nan=False)
    # Where the tiers run: `github` (the fork's tier workflows, dispatched) or `local` (`runners run`
    # on this machine, for the demo and the tests: it runs the fork's tier commands here, so only for a fork
    # whose trunk the operator trusts as much as this machine).
    tier_backend: Literal["github", "local"] = "github"
    intake_capacity: int = Field(
        default=200, ge=1
    )  # deliveries waiting for the database; beyond: 503 at once

    def web_url(self) -> str:
        """The web/git host: https://github.com for api.github.com, https://host for GHES's /api/v3."""
        if self.git_url:
            return self.git_url.rstrip("/")
        url = self.github_url.rstrip("/")
        if url.endswith("/api/v3"):
            return url.removesuffix("/api/v3")
        scheme, _, rest = url.partition("://")
        return f"{scheme}://{rest.removeprefix('api.')}"

    def github_host(self) -> str:
        """The host of `web_url()`, lowercased: the one upstream host allowed without asking."""
        return urllib.parse.urlsplit(self.web_url()).hostname or ""

    def listed_upstream_hosts(self) -> frozenset[str]:
        """`SLUICE_ALLOWED_UPSTREAM_HOSTS`: more hosts a fork's `upstream.url` may name."""
        listed = re.split(r"[,\s]+", self.allowed_upstream_hosts.lower())
        return frozenset(host.strip("[]") for host in listed if host)

    def private_key_pem(self) -> str:
        if self.private_key is not None:
            return self.private_key.get_secret_value()
        assert self.private_key_file is not None
        return self.private_key_file.read_text()

    def _key_problem(self) -> str | None:
        """Why the App's private key cannot sign the App's JWT (unreadable, or no PEM private key); None when
        it can. Never says anything of the key's content."""
        where = (
            "SLUICE_PRIVATE_KEY"
            if self.private_key is not None
            else f"SLUICE_PRIVATE_KEY_FILE={self.private_key_file}"
        )
        try:
            pem = self.private_key_pem()
        except OSError as exc:
            return (
                f"{where} cannot be read ({exc.strerror or type(exc).__name__}): make it readable to the "
                f"user the service runs as (uid {os.getuid()})"
            )
        except UnicodeDecodeError:
            return f"{where} is not text: give the .pem file GitHub generated for the App"
        if "\\n" in pem and "\n" not in pem.strip():
            return (
                f"{where} holds the two characters \\n where a PEM file has line breaks (the manifest "
                "conversion's JSON escapes them): save it with `jq -r .pem`"
            )
        try:
            key = serialization.load_pem_private_key(pem.encode(), password=None)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            return (
                f"{where} is not an unencrypted PEM private key: give the .pem file GitHub generated on the "
                "App's settings page (Private keys)"
            )
        if not isinstance(key, rsa.RSAPrivateKey):  # GitHub signs App JWTs with RS256 only
            return (
                f"{where} is not an RSA key: give the .pem file GitHub generated on the App's settings page "
                "(Private keys)"
            )
        return None

    def _url_problems(self) -> list[str]:
        found = []
        for name, url in (("SLUICE_GITHUB_URL", self.github_url), ("SLUICE_GIT_URL", self.git_url)):
            if not url:  # unset, or set empty (compose's default): derived from SLUICE_GITHUB_URL
                continue
            parts = urllib.parse.urlsplit(url)
            if parts.scheme not in ("https", "http") or not parts.hostname:
                found.append(
                    f"{name}={redact(url)!r} is not an http(s) URL with a host (https://github.example.com)"
                )
        urls = [host for host in self.listed_upstream_hosts() if not HOST_NAME.fullmatch(host)]
        if urls:
            found.append(
                f"SLUICE_ALLOWED_UPSTREAM_HOSTS lists {', '.join(sorted(urls))}: give host names or IP "
                "addresses (gitlab.example.com), not URLs or paths"
            )
        return found

    def _data_dir_problem(self) -> str | None:
        """Why the workers could not keep their mirrors in `data_dir`, or None (it need not exist yet)."""
        existing = next(
            p for p in (self.data_dir.absolute(), *self.data_dir.absolute().parents) if p.exists()
        )
        if not existing.is_dir():
            return f"SLUICE_DATA_DIR={self.data_dir}: {existing} is not a directory"
        if not os.access(existing, os.W_OK | os.X_OK):
            return (
                f"SLUICE_DATA_DIR={self.data_dir}: {existing} is not writable by the user the service runs "
                f"as (uid {os.getuid()})"
            )
        return None

    def problems(self) -> list[str]:
        """Every missing or unusable setting, each with what to set."""
        found = []
        if self.app_id is None:
            found.append(
                "SLUICE_APP_ID is not set: the GitHub App's id (a number, on the App's settings page)"
            )
        if self.private_key is None and self.private_key_file is None:
            found.append(
                "neither SLUICE_PRIVATE_KEY nor SLUICE_PRIVATE_KEY_FILE is set: the App's PEM private key"
            )
        elif self.private_key is None and self.private_key_file and not self.private_key_file.is_file():
            found.append(f"SLUICE_PRIVATE_KEY_FILE={self.private_key_file} is not a readable file")
        elif (unusable := self._key_problem()) is not None:
            found.append(unusable)
        if self.webhook_secret is None or not self.webhook_secret.get_secret_value():
            found.append("SLUICE_WEBHOOK_SECRET is not set: the App's webhook secret")
        found += self._url_problems()
        if (data_dir := self._data_dir_problem()) is not None:
            found.append(data_dir)
        return found + [problem for problem, typo in unknown_variables(os.environ) if typo]


def unknown_variables(environ: Mapping[str, str]) -> list[tuple[str, bool]]:
    """What to say of each `SLUICE_*` variable that is no setting, and whether it looks like a misspelt one
    that is not set (`SLUICE_DB_URL` without `SLUICE_DATABASE_URL`): such a typo would leave the default in
    force without a word (a SQLite file where PostgreSQL was meant), so the service refuses to start."""
    suffixes = sorted(name.upper() for name in Settings.model_fields)
    known = {f"SLUICE_{suffix}" for suffix in suffixes} | OTHER_VARIABLES
    said = []
    for name in sorted(n for n in environ if n.upper().startswith("SLUICE_") and n.upper() not in known):
        close = difflib.get_close_matches(name.upper().removeprefix("SLUICE_"), suffixes, n=1, cutoff=0.6)
        if close and f"SLUICE_{close[0]}" not in environ:
            said.append((f"{name} is not a setting Sluice knows: did you mean SLUICE_{close[0]}?", True))
        else:
            said.append((f"{name} is not a setting Sluice knows: ignored", False))
    return said
