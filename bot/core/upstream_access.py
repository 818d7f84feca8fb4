"""Whose credentials, if any, read a fork's upstream: a pure decision; no installation reads for another."""

from __future__ import annotations

import enum
import ipaddress
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass

from bot.core.config import CONFIG_PATH
from bot.core.errors import ConfigRefused


class UpstreamRefused(ConfigRefused):
    """Sluice may not read this upstream for this fork; permanent until a person changes something."""


class AccessKind(enum.StrEnum):
    ANONYMOUS = "anonymous"  # a public upstream: no credential at all
    FORK_TOKEN = "fork token"  # the upstream lies in the fork's own installation
    CONSENTED = "upstream token"  # another installation whose config lists the fork under `downstreams`


@dataclass(frozen=True)
class UpstreamAccess:
    kind: AccessKind
    installation_id: int | None  # whose installation token reads the upstream; None: anonymously


@dataclass(frozen=True)
class UpstreamFacts:
    fork: str  # owner/name
    fork_installation: int
    upstream_url: str
    upstream: str | None  # owner/name on Sluice's GitHub host; None for another host
    public: bool  # git answered an anonymous ls-remote
    upstream_installation: int | None  # the App's installation holding the upstream, when there is one
    downstreams: tuple[str, ...] = ()  # what the upstream installation's own config allows (read if needed)


def needs_consent(facts: UpstreamFacts) -> bool:
    """Whether reading the upstream would use another installation's token, so its config must be read."""
    return (
        not facts.public
        and facts.upstream is not None
        and facts.upstream_installation not in (None, facts.fork_installation)
    )


def decide(facts: UpstreamFacts) -> UpstreamAccess:
    """Anonymous when public; the fork's token in its own installation; another's only with its consent."""
    if facts.public:
        return UpstreamAccess(AccessKind.ANONYMOUS, None)
    if facts.upstream is None:
        raise UpstreamRefused(
            f"{facts.fork}: upstream {facts.upstream_url} cannot be read anonymously, and Sluice holds "
            "credentials only for its own GitHub host",
            "make the upstream public, or mirror it into a repository on GitHub where the App is installed",
        )
    if facts.upstream_installation == facts.fork_installation:
        return UpstreamAccess(AccessKind.FORK_TOKEN, facts.fork_installation)
    consented = facts.fork.lower() in {d.lower() for d in facts.downstreams}
    if facts.upstream_installation is not None and consented:
        return UpstreamAccess(AccessKind.CONSENTED, facts.upstream_installation)
    # One message whether the App is installed there or not: a refusal must not tell a fork what exists.
    raise UpstreamRefused(
        f"{facts.fork}: upstream {facts.upstream} cannot be read anonymously (it is private or does not "
        f"exist), and it is not in this installation of the App, nor does its own {CONFIG_PATH} list "
        f"{facts.fork} under `downstreams`; Sluice never uses one installation's access on behalf of another",
        f"add `downstreams: [{facts.fork}]` to {facts.upstream}'s {CONFIG_PATH} on its default branch (the "
        f"App must be installed there), or make {facts.upstream} public; then push to {facts.fork}'s "
        f"{CONFIG_PATH} so that Sluice registers it again",
    )


# --- hosts --------------------------------------------------------------------------------------------------


def host_of(url: str) -> str | None:
    """The host an http(s) upstream URL names, lowercased; None for any other form."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() not in ("https", "http"):
        return None
    try:
        return parts.hostname
    except ValueError:
        return None


def url_refusal(
    url: str, *, web_url: str, github_host: str, listed_hosts: frozenset[str]
) -> tuple[str, str] | None:
    """(problem, remedy) when Sluice must not fetch `url` whatever its host resolves to."""
    host = host_of(url)
    # http only where Sluice's own GitHub is served over http (a test rig); git's other transports never.
    schemes = {"https", urllib.parse.urlsplit(web_url).scheme.lower()}
    if host is None or urllib.parse.urlsplit(url).scheme.lower() not in schemes:
        return "is not an https:// URL", "the GitHub App fetches upstreams over https only; use the clone URL"
    if urllib.parse.urlsplit(url).username is not None:
        return "carries credentials", "remove them; Sluice reads with the App's installation tokens"
    if host != github_host and host not in listed_hosts:
        return (
            f"names the host {host}, which is not the GitHub host Sluice talks to ({github_host})",
            f"use a repository on {github_host}, or ask the operator to add {host} to "
            "SLUICE_ALLOWED_UPSTREAM_HOSTS",
        )
    return None


def address_refusal(
    host: str, addresses: Iterable[str], *, listed_hosts: frozenset[str], allow_private: bool
) -> tuple[str, str] | None:
    """(problem, remedy) when `host` resolves to an address Sluice must not reach for a fork."""
    internal = sorted(a for a in set(addresses) if not _is_public(a))
    if not internal or allow_private or _listed_literal(host, listed_hosts):
        return None
    return (
        f"names the host {host}, which resolves to a loopback, link-local or private address "
        f"({', '.join(internal)})",
        "ask the operator to set SLUICE_ALLOW_PRIVATE_UPSTREAMS=true if that host is meant to be reached",
    )


def _is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone (fe80::1%eth0)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def _listed_literal(host: str, listed_hosts: frozenset[str]) -> bool:
    """An IP literal the operator listed in SLUICE_ALLOWED_UPSTREAM_HOSTS is allowed even when private."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return host in listed_hosts
