"""The old command ``python -m pi_notebook.ai.providers.local_setup [binary|model|all|fetch]``,
kept working for CI scripts and documents that name it: a thin shim that runs the command of
``pi_notebook/local/setup.py`` (``python -m pi_notebook.local.setup``) with the same arguments
and exit code. Code imports the new module, never this one.
"""

from __future__ import annotations

if __name__ == "__main__":
    from pi_notebook.local.setup import main

    raise SystemExit(main())
