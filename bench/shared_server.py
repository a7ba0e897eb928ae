"""Two kernels asking the shared embedded server at once: one slot versus several.

Two processes (two kernels) hold leases on the same llama-server and send a request at the
same moment (a ~150-token answer each). For each slot count it prints, per process, the
time to the first token and to the end, and then the ratio of the later kernel's time to
first token with N slots to that with one slot (lower is better: with one slot the second
kernel waits for the whole first answer). A private cache is used, so a server the
developer is running is not touched; the binary and weights are the installed ones.

    /work/venv/bin/python bench/shared_server.py [--slots 1 4] [--tokens 150]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODEL = "qwen2.5-coder-0.5b"

ASKER = """
import asyncio, json, sys, time
from pi_notebook.ai import stream
from pi_notebook.local.provider import get_local_server, local_model
from pi_notebook.ai.types import Context, UserMessage
get_local_server(sys.argv[1]).start_blocking()
print("ready", flush=True)
sys.stdin.readline()

async def main():
    sent = time.monotonic()
    first = None
    events = stream(local_model(sys.argv[1]), Context(messages=[UserMessage(content=sys.argv[2])]),
                    max_tokens=int(sys.argv[3]))
    async for event in events:
        if first is None and event.type == "text_delta":
            first = time.monotonic()
    msg = await events.result()
    print(json.dumps({"stop": msg.stop_reason, "error": msg.error_message, "sent": sent,
                      "first": first, "end": time.monotonic(), "tokens": msg.usage.output}), flush=True)

asyncio.run(main())
"""

PROMPTS = ["Write a story about a lighthouse keeper.", "Write a story about a baker in Paris."]


def run(slots: int, tokens: int, cache: Path) -> list[dict]:
    env = {**os.environ, "PI_NOTEBOOK_CACHE": str(cache), "PI_NOTEBOOK_LLAMA_SLOTS": str(slots),
           "PI_NOTEBOOK_LLAMA_THREADS": os.environ.get("PI_NOTEBOOK_LLAMA_THREADS", "1")}
    kernels = [subprocess.Popen([sys.executable, "-c", ASKER, MODEL, p, str(tokens)], env=env, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE) for p in PROMPTS]
    try:
        for k in kernels:
            assert k.stdout is not None and k.stdout.readline().strip() == "ready"
        for k in kernels:
            assert k.stdin is not None
            k.stdin.write("go\n")
            k.stdin.flush()
        return [json.loads(k.stdout.readline()) for k in kernels if k.stdout is not None]
    finally:
        for k in kernels:
            k.kill()
            k.wait()
        time.sleep(2.0)  # the supervisor stops the server after the last lease


def main() -> None:
    from pi_notebook.local.setup import assemble_packaged_model, find_llama_server

    parser = argparse.ArgumentParser()
    parser.add_argument("--slots", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--tokens", type=int, default=150)
    args = parser.parse_args()
    binary = find_llama_server()
    assert binary is not None, "run: python -m pi_notebook.local.setup"
    os.environ["PI_NOTEBOOK_LLAMA_SERVER"] = str(binary)
    gguf = assemble_packaged_model(MODEL, log=lambda _line: None)
    later_first: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="pi-bench-shared-") as tmp:
        cache = Path(tmp)
        (cache / "models").mkdir()
        (cache / "models" / gguf.name).symlink_to(gguf)
        (cache / "models" / (gguf.name + ".verified")).write_text("ok")
        print(f"load average {os.getloadavg()[0]:.1f}; {args.tokens} tokens per answer")
        for slots in args.slots:
            results = run(slots, args.tokens, cache)
            t0 = min(r["sent"] for r in results)
            for i, r in enumerate(sorted(results, key=lambda r: r["first"] or 1e18)):
                first = (r["first"] - t0) if r["first"] else float("nan")
                print(f"slots={slots} kernel {i + 1}: {r['stop']:<6} first token {first:6.1f} s, "
                      f"end {r['end'] - t0:6.1f} s, {r['tokens']} tokens"
                      + (f"  error: {r['error']}" if r["error"] else ""))
            later_first[slots] = max((r["first"] or float("inf")) - t0 for r in results)
    base = later_first.get(1)
    if base:
        for slots, value in later_first.items():
            if slots != 1:
                print(f"later kernel's time to first token, {slots} slots / 1 slot: {value / base:.2f}")


if __name__ == "__main__":
    main()
