"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol: what a page really shows."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM = "chromium"
START_WITHIN_S = 30.0


def chromium_path() -> str | None:
    return shutil.which(CHROMIUM)


class Page:
    """One tab: navigate, evaluate JavaScript in it, take a screenshot."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws, self._ids = ws, itertools.count(1)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self._ids)
        await self._ws.send_json({"id": call_id, "method": method, "params": params})
        async for message in self._ws:
            data = json.loads(message.data)
            if data.get("id") == call_id:
                if "error" in data:
                    raise RuntimeError(f"{method}: {data['error']}")
                return dict(data["result"])
        raise RuntimeError(f"{method}: the browser closed the connection")

    async def emulate_phone(self, *, width: int, height: int) -> None:
        """A phone's viewport (CSS pixels, 2 device pixels each, mobile layout), whatever the window is."""
        await self.call(
            "Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=2, mobile=True
        )

    async def open(self, url: str) -> None:
        await self.call("Page.enable")
        await self.call("Page.navigate", url=url)
        for _ in range(200):  # until the document has loaded (no JavaScript of the page's own to wait for)
            if await self.evaluate("document.readyState") == "complete":
                return
            await asyncio.sleep(0.05)
        raise RuntimeError(f"{url} did not load")

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def screenshot(self, path: Path) -> None:
        shot = await self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))


@contextlib.asynccontextmanager
async def browser(*, width: int, height: int) -> AsyncIterator[Page]:
    """A fresh headless Chromium with a window of width × height CSS pixels, and its first tab."""
    executable = chromium_path()
    assert executable is not None, "Debian's chromium is not installed (.ci/run installs it)"
    # Chromium's helpers (renderer, crashpad) may still be writing the profile for a moment after the
    # group is killed: a leftover file there must not fail the test that used the browser.
    with tempfile.TemporaryDirectory(prefix="sluice-chromium-", ignore_cleanup_errors=True) as profile:
        proc = await asyncio.create_subprocess_exec(
            executable,
            "--headless=new",
            "--no-sandbox",  # tests run as root in a container
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,  # its own process group, so the helpers are killed with it
        )
        try:
            port = await _devtools_port(Path(profile))
            async with aiohttp.ClientSession() as session:
                async with session.get(f"http://127.0.0.1:{port}/json/list") as resp:
                    target = next(t for t in await resp.json() if t["type"] == "page")
                async with session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                    yield Page(ws)
        finally:
            await _kill_group(proc)


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """Kill Chromium and every helper it started, and wait until they have gone (5 s at most)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    await proc.wait()
    for _ in range(100):
        if not _running_in_group(proc.pid):
            return
        await asyncio.sleep(0.05)


def _running_in_group(pgid: int) -> bool:
    """Whether a process of group pgid still runs (a zombie no one has reaped yet writes nothing)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # pid (comm) state ppid pgrp ...: comm may hold spaces, so split after its closing parenthesis
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


async def _devtools_port(profile: Path) -> int:
    """Chromium writes the port it chose (for --remote-debugging-port=0) into the profile directory."""
    marker = profile / "DevToolsActivePort"
    for _ in range(int(START_WITHIN_S / 0.05)):
        if marker.exists() and marker.read_text().strip():
            return int(marker.read_text().splitlines()[0])
        await asyncio.sleep(0.05)
    raise RuntimeError(f"chromium did not open its DevTools port within {START_WITHIN_S:g} s")
