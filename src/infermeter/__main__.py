"""`python -m infermeter` runs the command-line interface (the one module outside `cli/` that may import it)."""

import infermeter.cli.app

if __name__ == "__main__":
    infermeter.cli.app.main()
