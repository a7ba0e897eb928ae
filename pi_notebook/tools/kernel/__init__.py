"""The seams to the kernel hosting IPython: host, patches, routed output, guards, interrupts, workers."""
