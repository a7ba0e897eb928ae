"""Only the names a call can reach are fingerprinted by contents; every way the code can reach
a name it does not mention is still followed, and every rebinding is still seen."""

from __future__ import annotations

import pytest

import pi_notebook.review.changes as changes
from pi_notebook.review.changes import visible_items
from pi_notebook.review.reach import MAX_HELD, reachable
from pi_notebook.review.reading import read_code
from pi_notebook.review.watch import NamespaceReview


def define(ns: dict, code: str) -> dict:
    """Run the user's own code in ``ns`` as a notebook cell would (module ``__main__``)."""
    ns.setdefault("__name__", "__main__")
    exec(code, ns)
    ns.pop("__builtins__", None)
    return ns


def agent_call(review: NamespaceReview, ns: dict, code: str, epoch: object = None) -> list[str]:
    watch = review.before_call(code, visible_items(ns, {}), epoch=epoch)
    exec(code, ns)
    ns.pop("__builtins__", None)
    return review.after_call(watch, ns, visible_items(ns, {})).lines()


def changed(lines: list[str]) -> set[str]:
    return {line.split("`")[1] for line in lines if "changed in place" in line}


def test_names_the_code_cannot_reach_are_not_fingerprinted(monkeypatch: pytest.MonkeyPatch):
    ns = {f"v{i}": [i, i + 1] for i in range(500)} | {"target": [1]}
    calls: list[object] = []
    real = changes.fingerprint
    monkeypatch.setattr(changes, "fingerprint", lambda v: calls.append(v) or real(v))
    review = NamespaceReview()
    review.start_run("run")
    lines = agent_call(review, ns, "target.append(2)")
    assert lines == ["`target` changed in place: list of 2, length 1 → 2"]
    assert len(calls) <= 4  # target before and after: not 1,002 fingerprints
    # the undo still has its copy
    review.undo(ns)
    assert ns["target"] == [1]


def test_an_alias_of_a_reached_object_is_compared():
    ns = define({}, "a = [1]\nb = a\nholder = {'inner': [1]}\ninner = holder['inner']")
    review = NamespaceReview()
    assert changed(agent_call(review, ns, "b.append(2)")) == {"a", "b"}
    assert changed(agent_call(review, ns, "holder['inner'].append(2)")) == {"holder", "inner"}


def test_a_function_or_method_of_the_notebook_reaches_the_names_its_code_uses():
    ns = define({}, """
log = []
seen = set()
def note(x):
    log.append(x)
def outer():
    note(1)
class Model:
    def fit(self):
        seen.add(1)
model = Model()
""")
    review = NamespaceReview()
    assert changed(agent_call(review, ns, "outer()")) == {"log"}
    assert changed(agent_call(review, ns, "model.fit()")) == {"seen"}


def test_what_a_closure_a_partial_or_an_instance_holds_is_reached():
    ns = define({}, """
import functools
rows = []
cache = {}
kept = [0]
def make():
    box = rows
    return lambda: box.append(1)
add_row = make()
put = functools.partial(dict.update, cache)
class Holder:
    def __init__(self, items):
        self.items = items
    def bump(self):
        self.items[0] += 1
holder = Holder(kept)
""")
    review = NamespaceReview()
    assert changed(agent_call(review, ns, "add_row()")) == {"rows"}
    assert changed(agent_call(review, ns, "put(k=1)")) == {"cache"}
    assert changed(agent_call(review, ns, "holder.bump()")) == {"kept"}


@pytest.mark.parametrize("code", ["exec('target' + '.append(2)')", "globals()['tar' + 'get'].append(2)",
                                  "get_ipython().run_cell('target.append(2)')", "target.append(2"])
def test_code_that_can_reach_any_name_compares_every_name(code: str):
    effects = read_code(code)
    assert reachable(effects, [("target", []), ("other", [])]) is None


def test_a_rebinding_of_a_name_the_code_does_not_mention_is_seen():
    review = NamespaceReview()
    ns = {"x": [1], "unseen": [1, 2]}
    review.start_run("run")
    watch = review.before_call("x.append(2)", visible_items(ns, {}))
    ns["x"].append(2)
    original = ns["unseen"]
    ns["unseen"] = {"k": 1}  # e.g. a user cell that ran meanwhile
    lines = review.after_call(watch, ns, visible_items(ns, {})).lines()
    assert "`unseen` rebound: list of 2 → dict of 1" in lines
    review.undo(ns)  # the object it was bound to is kept by reference and put back
    assert ns["unseen"] is original and ns["x"] == [1]


def test_a_later_call_that_reaches_a_name_first_left_alone_can_undo_it():
    review = NamespaceReview()
    ns = {"first": 1, "rows": [1, 2]}
    review.start_run("run")
    agent_call(review, ns, "first = 2", epoch=7)  # rows not reached: not looked into, not copied
    assert changed(agent_call(review, ns, "rows.append(3)", epoch=7)) == {"rows"}
    report = review.undo(ns)
    assert ns["rows"] == [1, 2] and ns["first"] == 1
    assert set(report.restored) == {"first", "rows"}


def test_no_user_code_runs_to_follow_what_an_object_holds():
    ns = define({}, """
calls = []
class Touchy:
    def __init__(self):
        self.items = [1]
    def __getattr__(self, name):
        calls.append(name)
        raise AttributeError(name)
    def __eq__(self, other):
        calls.append("eq")
        return False
    __hash__ = None
    @property
    def __class__(self):
        calls.append("__class__")
        return Touchy
t = Touchy()
held = t.items
""")
    review = NamespaceReview()
    assert changed(agent_call(review, ns, "t.items.append(2)")) == {"held"}
    assert ns["calls"] == []


def test_an_instance_of_a_class_from_a_module_a_class_attribute_and_a_generator_are_followed():
    import types

    library = types.ModuleType("userlib")  # a module of the user's project, not the notebook
    exec("class Holder:\n    def __init__(self, items):\n        self.items = items\n"
         "    def bump(self):\n        self.items.append(1)\n", library.__dict__)
    ns = define({"Holder": library.Holder}, """
rows = []
held = Holder(rows)
tally = [0]
class Config:
    store = tally
trail = []
def walk():
    while True:
        trail.append(1)
        yield
stepper = walk()
""")
    review = NamespaceReview()
    assert changed(agent_call(review, ns, "held.bump()")) == {"rows"}
    assert changed(agent_call(review, ns, "Config.store.append(1)")) == {"tally"}
    assert changed(agent_call(review, ns, "next(stepper)")) == {"trail"}


def test_past_its_bound_the_reach_is_every_name():
    wide = [[[object() for _ in range(30)] for _ in range(30)] for _ in range(30)]  # 27,000 objects
    assert MAX_HELD < 30 ** 3
    effects = read_code("len(wide)")
    assert reachable(effects, [("wide", wide), ("other", [])]) is None
    assert reachable(effects, [("wide", wide[0]), ("other", [])]) == {"wide"}
