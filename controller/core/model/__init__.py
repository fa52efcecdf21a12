"""The Tekton model: what a PipelineRun, its TaskRuns and their pods say, what resolution
fetched, the releases this one is tested with."""
