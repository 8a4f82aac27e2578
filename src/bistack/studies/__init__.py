"""Studies that use the task table: the build-order ladder, pooler comparisons, the demo,
attention explanations, and the reports they write."""
