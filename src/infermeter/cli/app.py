"""The `infermeter` command: one click group, one module per command; errors become one line and an exit code."""

from __future__ import annotations

import os
import signal
import sys
import threading

import click

from infermeter import __version__
from infermeter.cli import advise as advise_cmd
from infermeter.cli import bench as bench_cmd
from infermeter.cli import check as check_cmd
from infermeter.cli import compare as compare_cmd
from infermeter.cli import deploy as deploy_cmd
from infermeter.cli import explain as explain_cmd
from infermeter.cli import export as export_cmd
from infermeter.cli import history as history_cmd
from infermeter.cli import info
from infermeter.cli import inspect as inspect_cmd
from infermeter.cli import llm as llm_cmd
from infermeter.cli import load as load_cmd
from infermeter.cli import optimize as optimize_cmd
from infermeter.cli import parity as parity_cmd
from infermeter.cli import peak as peak_cmd
from infermeter.cli import quantize as quantize_cmd
from infermeter.cli import report as report_cmd
from infermeter.cli import serve as serve_cmd
from infermeter.cli import tune_batching as tune_batching_cmd
from infermeter.core.errors import InfermeterError


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="infermeter")
@click.option("--debug", is_flag=True, help="Show full tracebacks on errors.")
def app(debug: bool) -> None:
    """Measure, compare and optimize ML inference across frameworks on your own hardware."""


app.add_command(bench_cmd.bench)
app.add_command(quantize_cmd.quantize)
app.add_command(report_cmd.report)
app.add_command(compare_cmd.compare)
app.add_command(history_cmd.history)
app.add_command(advise_cmd.advise_cmd)
app.add_command(info.backends)
app.add_command(info.env)
app.add_command(info.models)
app.add_command(export_cmd.export)
app.add_command(check_cmd.check)
app.add_command(inspect_cmd.inspect_cmd)
app.add_command(explain_cmd.explain_cmd)
app.add_command(peak_cmd.peak)
app.add_command(parity_cmd.parity)
app.add_command(serve_cmd.serve)
app.add_command(optimize_cmd.optimize)
app.add_command(deploy_cmd.deploy)
app.add_command(load_cmd.load)
app.add_command(tune_batching_cmd.tune_batching)
app.add_command(llm_cmd.llm)


class _Interrupts:
    """Ctrl-C raises KeyboardInterrupt once; while the command then saves what it measured, a second Ctrl-C only
    says so, and a third stops the process at once. An interrupt landing in the middle of that clean-up would
    otherwise kill the process before the results file and the exit code are right.

    Python drops an exception raised while it runs a callback of its own (a weakref's, a finalizer's, the import
    lock's) with "Exception ignored": the interrupt is then lost and the command would run on and end with 0. So
    a swallowed KeyboardInterrupt re-arms the handler (the next Ctrl-C raises again), and a command that returns
    normally after a Ctrl-C ends as interrupted (130) all the same."""

    def __init__(self) -> None:
        self.presses = 0
        self.swallowed = 0
        self.previous_hook = sys.unraisablehook

    def install(self) -> None:
        """Handle SIGINT from now on, counting from zero (main may run more than once in one process)."""
        self.presses = self.swallowed = 0
        signal.signal(signal.SIGINT, self.on_signal)
        if sys.unraisablehook != self.on_unraisable:
            self.previous_hook, sys.unraisablehook = sys.unraisablehook, self.on_unraisable

    def on_unraisable(self, unraisable: object) -> None:
        """A KeyboardInterrupt Python swallowed: re-arm the handler and remember the press."""
        if isinstance(getattr(unraisable, "exc_value", None), KeyboardInterrupt):
            self.swallowed += 1
            self.presses = 0
        self.previous_hook(unraisable)  # type: ignore[arg-type]

    def on_signal(self, signum: int, frame: object) -> None:
        self.presses += 1
        if self.presses == 1:
            raise KeyboardInterrupt
        if self.presses == 2:
            print("saving what was measured; press Ctrl-C again to stop at once", file=sys.stderr)
            return
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)

    @property
    def pressed(self) -> bool:
        """Whether Ctrl-C was pressed during the command, even when the interrupt it raised was swallowed."""
        return self.presses > 0 or self.swallowed > 0

    @staticmethod
    def forget_unhandled() -> None:
        """Clear CPython's note that a KeyboardInterrupt went unhandled. A KeyboardInterrupt that leaves code a
        native library runs through `PyRun_String` (torch's import does) sets that note for good, even when the
        command catches the interrupt later; `python -m infermeter` then ends killed by SIGINT (-2) instead of
        with its exit code. Every `PyRun_String` clears it first, so running an empty one does."""
        if sys.implementation.name == "cpython":
            import ctypes

            ctypes.pythonapi.PyRun_SimpleString(b"pass")


_INTERRUPTS = _Interrupts()


def main(argv: list[str] | None = None) -> None:
    """Entry point: runs the app; InfermeterError and usage errors become `error: ...` on stderr, exit 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    on_main_thread = threading.current_thread() is threading.main_thread()
    if on_main_thread:
        _INTERRUPTS.install()
    debug = "--debug" in args
    try:
        code = app.main(args=args, prog_name="infermeter", standalone_mode=False)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.exceptions.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "infermeter"
        print(f"error: {exc.format_message()} (see `{where} --help`)", file=sys.stderr)
        code = 2
    except click.exceptions.ClickException as exc:
        print(f"error: {exc.format_message()}", file=sys.stderr)
        code = exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        print("interrupted", file=sys.stderr)
        code = 130
    except InfermeterError as exc:
        if debug:
            raise
        from infermeter.cli.common import error_message

        print(f"error: {error_message(exc)}", file=sys.stderr)
        code = exc.exit_code
    except Exception as exc:
        if debug:
            raise
        from infermeter.core.extras import missing_extra_error

        # An optional package that a command imported without checking first: still one line with its extra.
        missing = missing_extra_error(exc)
        if missing is not None:
            print(f"error: {missing}", file=sys.stderr)
            code = missing.exit_code
        else:
            print(
                f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback; please report it)",
                file=sys.stderr,
            )
            code = 1
    code = code if isinstance(code, int) else 0
    if on_main_thread and _INTERRUPTS.pressed:
        if code == 0:  # the interrupt was swallowed on its way (see _Interrupts)
            print("interrupted", file=sys.stderr)
            code = 130
        _INTERRUPTS.forget_unhandled()
    sys.exit(code)
