from gpudoctor.cli import main

if __name__ == "__main__":  # spawned bench workers re-import this module as __mp_main__
    raise SystemExit(main())
