from __future__ import annotations

import asyncio
import sys
import threading

import pytest
from IPython.display import display

from pi_notebook.tools.kernel.capture import (
    RoutedDisplayPublisher,
    RoutedStream,
    capture,
    capture_active,
    install_capture,
    uninstall_capture,
)
from helpers.shell import get_shell, routed


def test_install_is_idempotent_and_uninstall_restores_exactly() -> None:
    shell = get_shell()
    pub, start = shell.display_pub, threading.Thread.start
    with routed(shell) as (out, err):
        stdout_proxy = sys.stdout
        assert isinstance(stdout_proxy, RoutedStream) and isinstance(sys.stderr, RoutedStream)
        assert isinstance(shell.display_pub, RoutedDisplayPublisher)
        install_capture(shell)  # again: nothing changes
        assert sys.stdout is stdout_proxy
        uninstall_capture(shell)
        assert sys.stdout is out and sys.stderr is err
        assert shell.display_pub is pub and threading.Thread.start is start
        uninstall_capture(shell)  # again: harmless
        install_capture(shell)
    assert shell.display_pub is pub and threading.Thread.start is start


def test_outside_a_capture_everything_passes_through() -> None:
    with routed() as (out, err):
        print("plain")
        print("warn", file=sys.stderr)
        assert not capture_active()
    assert out.getvalue() == "plain\n" and err.getvalue() == "warn\n"


def test_capture_routes_streams_and_displays() -> None:
    got: list[tuple] = []
    with routed() as (out, err):
        with capture(lambda n, t: got.append((n, t)), lambda d, m: got.append(("display", d))):
            assert capture_active()
            print("captured")
            print("oops", file=sys.stderr)
            display({"text/markdown": "**md**", "text/plain": "md"}, raw=True)
        print("after")
    assert ("stdout", "captured") in got and ("stderr", "oops") in got
    assert ("display", {"text/markdown": "**md**", "text/plain": "md"}) in got
    assert out.getvalue() == "after\n" and err.getvalue() == ""


def test_capture_requires_install() -> None:
    with pytest.raises(RuntimeError, match="install_capture"):
        with capture(lambda n, t: None, lambda d, m: None):
            pass


async def test_concurrent_tasks_do_not_cross_talk() -> None:
    tool_out: list[str] = []

    async def tool() -> None:
        with capture(lambda n, t: tool_out.append(t), lambda d, m: tool_out.append("DISPLAY")):
            for i in range(5):
                print(f"TOOL-{i}")
                await asyncio.sleep(0.01)
            display({"text/plain": "tool display"}, raw=True)

    async def user() -> None:
        for i in range(5):
            print(f"USER-{i}")
            await asyncio.sleep(0.01)

    with routed() as (out, _):
        await asyncio.gather(tool(), user())
    real = out.getvalue()
    assert "TOOL" not in real and "tool display" not in real
    assert all(f"USER-{i}" in real for i in range(5))
    captured = "".join(tool_out)
    assert "USER" not in captured and all(f"TOOL-{i}" in captured for i in range(5))
    assert "DISPLAY" in tool_out


async def test_tasks_created_inside_inherit_the_capture() -> None:
    got: list[str] = []
    with routed() as (out, _):
        with capture(lambda n, t: got.append(t), lambda d, m: None):
            await asyncio.create_task(asyncio.to_thread(print, "from to_thread"))

            async def child() -> None:
                print("from child task")

            await asyncio.create_task(child())
    assert "from child task" in "".join(got) and "from to_thread" in "".join(got)
    assert out.getvalue() == ""


def test_threads_inherit_while_capturing_and_fall_back_after() -> None:
    got: list[str] = []
    release = threading.Event()
    with routed() as (out, _):
        with capture(lambda n, t: got.append(t), lambda d, m: None):
            t1 = threading.Thread(target=lambda: print("thread inside"))
            t1.start()
            t1.join()

            def late() -> None:
                release.wait(5)
                print("thread late")

            t2 = threading.Thread(target=late)
            t2.start()
        release.set()
        t2.join()
        t3 = threading.Thread(target=lambda: print("thread outside"))
        t3.start()
        t3.join()
    assert "thread inside" in "".join(got)
    assert "thread late" in out.getvalue()  # the capture had closed: back to the real stream
    assert "thread outside" in out.getvalue() and "thread outside" not in "".join(got)


def test_callbacks_run_with_the_capture_suspended() -> None:
    seen: list[str] = []

    def on_stream(name: str, text: str) -> None:
        seen.append(text)
        print("from callback")  # must reach the real stream, not recurse

    with routed() as (out, _):
        with capture(on_stream, lambda d, m: None):
            print("x", end="")
    assert seen == ["x"] and out.getvalue() == "from callback\n"


def test_foreign_patch_on_top_is_kept_working_after_uninstall() -> None:
    shell = get_shell()
    with routed(shell) as (out, _):
        proxy = sys.stdout
        wrapper = type("Wrapper", (), {"write": lambda self, s: proxy.write(s.upper()),
                                       "flush": lambda self: None})()
        sys.stdout = wrapper
        uninstall_capture(shell)
        assert sys.stdout is wrapper  # not ours to remove
        with pytest.raises(RuntimeError):
            with capture(lambda n, t: None, lambda d, m: None):
                pass
        print("still works")
        sys.stdout = out
    assert out.getvalue() == "STILL WORKS\n"


def test_reinstalling_does_not_pile_up_event_callbacks() -> None:
    shell = get_shell()
    before = {e: len(shell.events.callbacks[e]) for e in ("pre_execute", "post_execute")}
    for _ in range(3):
        with routed(shell):
            pass
    after = {e: len(shell.events.callbacks[e]) for e in ("pre_execute", "post_execute")}
    assert after == before
