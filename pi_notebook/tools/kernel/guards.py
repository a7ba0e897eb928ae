"""Kernel hooks that must behave differently while agent code runs (inside a capture).

Installed and removed by ``capture.install_capture`` / ``uninstall_capture``; each hook asks
``current()`` (the open capture of the calling context, or None) and behaves as before for
everything else:

- ``shell.ask_exit`` (what IPython's ``exit``/``quit`` call) raises ``SystemExit`` instead,
  so agent code cannot shut the user's kernel down; the tool reports it as an error.
- ``input()`` / ``getpass.getpass()`` (``builtins`` while idle, ``kernel.raw_input`` /
  ``kernel.getpass`` that ipykernel installs per request) raise ``StdinNotImplementedError``
  with a clear message: nobody can answer agent code, and from a worker thread during a
  user's request ipykernel would ask the user in the wrong cell.
- The two figure callbacks of ``post_execute`` are skipped by requests that end while
  ``hold_figure_flush()`` is held (agent code is running, from its first statement until its
  figures are closed):
  * matplotlib-inline's ``flush_figures`` displays and closes *all* open figures of the
    current request: a half-made agent figure would land in the user's cell;
  * pyplot's ``_draw_all_if_interactive`` draws every *stale* figure, on the kernel's main
    thread: agent code making 1,000 pyplot figures kept every request (a ``%agent status``,
    a widget's request) busy drawing all of them, 32 s without an answer. The agent's
    figures are drawn (at most ``max_figures``, off the loop) or closed undrawn by the tool.
  matplotlib keeps its "draw pending" and "stale" flags, so the user's own figures are drawn
  and shown after the next request.
- ``shell._showtraceback`` (called when a display formatter raises, e.g. a broken
  ``_repr_html_``; ipykernel publishes an ``error`` message in whatever cell is current)
  writes the traceback to the capture's stderr instead.
- A display formatter for ``FIGURE_TEXT_MIME`` (added to ``shell.display_formatter``, after
  the image formatters): a matplotlib figure that agent code shows itself (``plt.show()``
  with the inline backend, ``display(fig)``, ``fig`` as the last value) carries its words
  (``output/figure_text.py``) beside the image, read right after an image formatter drew it;
  never for a figure no image formatter drew (no second draw), never in the user's cells.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..output.figure_text import FIGURE_TEXT_MIME, figure_text
from .kernel_host import kernel_host
from .patches import PATCHES, Patch

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

__all__ = [
    "DISPLAY_ERROR_NOTE",
    "EXIT_REFUSED",
    "INPUT_REFUSED",
    "hold_figure_flush",
    "install_guards",
    "uninstall_guards",
]


class _Guards:
    def __init__(self) -> None:
        self.current: Callable[[], Any] = lambda: None
        self.patches: list[Patch] = []  # in PATCHES too; undone by uninstall_guards


_guards = _Guards()


def _current_capture() -> Any:
    return _guards.current()


def _patch(owner: object, name: str, replacement: Callable[..., Any], why: str) -> None:
    _guards.patches.append(PATCHES.apply(owner, name, replacement, why))


def install_guards(shell: InteractiveShell, current: Callable[[], Any]) -> None:
    """Install every hook on ``shell`` (``current()``: the open capture of the caller)."""
    _guards.current = current
    _install_exit_guard(shell)
    _install_flush_guard(shell)
    _install_input_guards(shell)
    _install_traceback_guard(shell)
    _install_figure_words(shell)


def uninstall_guards(shell: InteractiveShell | None = None) -> None:
    """Remove what :func:`install_guards` installed (hooks replaced since are left alone:
    they pass through once no capture is open)."""
    for patch in reversed(_guards.patches):
        PATCHES.undo(patch)
    _guards.__init__()  # type: ignore[misc]  # reset in place: importers hold this object


DISPLAY_ERROR_NOTE = "Error while formatting a value for display:\n"


def _install_traceback_guard(shell: InteractiveShell) -> None:
    orig = getattr(shell, "_showtraceback", None)
    if orig is None:
        return

    def showtraceback(etype: Any, evalue: Any, stb: Any, *args: Any, **kwargs: Any) -> Any:
        cap = _current_capture()
        if cap is None:
            return orig(etype, evalue, stb, *args, **kwargs)
        from ..output.format import strip_ansi

        text = "\n".join(stb) if isinstance(stb, (list, tuple)) else str(stb)
        cap.write("stderr", DISPLAY_ERROR_NOTE + strip_ansi(text) + "\n")
        return None

    _patch(shell, "_showtraceback", showtraceback,
           "a display formatter that raises in agent code reports to the tool's stderr, not the user's cell")


EXIT_REFUSED = "exit() is not available to agent code: the user's kernel keeps running"


def _install_exit_guard(shell: InteractiveShell) -> None:
    orig = getattr(shell, "ask_exit", None)
    if orig is None:
        return

    def ask_exit(*args: Any, **kwargs: Any) -> Any:
        if _current_capture() is not None:
            raise SystemExit(EXIT_REFUSED)
        return orig(*args, **kwargs)

    _patch(shell, "ask_exit", ask_exit, "exit()/quit() in agent code must not shut the user's kernel down")


INPUT_REFUSED = ("input() is not available to agent code: nobody can answer it. "
                 "Ask the user in your reply instead.")


def _refusing(orig: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if _current_capture() is not None:
            from IPython.core.error import StdinNotImplementedError

            raise StdinNotImplementedError(INPUT_REFUSED)
        return orig(*args, **kwargs)

    return guarded


def _install_input_guards(shell: InteractiveShell) -> None:
    import builtins
    import getpass

    targets: list[tuple[Any, str]] = [(builtins, "input"), (getpass, "getpass")]
    kernel = kernel_host(shell).kernel
    if kernel is not None:
        targets += [(kernel, name) for name in ("raw_input", "getpass") if hasattr(kernel, name)]
    for owner, name in targets:
        # on the kernel: an instance attribute shadows the method (ipykernel may replace it
        # mid-request; the guard then passes through)
        _patch(owner, name, _refusing(getattr(owner, name)),
               "input()/getpass() in agent code: nobody can answer it, so it fails at once")


_flush_holds = 0
_flush_holds_lock = threading.Lock()


@contextmanager
def hold_figure_flush() -> Iterator[None]:
    """While held, requests that end skip the figure callbacks (module docstring)."""
    global _flush_holds
    with _flush_holds_lock:
        _flush_holds += 1
    try:
        yield
    finally:
        with _flush_holds_lock:
            _flush_holds -= 1


# (callback name, a part of its module's name): see the module docstring.
_FIGURE_CALLBACKS = (("flush_figures", "matplotlib_inline"), ("_draw_all_if_interactive", "matplotlib"))


def _is_figure_flush(fn: Any) -> bool:
    name = getattr(fn, "__name__", "")
    module = getattr(fn, "__module__", "") or ""
    return any(name == n and part in module for n, part in _FIGURE_CALLBACKS)


def _install_flush_guard(shell: InteractiveShell) -> None:
    events: Any = getattr(shell, "events", None)
    orig = getattr(events, "trigger", None)
    if orig is None:
        return

    def trigger(event: str, *args: Any, **kwargs: Any) -> Any:
        callbacks = events.callbacks.get(event) if event == "post_execute" and _flush_holds else None
        if not callbacks or not any(_is_figure_flush(f) for f in callbacks):
            return orig(event, *args, **kwargs)
        # Run the others; the list object stays in place (register/unregister keep working).
        kept = [f for f in callbacks if not _is_figure_flush(f)]
        saved = list(callbacks)
        callbacks[:] = kept
        try:
            return orig(event, *args, **kwargs)
        finally:
            added = [f for f in callbacks if f not in kept]  # registered meanwhile
            removed = [f for f in kept if f not in callbacks]
            callbacks[:] = [f for f in saved if f not in removed] + added

    _patch(events, "trigger", trigger,
           "figure callbacks of post_execute skip requests that end while agent code makes figures")


# The formatters that draw a figure to show it: one of them ran before the words are read.
_DRAWING_MIMES = ("image/png", "image/jpeg", "image/svg+xml", "application/pdf")


def _drawn_by(formatters: dict[str, Any], fig: Any) -> bool:
    for mime in _DRAWING_MIMES:
        formatter = formatters.get(mime)
        if formatter is None or not getattr(formatter, "enabled", False):
            continue
        try:
            formatter.lookup(fig)
        except (KeyError, AttributeError):
            continue
        return True
    return False


def _is_figure(obj: Any) -> bool:
    """A matplotlib Figure (or a subclass), told by its class's name: matplotlib stays unimported."""
    return any(getattr(cls, "__module__", "") == "matplotlib.figure" and cls.__name__ == "Figure"
               for cls in type(obj).__mro__)


def _install_figure_words(shell: InteractiveShell) -> None:
    display_formatter: Any = getattr(shell, "display_formatter", None)
    found = getattr(display_formatter, "formatters", None)
    if not isinstance(found, dict) or FIGURE_TEXT_MIME in found:
        return
    formatters: dict[str, Any] = found
    from IPython.core.formatters import BaseFormatter
    from traitlets import Unicode

    class FigureWordsFormatter(BaseFormatter):
        """Not by a registered printer: IPython's ``select_figure_formats`` (the inline backend
        on pyplot's import) takes the Figure printer out of every formatter."""

        format_type = Unicode(FIGURE_TEXT_MIME)
        _return_type = str

        def __call__(self, obj: Any) -> str | None:
            if not self.enabled or _current_capture() is None or not _is_figure(obj):
                return None
            try:
                if not _drawn_by(formatters, obj):
                    return None
                return figure_text(obj) or None
            except Exception:  # the figure is shown without its words
                return None

    formatter = FigureWordsFormatter(parent=display_formatter)
    formatters[FIGURE_TEXT_MIME] = formatter  # last: the image formatters draw first

    def remove() -> None:
        if formatters.get(FIGURE_TEXT_MIME) is formatter:
            del formatters[FIGURE_TEXT_MIME]

    _guards.patches.append(PATCHES.record(
        display_formatter, f"formatters[{FIGURE_TEXT_MIME!r}]", None, formatter,
        "a figure agent code shows carries its words for the model (never in the user's cells)",
        restore=remove))
