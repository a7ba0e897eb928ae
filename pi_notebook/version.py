"""The package's version, in one place: the build reads it (pyproject.toml's
``[tool.hatch.version]``), and ``__version__``, ``%agent`` and ``python -m pi_notebook --version``
show it. Import-free, so every layer may read it."""

__version__ = "0.1.0"
