"""Packaging a user can trust: one import name at the top of site-packages, importable from a wheel and from a
plain checkout, every package folder in the wheel, a version, a license and a py.typed marker."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("protocol", "storage", "client", "broker", "drill", "spark")
# Importing is not enough: the codec compiles its readers and writers at first use, and that generated code
# imports the protocol modules by name (once as `protocol.primitives`, which only a checkout's root resolves).
IMPORT_CHECK = "; ".join([
    "import epoch_broker, epoch_broker.broker.app, epoch_broker.drill.admin, epoch_broker.client.blocking",
    "from epoch_broker.client.connection import ClientConnection",
    "from epoch_broker.protocol.messages import metadata",
    "request = metadata.REQUEST.cls(topics=[metadata.REQUEST.MetadataRequestTopic(name='t')])",
    "ClientConnection('check').send_request(metadata.API, 12, request, True)",
    "assert metadata.REQUEST.decode(metadata.REQUEST.encode(request, 12), 12).topics[0].name == 't'",
    "print(epoch_broker.__file__)"])


def test_the_wheel_has_only_epoch_broker_at_top_level(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    project, version = wheel.name.split("-")[:2]  # pure (py3-none-any) or with the compiled scanner (cp311-...)
    assert {name.split("/")[0] for name in names} == {"epoch_broker", f"{project}-{version}.dist-info"}
    assert "epoch_broker/py.typed" in names
    assert any(name.endswith("licenses/LICENSE") for name in names)


def test_the_wheel_declares_the_pytest_plugin_and_ships_the_testing_api(wheel: Path) -> None:
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    assert {"epoch_broker/testing.py", "epoch_broker/pytest_plugin.py"} <= names
    entry_points = next(name for name in names if name.endswith(".dist-info/entry_points.txt"))
    text = archive.read(entry_points).decode()
    assert "[pytest11]" in text and "epoch_broker = epoch_broker.pytest_plugin" in text


def test_every_package_folder_is_in_the_wheel(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    folders = [init.parent.relative_to(ROOT) for layer in LAYERS if (ROOT / layer).is_dir()
               for init in (ROOT / layer).rglob("__init__.py")]
    missing = [str(f) for f in folders if f"epoch_broker/{f.as_posix()}/__init__.py" not in names]
    assert missing == [], "add them to [tool.setuptools] packages in pyproject.toml"


def test_the_installed_wheel_imports_and_runs_from_outside_the_checkout(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, timeout=300, capture_output=True)
    env = {**os.environ, "PYTHONPATH": str(target)}
    result = subprocess.run([sys.executable, "-c", IMPORT_CHECK], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=60, check=True)
    assert result.stdout.strip() == str(target / "epoch_broker" / "__init__.py")
    version = subprocess.run([sys.executable, "-m", "epoch_broker", "--version"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=60, check=True)
    assert version.stdout.strip() == f"epoch-broker {tomllib_version()}"


def test_the_installed_wheel_type_checks(wheel: Path, tmp_path: Path) -> None:
    # What users install type-checks as their own mypy sees it (py.typed, the layers under epoch_broker as the
    # wheel lays them out); tests/test_types.py checks the checkout with the project's stricter settings.
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, timeout=300, capture_output=True)
    result = subprocess.run([sys.executable, "-m", "mypy", "--ignore-missing-imports", "--cache-dir",
                             str(tmp_path / "mypy-cache"), "-p", "epoch_broker"],
                            cwd=target, capture_output=True, text=True, timeout=280)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_plain_checkout_imports_without_an_install(tmp_path: Path) -> None:
    # Python run with -I ignores the environment and user site-packages (and the editable install's finder
    # lives in site-packages: -S keeps it away too), so only the checkout's folders can answer.
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT, checkout, ignore=shutil.ignore_patterns(".venv", ".git", "node_modules", "tests", "bench"))
    code = f"import sys; sys.path[:0] = [{str(checkout)!r}] + {sys.path[1:]!r}; " + IMPORT_CHECK
    result = subprocess.run([sys.executable, "-I", "-S", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(checkout / "epoch_broker" / "__init__.py")


def test_a_test_folder_cannot_shadow_a_product_package() -> None:
    # tests/ is a package, so tests/broker is `tests.broker`, never `broker`; no bare `broker` exists to shadow
    assert (ROOT / "tests" / "__init__.py").is_file()
    assert all((folder / "__init__.py").is_file() for folder in (ROOT / "tests").iterdir()
               if folder.is_dir() and any(folder.glob("test_*.py")))


def test_the_console_script_reports_the_version() -> None:
    script = Path(sys.executable).with_name("epoch-broker")
    result = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == f"epoch-broker {tomllib_version()}"


def tomllib_version() -> str:
    """The version the build takes (pyproject's dynamic attr), read without importing the package."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["dynamic"] == ["version"]
    text = (ROOT / "epoch_broker" / "__init__.py").read_text()
    return text.split('__version__ = "', 1)[1].split('"', 1)[0]


def test_the_docker_build_context_lets_in_everything_the_build_needs() -> None:
    """.dockerignore is an allow-list: every folder the package is built from, the files the build reads, and a
    wheelhouse (tests/shipped/test_docker.py builds the image for real)."""
    allowed = {line[1:] for line in (ROOT / ".dockerignore").read_text().splitlines() if line.startswith("!")}
    needed = {"epoch_broker", *(layer for layer in LAYERS if (ROOT / layer).is_dir())}
    assert needed | {"pyproject.toml", "setup.py", "README.md", "LICENSE", "wheelhouse"} == allowed
