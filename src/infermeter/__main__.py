"""`python -m infermeter` runs the command-line interface."""

from infermeter.cli.app import main

if __name__ == "__main__":
    main()
