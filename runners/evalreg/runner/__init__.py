"""Running cells: reconcile the plan with the store, fetch missing responses, grade them as
they stream, and write the results. Modules named ``_*`` are speed-only machinery (forked
workers, the DVC child process, the grading pool, the streaming cell writer)."""
