"""Shell and sbatch scripts: the parser (tokens, variables), the jobs they start, `#SBATCH` directives."""
