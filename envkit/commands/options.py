"""Options shared by several commands, declared once.

Single options are ``Annotated`` types (``json_output: JsonOption = False``). Groups of options that travel
together (the machine a command resolves for, the post-install check's settings) are NamedTuples (cheaper to define
than dataclasses: see envkit.catalog.model) whose fields carry the options; ``@with_options`` puts their fields into
a command's signature, so a new command that resolves builds takes them all with one parameter:
``def lock(..., target: TargetOptions)``.
"""

import functools
import inspect
import typing
from pathlib import Path
from typing import Annotated, Callable, List, NamedTuple, Optional

import typer

from envkit.commands import completion


def seconds_between(low: float, high: float) -> Callable[[float], float]:
    """A typer callback that takes a finite number of seconds in [low, high] (nan and inf are refused)."""

    def check(value: float) -> float:
        import math

        if not math.isfinite(value) or not low <= value <= high:
            raise typer.BadParameter(f"give seconds between {low:g} and {high:g}")
        return value

    return check


def path_value(text: "str | Path") -> Path:
    """A path option's value (typer's ``parser=``; a default given as a Path comes through it too): what the user
    typed, ``~`` expanded, with an empty value refused rather than read as the current directory (``--prefix ""``:
    typer's own Path type makes "" into ".")."""
    from envkit.state.files import user_path

    if isinstance(text, Path):
        return text
    try:
        return user_path(text)
    except ValueError as exc:
        raise typer.BadParameter(f"{text!r} {exc}") from None


def path_argument(parse: Callable[["str | Path"], Path] = path_value) -> Callable[["str | Path"], Path]:
    """``parse`` as an argument's ``parser=``, named so that help shows its type as ``<path>``: typer shows an
    argument's parser by the function's own name (``<path_value>``). An option shows its metavar instead."""

    def parsed(text: "str | Path") -> Path:
        return parse(text)

    parsed.__name__ = "path"
    return parsed


def program_value(text: "str | Path") -> Path:
    """A program option (``doctor --python``): a bare name (``python3.11``) as typed, for PATH to find as a shell
    would; anything with a '/' as a path, made absolute (``./python3`` is the file here: Path would shorten it to
    the bare name ``python3``)."""
    if isinstance(text, str) and "/" not in text and text.strip() and not text.startswith("~"):
        return Path(text)
    return path_value(text).absolute()


def file_path_value(text: "str | Path") -> Path:
    """A path option naming a file to write (``-o``): as :func:`path_value`, and never a directory's form
    (``out/``, which Path would turn into the file ``out``) or ``-`` (which is not standard output here)."""
    if isinstance(text, str) and (text.endswith("/") or text.strip() == "-"):
        raise typer.BadParameter(f"{text!r}: give the name of a file to write (envkit writes no directory, and "
                                 "not to standard output)")
    return path_value(text)


JsonOption = Annotated[
    bool,
    typer.Option("--json", help="Print JSON instead of text: indented on a terminal, one line into a pipe or file."),
]
ManifestsOption = Annotated[
    Optional[Path],
    typer.Option(
        "--manifests",
        envvar="ENVKIT_MANIFESTS",
        metavar="DIR",
        parser=path_value,
        help="Read manifests from this directory instead of the shipped ones (try an edited copy of envs/).",
        show_default=False,
    ),
]
MachineOption = Annotated[
    Optional[List[Path]],
    typer.Option(
        "--machine",
        metavar="FILE|DIR",
        parser=path_value,
        help="Resolve for the machine described in this profile file (the output of `envkit detect --json` "
        "saved on another machine) instead of this one. Repeatable, and a directory means every *.yaml/*.json "
        "profile in it: a build then fits only when it fits every machine (a fleet). A machine's name is its "
        "profile's `name`, else its file name.",
        show_default=False,
    ),
]
def _one_partition(value: Optional[List[str]]) -> Optional[List[str]]:
    """Refuse a repeated --partition (typer would silently keep the last one)."""
    if value and len(value) > 1:
        raise typer.BadParameter(f"give it once, not {len(value)} times: a fleet is one partition (NAME:NODE,... for "
                                 "some of its nodes; --machine adds profiles of other machines)")
    return value


# Read as a list so that a repeated --partition is refused, not silently cut to its last value; TargetOptions
# keeps the one spec as text (from_command_line).
PartitionOption = Annotated[
    Optional[List[str]],
    typer.Option(
        "--partition",
        "-p",  # as `envkit job` and `envkit survey` take it
        metavar="P[:NODES]",
        callback=_one_partition,
        autocompletion=completion.partition_specs,
        help="Resolve for the nodes of this partition of the site file ($ENVKIT_SITE, else the config's `site:`, "
        "else site.yaml in envkit's config directory; `envkit site` lists them), as a fleet. NAME:NODE,... "
        "keeps only those nodes (names as `envkit site` shows them). Once.",
        show_default=False,
    ),
]
CudaOption = Annotated[
    Optional[str],
    typer.Option("--cuda", metavar="X.Y", help="Take X.Y as the highest CUDA the driver supports.", show_default=False),
]
GpuArchOption = Annotated[
    Optional[List[str]],
    typer.Option(
        "--gpu-arch",
        metavar="ARCH",
        help="Take the machine's GPUs to be one GPU per value, of this compute capability (e.g. --gpu-arch 7.0 "
        "--gpu-arch 8.0 for a V100 and an A100), or an AMD GPU of this gfx target (--gpu-arch gfx942). "
        "Repeatable.",
        show_default=False,
    ),
]
PythonOption = Annotated[
    Optional[str],
    typer.Option("--python", metavar="X.Y", help="Only builds that publish this Python version.", show_default=False),
]
TimeoutOption = Annotated[
    float,
    typer.Option(
        "--timeout",
        metavar="SECONDS",
        callback=seconds_between(0.1, 600),
        help="Seconds each hardware probe may take before it is cut off.",
    ),
]
RunInArgument = Annotated[
    str, typer.Argument(metavar="ENV", help="The environment to run in (`envkit envs` lists them), or an image "
                        "`envkit pack` made, as a path (./torch.sqfs).",
                        autocompletion=completion.environment_names)
]
EnvArgument = Annotated[
    Optional[str],
    typer.Argument(metavar="ENV", help="An environment envkit made (`envkit envs` lists them).", show_default=False,
                   autocompletion=completion.environment_names),
]
ProbeTimeoutOption = Annotated[
    float,
    typer.Option(
        "--probe-timeout",
        metavar="SECONDS",
        callback=seconds_between(1, 3600),
        help="Seconds the check may take (importing the framework, the computations) before it is stopped.",
    ),
]


class TargetOptions(NamedTuple):
    """The machines a command resolves for: this one (detected), or profiles and partitions (a fleet), with
    overrides."""

    machine: MachineOption = None
    partition: PartitionOption = None
    cuda: CudaOption = None
    gpu_arch: GpuArchOption = None
    manifests: ManifestsOption = None
    timeout: TimeoutOption = 10.0

    @classmethod
    def from_command_line(cls, partition: Optional[List[str]] = None, **options: typing.Any) -> "TargetOptions":
        """The options as typer gives them: --partition as a list of at most one spec."""
        return cls(partition=partition[0] if partition else None, **options)

    @property
    def on_target(self) -> bool:
        """Whether the machine judged against is this one (no profile file, no partition, no overrides)."""
        return not self.machine and self.partition is None and self.cuda is None and not self.gpu_arch

    @property
    def elsewhere(self) -> bool:
        """Whether other machines were named (profiles or a partition), overrides aside."""
        return bool(self.machine) or self.partition is not None


class CheckOptions(NamedTuple):
    """The post-install check's settings (verify, doctor)."""

    framework: Annotated[
        str,
        typer.Option(
            "--framework",
            metavar="NAME",
            help="The framework to check: torch, tensorflow, jax, mxnet, or auto (the first of those installed).",
        ),
    ] = "auto"
    multi_gpu: Annotated[
        bool,
        typer.Option(
            "--multi-gpu",
            help="Also run a real all-reduce across all GPUs, check its sum and report the bus bandwidth (torch: "
            "NCCL, one process per GPU; TensorFlow: a MirroredStrategy all-reduce; JAX: a psum under pmap). Needs "
            "at least 2 GPUs; not built for MXNet.",
        ),
    ] = False
    bench: Annotated[
        bool,
        typer.Option("--bench", help="Also time a matrix multiply on each GPU and report TFLOP/s in float32 and "
                     "float16 (torch, TensorFlow and JAX; not MXNet)."),
    ] = False
    probe_timeout: ProbeTimeoutOption = 300.0


def with_options(command: Callable) -> Callable:
    """Expand each parameter of ``command`` annotated with an options group (a NamedTuple) into its options.

    typer reads the expanded signature (every parameter keyword-only, as typer passes them); the command is called
    with one instance per group, built from them (by the group's ``from_command_line``, where it has one, which
    turns typer's values into the group's).
    """
    signature = inspect.signature(command)
    hints = typing.get_type_hints(command, include_extras=True)
    groups: dict[str, type] = {}
    parameters: list[inspect.Parameter] = []
    for parameter in signature.parameters.values():
        group = hints.get(parameter.name)
        if isinstance(group, type) and issubclass(group, tuple) and hasattr(group, "_fields"):
            groups[parameter.name] = group
            group_hints = typing.get_type_hints(group, include_extras=True)
            for field in group._fields:
                parameters.append(inspect.Parameter(field, inspect.Parameter.KEYWORD_ONLY,
                                                    default=group._field_defaults.get(field, inspect.Parameter.empty),
                                                    annotation=group_hints[field]))
        else:
            parameters.append(parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY,
                                                annotation=hints.get(parameter.name, parameter.annotation)))

    @functools.wraps(command)
    def expanded(**kwargs):
        for name, group in groups.items():
            make = getattr(group, "from_command_line", group)
            kwargs[name] = make(**{field: kwargs.pop(field) for field in group._fields})
        return command(**kwargs)

    expanded.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    return expanded
