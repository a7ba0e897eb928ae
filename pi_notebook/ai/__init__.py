"""The LLM layer: a port of pi-ai. No IPython imports."""
