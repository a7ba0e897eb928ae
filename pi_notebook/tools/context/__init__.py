"""The notebook the agent reads: cell history, namespace, the notebook file, project files, references."""
