"""AgentView: the live widget under a %%agent cell."""
