"""tekton-coscheduler: every pod of a Tekton PipelineRun on one node."""

__version__ = "0.1.0"
