"""The environment fingerprint of a tier report: GPU, driver, toolchain, library versions, CPU and OS."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import platform
import shutil
import subprocess
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runners.report import Environment

log = logging.getLogger(__name__)

NVIDIA_SMI_TIMEOUT = 10.0
# Momentary clocks move with load and power state (an idle GPU reads a few hundred MHz), so they are
# recorded but left out of the context hash; the application clocks are what someone locking clocks sets.
MOMENTARY_CLOCKS = ("sm_mhz", "mem_mhz")
_QUERIES: tuple[tuple[str, ...], ...] = (
    ("name", "driver_version", "clocks.sm", "clocks.mem", "clocks.applications.graphics",
     "clocks.applications.memory"),
    ("name", "driver_version", "clocks.sm", "clocks.mem"),
)  # fmt: skip
_CLOCK_KEYS = {
    "clocks.sm": "sm_mhz",
    "clocks.mem": "mem_mhz",
    "clocks.applications.graphics": "app_sm_mhz",
    "clocks.applications.memory": "app_mem_mhz",
}


@dataclass(frozen=True)
class GpuInfo:
    model: str | None = None
    count: int = 0
    driver: str | None = None
    clocks: dict[str, str] | None = None


def fingerprint(*, interpreter: bool) -> Environment:
    """This machine's fingerprint. Reading the GPU never fails the run: what cannot be read stays empty. The
    tree under test is the job's working directory: a Triton built from it is told apart."""
    gpu = query_nvidia_smi() or _torch_gpu()
    fields: dict[str, Any] = {
        "gpu_model": gpu.model,
        "gpu_count": gpu.count,
        "driver": gpu.driver,
        "cuda": _torch_toolkit(),
        "clocks": gpu.clocks or {},
        "triton": _version("triton"),
        "triton_origin": origin("triton", Path.cwd()),
        "torch": _version("torch"),
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "os": platform.platform(),
        "interpreter": interpreter,
    }
    return Environment(**fields, context_hash=context_hash(fields))


def context_hash(fields: dict[str, Any]) -> str:
    """sha256 over the canonical JSON of the fingerprint's context (`context_fields`)."""
    canonical = json.dumps(context_fields(fields), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def context_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """What the context hash covers: the fingerprint less the momentary clocks. A Triton built from the tree
    under test is what a comparison measures, not where it ran: its version (`3.5.0+git1a2b3c4d`, a new one
    on every commit) is left out, its origin kept. An installed Triton's origin is left out, so a
    fingerprint hashes as it did before reports recorded origins."""
    stable = dict(fields)
    stable.pop("context_hash", None)
    if stable.get("triton_origin") == "checkout":
        stable.pop("triton", None)
    else:
        stable.pop("triton_origin", None)
    stable["clocks"] = {k: v for k, v in (fields.get("clocks") or {}).items() if k not in MOMENTARY_CLOCKS}
    return stable


def query_nvidia_smi(
    executable: str = "nvidia-smi", *, timeout: float = NVIDIA_SMI_TIMEOUT
) -> GpuInfo | None:
    """What `nvidia-smi` says about the GPUs; None when it is missing, fails, hangs or says nothing."""
    path = shutil.which(executable)
    if path is None:
        return None
    for fields in _QUERIES:  # the first asks for fields an older nvidia-smi may not know
        argv = [path, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        except (OSError, subprocess.SubprocessError) as err:  # a hung tool is not asked twice
            log.warning("%s: %s", executable, err)
            return None
        lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
        if done.returncode == 0 and lines:
            return _parse_gpus(fields, lines)
    return None


def _parse_gpus(fields: tuple[str, ...], lines: list[str]) -> GpuInfo:
    rows = [dict(zip(fields, (cell.strip() for cell in line.split(",")), strict=False)) for line in lines]
    first = rows[0]
    models = list(dict.fromkeys(row.get("name", "") for row in rows if row.get("name")))
    clocks = {
        _CLOCK_KEYS[field]: value.removesuffix(" MHz")
        for field, value in first.items()
        if field in _CLOCK_KEYS and _readable(value)
    }
    driver = first.get("driver_version")
    return GpuInfo(
        model=" + ".join(models) or None,
        count=len(rows),
        driver=driver if driver and _readable(driver) else None,
        clocks=clocks,
    )


def _readable(value: str) -> bool:
    return bool(value) and not value.startswith("[") and value not in ("N/A", "Not Supported")


def _torch_gpu() -> GpuInfo:
    """The GPUs torch sees, for machines without nvidia-smi (ROCm, containers without the tool)."""
    try:
        import torch

        if not torch.cuda.is_available():
            return GpuInfo()
        return GpuInfo(model=str(torch.cuda.get_device_name(0)), count=int(torch.cuda.device_count()))
    except Exception as err:  # a broken driver must not fail the run
        log.warning("cannot read the GPU through torch: %s", err)
        return GpuInfo()


def _torch_toolkit() -> str | None:
    """The CUDA (or ROCm) version torch was built against."""
    try:
        import torch

        cuda = torch.version.cuda
        hip = getattr(torch.version, "hip", None)
    except Exception:
        return None
    if cuda:
        return str(cuda)
    return f"hip {hip}" if hip else None


def origin(distribution: str, checkout: Path) -> str | None:
    """ "checkout" when the `distribution` this process imports was built from `checkout` (or a folder in
    it): its module lives there (an editable install), or pip's record of a regular install (PEP 610's
    direct_url.json) names it; "installed" when it came from elsewhere (an index, a wheel); None when it is
    not installed."""
    try:
        found = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    tree = checkout.resolve()
    module = _module_file(distribution)
    if module is not None and _within(module, tree):
        return "checkout"
    built, editable = _built_from(found)
    return "checkout" if built is not None and _within(built, tree) and not editable else "installed"


def editable_elsewhere(distribution: str, checkout: Path) -> bool:
    """Whether `distribution` was installed editable from `checkout` (`pip install -e`) while this process
    imports another copy of it (or none): an editable install is wired up when Python starts, so a build
    that made one after the runner started left the runner's suites the old Triton."""
    try:
        found = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    built, editable = _built_from(found)
    tree = checkout.resolve()
    if built is None or not editable or not _within(built, tree):
        return False
    module = _module_file(distribution)
    return module is None or not _within(module, tree)


def _built_from(found: importlib.metadata.Distribution) -> tuple[Path | None, bool]:
    """The local folder pip installed `found` from, and whether as an editable install; (None, False) when
    it came from elsewhere or its record is unreadable."""
    try:
        record = json.loads(found.read_text("direct_url.json") or "{}")
        url, editable = record.get("url", ""), bool((record.get("dir_info") or {}).get("editable"))
    except (ValueError, AttributeError):  # a malformed record is no local build
        return None, False
    parsed = urllib.parse.urlsplit(url if isinstance(url, str) else "")
    if parsed.scheme != "file":
        return None, False
    return Path(urllib.request.url2pathname(parsed.path)).resolve(), editable


def _module_file(name: str) -> Path | None:
    """Where `import name` would load it from (its package's `__init__.py`), without importing it; None
    when that is an installed copy (in a `site-packages`, which may sit in the checkout: a `.venv` there)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    found = Path(spec.origin).resolve()
    return None if {"site-packages", "dist-packages"} & set(found.parts) else found


def _within(path: Path, tree: Path) -> bool:
    return path == tree or tree in path.parents


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"
