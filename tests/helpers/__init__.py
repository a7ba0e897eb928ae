"""Helpers shared by the test folders, imported as ``helpers.<module>``.

tests/ is on ``sys.path`` while pytest runs (tests/conftest.py sits in a folder without an
``__init__.py``); a script of bench/ or a kernel that a test starts puts it there itself.
"""
