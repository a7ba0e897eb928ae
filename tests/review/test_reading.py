"""Reading agent code for what it may do to the user's names, before it runs."""

from __future__ import annotations

from pi_notebook.review.reading import read_code


def kinds(code: str) -> set[tuple[str, str]]:
    return {(e.name, e.kind) for e in read_code(code).effects}


def test_bindings_deletions_and_stores_are_read():
    found = kinds("a = 1\nb, (c, *d) = f()\ne += 1\nfor i in x: pass\nwith open(p) as fh: pass\n"
                  "import numpy as np\nfrom os import path\ndel g\nh['k'] = 2\nj.attr = 3\n"
                  "k.loc[k.x > 1, 'y'] = 0\ndel m['z']\nif (n := 5): pass")
    assert found >= {("a", "assigns"), ("b", "assigns"), ("c", "assigns"), ("d", "assigns"),
                     ("e", "changes"), ("i", "assigns"), ("fh", "assigns"), ("np", "assigns"),
                     ("path", "assigns"), ("g", "deletes"), ("h", "changes"), ("j", "changes"),
                     ("k", "changes"), ("m", "changes"), ("n", "assigns")}
    assert ("x", "assigns") not in found and ("f", "assigns") not in found


def test_mutating_methods_and_inplace_are_read_with_their_call():
    effects = read_code("df.drop(columns=['a'], inplace=True)\nitems.append(1)\nd['k'].update(x=1)\n"
                        "total = df.sum()\nclean = df.dropna(inplace=False)")
    details = {(e.name, e.detail) for e in effects.effects if e.kind == "calls"}
    assert details == {("df", "df.drop(..., inplace=True)"), ("items", "items.append(…)"),
                       ("d", "d['k'].update(…)")}
    assert effects.changed_in_place == {"df", "items", "d"}


def test_function_bodies_are_local_except_global_names_and_mutating_calls():
    effects = read_code("def f():\n    local = 1\n    global counter\n    counter = 2\n    seen.add(1)\n"
                        "g = lambda: out.append(1)")
    found = {(e.name, e.kind) for e in effects.effects}
    assert ("local", "assigns") not in found
    assert {("f", "assigns"), ("counter", "assigns"), ("seen", "calls"), ("out", "calls"), ("g", "assigns")} <= found


def test_dynamic_calls_and_unreadable_code_are_said():
    assert read_code("exec('x = 1')\nsetattr(obj, 'a', 1)").dynamic == ("exec", "setattr")
    assert read_code("def broken(:\n").unreadable


def test_calls_that_act_outside_the_kernel_are_listed():
    effects = read_code("df.to_csv('out.csv')\nwith open('log.txt', 'a') as fh: fh.write('x')\n"
                        "open('in.txt').read()\nimport os\nos.remove('tmp')\nget_ipython().system('ls')")
    assert effects.outside == ("df.to_csv(…)", "open(…)", "os.remove(…)", "get_ipython().system(…)")
