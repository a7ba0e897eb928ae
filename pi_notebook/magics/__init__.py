"""%%agent, %steer, %followup, %agent: the run lifecycle on the kernel loop."""
