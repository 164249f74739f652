"""Every writer goes through kit.core.atomicwrite (issue 53, line 6).

A full disk (a real tmpfs filled up, root only), permission denied, a name too long for the
file system and a read-only target give one paragraph naming the file, exit 1, no traceback,
no temp file left behind and the previous file unchanged -- for ``fit -o``, ``validate``,
``report -o``, ``export -o``, ``plan -o``, ``diff -o`` and ``compare -o``.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kit.cli import main
from kit.core import atomicwrite
from kit.core.atomicwrite import OutputError, replacing, write_text
from kit.data.ingest import ingest
from kit.fit import synth
from kit.fit.fitting import FitOptions, fit_series
from kit.model.io import write_model
from tests.conftest import small_tmpfs

REPO = Path(__file__).resolve().parent.parent
SETTINGS = {"deadline": None, "database": None, "derandomize": True,
            "suppress_health_check": list(HealthCheck)}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A small dataset (one synthetic series), a valid model file and a campaign."""
    root = tmp_path_factory.mktemp("writers")
    truth = synth.Truth([synth.TrueRegime(1, "linear", {"a": 5e-6, "b": 1e-9},
                                          synth.TrueNoise("lognormal", 0.05))])
    (root / "in").mkdir()
    for seed, transport in ((3, "tcp"), (4, "shm")):
        size, time = synth.sample(truth, 600, 1, 2**20, seed=seed)
        csv = root / "in" / f"{transport}.csv"
        csv.write_text("size,duration\n" + "".join(f"{int(s)},{t:.9e}\n"
                                                   for s, t in zip(size, time, strict=True)))
        ingest([csv], root / "ds", campaign="c", transport=transport)
    opts = FitOptions(validate=False, intervals=False)
    model = write_model(fit_series(root / "ds", {"transport": "tcp"}, opts).fitted,
                        root / "m.json")
    campaign = root / "c.yaml"
    campaign.write_text("name: w\nmpi: openmpi\ntransports: [shm]\nlauncher: mpirun\n"
                        "tools:\n  - tool: probe\n    samples: 10\n")
    return {"ds": root / "ds", "model": model, "campaign": campaign}


#: command line of each writer; OUT is the output path inside the place under test.
WRITERS = {
    "fit": ["fit", "{ds}", "--series", "transport=tcp", "--no-intervals", "--no-validate",
            "-o", "{out}.json"],
    "validate": ["validate", "{model}", "-o", "{out}.json"],
    "report": ["report", "{model}", "-o", "{out}"],
    "export": ["export", "{model}", "--simgrid", "-o", "{out}"],
    "plan": ["plan", "{campaign}", "-o", "{out}"],
    "diff": ["diff", "{ds}#transport=tcp", "{ds}#transport=shm", "--bootstrap", "20",
             "-o", "{out}"],
    "compare": ["compare", "{ds}", "--by", "transport", "-o", "{out}"],
}


def _argv(name: str, inputs: dict[str, Path], out: Path) -> list[str]:
    return [a.format(out=out, **inputs) for a in WRITERS[name]]


def _pt2pt(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PT2PT_PROBE": "/bin/true",
           "PT2PT_SITE_CONFIG": "/nonexistent/site.yaml"}
    return subprocess.run([sys.executable, "-m", "kit", *argv], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=600)


def _leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if atomicwrite.TMP_SUFFIX in p.name]


@pytest.fixture
def full_fs(tmp_path: Path) -> Iterator[Path]:
    """A real 4 MiB tmpfs with no space left, unmounted afterwards (root only)."""
    with small_tmpfs(tmp_path, "4m") as mnt:
        for name in ("fit", "validate", "report", "export", "plan", "diff", "compare"):
            (mnt / f"{name}-dir").mkdir()  # folders made while there was room
        with open(mnt / "ballast", "wb") as fh, pytest.raises(OSError):
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        yield mnt


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_disk_full_is_one_paragraph_and_leaves_no_temp_file(name: str, full_fs: Path,
                                                           inputs: dict[str, Path]) -> None:
    out = full_fs / f"{name}-dir" / "out"
    res = _pt2pt(_argv(name, inputs, out))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    text = " ".join(res.stderr.split())
    assert "no space left on the device (ENOSPC)" in text, text
    assert text.count("pt2pt: error:") == 1
    assert _leftovers(full_fs) == []
    if name == "plan":  # no half plan someone could submit
        assert not out.exists() or not (out / "manifest.json").exists()


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_name_too_long_is_one_paragraph(name: str, tmp_path: Path, inputs: dict[str, Path],
                                        monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PT2PT_PROBE", "/bin/true")
    monkeypatch.setenv("PT2PT_SITE_CONFIG", str(tmp_path / "no-site.yaml"))
    out = tmp_path / ("x" * 300)
    assert main(_argv(name, inputs, out)) == 1
    err = capsys.readouterr().err
    assert "ENAMETOOLONG" in err and str(tmp_path) in err
    assert _leftovers(tmp_path) == []


def test_validate_never_rewrites_a_read_only_model(tmp_path: Path,
                                                 inputs: dict[str, Path]) -> None:
    model = tmp_path / "ro.json"
    model.write_bytes(inputs["model"].read_bytes())
    model.chmod(0o444)
    before = model.read_bytes()
    res = _pt2pt(["validate", str(model)])
    assert res.returncode == 1 and "read-only" in res.stderr and "Traceback" not in res.stderr
    assert model.read_bytes() == before and stat.S_IMODE(model.stat().st_mode) == 0o444


def test_permission_denied_in_process(tmp_path: Path, inputs: dict[str, Path],
                                      monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Root ignores file modes, so EACCES is raised where a user meets it: the rename."""
    def denied(*_a: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(atomicwrite.os, "replace", denied)
    out = tmp_path / "exp"
    assert main(["export", str(inputs["model"]), "--simgrid", "-o", str(out)]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "permission denied (EACCES)" in err and str(out) in err
    assert _leftovers(tmp_path) == []


def test_replacing_keeps_the_mode_and_the_old_file_on_error(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    write_text(path, "one")
    path.chmod(0o640)
    write_text(path, "two")
    assert path.read_text() == "two" and stat.S_IMODE(path.stat().st_mode) == 0o640
    with pytest.raises(RuntimeError), replacing(path) as tmp:
        tmp.write_text("half")
        raise RuntimeError("writer failed")
    assert path.read_text() == "two" and _leftovers(tmp_path) == []


def test_a_file_in_the_way_of_a_folder(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutputError, match="not a folder"):
        write_text(tmp_path / "f" / "g.txt", "y")


@settings(max_examples=40, **SETTINGS)
@given(st.sampled_from([errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS,
                        errno.ENAMETOOLONG, errno.EIO]),
       st.sampled_from(["open", "write", "replace"]), st.binary(max_size=64))
def test_any_write_failure_leaves_the_old_file_and_no_temp(code: int, where: str,
                                                           data: bytes) -> None:
    """A failure at any step of any write: the old bytes stay, no temp file, and a storage
    error is an OutputError naming the file (others propagate unchanged)."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "out.bin"
        path.write_bytes(b"old")
        failure = OSError(code, os.strerror(code))
        real_replace = os.replace
        try:
            with replacing(path) as tmp:
                if where == "open":
                    raise failure
                tmp.write_bytes(data)
                if where == "write":
                    raise failure
                atomicwrite.os.replace = lambda *_a: (_ for _ in ()).throw(failure)  # type: ignore[assignment]
        except OutputError as err:
            assert atomicwrite.is_storage_error(failure) and str(path) in err.paragraph()
        except OSError as err:
            assert err is failure and not atomicwrite.is_storage_error(failure)
        finally:
            atomicwrite.os.replace = real_replace  # type: ignore[assignment]
        assert path.read_bytes() == b"old"
        assert sorted(p.name for p in Path(folder).iterdir()) == ["out.bin"]


def test_a_figure_is_saved_whole_or_not_at_all_and_always_closed(tmp_path: Path) -> None:
    """save_png (every PNG the kit writes: report, cluster heat maps, compare, diff): the
    picture replaces the old one in one step, a full disk is an OutputError that leaves the
    old picture and no temp file, and the figure is closed either way."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kit.core.atomicwrite import save_png

    path = tmp_path / "f.png"
    fig, _ = plt.subplots()
    assert save_png(fig, path, dpi=50) == path
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not plt.fignum_exists(fig.number)
    old = path.read_bytes()
    fig, _ = plt.subplots()
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    fig.savefig = lambda *_a, **_k: (_ for _ in ()).throw(full)  # type: ignore[method-assign]
    with pytest.raises(OutputError) as err:
        save_png(fig, path, dpi=50)
    assert str(path) in err.value.paragraph() and not plt.fignum_exists(fig.number)
    assert path.read_bytes() == old and _leftovers(tmp_path) == []
