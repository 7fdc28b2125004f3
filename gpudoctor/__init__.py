"""gpudoctor: find what will break or slow a GPU training job before it runs."""

__version__ = "0.1.0"
