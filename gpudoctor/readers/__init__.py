"""Job files read into facts, one module (or small package) per format; never executed. `registry` lists them."""
