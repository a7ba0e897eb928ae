"""The kernel keeps answering whatever the notebook holds, measured by probe gaps.

While an agent run reads a 100,000-cell notebook file (parsed and validated on the kernel's
loop, it costs 7.6-11.2 s without an answer) and then answers with pathological Markdown
(200,000 open brackets, then 3,000 distinct formulas: 6.6-9.7 s silent if parsed), ``%agent
status`` probes are sent one after another and the longest wait for a reply is measured.
"""

from __future__ import annotations

import json

import pytest
from helpers.kernel import RUNTIME, Kernel, faux_setup, probe_until_idle

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(300)]



def _huge_notebook(path) -> int:
    cells = [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": i,
              "source": f"x_{i} = {i} * 2  # " + "pad " * 40,
              "outputs": [{"output_type": "stream", "name": "stdout", "text": f"{i}\n" + "o" * 60}]}
             for i in range(100_000)]
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}
    path.write_text(json.dumps(nb))
    return path.stat().st_size


def test_probes_are_answered_during_a_huge_read_and_pathological_markdown(tmp_path):
    size = _huge_notebook(tmp_path / "big.ipynb")
    assert size > 25 * 2 ** 20
    kernel = Kernel(cwd=tmp_path)
    try:
        kernel.connect_frontend()
        kernel.ok(faux_setup(None))
        kernel.ok("%agent model faux/faux-1")
        kernel.ok("%config AgentMagics.approval = 'auto'")
        kernel.ok(f"%config AgentMagics.notebook_path = {str(tmp_path / 'big.ipynb')!r}")
        formulas = " ".join(f"$x_{{{i}}}^{{{i}}}$" for i in range(3000))
        kernel.ok("faux.set_responses([\n"
                  "  faux_assistant_message([faux_tool_call('read_notebook', {'start': 99990})], stop_reason='toolUse'),\n"
                  "  faux_assistant_message([faux_tool_call('read_notebook', {'cell_id': 'c5'})], stop_reason='toolUse'),\n"
                  f"  faux_assistant_message('[' * 200000 + {formulas!r}),\n"
                  "])")
        kernel.ok("%%agent\nread the notebook")
        gaps = probe_until_idle(kernel, limit_s=120, reply_timeout=60)
        assert not kernel.ev(f"{RUNTIME}.is_running()"), "the run did not end"
        results = kernel.ev(f"[m.content[0].text[:200] for m in {RUNTIME}.get_agent().state.messages "
                            "if m.role == 'toolResult']")
        assert len(results) == 2 and "100000 cells" in results[0], results
        print(f"probe replies: {len(gaps)}, longest {max(gaps):.2f} s", [round(g, 2) for g in gaps])
        assert max(gaps) < 4.0, gaps  # 6.6-11.2 s before; generous for a shared machine
    finally:
        kernel.shutdown()


FIGURES = 300


def test_probes_are_answered_while_agent_code_makes_many_pyplot_figures():
    # Every request that ended while agent code made pyplot figures ran pyplot's post_execute
    # draw_all on the main thread, drawing each stale agent figure: 200 figures kept the
    # kernel silent 15 s, 1,000 figures 50 s (measured on this machine before the fix).
    kernel = Kernel()
    try:
        kernel.connect_frontend()
        kernel.ok("%matplotlib inline")
        kernel.ok(faux_setup(None))
        kernel.ok("%agent model faux/faux-1")
        kernel.ok("%config AgentMagics.approval = 'auto'")
        code = (f"import matplotlib.pyplot as plt\nfor i in range({FIGURES}):\n"
                "    plt.figure()\n    plt.plot([1, 2, i])\n")
        kernel.ok("faux.set_responses([faux_assistant_message([faux_tool_call('python', "
                  f"{{'code': {code!r}}})], stop_reason='toolUse'), faux_assistant_message('done')])")
        kernel.ok("%%agent\nmake figures")
        gaps = probe_until_idle(kernel, limit_s=240, reply_timeout=120)
        assert not kernel.ev(f"{RUNTIME}.is_running()"), "the run did not end"
        print(f"probe replies: {len(gaps)}, longest {max(gaps):.2f} s")
        assert len(gaps) > 3, gaps  # the probes really ran while the figures were made
        assert max(gaps) < 4.0, gaps  # 15 s for 200 figures before; generous for a shared machine
        result = kernel.ev(f"[m for m in {RUNTIME}.get_agent().state.messages if m.role == 'toolResult'][0]"
                           ".model_dump(mode='json')")
        text = "".join(b.get("text", "") for b in result["content"])
        drawn = [o for o in result["details"]["outputs"] if "image/png" in o.get("data", {})]
        assert len(drawn) == 10, text  # max_figures drawn, the rest closed undrawn
        assert f"{FIGURES - 10} more figures" in text, text
        assert kernel.ev("__import__('matplotlib.pyplot').pyplot.get_fignums()") == []
        # the user's own figure is still drawn and shown after their cell
        after = kernel.ok("plt.plot([3, 2, 1]);")
        assert [m for m in after["outputs"] if m["msg_type"] == "display_data"]
    finally:
        kernel.shutdown()
