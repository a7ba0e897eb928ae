"""Notebook tools: run Python in the user kernel, inspect variables."""
