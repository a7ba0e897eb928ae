"""The after-check: fingerprints before and after a call, compared, one line per name."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pi_notebook.review.changes import compare, snapshot
from pi_notebook.review.fingerprint import fingerprint
from pi_notebook.review.reading import read_code


def run(namespace: dict, code: str) -> dict[str, str]:
    before = snapshot(namespace.items())
    exec(code, namespace)
    namespace.pop("__builtins__", None)
    report = compare(before, snapshot(namespace.items()), read_code(code))
    lines = {c.name: c.summary for c in report.changes}
    lines.update({"?" + line.split("`")[1]: line for line in report.unsure})
    return lines


def test_created_rebound_deleted():
    out = run({"a": 1, "b": [1, 2], "gone": "x"}, "a = 2\nb = [1, 2]\ndel gone\nnew = {'k': 1}")
    assert out["a"] == "`a` rebound: int → int (another value)"
    assert "b" not in out  # rebound to an equal value: nothing the user would see
    assert out["gone"] == "`gone` deleted (was str of 1 characters)"
    assert out["new"] == "`new` created: dict of 1"


def test_in_place_changes_of_each_container_kind():
    ns = {"df": pd.DataFrame({"a": [1, 2, 3], "b": [1.0, 2.0, 3.0]}), "s": pd.Series([1, 2, 3]),
          "arr": np.zeros(5), "lst": [1, 2], "d": {"k": 1}, "st": {1, 2}}
    out = run(ns, "df['c'] = df.a * 2\ndf['a'] = df['a'].astype(float)\ns.iloc[0] = 9\narr[2] = 1\n"
                  "lst.append(3)\nd['k'] = 2\nst.discard(1)")
    assert out["df"] == ("`df` changed in place: DataFrame 3×3, shape 3×2 → 3×3; columns added 'c'; "
                         "dtype 'a' int64 → float64")
    assert out["s"] == "`s` changed in place: Series of 3 (int64), values changed"
    assert out["arr"] == "`arr` changed in place: ndarray 5 float64, values changed"
    assert out["lst"] == "`lst` changed in place: list of 3, length 2 → 3"
    assert out["d"] == "`d` changed in place: dict of 1, values changed"
    assert out["st"] == "`st` changed in place: set of 1, length 2 → 1"


def test_a_change_inside_a_nested_object():
    out = run({"config": {"runs": [{"lr": 0.1}]}}, "config['runs'][0]['lr'] = 0.2")
    assert out["config"] == "`config` changed in place: dict of 1, values changed"


def test_large_values_are_sampled_and_a_missed_change_is_said():
    big = pd.DataFrame({"x": np.arange(200_000)})
    fp = fingerprint(big)
    assert fp.sampled
    out = run({"big": big}, "big.loc[100_001, 'x'] = -1")  # between the strided rows looked at
    assert "big" not in out
    assert "only a sample of it was compared" in out["?big"]
    caught = run({"big": big}, "big.loc[0, 'x'] = -1")  # the head is always looked at
    assert caught["big"].startswith("`big` changed in place")


class Touchy:
    """Every hook a fingerprint must not call raises."""

    calls: list[str] = []

    def __eq__(self, other): Touchy.calls.append("eq"); raise AssertionError("eq")
    def __hash__(self): Touchy.calls.append("hash"); raise AssertionError("hash")
    def __len__(self): Touchy.calls.append("len"); raise AssertionError("len")
    def __repr__(self): Touchy.calls.append("repr"); raise AssertionError("repr")
    def __getattr__(self, name): Touchy.calls.append(name); raise AssertionError(name)


class TouchyList(list):
    def __len__(self): Touchy.calls.append("len"); raise AssertionError("len")


def test_no_user_code_runs_to_fingerprint():
    Touchy.calls.clear()
    obj, sub = Touchy(), TouchyList([1])
    out = run({"obj": obj, "holder": [obj, {"k": obj}], "sub": sub,
               "col": pd.Series([obj, obj], dtype=object)},
              "obj2 = obj\nholder.append(1)\nsub.append(2)")
    assert Touchy.calls == []
    assert fingerprint(obj).opaque and fingerprint(sub).opaque
    assert out["holder"] == "`holder` changed in place: list of 3, length 2 → 3"
    assert "sub" not in out  # an unknown (sub)class: identity only


def test_code_that_makes_many_names_gets_a_bounded_report():
    out = compare({}, snapshot((f"n{i}", i) for i in range(6000)), None)
    lines = out.lines()
    assert len(lines) == 42
    assert lines[40] == "… and 5,960 more names: 5,960 created"
    assert lines[41].startswith("only the first 5,000 of 6,000 names were compared by contents")
