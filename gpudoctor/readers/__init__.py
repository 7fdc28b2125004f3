"""Job files read into facts, one module (or small package) per format; never executed. `registry` lists them.

Each format parses its file once and says all of it in one `FileFacts`: the variables it sets (`env`), the jobs
and pods it starts (`launch`), a training script's analysis (`script`), a DeepSpeed config (`ds_config`).
"""

# Suffixes of text formats (Python, YAML, JSON, TOML, documentation) that are never a shell script or a Dockerfile.
TEXT_SUFFIXES = {".py", ".yaml", ".yml", ".json", ".toml", ".md", ".txt", ".rst", ".cfg", ".ini"}
