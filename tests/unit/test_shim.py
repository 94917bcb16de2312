"""Issue 34, point 1: after `make setup`, `loadmgr` typed in any terminal runs this checkout's CLI.

scripts/install-shim.sh puts a small shim into a writable directory on PATH; the shim runs the nearest
checkout's .venv/bin/loadmgr (else the installing one's), and a foreign `loadmgr` is never replaced."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "scripts" / "install-shim.sh"


def _env(bin_dir: Path, home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LOADMGR_NO_SHIM", "LOADMGR_HOME")}
    env.update(PATH=f"{bin_dir}:/usr/bin:/bin", HOME=str(home), LOADMGR_SHIM_DIR=str(bin_dir), **extra)
    return env


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "loadmgr").exists(), reason="needs make setup's venv")
def test_the_shim_runs_the_checkouts_cli_from_anywhere(tmp_path: Path) -> None:
    bin_dir, home = tmp_path / "bin", tmp_path / "home"
    bin_dir.mkdir()
    home.mkdir()
    done = subprocess.run(["bash", str(INSTALL)], env=_env(bin_dir, home), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"'loadmgr' is on PATH ({bin_dir}/loadmgr" in done.stdout
    shim = bin_dir / "loadmgr"
    assert os.access(shim, os.X_OK) and str(ROOT) in shim.read_text()
    # From a directory outside any checkout, the installing checkout's CLI answers.
    ran = subprocess.run(
        ["loadmgr", "--help"], env=_env(bin_dir, home), cwd=tmp_path, capture_output=True, text=True
    )
    assert ran.returncode == 0 and "usage: loadmgr" in ran.stdout, ran.stderr
    # A foreign loadmgr is left alone, and said so.
    shim.write_text("#!/bin/sh\necho someone else's\n")
    again = subprocess.run(["bash", str(INSTALL)], env=_env(bin_dir, home), capture_output=True, text=True)
    assert "is not loadmgr's shim: left alone" in again.stdout
    assert shim.read_text() == "#!/bin/sh\necho someone else's\n"


def test_no_writable_directory_on_path_says_what_to_type(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = _env(tmp_path / "missing", home)
    env["PATH"] = "/usr/bin:/bin" if os.geteuid() != 0 else "/nonexistent:/usr/bin:/bin"
    env.pop("LOADMGR_SHIM_DIR")
    if os.access("/usr/local/bin", os.W_OK) and ":/usr/local/bin:" in f":{env['PATH']}:":
        pytest.skip("/usr/local/bin is on PATH and writable here")
    done = subprocess.run(["bash", str(INSTALL)], env=env, capture_output=True, text=True)
    assert done.returncode == 0
    assert ".venv/bin/loadmgr" in done.stdout and "source .venv/bin/activate" in done.stdout
    skipped = subprocess.run(
        ["bash", str(INSTALL)], env={**env, "LOADMGR_NO_SHIM": "1"}, capture_output=True, text=True
    )
    assert "no shim installed" in skipped.stdout
