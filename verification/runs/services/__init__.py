"""Writes of the run pipeline: tasks and cycles, rubrics, submissions and runs, events, the sweeper."""
