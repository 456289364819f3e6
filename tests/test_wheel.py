"""The built wheel is self-sufficient: installed into a fresh environment with pip (and with uvx),
with nothing from this checkout, it serves MCP over stdio to the official client."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_helpers import TIMEOUT_S
from mcp_types import TextContent

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

ROOT = Path(__file__).resolve().parents[1]
INSTALL_TIMEOUT_S = 900


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(ROOT)],
        check=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    (built,) = out.glob("memento_server-*.whl")
    return built


def test_the_wheel_carries_its_license_types_and_migrations(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "memento/py.typed" in names
    assert "memento/storage/migrations/sqlite/0004_shared_record.sql" in names
    assert "memento/storage/migrations/postgres/0004_shared_record.sql" in names
    # The dashboard ships whole in the package (no CDN): its page, scripts, styles and vendored library.
    assert {"memento/ui/static/index.html", "memento/ui/static/app.js", "memento/ui/static/app.css"} <= set(names)
    assert {"memento/ui/static/cytoscape.esm.min.js", "memento/ui/static/cytoscape.LICENSE.txt"} <= set(names)
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    assert "Name: memento-server" in text and "License-Expression: MIT" in text
    entry = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "memento = memento.cli:main" in entry and "memento-server = memento.cli:main" in entry


async def exercise(params: StdioServerParameters) -> None:
    async with Client(params, read_timeout_seconds=TIMEOUT_S * 4) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"remember", "recall", "memory_stats"} <= names
        stored = await client.call_tool("remember", {"content": "the wheel installs alone", "topic": "setup", "type": "fact"})
        assert not stored.is_error
        found = await client.call_tool("recall", {"text": "wheel installs"})
        assert not found.is_error and isinstance(found.content[0], TextContent)
        assert json.loads(found.content[0].text)["fragments"][0]["content"] == "the wheel installs alone"


def clean_env(tmp_path: Path) -> dict[str, str]:
    """No PYTHONPATH or virtualenv of the test run leaks into the installed server."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'store.db'}", EMBEDDING_PROVIDER="hash", HOME=str(tmp_path / "home"))
    return env


async def test_pip_install_of_the_wheel_serves_stdio(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(target)
    python = target / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)],
        check=True,
        timeout=INSTALL_TIMEOUT_S,
        cwd=tmp_path,
        env=clean_env(tmp_path),
    )
    version = subprocess.run([str(target / "bin" / "memento"), "--version"], capture_output=True, text=True, check=True, timeout=60)
    assert version.stdout.startswith("memento ")
    await exercise(
        StdioServerParameters(command=str(target / "bin" / "memento"), args=["serve", "--transport", "stdio"], env=clean_env(tmp_path))
    )


async def test_uvx_runs_the_wheel_over_stdio(wheel: Path, tmp_path: Path) -> None:
    uvx = shutil.which("uvx") or str(Path(sys.executable).parent / "uvx")
    if not Path(uvx).exists():
        pytest.skip("uvx not installed (the test extra installs uv)")
    env = clean_env(tmp_path) | {"UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_TOOL_DIR": str(tmp_path / "uv-tools")}
    # The first run installs the dependencies; do it before the client starts its timers.
    first = subprocess.run(
        [uvx, "--from", str(wheel), "memento-server", "--version"], capture_output=True, text=True, env=env, timeout=INSTALL_TIMEOUT_S
    )
    assert first.returncode == 0 and first.stdout.startswith("memento "), first.stderr[-2000:]
    await exercise(
        StdioServerParameters(command=uvx, args=["--from", str(wheel), "memento-server", "serve", "--transport", "stdio"], env=env)
    )
