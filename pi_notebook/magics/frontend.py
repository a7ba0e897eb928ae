"""Is a widget frontend really showing this kernel's output? And closing views at shutdown.

Interactivity (can someone click approval buttons? should ``%%agent`` return at once?) is
decided from evidence that a frontend renders widgets, never from environment variables:
a kernel started by nbclient/papermill from inside a notebook inherits ``JPY_SESSION_NAME``
and would look interactive. The evidence (see docs/design/waiting.md):

- ipywidgets' ``jupyter.widget.control`` comm is open (JupyterLab/Notebook open it on
  connect when ipywidgets is already imported);
- a view we displayed was rendered: its root widget carries ``_view_count = 0`` and every
  frontend view of it adds one (ipywidgets' view-count protocol, sent back on the comm).

The evidence is sticky for the kernel's lifetime: a frontend that rendered one view renders
the next one too.

The opposite evidence, *no* widget frontend (:func:`is_headless`), comes from the request
itself: a client that sent the cell with ``allow_stdin = False`` cannot answer ``input()``,
so nobody sits at it. nbclient (so ``jupyter execute``, papermill, ``nbconvert --execute``)
does that; JupyterLab, Notebook 7 and VS Code allow stdin. A run for such a client creates
no widget at all: nbclient stores every widget model it sees in the saved notebook.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..tools.kernel.kernel_host import kernel_host
from ..tools.kernel.patches import PATCHES, Patch

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

__all__ = ["has_widget_frontend", "is_headless", "frontend_seen", "track_view", "view_rendered", "count_new_views",
           "close_views", "install_shutdown_close", "uninstall_shutdown_close", "shutdown_requested"]

# an ipywidgets Widget: ipywidgets ships no types; here its view-count trait is set and read
# and its models closed (tests/magics/test_no_any.py lists it)
ForeignWidget = Any

_tracked: weakref.WeakSet[ForeignWidget] = weakref.WeakSet()
_seen = False
_counting = False
_construction_patch: Patch | None = None  # ipywidgets' construction callback, once replaced


def has_widget_frontend(shell: InteractiveShell) -> bool:
    """Does a widget-rendering frontend show this kernel's output (evidence so far)?"""
    if not kernel_host(shell).has_kernel:
        return False
    return frontend_seen()


def is_headless(shell: InteractiveShell) -> bool:
    """Is the cell running now from a client nobody sits at (module docstring)? False in
    terminal IPython (it has its own text view) and once a widget frontend was seen."""
    host = kernel_host(shell)
    if not host.has_kernel or frontend_seen():
        return False
    return host.request_allows_stdin() is False


def frontend_seen() -> bool:
    global _seen
    if not _seen and (_control_comm_open() or any(_rendered(w) for w in list(_tracked))):
        _seen = True
    return _seen


def track_view(widget: ForeignWidget) -> None:
    """Ask the frontend to count the views of ``widget`` (a ``_view_count`` of None means
    "do not track"). Best set before the widget is displayed; set just after, the count
    arrives as long as the update reaches the frontend before the view is shown."""
    if widget is None or not hasattr(widget, "_view_count"):
        return
    if widget._view_count is None:
        widget._view_count = 0
    _tracked.add(widget)


def count_new_views(on: bool) -> None:
    """While on, every widget constructed asks the frontend to count its views.

    ipywidgets calls its construction callback before the widget's comm opens, so the count
    is part of the widget's first state and the frontend sees it before any view exists
    (set after ``display``, a view may already be shown uncounted)."""
    global _counting, _construction_patch
    _counting = on
    if not on or _construction_patch is not None:
        return
    import ipywidgets

    widget_class = ipywidgets.Widget
    previous = widget_class._widget_construction_callback

    def constructed(widget: object) -> None:
        if _counting:
            track_view(widget)
        if callable(previous):
            previous(widget)

    widget_class.on_widget_constructed(constructed)
    _construction_patch = PATCHES.record(
        widget_class, "_widget_construction_callback", previous, constructed,
        "a view shown by a blocking cell reports when a frontend renders it",
        restore=lambda: widget_class.on_widget_constructed(previous))


def stop_counting_views() -> None:
    """Put back the construction callback found at install (extension unload)."""
    global _counting, _construction_patch
    _counting = False
    patch, _construction_patch = _construction_patch, None
    PATCHES.undo(patch)


def view_rendered(widget: ForeignWidget) -> bool:
    """Has a frontend shown ``widget``? (Also records the evidence.)"""
    rendered = _rendered(widget)
    if rendered:
        frontend_seen()
    return rendered


def _rendered(widget: ForeignWidget) -> bool:
    count = getattr(widget, "_view_count", None)
    return isinstance(count, int) and count > 0


def _control_comm_open() -> bool:
    widget_module = sys.modules.get("ipywidgets.widgets.widget")
    widget_class = getattr(widget_module, "Widget", None) if widget_module is not None else None
    return getattr(widget_class, "_control_comm", None) is not None


# --- views of a dying kernel ----------------------------------------------------------------
def _descendants(widget: ForeignWidget, seen: set[int]) -> list[ForeignWidget]:
    """``widget`` and every widget its traits hold (children, layout, style), each once."""
    widget_module = sys.modules.get("ipywidgets.widgets.widget")
    widget_class = getattr(widget_module, "Widget", None) if widget_module is not None else None
    if widget_class is None or not isinstance(widget, widget_class) or id(widget) in seen:
        return []
    seen.add(id(widget))
    found = [widget]
    for name in widget.keys:
        try:
            value = getattr(widget, name)
        except Exception:
            continue
        values = value if isinstance(value, (list, tuple)) else (value,)
        for item in values:
            found.extend(_descendants(item, seen))
    return found


def close_views(views: list[object]) -> int:
    """Close every widget model of ``views`` (a frontend removes a closed model's views, so
    nothing of a dead kernel keeps offering buttons). Returns how many were closed."""
    seen: set[int] = set()
    widgets: list[ForeignWidget] = []
    for view in views:
        widgets.extend(_descendants(getattr(view, "widget", view), seen))
    closed = 0
    for widget in widgets:
        if getattr(widget, "comm", None) is None:
            continue
        try:
            widget.close()
            closed += 1
        except Exception:
            pass  # the kernel is going away; a close that fails costs nothing more
    return closed


# Set when the kernel got a shutdown_request (a restart too). jupyter_client interrupts the
# kernel right before every shutdown and restart: that SIGINT is no Stop of the user's, and
# the run it would abort is ending with the kernel anyway (kernel_side.KernelSide.stop_guard).
_shutdown_requested = threading.Event()


def shutdown_requested() -> bool:
    """The kernel is shutting down or restarting (its shutdown_request has arrived)."""
    return _shutdown_requested.is_set()


def install_shutdown_close(shell: InteractiveShell, live_views: Callable[[], list[object]]) -> None:
    """Before the kernel shuts down (not for a restart), close the widget models of the
    views ``live_views()`` returns, so the frontend does not show them as alive.

    ipykernel calls ``kernel.do_shutdown`` for a ``shutdown_request`` (on its control
    thread); the close messages go out on iopub before the shutdown reply."""
    kernel = kernel_host(shell).kernel
    original = getattr(kernel, "do_shutdown", None)
    if original is None or PATCHES.find(kernel, "do_shutdown") is not None:
        return

    def do_shutdown(restart: bool) -> object:
        _shutdown_requested.set()
        # Not for a restart: the frontend has already dropped the old kernel's comms and
        # marks their views disconnected itself; each close would only log "Comm not
        # found" in the page's console (51 lines for two views).
        if not restart:
            try:
                close_views(list(live_views()))
            except Exception:
                pass
        return original(restart)

    PATCHES.apply(kernel, "do_shutdown", do_shutdown,
                  "a kernel shut down closes the live views' widget models first")


def uninstall_shutdown_close(shell: InteractiveShell) -> None:
    kernel = kernel_host(shell).kernel
    if kernel is not None:
        PATCHES.undo(PATCHES.find(kernel, "do_shutdown"))
