"""Dockerfiles and Containerfiles: the env of the final stage and the job its ENTRYPOINT/CMD starts."""
