"""Python files: training-script analysis (`ast`; never imported or run), env dicts, nemo_run jobs."""
