"""A call's output: its typed records and how it reads as text (budgets, images, tracebacks, hints)."""
