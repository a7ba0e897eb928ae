"""The agent core: a port of pi agent-core. No IPython imports."""
