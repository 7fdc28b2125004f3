"""gpudoctor's version, in one place (the build reads it here too: pyproject's `tool.hatch.version`)."""

__version__ = "0.1.0"
