"""The ``python``, ``list_variables`` and ``inspect_variable`` tools."""
